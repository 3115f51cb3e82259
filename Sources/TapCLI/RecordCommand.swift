import Dispatch
import Foundation
import Synchronization
import TapArguments
import TapCrypto
import TapHTTP
import TapNet
import TapProxy
import TapRecording
import TapSandbox
import TapCore
import TapEMV
import TapStore

/// `3dstape record`: the recording proxy.
struct RecordCommand: Command {
    let name = "record"
    let abstract = "Run the recording proxy and write every exchange to a session file"
    let usage = "3dstape record --session FILE [--listen HOST:PORT]... [--reverse URL] [--upstream-ca PEM] [--insecure-upstream] [--client-cert PEM --client-key PEM] [--pass-through PATTERN...] [--intercept PATTERN...] [--name LABEL] [--no-mask] [--max-session-size SIZE] [--quiet|--json-lines]"
    let maxPositionals = 0
    let options: [OptionSpec] = [
        .option("listen", "HOST:PORT", repeatable: true, help: "address to listen on (default 127.0.0.1:8080)"),
        .option("session", "FILE", help: "the session file to create (default sessions/<time>.3dstape)"),
        .option("reverse", "URL", help: "reverse mode: send every request to this upstream (http or https)"),
        .option("upstream-ca", "PEM", help: "roots for verifying upstream TLS (default: the system's)"),
        .flag("insecure-upstream", help: "do not verify upstream TLS certificates"),
        .option("client-cert", "PEM", help: "client certificate for mutual TLS to the upstream"),
        .option("client-key", "PEM", help: "private key of --client-cert"),
        .variadic("pass-through", "PATTERN", help: "tunnel CONNECTs to these hosts untouched (pinned hosts), recorded as tunnels: "
                  + "host, *.domain, * or [v6], each with an optional :port; wins over --intercept"),
        .variadic("intercept", "PATTERN", help: "intercept only CONNECTs to these hosts; every other is tunnelled untouched (default: intercept all)"),
        .option("name", "LABEL", help: "a label stored in the session"),
        .flag("no-mask", help: "store PANs and OTP entries unmasked"),
        .option("keylog", "FILE", help: "decrypt app-channel CReq/CRes with the CEKs in this key log (read as it grows)"),
        .option("decrypt", "substitute|none", help: "substitute: decrypt the app channel actively, with 3dstape's test DS identity (see 'ca export --ds')"),
        .option("ds-cert", "PEM", help: "with --decrypt substitute: the real DS encryption certificate deviceData is re-encrypted for"),
        .option("ds-root", "PEM", help: "with --decrypt substitute: the real DS root(s) acsSignedContent must chain to"),
        .option("ds-id", "ID", help: "with --decrypt substitute: the real directoryServerID (for an EC DS key; default A999999999)"),
        .option("upstream-timeout", "SECONDS", help: "answer 504 when the upstream takes longer (default 60)"),
        .option("header-timeout", "SECONDS", help: "answer 408 when a started request is not complete in time (default 30)"),
        .option("idle-timeout", "SECONDS", help: "close idle keep-alive client connections (default 120)"),
        .option("max-body", "BYTES", help: "largest request or response body (default 16777216, at most 512MiB); larger is 413"),
        .option("max-session-size", "SIZE", help: "stop recording when the session file reaches SIZE (e.g. 512MiB); traffic keeps flowing, as on a full disk"),
        .flag("quiet", help: "print only the summary"),
        .flag("json-lines", help: "print each exchange as one JSON line"),
    ] + remoteListeningOptions

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        let listens = try args.listenAddresses(default: "127.0.0.1:8080")
        let authorization = try args.listenAuthorization(listens) // before anything is created
        let mode: ProxyConfiguration.Mode
        if let r = args.value("reverse") {
            guard let u = UpstreamURL(r) else { throw InvalidArguments("--reverse \(r): expected http://host[:port] or https://host[:port]") }
            mode = .reverse(u)
        } else {
            mode = .forward
        }
        var roots: [Certificate]? = nil
        if let path = args.value("upstream-ca") { roots = try Certificate.parseAll(try readInput(path)) }
        var clientCert: Certificate?, clientKey: PrivateKey?
        switch (args.value("client-cert"), args.value("client-key")) {
        case let (c?, k?):
            clientCert = try Certificate(pemOrDER: try readInput(c))
            clientKey = try PrivateKey(pemOrDER: try readInput(k))
        case (nil, nil): break
        default: throw InvalidArguments("--client-cert and --client-key go together")
        }
        let upstreamTLS = try TLSContext(clientRoots: roots, verify: !args.has("insecure-upstream"),
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
        config.mask = !args.has("no-mask")
        config.routing = try args.hostRouting()
        if !config.routing.interceptsEverything, case .reverse = mode {
            throw InvalidArguments("--pass-through and --intercept choose among CONNECT targets: they need forward mode (no --reverse)")
        }
        if let t = try args.seconds("upstream-timeout") { config.upstreamTimeout = t }
        if let t = try args.seconds("header-timeout") { config.headerTimeout = t }
        if let t = try args.seconds("idle-timeout") { config.idleTimeout = t }
        let maxSessionBytes = try args.byteSize("max-session-size", within: (64 << 10)...(16 << 40))
        // A body is held in memory whole and stored as one SQLite value: at most 512MiB.
        if let n = try args.byteSize("max-body", within: 1...(512 << 20)) { config.limits.maxBodyBytes = n }

        let sessionPath = args.value("session") ?? defaultSessionPath()
        let created = ISO8601DateFormatter().string(from: Date())
        var meta: [(String, String)] = [("created_at", created), ("mode", config.modeName), ("tool_version", version),
                                        ("listen", listens.map(\.description).joined(separator: ",")),
                                        ("masked", config.mask ? "yes" : "no")]
        if let n = args.value("name") { meta.append(("label", n)) }
        if case let .reverse(u) = mode { meta.append(("upstream", u.description)) }
        let live = LiveView(mode: args.has("json-lines") ? .jsonLines : (args.has("quiet") ? .quiet : .lines), colour: io.colour)
        let tally = MessageTally()
        var keys = args.value("keylog").map { KeyLogFile(path: $0) as any ChannelKeySource }
        switch args.value("decrypt") ?? "none" {
        case "none": break
        case "substitute":
            guard let certPath = args.value("ds-cert"), let rootPath = args.value("ds-root") else {
                throw InvalidArguments("--decrypt substitute needs --ds-cert PEM and --ds-root PEM (the real DS's)")
            }
            let upstream = UpstreamDS(encryptionCertificate: try Certificate(pemOrDER: try readInput(certPath)),
                                      directoryServerID: args.value("ds-id") ?? SandboxKeys.directoryServerID,
                                      roots: try Certificate.parseAll(try readInput(rootPath)))
            let sub = KeySubstitution(identity: substitutionIdentity(try substitutionKeys()), upstream: upstream)
            config.substitution = sub
            keys = sub
        case let other: throw InvalidArguments("--decrypt \(other): expected substitute or none")
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
        io.err("stopped: \(s.exchanges) exchanges on \(s.connections) connections, \(s.errors) errors; 3DS messages: "
               + (types.isEmpty ? "none" : TerminalText.escaped(types)))
        if let line = s.backpressureSummary { io.err(line) }
        if let e = writer.writeError { io.err("recording stopped early: \(e); \(writer.exchangesDropped) exchanges were not recorded") }
        io.err("session: \(TerminalText.escaped(sessionPath)) (\(writer.exchangesWritten) exchanges written)")
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
            var types = TerminalText.escaped((x.requestTypes + x.responseTypes.map { "→\($0)" }).joined(separator: " "))
            if !types.isEmpty { types = "  " + types }
            let status = x.status.map(String.init) ?? "---"
            let statusText = colour ? (x.error != nil || (x.status ?? 500) >= 400 ? "\u{1B}[31m\(status)\u{1B}[0m" : "\u{1B}[32m\(status)\u{1B}[0m") : status
            line = "\(time)  \(TerminalText.escaped(x.method)) \(TerminalText.escaped(x.url))  \(statusText)\(types)  \(String(format: "%.1f", x.durationMs)) ms"
                + (x.error.map { "  (\(TerminalText.escaped($0)))" } ?? "")
        }
        StandardStreams.out(Data((line + "\n").utf8))
    }
}
