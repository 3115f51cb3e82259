import Foundation
import TapArguments
import TapCore
import TapEMV
import TapInspect
import TapRecording
import TapStore

/// `3dstape ls`: the sessions in a directory.
struct LsCommand: Command {
    let spec = CommandSpec(name: "ls",
                           abstract: "List the *.3dstape session files in DIR (default sessions/): label, created, exchanges, 3DS transactions, outcome",
                           usage: "[DIR] [--json]", maxPositionals: 1, options: [JSONList.flag.spec])

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        let dir = args.positionals.first ?? "sessions"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: dir) else {
            throw CommandFailure("cannot read directory \(dir)")
        }
        var rows: [SessionSummary] = []
        var problems: [String] = []
        for n in names.sorted() where n.hasSuffix(".3dstape") {
            let path = (dir as NSString).appendingPathComponent(n)
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir), !isDir.boolValue else { continue }
            do { rows.append(try SessionReader(path: path).summary()) } catch { problems.append("\(n): \(error)") }
        }
        if args.has(JSONList.flag) {
            io.json(JSON.array(rows.map(\.json)))
        } else {
            let table = [["FILE", "LABEL", "CREATED", "EXCHANGES", "3DS TX", "OUTCOME", "DURATION"]] + rows.map { r in
                // The label and the creation time are the file's words: cut short, so one 5 MB label does not pad every
                // line to 5 MB (hostile-file helper).
                [(r.path as NSString).lastPathComponent, TerminalText.abbreviated(r.label), TerminalText.abbreviated(r.created, limit: 40),
                 String(r.exchanges), String(r.transactions), r.outcome,
                 r.durationSeconds.map { String(format: "%.2f s", $0) } ?? "-"]
            }
            io.out(Table.render(table))
            if rows.isEmpty { io.out("(no sessions in \(TerminalText.escaped(dir)))") }
        }
        for p in problems { io.err("3dstape: ls: skipped \(TerminalText.escaped(p))") }
        return 0
    }
}

