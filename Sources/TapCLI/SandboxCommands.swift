import Foundation
import TapArguments
import TapCore
import TapCrypto
import TapEMV
import TapHTTPService
import TapIdentity
import TapJOSE
import TapNet
import TapProxy
import TapSandbox

/// Loads the sandbox keys from the per-user directory.
func sandboxKeys() throws -> SandboxKeys {
    try UserHome.resolve().sandboxKeys()
}

/// 3dstape's own test DS identity for key substitution (`ca export --ds`, `record --decrypt substitute`).
func substitutionKeys() throws -> SandboxKeys {
    try UserHome.resolve().testDSKeys()
}

/// The proxy side of key substitution: 3dstape's DS keys and ACS certificate.
func substitutionIdentity(_ keys: SandboxKeys) -> SubstitutionIdentity {
    SubstitutionIdentity(dsRSAKey: keys.dsKeys[.rsa]?.key, dsECKey: keys.dsKeys[.ec]?.key, directoryServerID: keys.directoryServerID,
                         acsKey: keys.acsRSA.key, acsCertificate: keys.acsRSA.cert, signing: .ps256)
}

/// `3dstape sandbox`: the DS + ACS simulator.
struct SandboxCommand: Command {
    let name = "sandbox"
    let abstract = "Run the built-in DS + ACS simulator ('sandbox certs --out DIR' writes what clients trust)"
    let usage = "3dstape sandbox [--listen HOST:PORT] [--tls] [--keylog FILE] [--ds-key rsa|ec] [--sign PS256|ES256] [--ares-delay S] [--proxy URL]\n       3dstape sandbox certs --out DIR [--ds-key rsa|ec]"
    let maxPositionals = 1
    let options: [OptionSpec] = [
        .option("listen", "HOST:PORT", help: "address to listen on (default 127.0.0.1:9443)"),
        .flag("tls", help: "serve HTTPS with the sandbox TLS certificate (issued by the sandbox DS root)"),
        .option("keylog", "FILE", help: "append each app-channel CEK as 'CEK <acsTransID> <hex>'"),
        .option("gateway-secret", "S", help: "the HS256 secret of the Trust Payments-style gateway at /tp/jwt/ (default: a documented test value)"),
        .option("ds-key", "rsa|ec", help: "the DS key deviceData is encrypted to (default rsa)"),
        .option("sign", "PS256|ES256", help: "the acsSignedContent algorithm (default PS256)"),
        .option("ares-delay", "SECONDS", help: "delay of the delayed-ARes test card (default 2)"),
        .option("proxy", "URL", help: "send the RReq to the 3DS Server through this forward proxy"),
        .option("out", "DIR", help: "with 'certs': where to write ds-root.pem, ds-root.der, ds-cert.pem, ds.json"),
        .flag("force", help: "with 'certs': replace files that exist (a symlink is replaced, never followed)"),
        .flag("bad-signature", help: "fault: send acsSignedContent with a corrupted signature (SDK negative tests)"),
        .option("header-timeout", "SECONDS", help: "answer 408 when a started request is not complete in time (default 30)"),
        .option("idle-timeout", "SECONDS", help: "close idle keep-alive connections (default 120)"),
        .flag("quiet", help: "do not log each message"),
    ] + remoteListeningOptions

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        let listens = args.positionals.first == "certs" ? [] : try args.listenAddresses(default: "127.0.0.1:9443")
        let authorization = listens.isEmpty ? nil : try args.listenAuthorization(listens) // before any key is made
        let keys = try sandboxKeys()
        guard let dsKey = DSKeyType(rawValue: args.value("ds-key") ?? "rsa") else { throw InvalidArguments("--ds-key: expected rsa or ec") }
        if args.positionals.first == "certs" {
            guard let out = args.value("out") else { throw InvalidArguments("sandbox certs needs --out DIR") }
            try keys.writeClientCertificates(to: out, dsKeyType: dsKey, replace: args.has("force"))
            io.out("wrote ds-root.pem, ds-root.der, ds-cert.pem (\(dsKey.rawValue)) and ds.json to \(TerminalText.escaped(out))")
            return 0
        }
        if let p = args.positionals.first { throw InvalidArguments("unknown action '\(p)'; expected 'certs' or nothing") }
        var o = SandboxOptions()
        o.dsKeyType = dsKey
        switch (args.value("sign") ?? "PS256").uppercased() {
        case "PS256": o.signing = .ps256
        case "ES256": o.signing = .es256
        case let other: throw InvalidArguments("--sign \(other): expected PS256 or ES256")
        }
        if let d = try args.duration("ares-delay") { o.aresDelay = d }
        if let t = try args.seconds("header-timeout") { o.headerTimeout = t }
        if let t = try args.seconds("idle-timeout") { o.idleTimeout = t }
        o.keylog = args.value("keylog")
        if let secret = args.value("gateway-secret") { o.gatewayJWTSecret = secret }
        o.badSignature = args.has("bad-signature")
        o.outgoingProxy = try args.forwardProxy()
        o.authorization = authorization
        o.maxConnections = try args.maxConnections()
        o.maxBufferedBytes = try args.maxBuffered()
        let stack = try ServiceStack.foreground()
        let quiet = args.has("quiet")
        let sandbox = Sandbox(keys: keys, options: o, loop: stack.loop) { line in
            if !quiet { StandardStreams.out(Data("sandbox: \(TerminalText.escaped(line))\n".utf8)) } // lines quote what clients sent
        }
        let bound = try sandbox.start(on: listens[0].bound, tls: args.has("tls"))
        io.err("sandbox DS + ACS on \(sandbox.baseURL) (DS key \(dsKey.rawValue), acsSignedContent \(o.signing.rawValue)); bound \(bound)")
        io.err("clients: '3dstape sandbox certs --out DIR' then '3dstape client --ds \(sandbox.baseURL) --certs DIR --card PAN'")
        stack.runUntilSignal()
        return 0
    }
}

