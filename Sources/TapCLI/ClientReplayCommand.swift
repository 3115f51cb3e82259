import Foundation
import TapArguments
import TapClientReplay
import TapCore
import TapCrypto
import TapEMV
import TapIdentity
import TapNet
import TapProxy
import TapRecording
import TapSandbox
import TapStore

/// `3dstape client-replay`: re-sends a recorded session's client side (the SDK and the 3DS Server) to live servers with
/// fresh IDs and keys, compares every answer with the recording, and can drive it as load.
struct ClientReplayCommand: Command {
    let spec = CommandSpec(name: "client-replay",
                           abstract: "Re-send a recorded session's client side to a live DS/ACS with fresh IDs and keys, and compare the answers",
                           usage: "SESSION (--certs DIR | --ds-cert PEM --ds-root PEM [--ds-id ID]) [--target URL] [--map HOST=URL]... [--card PAN]... [--secret [N=]VALUE]... "
                               + "[--transaction N]... [--concurrency N] [--rate R] [--speed F] [--repeat N] [--rreq-listen HOST:PORT] [--proxy URL] [--ca PEM] "
                               + "[--jwt-secret SECRET] [--session OUT] [--json] [--quiet]",
                           maxPositionals: 1,
                           options: [certs.spec, dsCert.spec, dsRoot.spec, dsID.spec, jwtSecret.spec, target.spec, map.spec, card.spec, secret.spec,
                                     transaction.spec, concurrency.spec, rate.spec, speed.spec, repeatCount.spec, rreqListen.spec, allowRemote.spec,
                                     rreqTimeout.spec, timeout.spec, proxy.spec, ca.spec, session.spec, json.spec, quiet.spec])
    static let certs = Option("certs", "DIR", PathValue(), help: "the target DS's certificates as 'sandbox certs --out DIR' or 'ca export --ds DIR' writes them")
    static let dsCert = Option("ds-cert", "PEM", PathValue(), help: "instead of --certs: the target DS's encryption certificate (deviceData is encrypted to it)")
    static let dsRoot = Option("ds-root", "PEM", PathValue(), help: "with --ds-cert: the roots acsSignedContent must chain to")
    static let dsID = Option("ds-id", "ID", TextValue(), help: "with --ds-cert: the DS's directoryServerID (needed for an EC DS key)")
    /// The gateway's HS256 secret, printable and at most 1024 characters.
    static let jwtSecret = Option("jwt-secret", "SECRET", CustomValue { (s, o) throws(InvalidArguments) -> [UInt8] in
        guard !s.isEmpty, s.utf8.count <= 1024, s.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) else {
            throw InvalidArguments("--\(o): expected a printable secret of 1 to 1024 bytes")
        }
        return Array(s.utf8)
    }, help: "sign the recorded gateway JWTs (Trust Payments style HS256) again with this secret, with the live IDs")
    static let target = Option("target", "URL", CustomValue { (t, o) throws(InvalidArguments) -> HTTPURL in
        guard let u = HTTPURL(t) else { throw InvalidArguments("--\(o) \(t): expected an http(s) URL") }
        return u
    }, help: "replaces the recorded DS (the host the first AReq went to), e.g. http://127.0.0.1:9443")
    static let map = Option("map", "HOST=URL", CustomValue { (m, o) throws(InvalidArguments) -> (String, HTTPURL) in
        guard let eq = m.firstIndex(of: "="), !m[..<eq].isEmpty, let u = HTTPURL(String(m[m.index(after: eq)...])) else {
            throw InvalidArguments("--\(o) \(m): expected HOST=URL (e.g. acs.example:443=http://127.0.0.1:9443)")
        }
        return (String(m[..<eq]), u)
    }, repeatable: true, help: "replaces another recorded host (host or host:port)")
    static let card = Option("card", "PAN", CustomValue { (c, o) throws(InvalidArguments) -> String in
        guard c.count >= 12, c.count <= 19, c.allSatisfy(\.isASCII), c.allSatisfy(\.isNumber) else {
            throw InvalidArguments("--\(o): expected a card number of 12 to 19 digits")
        }
        return c
    }, repeatable: true, help: "a full card number for an acctNumber the recording masked (matched by first 6 and last 4)")
    /// The transaction it is for (0: all) and the value.
    static let secret = Option("secret", "[N=]VALUE", CustomValue { (s, o) throws(InvalidArguments) -> (Int, String) in
        if let eq = s.firstIndex(of: "="), let n = Int(s[..<eq]) {
            guard n >= 1 else { throw InvalidArguments("--\(o) \(n)=…: transactions are numbered from 1") }
            return (n, String(s[s.index(after: eq)...]))
        }
        return (0, s)
    }, repeatable: true, help: "what the cardholder typed where the recording masked it (***): for transaction N, or for all")
    static let transaction = Option("transaction", "N",
                                    WholeNumberValue(1...Int.max, refusal: { "--\($0) \($1): expected a transaction number from 1" }),
                                    repeatable: true, help: "replay only these transactions (1-based, as 'show' numbers them)")
    static let concurrency = Option("concurrency", "N", WholeNumberValue(1...1024), default: 1, help: "transactions at once (default 1)")
    static let rate = Option("rate", "R", CustomValue { (r, o) throws(InvalidArguments) -> Double in
        let text = r.hasSuffix("/s") ? String(r.dropLast(2)) : r
        do { return try Checked.number(text, within: 0.001...100_000) } catch { throw InvalidArguments("--\(o) \(r): \(error)") }
    }, help: "new transactions per second (R or R/s; default: as fast as --concurrency allows)")
    static let speed = Option("speed", "F", CustomValue { (s, o) throws(InvalidArguments) -> Double in
        do { return try Checked.number(s, within: 0.001...1_000_000) } catch { throw InvalidArguments("--\(o) \(s): \(error)") }
    }, help: "keep the recorded gaps between transactions, divided by F")
    static let repeatCount = Option("repeat", "N", WholeNumberValue(1...1_000_000), default: 1, help: "run the set N times, fresh IDs each time (default 1)")
    static let rreqListen = Option("rreq-listen", "HOST:PORT", HostPortValue(), help: "the 3DS Server's RReq listener (default 127.0.0.1 on a free port)")
    static let allowRemote = Flag("allow-remote", help: "let --rreq-listen be an address other machines can reach")
    static let rreqTimeout = Option("rreq-timeout", "DURATION", DurationValue.timeout, help: "the wait for each RReq after a challenge (default 10s)")
    static let timeout = Option("timeout", "DURATION", DurationValue.timeout, help: "each request's timeout (default 10s)")
    static let proxy = Option("proxy", "URL", ForwardProxyValue(), help: "send everything through this HTTP proxy (e.g. 3dstape record)")
    static let ca = Option("ca", "PEM", PathValue(), repeatable: true, help: "extra TLS roots for https targets")
    static let session = Option("session", "OUT", CustomValue { (out, o) throws(InvalidArguments) in
        guard !out.isEmpty else { throw InvalidArguments("--\(o): expected a file name") }
        return out
    }, help: "where the live run is written (default sessions/client-replay-<time>-<pid>.3dstape)")
    static let json = Flag("json", help: "one JSON object per transaction, then a summary")
    static let quiet = Flag("quiet", help: "print only the transactions that differ and the summary")

    /// Everything the options ask for, checked before a connection is made.
    struct Plan {
        var session: String
        var out: String
        var certs: String
        /// The target DS read from `--ds-cert`/`--ds-root` (then `certs` is empty).
        var dsIdentity: ClientReplayer.DSIdentity? = nil
        var inputs = ClientReplayPlan.Inputs()
        var only: Set<Int> = []
        var load = ClientReplayRunner.Load()
        var replayer = ClientReplayer.Options()
        var json: Bool
        var quiet: Bool
        /// With `quiet`: no summary line either when every transaction matched (the demo's `--quiet`).
        var summaryOnlyOnDifference = false
    }

    /// `--certs DIR`, or `--ds-cert PEM` with `--ds-root PEM` (and `--ds-id`): exactly one of the two forms.
    /// The PEM form is read and checked here (a file that is missing or holds no certificate is a usage error).
    static func dsSource(_ args: ParsedArguments) throws -> (certs: String, identity: ClientReplayer.DSIdentity?) {
        let certs = try args.value(Self.certs), cert = try args.value(Self.dsCert), root = try args.value(Self.dsRoot), id = try args.value(Self.dsID)
        if let certs {
            guard cert == nil, root == nil, id == nil else {
                throw InvalidArguments("--certs DIR or --ds-cert PEM --ds-root PEM: give one of the two, not both")
            }
            guard !certs.isEmpty else { throw InvalidArguments("--certs: expected a directory") }
            return (certs, nil)
        }
        guard let cert, let root else {
            if cert != nil || root != nil || id != nil {
                throw InvalidArguments("--ds-cert PEM and --ds-root PEM go together (the DS's encryption certificate and its roots)")
            }
            throw InvalidArguments("--certs DIR is required: the target DS's certificates ('3dstape sandbox certs --out DIR' for the sandbox), "
                                   + "or --ds-cert PEM --ds-root PEM")
        }
        guard !cert.isEmpty, !root.isEmpty else { throw InvalidArguments("--ds-cert, --ds-root: expected a file") }
        if let id {
            guard !id.isEmpty, id.count <= 64, id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == ".") }) else {
                throw InvalidArguments("--ds-id \(TerminalText.escaped(id)): expected a directoryServerID (letters, digits, - _ ., at most 64)")
            }
        }
        do {
            return ("", try ClientReplayer.DSIdentity(certificatePEM: try readInput(cert), certificatePath: cert, rootsPEM: try readInput(root),
                                                      rootsPath: root, directoryServerID: id))
        } catch let e as IdentityError { throw InvalidArguments(e.message) } catch {
            throw InvalidArguments("--ds-cert \(cert) / --ds-root \(root): \(error)")
        }
    }

    static func plan(_ args: ParsedArguments) throws -> Plan {
        guard let session = args.positionals.first else { throw InvalidArguments("which session? usage: 3dstape client-replay SESSION --certs DIR [--target URL]") }
        let (certs, identity) = try dsSource(args)
        // The default carries the process ID too: two runs started in the same second (a quick rerun, runs in parallel)
        // each get their own file.
        let out = try args.value(Self.session) ?? "sessions/client-replay-\(ReplayCommand.stamp())-\(getpid()).3dstape"
        try refuseExisting(out, "--session \(out) already exists: choose another or remove it")
        var p = Plan(session: session, out: out, certs: certs, json: args.has(Self.json), quiet: args.has(Self.quiet))
        p.dsIdentity = identity
        p.replayer.jwtSecret = try args.value(Self.jwtSecret)
        if let u = try args.value(Self.target) { p.inputs.target = u }
        p.inputs.map = try args.all(Self.map).map { (host: $0.0, url: $0.1) }
        p.inputs.cards = try args.all(Self.card)
        for (n, value) in try args.all(Self.secret) { p.inputs.secrets[n] = value }
        p.only = Set(try args.all(Self.transaction))
        p.load.concurrency = try args.value(Self.concurrency, default: 1)
        p.load.repeats = try args.value(Self.repeatCount, default: 1)
        if let r = try args.value(Self.rate) { p.load.rate = r }
        if let s = try args.value(Self.speed) { p.load.speed = s }
        p.replayer.proxy = try args.value(Self.proxy)
        for path in try args.all(Self.ca) { p.replayer.extraRoots += try Certificate.parseAll(try readInput(path)) }
        if let t = try args.value(Self.rreqTimeout) { p.replayer.rreqTimeout = t }
        if let t = try args.value(Self.timeout) { p.replayer.requestTimeout = t }
        p.replayer.rreqListen = try args.singleListenAddress(Self.rreqListen, default: "127.0.0.1:0",
                                                             remedy: "the RReq listener would take RReqs from other machines; add --allow-remote").bound
        return p
    }

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        var p = try ClientReplayCommand.plan(args)
        // 3dstape's own DS identities open deviceData that a client encrypted to them (key substitution, the sandbox): those
        // this home already has (none is made here: a key that did not exist when the session was recorded opens nothing).
        let home = UserHome.resolve().path as NSString
        for (dir, load) in [("ca/ds", substitutionKeys), ("sandbox", sandboxKeys)] where FileManager.default.fileExists(atPath: home.appendingPathComponent(dir)) {
            let keys = try load()
            p.inputs.deviceDataKeys.append((keys.dsKeys[.rsa]?.key, keys.dsKeys[.ec]?.key, keys.directoryServerID))
        }
        return try ClientReplayCommand.execute(p, io)
    }

    /// Runs a checked plan: prints each transaction as it completes and the summary; 0 when all match, 1 otherwise.
    static func execute(_ p: Plan, _ io: Terminal) throws -> Int32 {
        let plan: ClientReplayPlan
        do { plan = try ClientReplayPlan.load(path: p.session, inputs: p.inputs, only: p.only) } catch let e as SandboxError {
            throw InvalidArguments(e.message)
        }
        guard !plan.transactions.isEmpty else { throw CommandFailure("\(p.session) holds no 3DS transaction to replay") }
        let ds = try p.dsIdentity ?? ClientReplayer.DSIdentity(directory: p.certs)
        let replayer = try ClientReplayer(ds: ds, options: p.replayer)
        defer { replayer.stop() }
        let dir = (p.out as NSString).deletingLastPathComponent
        if !dir.isEmpty { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
        let writer = try SessionWriter(path: p.out, meta: [("created_at", ISO8601DateFormatter().string(from: Date())), ("mode", "client-replay"),
                                                          ("label", "3dstape client-replay of \(p.session)"), ("masked", "yes"),
                                                          ("client_replayed_session", p.session), ("tool_version", version)])
        let runner = ClientReplayRunner(plan: plan, replayer: replayer, writer: writer)
        let started = Date()
        let tty = isatty(STDERR_FILENO) == 1
        let progress = Locked((differing: 0, shown: Date.distantPast, seen: [ClientReplayOutcome]()))
        let tally = runner.run(load: p.load) { o, done, total in
            if p.json {
                io.out(TerminalText.escapedJSON(Masking.maskText(o.json.compact))) // an error text may quote a card number
            } else if !(p.quiet && o.matches) {
                // On a terminal the progress line (stderr, no newline) is cleared first, so the two do not run together.
                if tty, !p.quiet, total > 1 { StandardStreams.err(Data("\r\u{1B}[2K".utf8)) }
                io.out(ClientReplayCommand.line(o, io))
            }
            // The progress line (a terminal only, at most twice a second): done/total, rate, differing, p50/p99 per message type.
            if tty, !p.quiet, total > 1 {
                let line: String? = progress.withLock { s in
                    if !o.matches { s.differing += 1 }
                    s.seen.append(o)
                    if s.seen.count > 10_000 { s.seen.removeFirst(5_000) } // the percentiles of the last few thousand
                    guard done == total || Date().timeIntervalSince(s.shown) >= 0.5 else { return nil }
                    s.shown = Date()
                    let rate = Double(done) / max(Date().timeIntervalSince(started), 0.001)
                    let types = ClientReplayRunner.latencyTable(s.seen).filter { $0.type != "transaction" }
                        .map { String(format: "%@ %.0f/%.0f ms", TerminalText.escaped($0.type) as NSString, $0.p50, $0.p99) }
                    return String(format: "\r%d/%d transactions, %.1f/s, %d differ; p50/p99 ", done, total, rate, s.differing)
                        + types.joined(separator: ", ") + "   " + (done == total ? "\n" : "")
                }
                if let line { StandardStreams.err(Data(line.utf8)) }
            }
        }
        writer.close()
        let matched = tally.matched
        let elapsed = Date().timeIntervalSince(started)
        if p.json {
            io.out(TerminalText.escapedJSON(JSON.object([
                ("summary", .object([("transactions", .number(String(tally.count))), ("matched", .number(String(matched))),
                                     ("differed", .number(String(tally.count - matched))), ("seconds", .number(String(format: "%.3f", elapsed))),
                                     ("session", .string(p.out))])),
            ]).compact))
        } else {
            if !p.quiet, tally.count > 1 {
                let rows = tally.latencyTable
                let width = max(14, (rows.map { TerminalText.escaped($0.type).count }.max() ?? 0) + 1) // a gateway call's path is longer
                io.out("\nlatency (ms)" + String(repeating: " ", count: width - 9) + "count      p50      p99      max")
                for r in rows {
                    let type = TerminalText.escaped(r.type)
                    io.out(type + String(repeating: " ", count: max(1, width - type.count))
                           + String(format: "%9d %8.1f %8.1f %8.1f", r.count, r.p50, r.p99, r.max))
                }
            }
            if p.summaryOnlyOnDifference, matched == tally.count { return 0 }
            io.out("client replay: \(matched) of \(tally.count) transactions answered as recorded"
                   + String(format: " (%.1f s, %.1f/s); session %@", elapsed, Double(tally.count) / max(elapsed, 0.001), p.out as NSString))
        }
        return matched == tally.count ? 0 : 1
    }

    /// One transaction's line (and its differences below it), escaped for the terminal.
    static func line(_ o: ClientReplayOutcome, _ io: Terminal) -> String {
        let head = o.matches ? io.green("same") : io.red("DIFF")
        var s = "\(head) #\(o.transaction)\(o.pass > 0 ? " (pass \(o.pass + 1))" : "")  recorded \(TerminalText.escaped(Masking.maskText(o.recordedOutcome))) → live "
            + TerminalText.escaped(Masking.maskText(o.liveOutcome)) + String(format: "  %.0f ms", o.totalMs)
        if let f = o.failure { s += "\n    " + TerminalText.escaped(Masking.maskText(f)) }
        for d in o.differences.prefix(8) {
            s += "\n    \(TerminalText.escaped(d.message)) \(TerminalText.escaped(d.element)): \(TerminalText.escaped(Masking.maskText(d.recorded))) → "
                + TerminalText.escaped(Masking.maskText(d.live))
        }
        if o.differences.count > 8 { s += "\n    … \(o.differences.count - 8) more" }
        if !o.matches { for n in o.notes { s += "\n    note: " + TerminalText.escaped(n) } } // why it may differ
        return s
    }
}
