import Foundation
import TapArguments
import TapClientReplay
import TapCore
import TapCrypto
import TapEMV
import TapIdentity
import TapInspect
import TapHTTPService
import TapJOSE
import TapNet
import TapProxy
import TapRecording
import TapReplay
import TapSandbox
import TapStore

/// `3dstape demo`: the sandbox, the recorder and the client on one machine, a set of flows, a session.
struct DemoCommand: Command {
    let spec = CommandSpec(name: "demo", abstract: "Run sandbox + recorder + client for a set of 3DS flows, write the session and show it",
                           usage: "[--out FILE] [--channel app|browser|all] [--gateway pxp|trustpayments] [--quiet] "
                               + "[--sandbox-listen HOST:PORT] [--record-listen HOST:PORT] [--replay-listen HOST:PORT]",
                           maxPositionals: 0, usesUserKeys: true,
                           options: [out.spec, channel.spec, gateway.spec, quiet.spec, sandboxListen.spec, recordListen.spec, replayListen.spec,
                                     allowRemote.spec])
    static let out = Option("out", "FILE", CustomValue { (out, o) throws(InvalidArguments) in
        guard !out.isEmpty else { throw InvalidArguments("--\(o): expected a file name") }
        return out
    }, help: "the session file (default sessions/demo-<time>.3dstape)")
    static let channel = Option("channel", "app|browser|all",
                                ChoiceValue([("app", "app"), ("browser", "browser"), ("all", "all")], refusal: { "--\($0) \($1): expected app, browser or all" }),
                                default: "all", help: "which flows to run (default all)")
    static let gateway = Option("gateway", "NAME", gatewayChoice,
                                help: "instead, a few flows wrapped in the sandbox's PXP-style (pxp) or Trust Payments-style (trustpayments) gateway "
                                    + "calls (for 'show --profile')")
    static let quiet = Flag("quiet", help: "print only each flow's result (and any replayed flow whose outcome differs) and the session's file name")
    static let sandboxListen = Option("sandbox-listen", "HOST:PORT", HostPortValue(), help: "the sandbox DS and ACS's address (default 127.0.0.1:0, a free port)")
    static let recordListen = Option("record-listen", "HOST:PORT", HostPortValue(), help: "the recorder's address (default 127.0.0.1:0)")
    static let replayListen = Option("replay-listen", "HOST:PORT", HostPortValue(),
                                     help: "the address of the replay that follows the recording (default 127.0.0.1:0)")
    static let allowRemote = Flag("allow-remote", help: "let those addresses be ones other machines can reach (the sandbox has no login)")

    /// What the options ask for, every one checked before anything starts.
    struct Plan {
        var out: String
        var channel: String
        var gateway: Gateway?
        var sandbox: ListenAddress
        var recorder: ListenAddress
        var replayer: ListenAddress
        var quiet: Bool
        var flows: [Flow] {
            if let gateway { return DemoCommand.gatewayFlows(gateway) }
            return DemoCommand.flows.filter { channel == "all" || ($0.browser == (channel == "browser")) }
        }
    }

