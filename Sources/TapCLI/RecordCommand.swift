import Dispatch
import Foundation
import Synchronization
import TapArguments
import TapCrypto
import TapHTTP
import TapIdentity
import TapNet
import TapProxy
import TapRecording
import TapCore
import TapEMV
import TapStore

/// `3dstape record`: the recording proxy.
struct RecordCommand: Command {
    let spec = CommandSpec(name: "record", abstract: "Run the recording proxy and write every exchange to a session file",
                           usage: "[--session FILE] [--listen HOST:PORT]... [--reverse URL] [--upstream-ca PEM] [--insecure-upstream] [--client-cert PEM --client-key PEM] [--pass-through PATTERN...] [--intercept PATTERN...] [--name LABEL] [--no-mask] [--max-session-size SIZE] [--quiet|--json-lines]",
                           maxPositionals: 0, usesUserKeys: true,
                           options: [listen.spec, session.spec, reverse.spec, upstreamCA.spec, insecureUpstream.spec, clientCert.spec,
                                     clientKey.spec, passThrough.spec, intercept.spec, label.spec, noMask.spec, keylog.spec, decrypt.spec,
                                     dsCert.spec, dsRoot.spec, dsID.spec, upstreamTimeout.spec, headerTimeout.spec, idleTimeout.spec, maxBody.spec,
                                     maxSessionSize.spec, quiet.spec, jsonLines.spec] + remoteListeningOptions)
    static let listen = Option("listen", "HOST:PORT", HostPortValue(), repeatable: true, help: "address to listen on (default 127.0.0.1:8080)")
    static let session = Option("session", "FILE", PathValue(), help: "the session file to create (default sessions/<time>.3dstape)")
    static let reverse = Option("reverse", "URL", UpstreamURLValue(), help: "reverse mode: send every request to this upstream (http or https)")
    static let upstreamCA = Option("upstream-ca", "PEM", PathValue(), help: "roots for verifying upstream TLS (default: the system's)")
    static let insecureUpstream = Flag("insecure-upstream", help: "do not verify upstream TLS certificates")
    static let clientCert = Option("client-cert", "PEM", PathValue(), help: "client certificate for mutual TLS to the upstream")
    static let clientKey = Option("client-key", "PEM", PathValue(), help: "private key of --client-cert")
    static let passThrough = Option("pass-through", "PATTERN", HostPatternsValue(), variadic: true,
                                    help: "tunnel CONNECTs to these hosts untouched (pinned hosts), recorded as tunnels: "
                                        + "host, *.domain, * or [v6], each with an optional :port; wins over --intercept")
    static let intercept = Option("intercept", "PATTERN", HostPatternsValue(), variadic: true,
                                  help: "intercept only CONNECTs to these hosts; every other is tunnelled untouched (default: intercept all)")
    static let label = Option("name", "LABEL", TextValue(), help: "a label stored in the session")
    static let noMask = Flag("no-mask", help: "store PANs and OTP entries unmasked")
    static let keylog = Option("keylog", "FILE", PathValue(), help: "decrypt app-channel CReq/CRes with the CEKs in this key log (read as it grows)")
    /// `--decrypt substitute` (true) or `none` (false, the default).
    static let decrypt = Option("decrypt", "substitute|none",
                                ChoiceValue([("substitute", true), ("none", false)], refusal: { "--\($0) \($1): expected substitute or none" }),
                                default: false,
                                help: "substitute: decrypt the app channel actively, with 3dstape's test DS identity (see 'ca export --ds')")
    static let dsCert = Option("ds-cert", "PEM", PathValue(), help: "with --decrypt substitute: the real DS encryption certificate deviceData is re-encrypted for")
    static let dsRoot = Option("ds-root", "PEM", PathValue(), help: "with --decrypt substitute: the real DS root(s) acsSignedContent must chain to")
    static let dsID = Option("ds-id", "ID", TextValue(), help: "with --decrypt substitute: the real directoryServerID (for an EC DS key; default A999999999)")
    static let upstreamTimeout = Option("upstream-timeout", "SECONDS", DurationValue.timeout, help: "answer 504 when the upstream takes longer (default 60)")
    static let headerTimeout = Option("header-timeout", "SECONDS", DurationValue.timeout,
                                      help: "answer 408 when a started request is not complete in time (default 30)")
    static let idleTimeout = Option("idle-timeout", "SECONDS", DurationValue.timeout, help: "close idle keep-alive client connections (default 120)")
    /// A body is held in memory whole and stored as one SQLite value: at most 512MiB.
    static let maxBody = Option("max-body", "BYTES", ByteSizeValue(1...(512 << 20)),
                                help: "largest request or response body (default 16777216, at most 512MiB); larger is 413")
    static let maxSessionSize = SessionFileSize.maxSessionSize
    static let quiet = Flag("quiet", help: "print only the summary")
    static let jsonLines = Flag("json-lines", help: "print each exchange as one JSON line")

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        let listens = try args.listenAddresses(Self.listen, default: "127.0.0.1:8080")
        let authorization = try args.listenAuthorization(listens) // before anything is created
        let sessionPath = try args.value(Self.session) ?? defaultSessionPath()
        try refuseExisting(sessionPath, "\(sessionPath) already exists; choose another --session or remove it") // before the CA is made
        let mode: ProxyConfiguration.Mode
        if let u = try args.value(Self.reverse) {
            mode = .reverse(u)
        } else {
            mode = .forward
        }
        var roots: [Certificate]? = nil
        if let path = try args.value(Self.upstreamCA) { roots = try Certificate.parseAll(try readInput(path)) }
        var clientCert: Certificate?, clientKey: PrivateKey?
        switch (try args.value(Self.clientCert), try args.value(Self.clientKey)) {
        case let (c?, k?):
            clientCert = try Certificate(pemOrDER: try readInput(c))
            clientKey = try PrivateKey(pemOrDER: try readInput(k))
        case (nil, nil): break
        default: throw InvalidArguments("--client-cert and --client-key go together")
        }
        let upstreamTLS = try TLSContext(clientRoots: roots, verify: !args.has(Self.insecureUpstream),
                                         clientCertificate: clientCert, clientKey: clientKey)
        var intercept: TLSContext?
        var caFingerprint: String?
        if case .forward = mode {
            let (ca, created) = try UserHome.resolve().interceptionCA()
            caFingerprint = ca.certificate.sha256Fingerprint
            if created { io.err("created the interception CA in \(UserHome.resolve().path)/ca; clients must trust it ('3dstape ca export')") }
            intercept = try TLSContext(interceptingWith: try LeafCertificateCache(authority: ca))
        }
        var config = ProxyConfiguration(mode: mode, upstreamTLS: upstreamTLS, interceptTLS: intercept)
        config.authorization = authorization
        config.maxConnections = try args.maxConnections()
        config.maxBufferedBytes = try args.maxBuffered()
        config.mask = !args.has(Self.noMask)
        config.routing = try args.hostRouting(passThrough: Self.passThrough, intercept: Self.intercept)
        if !config.routing.interceptsEverything, case .reverse = mode {
            throw InvalidArguments("--pass-through and --intercept choose among CONNECT targets: they need forward mode (no --reverse)")
        }
        if let t = try args.value(Self.upstreamTimeout) { config.upstreamTimeout = t }
        if let t = try args.value(Self.headerTimeout) { config.headerTimeout = t }
        if let t = try args.value(Self.idleTimeout) { config.idleTimeout = t }
        let maxSessionBytes = try args.value(Self.maxSessionSize)
        if let n = try args.value(Self.maxBody) { config.limits.maxBodyBytes = n }

