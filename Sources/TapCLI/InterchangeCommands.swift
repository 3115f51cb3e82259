import Foundation
import TapArguments
import TapCore
import TapEMV
import TapInspect
import TapRecording
import TapReplay
import TapStore

/// `3dstape diff`: two sessions compared transaction by transaction.
struct DiffCommand: Command {
    let spec = CommandSpec(name: "diff",
                           abstract: "Compare two sessions: transactions paired by order and shape (a replay: by what it matched), per-message element changes, "
                               + "statuses, outcomes, timings",
                           usage: "A B [--json] [--pair-by match|shape] [--timing-tolerance DURATION] [--ignore-field NAME]... [--max-pairing-steps N]",
                           maxPositionals: 2, options: [json.spec, pairBy.spec, timingTolerance.spec, ignoreField.spec, maxPairingSteps.spec])
    static let json = Flag("json", help: "print the differences as JSON")
    static let pairBy = Option("pair-by", "match|shape",
                               ChoiceValue<SessionDiff.PairBy>([("match", .match), ("shape", .shape)], refusal: { "--\($0) \($1): expected match or shape" }),
                               help: "match: B is a replay of A, each replayed transaction is compared with the recorded one it matched "
                                   + "(the default when B's meta names A); shape: by order, channel, category and version (the default otherwise)")
    /// nil for `off`: no timing is compared.
    static let timingTolerance = Option("timing-tolerance", "DURATION", CustomValue { (t, o) throws(InvalidArguments) -> Double? in
        t == "off" ? nil : try DurationValue.anyWait.parse(t, option: o)
    }, help: "report exchanges whose durations differ by more than this (default 250ms; 'off' compares none)")
    static let ignoreField = Option("ignore-field", "NAME", TextValue(),
                                    help: "also ignore this element's value (repeatable); IDs, keys, signatures and dates always are")
    static let maxPairingSteps = Option("max-pairing-steps", "N",
                                        WholeNumberValue(1...Int.max, refusal: { "--\($0) \($1): expected a positive number" }),
                                        help: "give up (exit 2) when pairing would take more steps (default \(SessionDiff.defaultMaxPairingSteps), "
                                            + "a few seconds; it grows with the transactions times those left unpaired)")

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        guard args.positionals.count == 2 else { throw InvalidArguments("give two session files: 3dstape diff A B") }
        let (pa, pb) = (args.positionals[0], args.positionals[1])
        var options = SessionDiff.Options()
        if let t = try args.value(Self.timingTolerance) { options.timingTolerance = t }
        options.ignore = Set(try args.all(Self.ignoreField))
        if let n = try args.value(Self.maxPairingSteps) { options.maxPairingSteps = n }
        let (ra, rb) = (try SessionReader(path: pa), try SessionReader(path: pb))
        options.pairBy = try DiffCommand.pairing(try args.value(Self.pairBy), a: pa, b: rb)
        let diff: SessionDiff
        do {
            diff = try SessionDiff.compare(try ra.exchanges(), try rb.exchanges(), options: options)
        } catch let e as SessionDiff.TooDifferent {
            io.err("3dstape: diff: \(e.description); compare parts of them, or raise --max-pairing-steps")
            return 2
        }
        if args.has(Self.json) {
            io.json(JSON.object([("a", .string(pa)), ("b", .string(pb)), ("transactions_a", .number(String(diff.transactionsA))),
                                 ("transactions_b", .number(String(diff.transactionsB))), ("paired", .number(String(diff.pairedTransactions))),
                                 ("pair_by", .string(diff.pairedBy.rawValue)), ("not_replayed_a", .number(String(diff.unreplayedTransactions))),
                                 ("differences", .array(diff.changes.map(\.json)))]))
        } else {
            if !diff.changes.isEmpty {
                io.out(Table.render([["TX A/B", "EXCH A/B", "MESSAGE", "CHANGE", "ELEMENT", "A", "B"]] + diff.changes.map { c in
                    ["\(c.transactionA.map(String.init) ?? "-")/\(c.transactionB.map(String.init) ?? "-")",
                     "\(c.exchangeA.map(String.init) ?? "-")/\(c.exchangeB.map(String.init) ?? "-")",
                     ThreeDSContent.printable(c.message ?? "-"), c.kind.rawValue, c.pointer ?? "-",
                     ThreeDSContent.printable(c.before ?? "-"), ThreeDSContent.printable(c.after ?? "-")]
                }))
            }
            let how = diff.pairedBy == .match
                ? " by what the replay matched" + (diff.unreplayedTransactions > 0 ? " (\(diff.unreplayedTransactions) of A not replayed, not compared)" : "")
                : ""
            io.out("\(diff.transactionsA) transactions in A, \(diff.transactionsB) in B, \(diff.pairedTransactions) paired\(how); "
                   + (diff.isEmpty ? "no differences" : counted(diff.changes.count, "difference")))
        }
        return diff.isEmpty ? 0 : 1
    }

    /// `--pair-by` checked against the sessions: `match` only when B is a replay (exit status 2 otherwise); absent, `match`
    /// when B is a replay of A, else `shape`.
    static func pairing(_ option: SessionDiff.PairBy?, a: String, b: SessionReader) throws -> SessionDiff.PairBy {
        guard let p = option else { return SessionDiff.defaultPairing(a: a, b: b) }
        if p == .match, !SessionDiff.isReplaySession(b) {
            throw InvalidArguments("--pair-by match: \(b.path) is not a replay (no replay matches in it); pair by shape, or give the replay as B")
        }
        // A replay of another recording, whose file is still there: its matches name that recording's exchanges, not A's.
        if p == .match, let replayed = b.meta["replayed_session"], FileManager.default.fileExists(atPath: replayed),
           !SessionDiff.isReplay(b, of: a) {
            throw InvalidArguments("--pair-by match: \(b.path) is a replay of \(TerminalText.escaped(replayed)), not of \(a); pair by shape")
        }
        return p
    }
}

