import Foundation
import TapArguments
import TapCore
import TapCrypto
import TapEMV
import TapJOSE
import TapIdentity
import TapNet
import TapProxy
import TapRecording
import TapReplay
import TapStore

/// `3dstape replay`: serves a recorded session as its servers, deterministically, with timing control.
struct ReplayCommand: Command {
    let spec = CommandSpec(name: "replay", abstract: "Serve a recorded session as the DS, ACS and every other server in it, with timing control",
                           usage: "SESSION [--listen HOST:PORT]... [--tls] [--public-url URL] [--timing MODE] [--jitter DIST] [--seed N] "
                               + "[--delay MATCH=DURATION]... [--on-miss 404|erro|forward:URL] [--pass-through PATTERN...] [--repeat last|cycle|miss] [--ignore-field NAME]... "
                               + "[--fault MATCH=ACTION[@P]]... [--faults FILE] [--scenario NAME [--partial]] [--jwt-secret S] [--sign PS256|ES256] [--session OUT] [--max-session-size SIZE] [--quiet|--json-lines]",
                           maxPositionals: 1, usesUserKeys: true,
                           options: [listen.spec, tls.spec, publicURL.spec, timing.spec, jitter.spec, seed.spec, delay.spec, onMiss.spec,
                                     passThrough.spec, repeatMode.spec, ignoreField.spec, sign.spec, fault.spec, scenario.spec, partial.spec,
                                     faults.spec, jwtSecret.spec, session.spec, SessionFileSize.maxSessionSize.spec, headerTimeout.spec, idleTimeout.spec, quiet.spec,
                                     jsonLines.spec] + remoteListeningOptions)
    static let listen = Option("listen", "HOST:PORT", HostPortValue(), repeatable: true,
                               help: "address to listen on (default 127.0.0.1:8080); one listener takes direct and proxy clients")
    static let tls = Flag("tls", help: "serve HTTPS to direct clients (leaf from 3dstape's CA, as for intercepted CONNECT)")
    /// Without a trailing slash.
    static let publicURL = Option("public-url", "URL", CustomValue { (u, o) throws(InvalidArguments) in
        guard HTTPURL(u) != nil else { throw InvalidArguments("--\(o) \(u): expected http(s)://host[:port]") }
        return u.hasSuffix("/") ? String(u.dropLast()) : u
    }, help: "the replayer's address written into acsURL and similar fields (default: the address a direct client used)")
    // Every number in the timing options is checked, with its range, before anything starts (exit status 2).
    static let timing = Option("timing", "MODE", CustomValue { (t, o) throws(InvalidArguments) in
        do { return try TimingMode.read(t) } catch { throw InvalidArguments("--\(o) \(t): \(error)") }
    }, help: "original (default: each answer after its recorded wait), none, scale:F, fixed:DURATION")
    static let jitter = Option("jitter", "DIST", CustomValue { (j, o) throws(InvalidArguments) in
        do { return try Jitter.read(j) } catch { throw InvalidArguments("--\(o) \(j): \(error)") }
    }, help: "added on top: uniform:MIN-MAX or lognormal:MEDIAN,SIGMA[,MAX], drawn from --seed")
    static let seed = Option("seed", "N", SeedValue(), help: "seed for jitter and fresh IDs (default 0): the same seed gives the same schedule")
    static let delay = Option("delay", "MATCH=DURATION", CustomValue { (text, o) throws(InvalidArguments) in
        do { return try DelayRule.read(text) } catch { throw InvalidArguments("--\(o) \(text): \(error)") }
    }, repeatable: true, help: "per message: ARes=2s, CRes#2=500ms, exchange:7=1s, path:/acs/challenge=250ms")
    static let onMiss = Option("on-miss", "404|erro|forward:URL", CustomValue { (v, o) throws(InvalidArguments) -> MissAnswer in
        switch v {
        case "404": return .notFound
        case "erro": return .erro
        case let v where v.hasPrefix("forward:"):
            let url = String(v.dropFirst(8))
            guard HTTPURL(url) != nil else { throw InvalidArguments("--\(o) \(v): expected forward:http(s)://host[:port]") }
            return .forward(url)
        case let v: throw InvalidArguments("--\(o) \(v): expected 404, erro or forward:URL")
        }
    }, default: .notFound, help: "answer to a request nothing matches (default 404 with the closest exchanges)")
    static let passThrough = Option("pass-through", "PATTERN", HostPatternsValue(), variadic: true,
                                    help: "proxy clients reach these hosts live (host, *.domain, * or [v6], each with an optional :port): "
                                        + "a CONNECT is tunnelled untouched, a plain-HTTP request forwarded; both recorded")
    static let repeatMode = Option("repeat", "last|cycle|miss", ChoiceValue<RepeatMode>(refusal: { "--\($0) \($1): expected last, cycle or miss" }),
                                   help: "when identical requests outnumber their recordings (default last)")
    static let ignoreField = Option("ignore-field", "NAME", TextValue(), repeatable: true, help: "a JSON field ignored when matching non-3DS bodies")
    static let sign = Option("sign", "PS256|ES256", signingChoice, default: .ps256,
                             help: "acsSignedContent algorithm for fresh app-channel keys (default PS256)")
    static let fault = Option("fault", "MATCH=ACTION[@P]", CustomValue { (text, _) throws(InvalidArguments) -> FaultRule in
        do { return try FaultRule.parse(text) } catch { throw InvalidArguments("\(error)") }
    }, repeatable: true, help: "inject a fault: MATCH as for --delay; ACTION hang, reset, close, dribble:D, delay:D, "
        + "status:CODE, truncate:BYTES, malformed, erro:CODE, trans-status:X, challenge-cancel:NN, bad-signature, untrusted-signer, "
        + "wrong-ephemeral-key, bad-counter, wrong-key, drop-rreq, rreq-delay:D, acs-timeout; on gateway answers (path:/pxp/…, path:/tp/jwt/) "
        + "pxp-error:CODE, pxp-state:STATE, sca-exemption:NAME, auth-refused, auth-failed, tp-errorcode:REQUESTTYPE=CODE[/FIELD], "
        + "jwt-bad-signature; P a probability drawn from --seed")
    /// The scenario's name, once known to exist.
    static let scenario = Option("scenario", "NAME", CustomValue { (name, o) throws(InvalidArguments) -> String in
        guard ReplayScenario.named(name) != nil else { throw InvalidArguments("--\(o) \(name): no such scenario; '3dstape scenarios' lists them") }
        return name
    }, help: "apply a named failure scenario ('3dstape scenarios' lists them)")
    static let partial = Flag("partial", help: "with --scenario: apply the scenario's rules that can apply to this session and list the others")
    static let faults = Option("faults", "FILE", PathValue(),
                               help: "fault rules as JSON: [{\"match\": \"CRes#1\", \"action\": \"bad-counter\", \"probability\": 1, \"description\": \"…\"}]")
    static let jwtSecret = Option("jwt-secret", "S", CustomValue { (secret, o) throws(InvalidArguments) in
        guard !secret.isEmpty else { throw InvalidArguments("--\(o): expected a non-empty secret") }
        return secret
    }, help: "the HS256 secret a faulted Trust Payments-style answer is signed again with (default: the sandbox's test secret)")
    static let session = Option("session", "OUT", PathValue(), help: "the replay's own session file (default sessions/replay-<time>.3dstape)")
    static let headerTimeout = Option("header-timeout", "SECONDS", DurationValue.timeout, default: 30,
                                      help: "answer 408 when a started request is not complete in time (default 30)")
    static let idleTimeout = Option("idle-timeout", "SECONDS", DurationValue.timeout, default: 120, help: "close idle keep-alive connections (default 120)")
    static let quiet = Flag("quiet", help: "print only the summary")
    static let jsonLines = Flag("json-lines", help: "print each exchange as one JSON line")