/// `3dstape show`: a session's timeline, or one exchange in full.
struct ShowCommand: Command {
    let spec = CommandSpec(name: "show", abstract: "Show a session's timeline, or one exchange in full with headers and decoded bodies",
                           usage: "SESSION [--exchange N] [--json] [--profile emv|pxp|trustpayments] [--jwt-secret SECRET]", maxPositionals: 1,
                           options: [exchange.spec, json.spec, profile.spec, jwtSecret.spec])
    static let exchange = Option("exchange", "N", CustomValue { (n, o) throws(InvalidArguments) -> Int64 in
        guard let id = Int64(n) else { throw InvalidArguments("--\(o) \(n): expected a number") }
        return id
    }, help: "show exchange N (its id in the timeline) in full")
    static let json = Flag("json", help: "print JSON")
    /// What the timeline shows.
    enum Profile: String, Sendable, CaseIterable { case emv, pxp, trustpayments }
    static let profile = Option("profile", "NAME", ChoiceValue<Profile>(refusal: { "--\($0) \($1): expected emv, pxp or trustpayments" }), default: .emv,
                                help: "emv (default): 3DS messages; pxp: PXP Checkout's flow steps and SDK callbacks; "
                                    + "trustpayments: Trust Payments' JWT requests and responses")
    static let jwtSecret = Option("jwt-secret", "SECRET", TextValue(),
                                  help: "trustpayments: the shared secret that verifies the HS256 JWTs (a response that does not verify exits 1)")

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        guard let path = args.positionals.first else { throw InvalidArguments("give a session file (see '3dstape ls')") }
        let reader = try SessionReader(path: path)
        if let id = try args.value(Self.exchange) {
            guard let x = try reader.exchange(id: id) else { throw CommandFailure("\(path) has no exchange \(id)") }
            if args.has(Self.json) { io.json(ExchangeJSON.full(x)) } else { printFull(x, io: io) }
            return 0
        }
        let all = try reader.exchanges()
        switch try args.value(Self.profile, default: .emv) {
        case .emv: break
        case .pxp: return showPXP(all, path: path, json: args.has(Self.json), io)
        case .trustpayments: return showTrustPayments(all, path: path, secret: try args.value(Self.jwtSecret), json: args.has(Self.json), io)
        }
        if args.given(Self.jwtSecret) { throw InvalidArguments("--jwt-secret goes with --profile trustpayments") }
        let events = try reader.events()
        if args.has(Self.json) {
            io.json(JSON.object([("file", .string(path)), ("meta", .object(reader.meta.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })),
                                 ("exchanges", .array(all.map(ExchangeJSON.summary))),
                                 ("events", .array(events.map { .object([("at", .number(String(format: "%.6f", $0.at))), ("kind", .string($0.kind)),
                                                                         ("detail", .string($0.detail))]) }))]))
            return 0
        }
        let m = reader.meta.mapValues { TerminalText.escaped($0) }
        io.out(io.bold("session ") + TerminalText.escaped(path) + (m["label"].map { "  label: \($0)" } ?? ""))
        io.out("created \(m["created_at"] ?? "?")  mode \(m["mode"] ?? "?")\(m["upstream"].map { " → \($0)" } ?? "")  masked \(m["masked"] ?? "?")")
        let t0 = all.first?.requestStart ?? 0
        var rows = [["#", "T+MS", "METHOD", "URL", "STATUS", "3DS", "MS"]]
        for x in all {
            let req = x.messages.filter { $0.messageDirection == .request }.map(Self.describe)
            let resp = x.messages.filter { $0.messageDirection == .response }.map(Self.describe)
            var threeDS = (req + resp.map { "→ " + $0 }).joined(separator: " ")
            if let r = x.replay { threeDS += "  " + Self.describe(r) }
            if let t = x.tunnel { threeDS += ExchangeJSON.describe(t) }
            rows.append([String(x.id), String(format: "%.1f", (x.requestStart - t0) * 1000), x.method, x.url,
                         x.status.map(String.init) ?? "-", threeDS + (x.error.map { "  ! \($0)" } ?? ""),
                         x.durationMs.map { String(format: "%.1f", $0) } ?? "-"])
        }
        io.out(Table.render(rows, shortened: [3: Table.urlWidth]))
        io.out("\(counted(all.count, "exchange")); '3dstape show \(TerminalText.escaped(path)) --exchange N' for one in full")
        if !events.isEmpty {
            // Events by kind (their rows: sqlite3, or --json); the writer's backpressure in full, since it bears on every timing above.
            let kinds = Dictionary(grouping: events, by: \.kind).map { "\($0.value.count) \(TerminalText.escaped($0.key))" }.sorted()
            io.out("events: " + kinds.joined(separator: ", ") + " ('--json' lists them)")
            for e in events where e.kind == "backpressure" { io.out(io.red("! " + TerminalText.escaped(e.detail))) }
        }
        return 0
    }

    /// PXP Checkout's view: the step of its nine-step 3DS flow each exchange belongs to, and the SDK callbacks it drives.
    func showPXP(_ all: [StoredExchange], path: String, json: Bool, _ io: Terminal) -> Int32 {
        let labelled = all.map { ($0, PXPProfile.label($0)) }
        if json {
            io.json(JSON.array(labelled.map { x, l in
                ExchangeJSON.summary(x).setting("pxp", to: l.map { .object([("step", .string($0.step)), ("callback", .string($0.callback))]) } ?? .null)
            }))
            return 0
        }
        var rows = [["#", "METHOD", "URL", "STATUS", "3DS", "PXP STEP", "SDK CALLBACK"]]
        for (x, l) in labelled {
            rows.append([String(x.id), x.method, ThreeDSContent.printable(x.url), x.status.map(String.init) ?? "-",
                         x.messages.compactMap(\.type).joined(separator: " → "), l?.step ?? "-", l?.callback ?? "-"])
        }
        io.out(io.bold("session ") + TerminalText.escaped(path) + "  profile pxp (PXP Checkout's 3DS flow)")
        io.out(Table.render(rows, shortened: [2: Table.urlWidth]))
        return 0
    }

    /// Trust Payments' view: each JWT request's types, each response's errorcode and message, and the signatures.
    func showTrustPayments(_ all: [StoredExchange], path: String, secret: String?, json: Bool, _ io: Terminal) -> Int32 {
        let key = secret.map { Array($0.utf8) }
        let calls = all.compactMap { x in TrustPaymentsProfile.decode(x, secret: key).map { (x, $0) } }
        let bad = calls.filter { $0.1.responseSignature == .doesNotVerify }.count
        if json {
            io.json(JSON.array(calls.map { x, c in
                ExchangeJSON.summary(x).setting("trustpayments", to: .object([
                    ("request_types", .array(c.requestTypes.map(JSON.string))),
                    ("request_jwt", c.requestSignature.map { .string($0.description) } ?? .null),
                    ("request_payload", c.requestPayload ?? .null),
                    ("responses", .array(c.responses.map { .object([("type", .string($0.type)), ("errorcode", .string($0.errorCode)),
                                                                    ("errormessage", .string($0.errorMessage))]) })),
                    ("response_jwt", c.responseSignature.map { .string($0.description) } ?? .null),
                    ("response_payload", c.responsePayload ?? .null),
                ]))
            }))
            return bad > 0 ? 1 : 0
        }
        var rows = [["#", "URL", "REQUEST TYPES", "REQUEST JWT", "RESPONSES (errorcode message)", "RESPONSE JWT"]]
        for (x, c) in calls {
            rows.append([String(x.id), ThreeDSContent.printable(x.url), c.requestTypes.joined(separator: ","), c.requestSignature?.description ?? "-",
                         ThreeDSContent.printable(c.responses.map { "\($0.type) \($0.errorCode) \($0.errorMessage)" }.joined(separator: "; ")),
                         c.responseSignature?.description ?? "-"])
        }
        let unverified = Set(calls.enumerated().filter { $0.element.1.responseSignature == .doesNotVerify }.map { $0.offset + 1 })
        io.out(io.bold("session ") + TerminalText.escaped(path) + "  profile trustpayments (JWT requests and responses)")
        let red: (String) -> String = io.red
        io.out(Table.render(rows, shortened: [1: Table.urlWidth]) { row, column -> ((String) -> String)? in column == 5 && unverified.contains(row) ? red : nil })
        io.out("\(calls.count) JWT exchanges of \(all.count)" + (bad > 0 ? "; \(bad) response JWTs DO NOT VERIFY with the given secret" : "")
               + (secret == nil ? "; signatures not checked: give --jwt-secret" : ""))
        return bad > 0 ? 1 : 0
    }

    /// A replayed exchange: what it matched (or missed) and its delays.
    static func describe(_ r: ReplayAnnotation) -> String {
        var s = r.miss != nil ? "[miss]" : "[replayed #\(r.recordedExchangeID.map(String.init) ?? "-")"
        if r.miss == nil {
            // The actual delay is unset when no answer went out (the client gave up first, a hang, the replayer stopped): "-".
            s += String(format: ", delay %.1f/", r.scheduledDelayMs ?? 0) + (r.actualDelayMs.map { String(format: "%.1f", $0) } ?? "-") + " ms"
            s += (r.faults.map { ", fault \($0)" } ?? "") + "]"
        }
        return s
    }

    static func describe(_ m: RecordedMessage) -> String {
        var s = m.type ?? "?"
        if m.isEncrypted { return s + " (JWE)" }
        let json = m.json
        if let v = json?["messageVersion"]?.stringValue { s += " " + v }
        if let t = json?["transStatus"]?.stringValue { s += " " + t }
        if let e = json?["errorCode"]?.stringValue { s += " " + e }
        if m.isDecrypted { s += m.wasImportedInClear ? " (imported in clear)" : " (decrypted)" }
        return s
    }

    func printFull(_ x: StoredExchange, io: Terminal) {
        func safe(_ s: String) -> String { TerminalText.escaped(s) }
        io.out(io.bold("exchange \(x.id)") + "  connection \(x.connectionID)  upstream \(safe(x.upstream ?? "-"))")
        io.out(io.bold("\(safe(x.method)) \(safe(x.url))") + "  → \(x.status.map(String.init) ?? "no response")")
        if let e = x.error { io.out(io.red("error: \(safe(e))")) }
        if let t = x.tunnel {
            io.out(ExchangeJSON.describe(t, brief: false) + "; passed through by \(safe(t.decidedBy ?? "-")) (bytes not decrypted or stored)")
        }
        if let r = x.replay {
            io.out("replay: " + safe(r.miss.map { "missed: \($0)" } ?? "matched recorded exchange #\(r.recordedExchangeID.map(String.init) ?? "-") by \(r.matchedBy ?? "-")")
                   + String(format: "; delay scheduled %.3f ms, actual %@", r.scheduledDelayMs ?? 0,
                            r.actualDelayMs.map { String(format: "%.3f ms", $0) } ?? "none (\(safe(r.outcome ?? "no answer went out")))")
                   + safe(r.faults.map { "; faults injected: \($0)" } ?? ""))
        }
        let t0 = x.requestStart
        func ms(_ t: Double?) -> String { t.map { String(format: "+%.3f ms", ($0 - t0) * 1000) } ?? "-" }
        // An upstream connection kept alive from an earlier exchange was made before this request started: its times are
        // that connection's (stored so), said as such rather than as a negative offset.
        func made(_ t: Double?) -> String {
            guard let t, t < t0 else { return ms(t) }
            return String(format: "%.3f ms before (a kept-alive connection)", (t0 - t) * 1000)
        }
        io.out("timings: request start \(ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: t0)))"
               + ", upstream connected \(made(x.upstreamConnect)), TLS \(made(x.tlsDone)), request sent \(ms(x.requestSent))"
               + ", first byte \(ms(x.firstByte)), done \(ms(x.done))" + (x.clientAbortAt.map { ", client aborted \(ms($0))" } ?? ""))
        for (title, headers, body, encoding, direction) in [("request", x.requestHeaders, x.requestBody, x.requestContentEncoding, MessageDirection.request),
                                                              ("response", x.responseHeaders, x.responseBody, x.responseContentEncoding, MessageDirection.response)] {
            io.out("")
            io.out(io.bold("── \(title) headers"))
            for (n, v) in headers { io.out("\(safe(n)): \(safe(v))") }
            let msgs = x.messages.filter { $0.messageDirection == direction }
            io.out(io.bold("── \(title) body") + " (\(body.count) bytes\(encoding.map { ", decoded from \(safe($0))" } ?? ""))")
            if msgs.isEmpty {
                io.out(Self.bodyText(body))
            } else {
                for m in msgs {
                    io.out(safe("# 3DS \(m.type ?? "?") in \(m.location)" + (m.decryption.map { " — \($0)" } ?? "")))
                    if m.isEncrypted {
                        io.out("(JWE header) " + TerminalText.escapedJSON(m.json?.compact ?? ""))
                        io.out(Self.bodyText(body))
                    } else {
                        io.out(TerminalText.escapedJSON(m.json?.pretty ?? ""))
                    }
                }
            }
        }
    }

    /// A body as text to print: JSON pretty, other UTF-8 over its own lines (escaped, cut at 4000 characters).
    static func bodyText(_ body: [UInt8]) -> String {
        if body.isEmpty { return "(empty)" }
        if let j = try? JSON.parse(body) { return TerminalText.escapedJSON(j.pretty) }
        if let s = String(validating: body, as: UTF8.self) {
            return TerminalText.escaped(s.count > 4000 ? String(s.prefix(4000)) : s, keepingLineBreaks: true) + (s.count > 4000 ? "\n… (\(s.count) characters)" : "")
        }
        return "(\(body.count) bytes of binary data)"
    }
}