        let created = ISO8601DateFormatter().string(from: Date())
        var meta: [(String, String)] = [("created_at", created), ("mode", config.modeName), ("tool_version", version),
                                        ("listen", listens.map(\.description).joined(separator: ",")),
                                        ("masked", config.mask ? "yes" : "no")]
        if let n = try args.value(Self.label) { meta.append(("label", n)) }
        if case let .reverse(u) = mode { meta.append(("upstream", u.description)) }
        let live = LiveView(mode: args.has(Self.jsonLines) ? .jsonLines : (args.has(Self.quiet) ? .quiet : .lines), colour: io.colour)
        let tally = MessageTally()
        var keys = try args.value(Self.keylog).map { KeyLogFile(path: $0) as any ChannelKeySource }
        if try args.value(Self.decrypt, default: false) {
            guard let certPath = try args.value(Self.dsCert), let rootPath = try args.value(Self.dsRoot) else {
                throw InvalidArguments("--decrypt substitute needs --ds-cert PEM and --ds-root PEM (the real DS's)")
            }
            let upstream = UpstreamDS(encryptionCertificate: try Certificate(pemOrDER: try readInput(certPath)),
                                      directoryServerID: try args.value(Self.dsID) ?? SandboxKeys.directoryServerID,
                                      roots: try Certificate.parseAll(try readInput(rootPath)))
            let sub = KeySubstitution(identity: substitutionIdentity(try substitutionKeys()), upstream: upstream)
            config.substitution = sub
            keys = sub
        }
        let writer = try SessionWriter(path: sessionPath, meta: meta, keys: keys, maxBytes: maxSessionBytes, onProblem: { problem in
            StandardStreams.err(Data("3dstape: record: \(TerminalText.escaped(problem))\n".utf8))
        }, onExchange: { line in
            tally.add(line.requestTypes + line.responseTypes)
            live.print(line)
        })
        let stack = try ServiceStack.foreground()
        let server = ProxyServer(loop: stack.loop, config: config, writer: writer,
                                 onLog: { line in StandardStreams.err(Data("3dstape: \(TerminalText.escaped(line))\n".utf8)) })
        var bound: [HostPort] = []
        do {
            for l in listens { bound.append(try server.listen(on: l.bound)) }
        } catch {
            writer.discard() // nothing was recorded: no empty session is left to block the next run's --session
            throw error
        }
        let upstreamText: String = { if case let .reverse(u) = mode { return " → \(u)" }; return " (forward proxy; \(config.routing.summary))" }()
        io.err("recording on \(bound.map { "http://\($0)" }.joined(separator: ", "))\(upstreamText)")
        if let caFingerprint {
            // What a phone's or simulator's proxy settings and its certificate check need, on one line.
            io.err("proxy \(bound.map(\.description).joined(separator: ", "))   CA SHA-256 \(caFingerprint)")
        }
        io.err("session: \(TerminalText.escaped(sessionPath))   Ctrl-C to stop")

        stack.onStop { server.shutdown() }
        stack.finally { writer.close() }
        stack.runUntilSignal()
        let s = server.stats
        let types = tally.counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        io.err("")
        io.err("stopped: \(counted(s.exchanges, "exchange")) on \(counted(s.connections, "connection")), \(counted(s.errors, "error")); 3DS messages: "
               + (types.isEmpty ? "none" : TerminalText.escaped(types)))
        if let line = s.backpressureSummary { io.err(line) }
        if let e = writer.writeError { io.err("recording stopped early: \(e); \(counted(writer.exchangesDropped, "exchange")) not recorded") }
        io.err("session: \(TerminalText.escaped(sessionPath)) (\(counted(writer.exchangesWritten, "exchange")) written)")
        return writer.writeError == nil ? 0 : 1
    }