    /// Checks every option (exit status 2 for a bad one) before a key, a server or a session file is made.
    static func plan(_ args: ParsedArguments) throws -> Plan {
        let channel = try args.value(Self.channel, default: "all")
        let gateway = try args.value(Self.gateway)
        if gateway != nil, args.given(Self.channel) { throw InvalidArguments("--gateway runs its own flows: give --channel or --gateway, not both") }
        let remedy = "the sandbox and the recorder have no login; add --allow-remote to listen there anyway"
        let sandbox = try args.singleListenAddress(Self.sandboxListen, default: "127.0.0.1:0", remedy: remedy)
        let recorder = try args.singleListenAddress(Self.recordListen, default: "127.0.0.1:0", remedy: remedy)
        let replayer = try args.singleListenAddress(Self.replayListen, default: "127.0.0.1:0", remedy: remedy)
        // The three servers overlap in time (the sandbox still runs while the replay starts): each pinned port its own.
        let named = [("--sandbox-listen", sandbox.bound), ("--record-listen", recorder.bound), ("--replay-listen", replayer.bound)]
        for (i, a) in named.enumerated() where a.1.port != 0 {
            if let b = named[(i + 1)...].first(where: { $0.1.port == a.1.port && $0.1.description == a.1.description }) {
                throw InvalidArguments("\(a.0) and \(b.0) are the same address \(a.1): give each its own port")
            }
        }
        let f = DateFormatter()
        f.dateFormat = "yyyyMMdd-HHmmss"
        let out = try args.value(Self.out) ?? "sessions/demo-\(f.string(from: Date())).3dstape"
        try refuseExisting(out, "--out \(out) already exists: choose another --out or remove it")
        return Plan(out: out, channel: channel, gateway: gateway, sandbox: sandbox, recorder: recorder, replayer: replayer, quiet: args.has(Self.quiet))
    }

    struct Flow {
        let card: String
        let browser: Bool
        let version: String
        var answer: String? = nil
        var select: [String] = []
        var oob = false
        var enc: ContentEncryption = .a128cbcHS256
        var gateway: Gateway? = nil
        let expect: String

        /// Runs the flow with the SDK-like client through `proxy`; returns the outcome as the demo prints it.
        func run(ds: String, certs: String, proxy: HostPort) throws -> (String, ClientResult) {
            var o = ClientOptions(dsURL: HTTPURL(ds)!, card: card, certsDirectory: certs)
            o.browser = browser
            o.messageVersion = version
            o.answer = answer
            o.select = select
            o.oob = oob
            o.enc = enc
            o.gateway = gateway
            o.proxy = proxy
            o.timeout = 10
            let r = try SDKClient(options: o).run()
            return (r.error.map { "Erro \($0["errorCode"]?.stringValue ?? "?")" } ?? (r.transStatus ?? "-"), r)
        }
    }

    /// Seconds the demo waits, at most, for the ACS's last RReqs to be answered before it stops the recorder or the
    /// replayer (on loopback they are answered within milliseconds; past this, it says so and goes on).
    static let rreqGrace: Double = 10

    static let flows: [Flow] = [
        Flow(card: "4000000000001000", browser: false, version: "2.2.0", expect: "Y"),
        Flow(card: "4000000000001018", browser: false, version: "2.2.0", expect: "N"),
        Flow(card: "4000000000001026", browser: false, version: "2.1.0", expect: "U"),
        Flow(card: "4000000000001034", browser: false, version: "2.2.0", expect: "A"),
        Flow(card: "4000000000001042", browser: false, version: "2.2.0", expect: "R"),
        Flow(card: "4000000000001059", browser: false, version: "2.3.1", expect: "I"),
        Flow(card: "4000000000001067", browser: false, version: "2.2.0", answer: "1234", expect: "Y"),
        Flow(card: "4000000000001067", browser: false, version: "2.1.0", answer: "9999", expect: "N"),
        Flow(card: "4000000000001075", browser: false, version: "2.2.0", select: ["2"], enc: .a128gcm, expect: "Y"),
        Flow(card: "4000000000001083", browser: false, version: "2.2.0", select: ["1", "3"], expect: "Y"),
        Flow(card: "4000000000001091", browser: false, version: "2.2.0", oob: true, enc: .a128gcm, expect: "Y"),
        Flow(card: "4000000000001109", browser: false, version: "2.2.0", answer: "1234", expect: "Y"),
        Flow(card: "4000000000001117", browser: false, version: "2.3.1", oob: true, enc: .a128gcm, expect: "Y"),
        Flow(card: "4000000000001125", browser: false, version: "2.3.1", expect: "Y"),
        Flow(card: "4000000000001133", browser: false, version: "2.2.0", expect: "Y"),
        Flow(card: "4000000000001000", browser: true, version: "2.2.0", expect: "Y"),
        Flow(card: "4000000000001067", browser: true, version: "2.2.0", answer: "1234", expect: "Y"),
        Flow(card: "4000000000001075", browser: true, version: "2.1.0", select: ["2"], expect: "Y"),
        Flow(card: "4000000000001091", browser: true, version: "2.3.1", oob: true, expect: "Y"),
        Flow(card: "4000000000001166", browser: false, version: "2.2.0", expect: "Erro 305"),
    ]