    /// `PS256` or `ES256` in any case, as `--sign` takes it (replay and sandbox).
    static let signingChoice = ChoiceValue<SignatureAlgorithm>([("PS256", .ps256), ("ES256", .es256)], normalise: { $0.uppercased() },
                                                               refusal: { "--\($0) \($1): expected PS256 or ES256" })

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        guard let path = args.positionals.first else { throw InvalidArguments("which session? usage: \(spec.usage)") }
        var options = try ReplayCommand.options(args)
        let passThrough = try args.all(Self.passThrough).flatMap { $0 }
        let headerTimeout = try args.value(Self.headerTimeout, default: 30), idleTimeout = try args.value(Self.idleTimeout, default: 120)
        let maxConnections = try args.maxConnections(), maxBuffered = try args.maxBuffered()
        let out = try args.value(Self.session) ?? "sessions/replay-\(ReplayCommand.stamp()).3dstape"
        try refuseExisting(out, "\(out) already exists; choose another --session or remove it") // before the session is read
        let catalog: ReplayCatalog
        do { catalog = try ReplayCatalog.load(path: path) } catch let e as SessionFileError { throw CommandFailure(e.message) }
        let coverage = RuleCoverage(catalog)
        let notApplied = try ReplayCommand.scenarioPart(args, &options, coverage)
        for line in notApplied { io.err("3dstape: replay: --scenario \(try args.value(Self.scenario) ?? "") --partial leaves out \(TerminalText.escaped(line))") }
        let faultProblems = ReplayFaults.problems(options.faults, delays: options.schedule.rules, coverage: coverage)
        if !faultProblems.isEmpty { throw InvalidArguments(faultProblems.joined(separator: "\n  ")) } // the first few, then a count
        let problems = catalog.undecryptedProblems()
        if !problems.isEmpty {
            for p in problems { io.err("3dstape: replay: \(TerminalText.escaped(p))") }
            throw CommandFailure("\(problems.count) transaction(s) cannot be replayed with fresh keys until their app channel is decrypted")
        }
        let listens = try args.listenAddresses(Self.listen, default: "127.0.0.1:8080")
        let authorization = try args.listenAuthorization(listens)
        let identity = try ReplayCommand.acsIdentity(try args.value(Self.sign))
        let engine = ReplayEngine(catalog: catalog, options: options, identity: identity)
        let scenarioMeta = try args.value(Self.scenario).map { [("scenario", $0)] } ?? []
        let partialMeta = notApplied.isEmpty ? [] : [("scenario_not_applied", notApplied.joined(separator: "\n"))]
        let writer = try SessionWriter(path: out, meta: SessionWriter.replayMeta(of: path)
                                           + [("seed", String(options.schedule.seed)), ("tool_version", version)] + scenarioMeta + partialMeta,
                                       keys: engine, maxBytes: try args.value(SessionFileSize.maxSessionSize),
                                       onProblem: { StandardStreams.err(Data("3dstape: replay: \(TerminalText.escaped($0))\n".utf8)) })
        let (ca, _) = try UserHome.resolve().interceptionCA()
        let intercept = try TLSContext(interceptingWith: try LeafCertificateCache(authority: ca))
        let stack = try ServiceStack.foreground()
        let view = ReplayView(mode: args.has(Self.jsonLines) ? .jsonLines : (args.has(Self.quiet) ? .quiet : .lines))
        let replayer = Replayer(loop: stack.loop, engine: engine, writer: writer, outgoingTLS: try TLSContext(clientRoots: nil), report: view.print)
        replayer.passThrough = passThrough
        let tls = args.has(Self.tls)
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
        io.err("replaying \(path) (\(counted(catalog.flows.count, "3DS transaction")), \(counted(catalog.exchanges.count, "exchange"))) on "
               + bound.map { "\(tls ? "https" : "http")://\($0)" }.joined(separator: ", ") + "; direct or as a proxy")
        io.err("replay session: \(TerminalText.escaped(out))   Ctrl-C to stop")
        stack.onStop { replayer.stop(byUser: true) } // Ctrl-C or SIGTERM: answers not yet sent were cut short by us
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
        guard let name = try args.value(Self.scenario), let scenario = ReplayScenario.named(name) else {
            if args.has(Self.partial) { throw InvalidArguments("--partial goes with --scenario NAME") }
            return []
        }
        let (applicable, notApplicable) = try scenario.applicability(to: coverage)
        guard !notApplicable.isEmpty else { return [] }
        let lines = notApplicable.map { "--scenario \(name): rule \($0.rule) cannot apply: \($0.reason)" }
        guard !applicable.isEmpty else { throw InvalidArguments((lines + ["no rule of scenario \(name) applies to this session"]).joined(separator: "\n  ")) }
        guard args.has(Self.partial) else {
            throw InvalidArguments((lines + ["'--scenario \(name) --partial' applies the rest (\(applicable.map(\.description).joined(separator: ", "))) "
                                             + "and lists what it leaves out"]).joined(separator: "\n  "))
        }
        // The scenario's rules come last in options.faults (after --fault and --faults): replaced by those that apply.
        options.faults.removeLast(scenario.rules.count)
        options.faults += applicable
        return notApplicable.map { "\($0.rule): \($0.reason)" }
    }

    /// The closing count: answers, the clients' closing messages after a fault (apart from misses), misses, clients that
    /// gave up, answers cut short by the stop (Ctrl-C), and what became of the RReqs (delivered, not delivered because the
    /// client had gone, dropped by a fault).
    static func summary(_ c: (answered: Int, closing: Int, missed: Int, aborted: Int, rreqs: Int, rreqsUndelivered: Int, rreqsDropped: Int,
                              cutShort: Int)) -> String {
        var parts = ["\(c.answered) answered"]
        if c.closing > 0 { parts.append("\(counted(c.closing, "closing message")) after a fault or the end answered as an ACS") }
        parts += ["\(c.missed) missed", "\(c.aborted) clients gave up"]
        if c.cutShort > 0 { parts.append("\(counted(c.cutShort, "answer")) cut short by the stop") }
        parts.append("\(counted(c.rreqs, "RReq")) delivered")
        if c.rreqsUndelivered > 0 { parts.append("\(counted(c.rreqsUndelivered, "RReq")) not delivered (client gone)") }
        if c.rreqsDropped > 0 { parts.append("\(counted(c.rreqsDropped, "RReq")) dropped by fault") }
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
        if let t = try args.value(Self.timing) { o.schedule.timing = t }
        if let j = try args.value(Self.jitter) { o.schedule.jitter = j }
        o.schedule.rules = try args.all(Self.delay)
        if let n = try args.value(Self.seed) { o.schedule.seed = n }
        o.onMiss = try args.value(Self.onMiss, default: .notFound)
        if let m = try args.value(Self.repeatMode) { o.repeatMode = m }
        o.ignoreFields = Set(try args.all(Self.ignoreField))
        if let secret = try args.value(Self.jwtSecret) { o.jwtSecret = secret }
        o.faults = try args.all(Self.fault)
        do {
            if let file = try args.value(Self.faults) { o.faults += try FaultRule.parseFile(try readInput(file), name: file) }
            if let name = try args.value(Self.scenario), let scenario = ReplayScenario.named(name) { o.faults += try scenario.faultRules() }
        } catch let e as ReplayError {
            throw InvalidArguments(e.description)
        }
        if let u = try args.value(Self.publicURL) { o.publicURL = u }
        return o
    }

    /// 3dstape's ACS certificate under the test DS root that `ca export --ds` hands out.
    static func acsIdentity(_ sign: SignatureAlgorithm?) throws -> ReplayACSIdentity {
        let keys = try substitutionKeys()
        if sign == .es256 { return ReplayACSIdentity(key: keys.acsEC.key, certificate: keys.acsEC.cert, signing: .es256) }
        return ReplayACSIdentity(key: keys.acsRSA.key, certificate: keys.acsRSA.cert, signing: .ps256)
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
    let spec = CommandSpec(name: "scenarios",
                           abstract: "List the named 3DS failure scenarios for 'replay --scenario' (rules, expected behaviour, what SDKs show)",
                           usage: "[--json]", maxPositionals: 0, options: [JSONList.flag.spec])

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        if args.has(JSONList.flag) {
            io.json(JSON.array(ReplayScenario.all.map { s in
                .object([("name", .string(s.name)), ("rules", .array(s.rules.map(JSON.string))), ("summary", .string(s.summary)),
                         ("expected", .string(s.expected)), ("expectation", .array(s.expectation.map(\.json))),
                         ("pxpCheckout", .string(s.surfaces.pxp)), ("cake3ds2", .string(s.surfaces.cake)),
                         ("trustPayments", .string(s.surfaces.trustPayments)),
                         ("gateway", s.gateway.map { .string($0.rawValue) } ?? .null)])
            }))
            return 0
        }
        for s in ReplayScenario.all {
            io.out(io.bold(s.name) + "  " + s.rules.map { "--fault \($0)" }.joined(separator: " "))
            io.out("    \(s.summary)")
            io.out("    expected: \(s.expected)")
            io.out("    check: \(s.expectation.map(\.description).joined(separator: "; "))")
            io.out("    PXP Checkout: \(s.surfaces.pxp); Cake3DS2: \(s.surfaces.cake); Trust Payments: \(s.surfaces.trustPayments)")
            if let g = s.gateway { io.out("    needs a session recorded through the \(g.title) gateway (demo --gateway \(g.rawValue))") }
        }
        return 0
    }
}