    func defaultSessionPath() -> String {
        let f = DateFormatter()
        f.dateFormat = "yyyyMMdd-HHmmss"
        return "sessions/\(f.string(from: Date())).3dstape"
    }
}

/// Counts 3DS message types as the writer reports them.
final class MessageTally: Sendable {
    private let box = Locked<[String: Int]>([:])
    func add(_ types: [String]) { box.withLock { for t in types { $0[t, default: 0] += 1 } } }
    var counts: [String: Int] { box.withLock { $0 } }
}

/// Prints one line per exchange as it completes.
struct LiveView: Sendable {
    enum Mode: Sendable { case lines, jsonLines, quiet }
    let mode: Mode
    let colour: Bool

    func print(_ x: ExchangeLine) {
        let line: String
        switch mode {
        case .quiet: return
        case .jsonLines:
            let obj = JSON.object([
                ("at", .number(String(format: "%.6f", x.at))), ("method", .string(x.method)), ("url", .string(x.url)),
                ("status", x.status.map { .number(String($0)) } ?? .null),
                ("request", .array(x.requestTypes.map(JSON.string))), ("response", .array(x.responseTypes.map(JSON.string))),
                ("duration_ms", .number(String(format: "%.3f", x.durationMs))), ("error", x.error.map(JSON.string) ?? .null),
            ])
            line = TerminalText.escapedJSON(obj.compact)
        case .lines:
            let f = DateFormatter()
            f.dateFormat = "HH:mm:ss.SSS"
            let time = f.string(from: Date(timeIntervalSince1970: x.at))
            var types = TerminalText.escaped((x.requestTypes + x.responseTypes.map { "→ \($0)" }).joined(separator: " "))
            if !types.isEmpty { types = "  " + types }
            let status = x.status.map(String.init) ?? "---"
            let statusText = colour ? (x.error != nil || (x.status ?? 500) >= 400 ? "\u{1B}[31m\(status)\u{1B}[0m" : "\u{1B}[32m\(status)\u{1B}[0m") : status
            line = "\(time)  \(TerminalText.escaped(x.method)) \(TerminalText.escaped(x.url))  \(statusText)\(types)  \(String(format: "%.1f", x.durationMs)) ms"
                + (x.error.map { "  (\(TerminalText.escaped($0)))" } ?? "")
        }
        StandardStreams.out(Data((line + "\n").utf8))
    }
}
