import Foundation
import TapArguments
import TapCore
import TapCrypto
import TapEMV
import TapNet
import TapProxy
import TapRecording
import TapReplay
import TapSandbox
import TapStore

/// `3dstape replay`: serves a recorded session as its servers, deterministically, with timing control.
struct ReplayCommand: Command {
    let name = "replay"
    let abstract = "Serve a recorded session as the DS, ACS and every other server in it, with timing control"
    let usage = "3dstape replay SESSION [--listen HOST:PORT]... [--tls] [--public-url URL] [--timing MODE] [--jitter DIST] [--seed N] "
        + "[--delay MATCH=DURATION]... [--on-miss 404|erro|forward:URL] [--pass-through PATTERN...] [--repeat last|cycle|miss] [--ignore-field NAME]... "
        + "[--fault MATCH=ACTION[@P]]... [--faults FILE] [--scenario NAME [--partial]] [--jwt-secret S] [--sign PS256|ES256] [--session OUT] [--quiet|--json-lines]"
    let maxPositionals = 1
    let options: [OptionSpec] = [
        .option("listen", "HOST:PORT", repeatable: true, help: "address to listen on (default 127.0.0.1:8080); one listener takes direct and proxy clients"),
        .flag("tls", help: "serve HTTPS to direct clients (leaf from 3dstape's CA, as for intercepted CONNECT)"),
        .option("public-url", "URL", help: "the replayer's address written into acsURL and similar fields (default: the address a direct client used)"),
        .option("timing", "MODE", help: "original (default: each answer after its recorded wait), none, scale:F, fixed:DURATION"),
        .option("jitter", "DIST", help: "added on top: uniform:MIN-MAX or lognormal:MEDIAN,SIGMA[,MAX], drawn from --seed"),
        .option("seed", "N", help: "seed for jitter and fresh IDs (default 0): the same seed gives the same schedule"),
        .option("delay", "MATCH=DURATION", repeatable: true, help: "per message: ARes=2s, CRes#2=500ms, exchange:7=1s, path:/acs/challenge=250ms"),
        .option("on-miss", "404|erro|forward:URL", help: "answer to a request nothing matches (default 404 with the closest exchanges)"),
        .variadic("pass-through", "PATTERN", help: "proxy clients reach these hosts live (host, *.domain, * or [v6], each with an optional :port): "
                  + "a CONNECT is tunnelled untouched, a plain-HTTP request forwarded; both recorded"),
        .option("repeat", "last|cycle|miss", help: "when identical requests outnumber their recordings (default last)"),
        .option("ignore-field", "NAME", repeatable: true, help: "a JSON field ignored when matching non-3DS bodies"),
        .option("sign", "PS256|ES256", help: "acsSignedContent algorithm for fresh app-channel keys (default PS256)"),
        .option("fault", "MATCH=ACTION[@P]", repeatable: true, help: "inject a fault: MATCH as for --delay; ACTION hang, reset, close, dribble:D, delay:D, "
                + "status:CODE, truncate:BYTES, malformed, erro:CODE, trans-status:X, challenge-cancel:NN, bad-signature, untrusted-signer, "
                + "wrong-ephemeral-key, bad-counter, wrong-key, drop-rreq, rreq-delay:D, acs-timeout; on gateway answers (path:/pxp/…, path:/tp/jwt/) "
                + "pxp-error:CODE, pxp-state:STATE, sca-exemption:NAME, auth-refused, auth-failed, tp-errorcode:REQUESTTYPE=CODE[/FIELD], "
                + "jwt-bad-signature; P a probability drawn from --seed"),
        .option("scenario", "NAME", help: "apply a named failure scenario ('3dstape scenarios' lists them)"),
        .flag("partial", help: "with --scenario: apply the scenario's rules that can apply to this session and list the others"),
        .option("faults", "FILE", help: "fault rules as JSON: [{\"match\": \"CRes#1\", \"action\": \"bad-counter\", \"probability\": 1, \"description\": \"…\"}]"),
        .option("jwt-secret", "S", help: "the HS256 secret a faulted Trust Payments-style answer is signed again with (default: the sandbox's test secret)"),
        .option("session", "OUT", help: "the replay's own session file (default sessions/replay-<time>.3dstape)"),
        .option("header-timeout", "SECONDS", help: "answer 408 when a started request is not complete in time (default 30)"),
        .option("idle-timeout", "SECONDS", help: "close idle keep-alive connections (default 120)"),
        .flag("quiet", help: "print only the summary"),
        .flag("json-lines", help: "print each exchange as one JSON line"),
    ] + remoteListeningOptions

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        guard let path = args.positionals.first else { throw InvalidArguments("which session? usage: \(usage)") }
        var options = try ReplayCommand.options(args)
        let passThrough = try args.hostPatterns("pass-through") // refused (exit 2) before anything starts
        let headerTimeout = try args.seconds("header-timeout") ?? 30, idleTimeout = try args.seconds("idle-timeout") ?? 120
        let maxConnections = try args.maxConnections(), maxBuffered = try args.maxBuffered()
        let catalog: ReplayCatalog
        do { catalog = try ReplayCatalog.load(path: path) } catch let e as SessionFileError { throw CommandFailure(e.message) }
        let coverage = RuleCoverage(catalog)
        let notApplied = try ReplayCommand.scenarioPart(args, &options, coverage)
        for line in notApplied { io.err("3dstape: replay: --scenario \(args.value("scenario") ?? "") --partial leaves out \(TerminalText.escaped(line))") }
        let faultProblems = ReplayFaults.problems(options.faults, delays: options.schedule.rules, coverage: coverage)
        if !faultProblems.isEmpty { throw InvalidArguments(faultProblems.joined(separator: "\n  ")) } // the first few, then a count
        let problems = catalog.undecryptedProblems()
        if !problems.isEmpty {
            for p in problems { io.err("3dstape: replay: \(TerminalText.escaped(p))") }
            throw CommandFailure("\(problems.count) transaction(s) cannot be replayed with fresh keys until their app channel is decrypted")
        }
        let listens = try args.listenAddresses(default: "127.0.0.1:8080")
        let authorization = try args.listenAuthorization(listens)
        let identity = try ReplayCommand.acsIdentity(args.value("sign"))
        let engine = ReplayEngine(catalog: catalog, options: options, identity: identity)
        let out = args.value("session") ?? "sessions/replay-\(ReplayCommand.stamp()).3dstape"
        let scenarioMeta = args.value("scenario").map { [("scenario", $0)] } ?? []
        let partialMeta = notApplied.isEmpty ? [] : [("scenario_not_applied", notApplied.joined(separator: "\n"))]
        let writer = try SessionWriter(path: out, meta: SessionWriter.replayMeta(of: path)
                                           + [("seed", String(options.schedule.seed)), ("tool_version", version)] + scenarioMeta + partialMeta,
                                       keys: engine,
                                       onProblem: { StandardStreams.err(Data("3dstape: replay: \(TerminalText.escaped($0))\n".utf8)) })
        let (ca, _) = try UserHome.resolve().interceptionCA()
        let intercept = try TLSContext(interceptingWith: try LeafCertificateCache(authority: ca))
        let stack = try ServiceStack.foreground()
        let view = ReplayView(mode: args.has("json-lines") ? .jsonLines : (args.has("quiet") ? .quiet : .lines))
        let replayer = Replayer(loop: stack.loop, engine: engine, writer: writer, outgoingTLS: try TLSContext(clientRoots: nil), report: view.print)
        replayer.passThrough = passThrough
        let tls = args.has("tls")
        var bound: [HostPort] = []
        do {
            for l in listens {
                bound.append(try replayer.start(on: l.bound, tls: tls ? intercept : nil, intercepting: intercept, scheme: tls ? "https" : "http",
                                                headerTimeout: headerTimeout, idleTimeout: idleTimeout, authorization: authorization,
                                                maxConnections: maxConnections, maxBufferedBytes: maxBuffered))
            }
        } catch {
            writer.discard() // nothing was served: no empty session is left to block the next run's --session
            throw error
        }
        io.err("replaying \(path) (\(catalog.flows.count) 3DS transactions, \(catalog.exchanges.count) exchanges) on "
               + bound.map { "\(tls ? "https" : "http")://\($0)" }.joined(separator: ", ") + "; direct or as a proxy")
        io.err("replay session: \(TerminalText.escaped(out))   Ctrl-C to stop")
        stack.onStop { replayer.stop() }
        stack.finally { writer.close() }
        stack.runUntilSignal()
        let c = replayer.counts
        io.err("\nstopped: \(ReplayCommand.summary(c)); session: \(TerminalText.escaped(out))")
        if replayer.forwardLoops > 0 {
            io.err("\(replayer.forwardLoops) forwarded request(s) came back to the replayer and were answered 508: --on-miss forward:URL "
                   + "(or a live endpoint) leads to the replayer itself")
        }
        if let line = replayer.writerWaitSummary { io.err(line) }
        return writer.writeError == nil ? 0 : 1
    }

    /// The scenario's rules that cannot apply to this session: refused (exit 2) with a line for each and the offer of
    /// `--partial`, or with `--partial` taken out of `options` and returned (`RULE: reason`, one each) for the session meta.
    static func scenarioPart(_ args: ParsedArguments, _ options: inout ReplayOptions, _ coverage: RuleCoverage) throws -> [String] {
        guard let name = args.value("scenario"), let scenario = ReplayScenario.named(name) else {
            if args.has("partial") { throw InvalidArguments("--partial goes with --scenario NAME") }
            return []
        }
        let (applicable, notApplicable) = try scenario.applicability(to: coverage)
        guard !notApplicable.isEmpty else { return [] }
        let lines = notApplicable.map { "--scenario \(name): rule \($0.rule) cannot apply: \($0.reason)" }
        guard !applicable.isEmpty else { throw InvalidArguments((lines + ["no rule of scenario \(name) applies to this session"]).joined(separator: "\n  ")) }
        guard args.has("partial") else {
            throw InvalidArguments((lines + ["'--scenario \(name) --partial' applies the rest (\(applicable.map(\.description).joined(separator: ", "))) "
                                             + "and lists what it leaves out"]).joined(separator: "\n  "))
        }
        // The scenario's rules come last in options.faults (after --fault and --faults): replaced by those that apply.
        options.faults.removeLast(scenario.rules.count)
        options.faults += applicable
        return notApplicable.map { "\($0.rule): \($0.reason)" }
    }

    /// The closing count: answers, the clients' closing messages after a fault (apart from misses), misses, clients that
    /// gave up, and what became of the RReqs (delivered, not delivered because the client had gone, dropped by a fault).
    static func summary(_ c: (answered: Int, closing: Int, missed: Int, aborted: Int, rreqs: Int, rreqsUndelivered: Int, rreqsDropped: Int)) -> String {
        var parts = ["\(c.answered) answered"]
        if c.closing > 0 { parts.append("\(c.closing) closing message\(c.closing == 1 ? "" : "s") after a fault or the end answered as an ACS") }
        parts += ["\(c.missed) missed", "\(c.aborted) clients gave up", "\(c.rreqs) RReqs delivered"]
        if c.rreqsUndelivered > 0 { parts.append("\(c.rreqsUndelivered) RReq\(c.rreqsUndelivered == 1 ? "" : "s") not delivered (client gone)") }
        if c.rreqsDropped > 0 { parts.append("\(c.rreqsDropped) RReq\(c.rreqsDropped == 1 ? "" : "s") dropped by fault") }
        return parts.joined(separator: ", ")
    }

    static func stamp() -> String {
        let f = DateFormatter()
        f.dateFormat = "yyyyMMdd-HHmmss"
        return f.string(from: Date())
    }

    /// The replay options from the command line, each refused with a clear line when malformed.
    static func options(_ args: ParsedArguments) throws -> ReplayOptions {
        var o = ReplayOptions()
        // Every number in the timing options is checked here, with its range, before anything starts (exit status 2).
        if let t = args.value("timing") {
            do { o.schedule.timing = try TimingMode.read(t) } catch { throw InvalidArguments("--timing \(t): \(error)") }
        }
        if let j = args.value("jitter") {
            do { o.schedule.jitter = try Jitter.read(j) } catch { throw InvalidArguments("--jitter \(j): \(error)") }
        }
        o.schedule.rules = try args.all("delay").map { text in
            do { return try DelayRule.read(text) } catch { throw InvalidArguments("--delay \(text): \(error)") }
        }
        if let n = try args.seed() {
            o.schedule.seed = n
        }
        switch args.value("on-miss") ?? "404" {
        case "404": o.onMiss = .notFound
        case "erro": o.onMiss = .erro
        case let v where v.hasPrefix("forward:"):
            let url = String(v.dropFirst(8))
            guard HTTPURL(url) != nil else { throw InvalidArguments("--on-miss \(v): expected forward:http(s)://host[:port]") }
            o.onMiss = .forward(url)
        case let v: throw InvalidArguments("--on-miss \(v): expected 404, erro or forward:URL")
        }
        if let r = args.value("repeat") {
            guard let m = RepeatMode(rawValue: r) else { throw InvalidArguments("--repeat \(r): expected last, cycle or miss") }
            o.repeatMode = m
        }
        o.ignoreFields = Set(args.all("ignore-field"))
        if let secret = args.value("jwt-secret") {
            guard !secret.isEmpty else { throw InvalidArguments("--jwt-secret: expected a non-empty secret") }
            o.jwtSecret = secret
        }
        do {
            o.faults = try args.all("fault").map { (text) throws(ReplayError) in try FaultRule.parse(text) }
            if let file = args.value("faults") { o.faults += try FaultRule.parseFile(try readInput(file), name: file) }
            if let name = args.value("scenario") {
                guard let scenario = ReplayScenario.named(name) else {
                    throw InvalidArguments("--scenario \(name): no such scenario; '3dstape scenarios' lists them")
                }
                o.faults += try scenario.faultRules()
            }
        } catch let e as ReplayError {
            throw InvalidArguments(e.description)
        }
        if let u = args.value("public-url") {
            guard HTTPURL(u) != nil else { throw InvalidArguments("--public-url \(u): expected http(s)://host[:port]") }
            o.publicURL = u.hasSuffix("/") ? String(u.dropLast()) : u
        }
        return o
    }

    /// 3dstape's ACS certificate under the test DS root that `ca export --ds` hands out.
    static func acsIdentity(_ sign: String?) throws -> ReplayACSIdentity {
        let keys = try substitutionKeys()
        switch (sign ?? "PS256").uppercased() {
        case "PS256": return ReplayACSIdentity(key: keys.acsRSA.key, certificate: keys.acsRSA.cert, signing: .ps256)
        case "ES256": return ReplayACSIdentity(key: keys.acsEC.key, certificate: keys.acsEC.cert, signing: .es256)
        case let other: throw InvalidArguments("--sign \(other): expected PS256 or ES256")
        }
    }
}