/// `3dstape export`: a session as HAR 1.2, a sequence diagram (Mermaid or SVG), or JSON lines.
struct ExportCommand: Command {
    let spec = CommandSpec(name: "export",
                           abstract: "Export a session as HAR 1.2 (Chrome DevTools, mitmproxy), a sequence diagram (Mermaid or SVG), or JSON lines (jq)",
                           usage: "SESSION --format har|mermaid|svg|jsonl [--out FILE] [--force]", maxPositionals: 1,
                           options: [format.spec, out.spec, force.spec])
    static let format = Option("format", "FORMAT",
                               ChoiceValue([("har", "har"), ("mermaid", "mermaid"), ("svg", "svg"), ("jsonl", "jsonl")],
                                           refusal: { "--\($0) \($1): expected har, mermaid, svg or jsonl" }),
                               help: "har, mermaid, svg (the sequence diagram '3dstape web' draws) or jsonl")
    /// `-` is standard output.
    static let out = Option("out", "FILE", PathValue(), help: "write to FILE (created 0600; default standard output)")
    static let force = Flag("force", help: "replace FILE if it exists")

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        guard let path = args.positionals.first else { throw InvalidArguments("give a session file (see '3dstape ls')") }
        guard let format = try args.value(Self.format) else { throw InvalidArguments("--format is required: har, mermaid, svg or jsonl") }
        let out = try args.value(Self.out).flatMap { $0 == "-" ? nil : $0 }
        if let out, !args.has(Self.force) { try refuseExisting(out, "\(out) already exists; remove it or use --force") }
        let reader = try SessionReader(path: path)
        let exchanges = try reader.exchanges()
        let text: String
        switch format {
        // The JSON formats carry no character a terminal acts on (`TerminalText.escapedJSON`: the same JSON), the
        // diagrams none either (`Mermaid.clean`, `MarkupText.escaped`): an export read with cat is safe.
        case "har": text = TerminalText.escapedJSON(HAR.export(exchanges, meta: reader.meta, creatorVersion: version).pretty) + "\n"
        case "mermaid": text = Mermaid.sequenceDiagram(exchanges)
        case "svg": text = SequenceSVG.render(SequenceDiagram(exchanges)) + "\n"
        default: text = exchanges.map { TerminalText.escapedJSON(ExchangeJSON.full($0).compact) + "\n" }.joined()
        }
        if let out {
            do { try SecureFile.create(out, contents: Array(text.utf8), mode: 0o600, replace: args.has(Self.force)) } catch {
                throw CommandFailure(error.description)
            }
            io.err("\(counted(exchanges.count, "exchange")) written to \(TerminalText.escaped(out)) (\(format))")
        } else {
            StandardStreams.out(Data(text.utf8))
        }
        return 0
    }
}

/// `3dstape import`: a HAR file becomes a session (masked, 3DS messages decoded, timings kept).
struct ImportCommand: Command {
    let spec = CommandSpec(name: "import",
                           abstract: "Turn a HAR file (Chrome DevTools, Charles, Proxyman, mitmproxy) into a session: masked, 3DS messages decoded, timings kept",
                           usage: "FILE.har [--session OUT] [--name LABEL]", maxPositionals: 1, options: [session.spec, label.spec])
    static let session = Option("session", "OUT", PathValue(), help: "the session file to create (default sessions/<FILE>.3dstape)")
    static let label = Option("name", "LABEL", TextValue(), help: "the session's label (default: the HAR file's name)")
    /// The largest HAR file imported (refused before it is read).
    static let limit = 512 << 20
    /// Exchanges waiting for the session writer beyond which reading pauses, so memory holds a bounded part of the file.
    static let backlog = 1024