    /// The flows of `--gateway`: frictionless and challenged, app and browser, one not authenticated.
    static func gatewayFlows(_ g: Gateway) -> [Flow] {
        [Flow(card: "4000000000001000", browser: false, version: "2.2.0", gateway: g, expect: "Y"),
         Flow(card: "4000000000001067", browser: true, version: "2.2.0", answer: "1234", gateway: g, expect: "Y"),
         Flow(card: "4000000000001067", browser: false, version: "2.3.1", answer: "1234", gateway: g, expect: "Y"),
         Flow(card: "4000000000001018", browser: false, version: "2.2.0", gateway: g, expect: "N")]
    }

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        let plan = try DemoCommand.plan(args)
        let out = plan.out
        let keys = try sandboxKeys()
        // Key substitution: the client trusts 3dstape's test DS identity; the recorder decrypts the app
        // channel and re-encrypts toward the sandbox, whose real DS certificate and root it is given.
        let identity = try substitutionKeys()
        let certs = (UserHome.resolve().path as NSString).appendingPathComponent("ca/ds/client-certs-rsa")
        try identity.writeClientCertificates(to: certs, dsKeyType: .rsa, replace: true)
        let substitution = KeySubstitution(identity: substitutionIdentity(identity),
                                           upstream: UpstreamDS(encryptionCertificate: keys.dsKeys[.rsa]!.cert,
                                                                directoryServerID: keys.directoryServerID, roots: [keys.root.certificate]))

        let stack = try ServiceStack.background("3dstape-demo")
        let loop = stack.loop
        let writer = try SessionWriter(path: out, meta: [("created_at", ISO8601DateFormatter().string(from: Date())), ("mode", "forward"),
                                                        ("label", plan.gateway.map { "3dstape demo: sandbox flows through the \($0.rawValue) gateway" }
                                                            ?? "3dstape demo: sandbox flows (\(plan.channel) channels)"), ("masked", "yes"),
                                                        ("tool_version", version)], keys: substitution)
        var config = ProxyConfiguration(mode: .forward, upstreamTLS: try TLSContext(clientRoots: [keys.root.certificate]), interceptTLS: nil)
        config.upstreamTimeout = 10
        config.substitution = substitution
        let proxy = ProxyServer(loop: loop, config: config, writer: writer)
        stack.onStop { proxy.shutdown() }
        stack.finally { writer.close() }
        let proxyAddress = try proxy.listen(on: plan.recorder.bound)
        var options = SandboxOptions()
        options.outgoingProxy = proxyAddress
        options.decoupledDelay = 0.2
        let sandbox = Sandbox(keys: keys, options: options, loop: loop)
        try sandbox.start(on: plan.sandbox.bound, tls: false)
        stack.onStop { sandbox.stop() } // its address is free again for the last step's sandbox
        stack.start()
        io.err("sandbox \(sandbox.baseURL), recorder http://\(proxyAddress), session \(out)")