/// Prints one line per replayed exchange: what matched, the scheduled delay, the outcome.
struct ReplayView: Sendable {
    enum Mode: Sendable { case lines, jsonLines, quiet }
    let mode: Mode

    func print(_ x: ReplayLine) {
        let line: String
        switch mode {
        case .quiet: return
        case .jsonLines:
            line = TerminalText.escapedJSON(JSON.object([
                ("at", .number(String(format: "%.6f", x.at))), ("method", .string(x.method)), ("url", .string(x.target)),
                ("status", x.status.map { .number(String($0)) } ?? .null),
                ("recorded_exchange", x.recordedExchangeID.map { .number(String($0)) } ?? .null),
                ("matched_by", x.matchedBy.map(JSON.string) ?? .null), ("miss", x.miss.map(JSON.string) ?? .null),
                ("scheduled_ms", .number(String(format: "%.3f", x.scheduledMs))),
                ("actual_ms", x.actualMs.map { .number(String(format: "%.3f", $0)) } ?? .null), ("faults", x.faults.map(JSON.string) ?? .null),
                ("outcome", .string(x.outcome)),
            ]).compact)
        case .lines:
            // The miss names the live request's values, the target and method are the client's: all escaped.
            var matched = x.miss.map { "MISS: \(ThreeDSContent.printable($0))" } ?? "#\(x.recordedExchangeID.map(String.init) ?? "-") \(TerminalText.escaped(x.matchedBy ?? ""))"
            if let f = x.faults { matched += "  FAULT \(TerminalText.escaped(f))" }
            let actual = x.actualMs.map { String(format: "%.1f", $0) } ?? "-"
            line = "\(TerminalText.escaped(x.method)) \(ThreeDSContent.printable(x.target))  → \(x.status.map(String.init) ?? "---")  \(matched)  "
                + "delay \(String(format: "%.1f", x.scheduledMs)) ms scheduled, \(actual) ms actual  \(TerminalText.escaped(x.outcome))"
        }
        StandardStreams.out(Data((line + "\n").utf8))
    }
}