    /// The file is read a piece at a time (`HAR.read`) and written to a hidden file beside OUT that takes OUT's name only
    /// once complete: a bad entry, a write error, SIGINT or SIGTERM (exit 130, 143) leave nothing that looks like a session.
    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        guard let file = args.positionals.first else { throw InvalidArguments("give a HAR file") }
        let base = ((file as NSString).lastPathComponent as NSString).deletingPathExtension
        let out = try args.value(Self.session) ?? "sessions/\(base).3dstape"
        try refuseExisting(out, "\(out) already exists; choose another --session or remove it")
        let input = try InputFile(file, limit: ImportCommand.limit)
        let stop = StopRequest()
        defer { stop.cancel() }
        let writer: SessionWriter
        do {
            writer = try SessionWriter(path: SessionWriter.stagingPath(for: out),
                                       meta: [("created_at", ISO8601DateFormatter().string(from: Date())), ("mode", "import"),
                                              ("label", try args.value(Self.label) ?? base), ("imported_from", file), ("masked", "yes"),
                                              ("tool_version", version)])
        } catch { throw CommandFailure("\(error)") }
        var connections: [String: Int64] = [:]
        var i = 0
        let count: Int
        do {
            count = try HAR.read(from: { () throws -> [UInt8] in
                try stop.check()
                return try input.read(upTo: 1 << 20)
            }, each: { e in
                while WriterBackpressure(eventLimit: ImportCommand.backlog).isBehind(writer.backlogNow) {
                    try stop.check()
                    usleep(1_000)
                }
                ImportCommand.submit(e, index: i, from: base, connections: &connections, to: writer)
                i += 1
            })
            try stop.check()
            writer.close() // the closing indexes: the file is complete when this returns
            try stop.check()
            try writer.publish(as: out)
        } catch let interrupted as Interrupted {
            writer.discard()
            io.err("3dstape: import: \(interrupted) after \(i) entries; nothing was written to \(TerminalText.escaped(out))")
            return interrupted.exitStatus
        } catch let e as HAR.ImportError {
            writer.discard()
            // The reason quotes the file (a URL, a date): printed with card numbers masked, as the import stores them.
            throw CommandFailure("\(file): \(ThreeDSContent.printable("\(e)")); nothing was written to \(out)")
        } catch {
            writer.discard()
            throw CommandFailure("\(error)")
        }
        let (shownOut, shownFile) = (TerminalText.escaped(out), TerminalText.escaped(file))
        io.out("\(shownOut): \(counted(count, "exchange")) imported from \(shownFile) (masked); '3dstape show \(shownOut)' to read it")
        return 0
    }

    /// One HAR entry as session events: its connection (opened at its first entry) and its exchange.
    static func submit(_ e: HAR.Entry, index i: Int, from base: String, connections: inout [String: Int64], to writer: SessionWriter) {
        let key = e.connection.isEmpty ? "entry-\(i)" : e.connection
        let origin = URLComponents(string: e.url).map { "\($0.host ?? "")\($0.port.map { ":\($0)" } ?? "")" }
        let connection: Int64
        if let c = connections[key] { connection = c } else {
            connection = Int64(connections.count + 1)
            connections[key] = connection
            writer.submit(.connectionOpened(ConnectionRecord(id: connection, clientAddress: "imported from \(base)", acceptedAt: e.start,
                                                             mode: "import", upstream: origin)))
        }
        let url = URLComponents(string: e.url)
        var record = ExchangeRecord(connectionID: connection, seq: i, method: e.method, url: e.url, host: url?.host,
                                    path: url.map { $0.percentEncodedPath + ($0.percentEncodedQuery.map { "?" + $0 } ?? "") },
                                    upstream: origin, request: CapturedMessage(headers: e.requestHeaders, body: e.requestBody, wireSize: e.requestBody.count,
                                                                     plaintext: e.requestPlaintext),
                                    requestStart: e.start)
        record.status = e.status
        if e.status != nil {
            record.response = CapturedMessage(headers: e.responseHeaders, body: e.responseBody, wireSize: e.responseBody.count,
                                              plaintext: e.responsePlaintext)
        }
        record.upstreamConnect = e.upstreamConnect
        record.tlsDone = e.tlsDone
        record.requestSent = e.requestSent
        record.firstByte = e.firstByte
        record.done = e.done
        record.error = e.error
        writer.submit(.exchange(record))
    }
}