/// `3dstape client`: an SDK-like client plus 3DS Server.
struct ClientCommand: Command {
    let name = "client"
    let abstract = "Play a 3DS SDK and 3DS Server: AReq, acsSignedContent check, the encrypted challenge, RReq"
    let usage = "3dstape client --ds URL --card PAN --certs DIR [--channel app|browser] [--message-version V] [--enc A128CBC-HS256|A128GCM] [--answer TEXT | --select N... | --oob] [--cancel] [--proxy URL] [--ca PEM] [--timeout D] [--ares-timeout D] [--cres-timeout D] [--rreq-timeout D] [--rreq-listen HOST:PORT] [--misbehave WHAT] [--gateway pxp|trustpayments] [--gateway-secret S] [--json]"
    let maxPositionals = 0
    let options: [OptionSpec] = [
        .option("ds", "URL", help: "the DS (its /ds/areq, or the base URL)"),
        .option("card", "PAN", help: "the card number (see the sandbox test cards)"),
        .option("certs", "DIR", help: "a directory as 'sandbox certs' writes it (DS root, DS certificate, ds.json)"),
        .option("channel", "app|browser", help: "device channel (default app)"),
        .option("message-version", "V", help: "2.1.0, 2.2.0 (default) or 2.3.1"),
        .option("enc", "ENC", help: "app-channel JWE enc: A128CBC-HS256 (default) or A128GCM"),
        .option("answer", "TEXT", help: "the OTP (text and HTML challenges)"),
        .variadic("select", "N", help: "the choices (select challenges)"),
        .flag("oob", help: "confirm an out-of-band challenge"),
        .flag("cancel", help: "cancel the challenge (challengeCancel 01)"),
        .option("proxy", "URL", help: "send everything through this HTTP proxy (e.g. 3dstape record)"),
        .option("ca", "PEM", repeatable: true, help: "extra TLS roots for https URLs (e.g. 3dstape's interception CA)"),
        .option("timeout", "DURATION", help: "the SDK's challenge timeout, first CReq to final CRes (default 300s); on expiry Erro 402 and challengeCancel 08 are sent"),
        .option("ares-timeout", "DURATION", help: "the 3DS Server's wait for the ARes (default 10s)"),
        .option("cres-timeout", "DURATION", help: "the SDK's wait for each CRes (default 10s, the spec's); on expiry as for --timeout"),
        .option("rreq-timeout", "DURATION", help: "the 3DS Server's wait for the ACS's RReq after a challenge or a decoupled ARes (default 10s)"),
        .option("rreq-listen", "HOST:PORT", help: "where the 3DS Server takes the RReq (default 127.0.0.1 on a free port)"),
        .flag("allow-remote", help: "let --rreq-listen be an address other machines can reach"),
        .option("misbehave", "WHAT[,WHAT]", repeatable: true, help: "play a non-conformant SDK to see '3dstape check' fail: no-erro (never sends an Erro), "
                + "ignore-cres-errors (takes a CRes with a wrong counter, stops quietly on one that does not decrypt), "
                + "trust-unverified-jwt (trusts a Trust Payments-style response JWT without verifying it)"),
        .option("gateway", "NAME", help: "wrap the authentication in the sandbox's PXP-style (pxp) or Trust Payments-style (trustpayments) gateway calls"),
        .option("gateway-secret", "S", help: "the Trust Payments-style gateway's HS256 secret (default: the sandbox's test secret)"),
        .flag("json", help: "print the outcome as JSON"),
    ]

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        guard let ds = args.value("ds"), let dsURL = HTTPURL(ds) else { throw InvalidArguments("--ds URL is required (http://host:port)") }
        guard let card = args.value("card") else { throw InvalidArguments("--card PAN is required") }
        guard let certs = args.value("certs") else { throw InvalidArguments("--certs DIR is required: '3dstape sandbox certs --out DIR' against the sandbox, "
                                                                                   + "'3dstape ca export --ds DIR' against a replay") }
        var o = ClientOptions(dsURL: dsURL, card: card, certsDirectory: certs)
        switch args.value("channel") ?? "app" {
        case "app": o.browser = false
        case "browser": o.browser = true
        case let c: throw InvalidArguments("--channel \(c): expected app or browser")
        }
        o.messageVersion = args.value("message-version") ?? "2.2.0"
        guard ["2.1.0", "2.2.0", "2.3.1"].contains(o.messageVersion) else {
            throw InvalidArguments("--message-version \(o.messageVersion): expected 2.1.0, 2.2.0 or 2.3.1")
        }
        if let e = args.value("enc") {
            guard let enc = ContentEncryption(rawValue: e) else { throw InvalidArguments("--enc \(e): expected A128CBC-HS256 or A128GCM") }
            o.enc = enc
        }
        o.answer = args.value("answer")
        o.select = args.all("select").flatMap { $0.split(separator: ",").map(String.init) }
        o.oob = args.has("oob")
        o.cancel = args.has("cancel")
        o.proxy = try args.forwardProxy()
        for path in args.all("ca") { o.extraRoots += try Certificate.parseAll(try readInput(path)) }
        if let t = try args.seconds("timeout") { o.timeout = t }
        if let t = try args.seconds("ares-timeout") { o.aresTimeout = t }
        if let t = try args.seconds("cres-timeout") { o.cresTimeout = t }
        if let t = try args.seconds("rreq-timeout") { o.rreqTimeout = t }
        o.rreqListen = try args.singleListenAddress("rreq-listen", default: "127.0.0.1:0",
                                                    remedy: "the 3DS Server's RReq listener would take RReqs from other machines; add --allow-remote").bound
        for m in args.all("misbehave").flatMap({ $0.split(separator: ",").map(String.init) }) {
            guard let b = Misbehaviour(rawValue: m) else {
                throw InvalidArguments("--misbehave \(m): expected \(Misbehaviour.allCases.map(\.rawValue).joined(separator: " or "))")
            }
            o.misbehaviour.insert(b)
        }
        if let gateway = try args.gateway() { o.gateway = gateway }
        if let secret = args.value("gateway-secret") {
            guard !secret.isEmpty else { throw InvalidArguments("--gateway-secret: an empty secret signs nothing; give the gateway's HS256 secret") }
            o.gatewayJWTSecret = secret
        }
        let result = try SDKClient(options: o).run()
        // What the DS and ACS sent back is printed with card numbers masked (an Erro's errorDetail may quote one).
        if args.has("json") {
            io.out(TerminalText.escapedJSON(ThreeDSContent.maskLuhnRuns(Masking.mask(result.json(gateway: o.gateway, cancelled: o.cancel)).pretty)))
        } else {
            // the DS's and ACS's answers
            io.out(TerminalText.escaped(Masking.maskText(ClientCommand.describe(result)), keepingLineBreaks: true))
        }
        // The last line: what the SDK would surface, for `3dstape check`'s result clauses (fixed names and the codes the
        // gateway sent, escaped as JSON like the rest). With --json, stdout stays one JSON document (the object is its
        // `result` member) and the line goes to stderr, which a check run's log holds too.
        let surfaced = result.surfaced(gateway: o.gateway, cancelled: o.cancel)
        let line = "3dstape-result: " + TerminalText.escapedJSON(surfaced.compact)
        if args.has("json") { io.err(line) } else { io.out(line) }
        if let e = result.error {
            io.err("3dstape: client: \(ThreeDSContent.printable(ClientCommand.errorText(e)))")
            return 1
        }
        // Through a gateway, a payment refused, failed or not authenticated is an error the SDK surfaces (PXP Checkout's
        // code, a failed submit result, a Trust Payments error): so is the exit status. Without one, transStatus N is an answer.
        if o.gateway != nil, surfaced["outcome"]?.stringValue == "failure" {
            let sdk = surfaced["sdk"]
            let what = sdk?["error"]?.stringValue ?? sdk?["result"]?.stringValue ?? sdk?["outcome"]?.stringValue ?? "failure"
            io.err("3dstape: client: \(sdk?["name"]?.stringValue ?? "the SDK") surfaces \(TerminalText.escaped(what))")
            return 1
        }
        return 0
    }

    static func errorText(_ e: JSON) -> String {
        if let m = e["message"]?.stringValue { return m }
        return "Erro \(e["errorCode"]?.stringValue ?? "?") from \(e["errorComponent"]?.stringValue ?? "?"): "
            + "\(e["errorDescription"]?.stringValue ?? "") (\(e["errorDetail"]?.stringValue ?? ""))"
    }

    static func describe(_ r: ClientResult) -> String {
        var s = "transStatus \(r.transStatus ?? "-")"
        if let reason = r.transStatusReason { s += " (reason \(reason))" }
        if let eci = r.eci { s += ", eci \(eci)" }
        s += r.challenge ? ", challenge acsUiType \(r.acsUiType ?? "?")" : ", frictionless"
        s += ", \(r.messageVersion)"
        if r.rreqReceived { s += ", RReq received" }
        if let total = r.timings.first(where: { $0.0 == "total_ms" })?.1 { s += String(format: ", %.0f ms", total) }
        if let e = r.error { s += " — error: \(errorText(e))" }
        for note in r.notes { s += "\n  " + note }
        return s
    }
}