/// `3dstape scenarios`: the named failure scenarios `replay --scenario` applies.
struct ScenariosCommand: Command {
    let name = "scenarios"
    let abstract = "List the named 3DS failure scenarios for 'replay --scenario' (rules, expected behaviour, what SDKs show)"
    let usage = "3dstape scenarios [--json]"
    let maxPositionals = 0
    let options: [OptionSpec] = [.flag("json", help: "print a JSON array")]

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        if args.has("json") {
            io.json(JSON.array(ReplayScenario.all.map { s in
                .object([("name", .string(s.name)), ("rules", .array(s.rules.map(JSON.string))), ("summary", .string(s.summary)),
                         ("expected", .string(s.expected)), ("expectation", .array(s.expectation.map(\.json))),
                         ("pxpCheckout", .string(s.pxp)), ("cake3ds2", .string(s.cake)), ("trustPayments", .string(s.trustPayments)),
                         ("gateway", s.gateway.map { .string($0.rawValue) } ?? .null)])
            }))
            return 0
        }
        for s in ReplayScenario.all {
            io.out(io.bold(s.name) + "  " + s.rules.map { "--fault \($0)" }.joined(separator: " "))
            io.out("    \(s.summary)")
            io.out("    expected: \(s.expected)")
            io.out("    check: \(s.expectation.map(\.description).joined(separator: "; "))")
            io.out("    PXP Checkout: \(s.pxp); Cake3DS2: \(s.cake); Trust Payments: \(s.trustPayments)")
            if let g = s.gateway { io.out("    needs a session recorded through the \(g.title) gateway (demo --gateway \(g.rawValue))") }
        }
        return 0
    }
}