/// Left-aligned text tables. Every cell goes through `TerminalText.escaped` (cells hold URLs, message types, labels and
/// values from sessions); `style` may colour a cell afterwards, by row (0 is the header) and column. A column in
/// `shortened` is cut to that many characters with `…` in the middle (`shortened(_:to:)`), so that one long URL does not
/// pad every row of a timeline to its length.
enum Table {
    static func render(_ rows: [[String]], shortened: [Int: Int] = [:],
                       style: (_ row: Int, _ column: Int) -> ((String) -> String)? = { _, _ in nil }) -> String {
        guard let first = rows.first else { return "" }
        let rows = rows.map { $0.enumerated().map { i, c in TerminalText.escaped(shortened[i].map { Table.shortened(c, to: $0) } ?? c) } }
        var widths = [Int](repeating: 0, count: first.count)
        for r in rows { for (i, c) in r.enumerated() where i < widths.count { widths[i] = max(widths[i], c.count) } }
        return rows.enumerated().map { n, r in
            r.enumerated().map { i, c in
                let cell = i == r.count - 1 ? c : c + String(repeating: " ", count: widths[i] - c.count)
                return style(n, i).map { $0(cell) } ?? cell
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }

    /// `text` if it has at most `width` characters; else its start and its end around `…`, `width` characters in all
    /// (a URL keeps its host and the end of its path).
    static func shortened(_ text: String, to width: Int) -> String {
        guard text.count > width, width >= 3 else { return text }
        let head = (width - 1) / 2
        return String(text.prefix(head)) + "…" + String(text.suffix(width - 1 - head))
    }

    /// The widest a URL column of a session's timeline gets (`show`, its profiles); `--exchange N` and `--json` give it whole.
    static let urlWidth = 64
}

/// `3dstape decrypt`: opens a session's recorded app-channel messages with a key log, in place.
struct DecryptCommand: Command {
    let spec = CommandSpec(name: "decrypt", abstract: "Decrypt a session's recorded app-channel CReq/CRes with a key log (in place)",
                           usage: "SESSION --keylog FILE", maxPositionals: 1, options: [keylog.spec])
    static let keylog = Option("keylog", "FILE", PathValue(), help: "lines 'CEK <acsTransID> <64 hex digits>' (as 'sandbox --keylog' writes)")

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        guard let path = args.positionals.first else { throw InvalidArguments("give a session file") }
        guard let keylog = try args.value(Self.keylog) else { throw InvalidArguments("--keylog FILE is required") }
        let log: KeyLog
        do { log = try KeyLog.load(path: keylog) } catch { throw CommandFailure("\(keylog): \(error.message)") }
        let o = try SessionDecryptor.decrypt(path: path, keys: StaticKeys(log: log))
        io.out("\(TerminalText.escaped(path)): \(o.decrypted) app-channel messages decrypted, \(o.noKey) without a key in the log, "
               + "\(o.failed) whose key did not open them, \(o.alreadyDecrypted) already in clear")
        return o.failed == 0 ? 0 : 1
    }
}

/// A key log read once.
struct StaticKeys: ChannelKeySource {
    let log: KeyLog
    func cek(for acsTransID: String) -> [UInt8]? { log.cek(for: acsTransID) }
}