        let flows = plan.flows
        var failures = 0
        var outcomes: [String] = []
        for flow in flows {
            let (got, r) = try flow.run(ds: sandbox.baseURL, certs: certs, proxy: proxyAddress)
            let ok = got == flow.expect
            if !ok { failures += 1 }
            outcomes.append(got)
            let card = TestCard.find(flow.card)?.summary ?? flow.card
            func pad(_ t: String, _ n: Int) -> String { t.count >= n ? t : t + String(repeating: " ", count: n - t.count) }
            io.out("\(ok ? io.green("ok  ") : io.red("FAIL")) \(pad(flow.browser ? "browser" : "app", 7)) \(flow.version)  "
                   + "\(pad(card, 44)) → \(got)\(r.rreqReceived ? "  (RReq)" : "")")
        }
        // The last RReqs are sent just after their final CRes: the recorder stops once each is answered (and so recorded).
        if !sandbox.rreqsDue.waitForNone(within: DemoCommand.rreqGrace) { io.err("demo: an RReq is still unanswered; stopping the recorder anyway") }
        stack.stop()
        if !plan.quiet { io.out("") }
        if !plan.quiet {
            let show = ShowCommand()
            _ = try show.run(try show.spec.parse([out]), io)
            // The app channel, in clear: what key substitution recovered from the JWE bodies.
            let clear = try SessionReader(path: out).exchanges().flatMap { x in
                x.messages.filter { $0.messageLocation == .jwe && $0.isDecrypted }.map { (x.id, $0) }
            }
            if !clear.isEmpty {
                io.out("\napp-channel CReq/CRes in clear (decrypted by key substitution; entries masked; the transaction IDs left out):")
                for (id, m) in clear { io.out("  #\(id) \(DemoCommand.inClear(m))") }
            }
        }
        failures += try replayAndCompare(out, flows: flows, recorded: outcomes, certs: certs, sandboxURL: sandbox.baseURL, listen: plan.replayer.bound,
                                         quiet: plan.quiet, io)
        if plan.gateway == nil { failures += try clientReplay(out, flows: flows, keys: keys, listen: plan.sandbox.bound, quiet: plan.quiet, io) }
        if plan.quiet {
            io.out("session written to \(TerminalText.escaped(out)) (\(counted(writer.exchangesWritten, "exchange")))")
            return failures == 0 ? 0 : 1
        }
        try inspect(recording: out, io)
        io.out("\nsession written to \(TerminalText.escaped(out)) (\(counted(writer.exchangesWritten, "exchange")))" + (try DemoCommand.hints(out).map { "; try " + $0 } ?? ""))
        let dir = (out as NSString).deletingLastPathComponent
        io.out("browse it: '3dstape web\(dir == "sessions" || dir.isEmpty ? "" : " \(dir)")', then open http://127.0.0.1:8470/ "
               + "(timeline, decrypted CReq/CRes, sequence diagrams, the replay beside the recording)")
        return failures == 0 ? 0 : 1
    }

    /// What `3dstape validate` and `3dstape diff` say about the recording and its replay.
    func inspect(recording: String, _ io: Terminal) throws {
        let recorded = try SessionReader(path: recording).exchanges()
        let findings = Validator.validate(recorded)
        let errors = findings.filter { $0.severity == .error }.count
        io.out("validate: \(counted(errors, "error")), \(counted(findings.count - errors, "warning")) in the recording's 3DS messages ('3dstape validate \(recording)')")
        let replay = (recording as NSString).deletingPathExtension + "-replay.3dstape"
        var options = SessionDiff.Options()
        options.timingTolerance = nil
        let diff: SessionDiff
        let replayReader = try SessionReader(path: replay)
        options.pairBy = SessionDiff.defaultPairing(a: recording, b: replayReader)
        do { diff = try SessionDiff.compare(recorded, try replayReader.exchanges(), options: options) } catch let e as SessionDiff.TooDifferent {
            throw CommandFailure("diff: \(e.description)")
        }
        io.out("diff: \(diff.pairedTransactions) transactions paired, "
               + (diff.isEmpty ? "no differences" : counted(diff.changes.count, "difference")) + " between the recording and its replay, timings aside "
               + "('3dstape diff \(recording) \(replay)')")
    }

    /// With the sandbox stopped, replays the session just recorded: the same flows through `3dstape replay`'s engine
    /// (as a proxy, original timing, fresh app-channel keys), each outcome compared with the recording's.
    func replayAndCompare(_ session: String, flows: [Flow], recorded: [String], certs: String, sandboxURL: String, listen: HostPort, quiet: Bool,
                          _ io: Terminal) throws -> Int {
        let catalog = try ReplayCatalog.load(path: session)
        var options = ReplayOptions()
        // The gateway calls carry values new on every run (as `replay --ignore-field` would be told).
        if flows.contains(where: { $0.gateway != nil }) {
            options.ignoreFields = ["jwt", "merchantTransactionId", "gatewayTokenId", "authenticationId", "threeDSServerTransID"]
        }
        let engine = ReplayEngine(catalog: catalog, options: options, identity: try ReplayCommand.acsIdentity(nil))
        let replayPath = (session as NSString).deletingPathExtension + "-replay.3dstape"
        try? FileManager.default.removeItem(atPath: replayPath)
        let writer = try SessionWriter(path: replayPath, meta: SessionWriter.replayMeta(of: session),
                                       keys: engine)
        let stack = try ServiceStack.background("3dstape-demo-replay")
        let replayer = Replayer(loop: stack.loop, engine: engine, writer: writer, outgoingTLS: try TLSContext(clientRoots: nil), report: { _ in })
        stack.onStop { replayer.stop() }
        stack.finally { writer.close() }
        let address = try replayer.start(on: listen, tls: nil, intercepting: nil, scheme: "http")
        stack.start()
        if !quiet { io.out("\nthe sandbox is stopped; replaying the session as '3dstape replay' does (here on \(address)), the same flows through it:") }
        var failures = 0
        for (flow, want) in zip(flows, recorded) {
            let (got, r) = try flow.run(ds: sandboxURL, certs: certs, proxy: address)
            let ok = got == want
            if !ok { failures += 1 }
            if quiet && ok { continue }
            func pad(_ t: String, _ n: Int) -> String { t.count >= n ? t : t + String(repeating: " ", count: n - t.count) }
            io.out("\(ok ? io.green("same") : io.red("DIFF")) \(pad(flow.browser ? "browser" : "app", 7)) \(flow.version)  "
                   + "\(pad(TestCard.find(flow.card)?.summary ?? flow.card, 44)) → \(got) (recorded \(want))\(r.rreqReceived ? "  (RReq)" : "")")
        }
        if !replayer.rreqsDue.waitForNone(within: DemoCommand.rreqGrace) { io.err("demo: an RReq is still unanswered; stopping the replayer anyway") }
        stack.stop()
        let c = replayer.counts
        if !quiet { io.out("replay: \(flows.count - failures) of \(flows.count) outcomes matched the recording; \(c.answered) answers, \(c.missed) misses, "
               + "\(counted(c.rreqs, "RReq")) delivered; replay session \(replayPath)") }
        return failures
    }

    /// The last step: the sandbox restarted with its other DS key type (new keys for deviceData), and the recording's client
    /// side re-sent to it by `client-replay` (fresh IDs, keys and deviceData), every answer compared with the recording.
    /// Returns 1 when any transaction was answered otherwise, else 0.
    func clientReplay(_ session: String, flows: [Flow], keys: SandboxKeys, listen: HostPort, quiet: Bool, _ io: Terminal) throws -> Int {
        var options = SandboxOptions()
        options.dsKeyType = .ec
        options.decoupledDelay = 0.2
        let stack = try ServiceStack.background("3dstape-demo-creplay")
        let sandbox = Sandbox(keys: keys, options: options, loop: stack.loop)
        // On the first sandbox's address when --sandbox-listen pinned it (that one has stopped: a firewall or a container's
        // published port lets this one through too); else a free port.
        try sandbox.start(on: listen.port == 0 ? HostPort(host: listen.host, port: 0) : listen, tls: false)
        stack.onStop { sandbox.stop() }
        stack.start()
        defer { stack.stop() }
        let certs = (UserHome.resolve().path as NSString).appendingPathComponent("sandbox/client-certs-ec")
        try keys.writeClientCertificates(to: certs, dsKeyType: .ec, replace: true)
        let out = (session as NSString).deletingPathExtension + "-client-replay.3dstape"
        try? FileManager.default.removeItem(atPath: out)
        var p = ClientReplayCommand.Plan(session: session, out: out, certs: certs, json: false, quiet: true)
        p.summaryOnlyOnDifference = quiet // --quiet prints a replayed flow only when it differs
        p.inputs.target = HTTPURL(sandbox.baseURL)
        // The recording masks card numbers and what the cardholder typed: the demo knows both.
        p.inputs.cards = TestCard.all.map(\.pan)
        for (i, flow) in flows.enumerated() {
            if let secret = flow.answer ?? (flow.select.isEmpty ? nil : flow.select.joined(separator: ",")) ?? (flow.oob ? "oob" : nil) { p.inputs.secrets[i + 1] = secret }
        }
        let identity = try substitutionKeys()
        p.inputs.deviceDataKeys = [(identity.dsKeys[.rsa]?.key, identity.dsKeys[.ec]?.key, identity.directoryServerID)]
        if !quiet { io.out("\nthe sandbox restarted with an EC DS key (\(sandbox.baseURL)); 'client-replay' re-sends the recording's client side to it:") }
        return try ClientReplayCommand.execute(p, io) == 0 ? 0 : 1
    }

    /// One decrypted app-channel message on a line: `CReq 2.2.0 {…}` with the members that tell its step of the challenge
    /// first (the four transaction IDs, which the timeline's transaction already names, and its type and version left out
    /// of the JSON), so that a terminal's width shows the counters, the UI type and the entries, not the IDs.
    static func inClear(_ m: RecordedMessage) -> String {
        let left: [String] = TransactionIDField.allCases.map(\.rawValue) + [EMVField.messageType.rawValue, EMVField.messageVersion.rawValue]
        let members = left.reduce(m.json ?? .null) { $0.removing($1) }
        let version = m.json?[.messageVersion]?.stringValue ?? ""
        return TerminalText.escaped("\(m.type ?? "?") \(version)") + " " + TerminalText.escapedJSON(members.compact)
    }

    /// The closing hints, true for the session just made: an exchange that holds a challenge message (an app CReq/CRes,
    /// else a browser challenge's creq form) to open in full, and a scenario whose rules apply to the session. Nil when
    /// the session has neither.
    static func hints(_ path: String) throws -> String? {
        var parts: [String] = []
        let session = TerminalText.escaped(path)
        let xs = try SessionReader(path: path).exchanges()
        if let x = xs.first(where: { $0.messages.contains { $0.kind == .cRes && $0.messageDirection == .response } }) {
            parts.append("'3dstape show \(session) --exchange \(x.id)' (an app-channel CReq/CRes in full)")
        } else if let x = xs.first(where: { $0.messages.contains { $0.kind == .cReq } }) {
            parts.append("'3dstape show \(session) --exchange \(x.id)' (a browser challenge's creq form in full)")
        }
        let catalog = try ReplayCatalog.load(path: path)
        // As `replay --scenario` decides it (`applicability`: every rule can apply, and a gateway scenario's gateway was
        // recorded), then its start-up check of the rules; the catalog's answers indexed once for all the scenarios.
        let coverage = RuleCoverage(catalog)
        let applicable = ReplayScenario.all.filter { s in
            (try? s.applicability(to: coverage)).map { $0.notApplicable.isEmpty && ReplayFaults.problems($0.applicable, coverage: coverage).isEmpty } ?? false
        }
        if let s = applicable.first(where: { $0.name == "challenge-timeout" }) ?? applicable.first {
            parts.append("'3dstape replay \(session) --scenario \(s.name)' (\(applicable.count) of the \(ReplayScenario.all.count) scenarios "
                         + "apply to this session; '3dstape scenarios' lists them)")
        }
        return parts.isEmpty ? nil : parts.joined(separator: ", or ")
    }
}
