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

/// Files of a DS identity already in `directory` (without --force): a usage error (exit status 2) before any key is made.
func refuseExistingClientCertificates(in directory: String) throws {
    if let refusal = SandboxKeys.existingClientCertificate(in: directory) { throw InvalidArguments(refusal) }
}

/// `3dstape sandbox`: the DS + ACS simulator.
struct SandboxCommand: Command {
    let spec = CommandSpec(name: "sandbox", abstract: "Run the built-in DS + ACS simulator ('sandbox certs --out DIR' writes what clients trust)",
                           usage: "[--listen HOST:PORT] [--tls] [--keylog FILE] [--ds-key rsa|ec] [--sign PS256|ES256] [--ares-delay S] [--proxy URL]",
                                  "certs --out DIR [--ds-key rsa|ec]",
                           maxPositionals: 1, usesUserKeys: true,
                           options: [listen.spec, tls.spec, keylog.spec, gatewaySecret.spec, dsKey.spec, sign.spec, aresDelay.spec, proxy.spec,
                                     out.spec, force.spec, badSignature.spec, headerTimeout.spec, idleTimeout.spec,
                                     quiet.spec] + remoteListeningOptions)
    static let listen = Option("listen", "HOST:PORT", HostPortValue(), help: "address to listen on (default 127.0.0.1:9443)")
    static let tls = Flag("tls", help: "serve HTTPS with the sandbox TLS certificate (issued by the sandbox DS root)")
    static let keylog = Option("keylog", "FILE", PathValue(), help: "append each app-channel CEK as 'CEK <acsTransID> <hex>'")
    static let gatewaySecret = Option("gateway-secret", "S", TextValue(),
                                      help: "the HS256 secret of the Trust Payments-style gateway at /tp/jwt/ (default: a documented test value)")
    static let dsKey = Option("ds-key", "rsa|ec", dsKeyChoice, default: .rsa, help: "the DS key deviceData is encrypted to (default rsa)")
    static let sign = Option("sign", "PS256|ES256", ReplayCommand.signingChoice, default: .ps256, help: "the acsSignedContent algorithm (default PS256)")
    static let aresDelay = Option("ares-delay", "SECONDS", DurationValue.anyWait, help: "delay of the delayed-ARes test card (default 2)")
    static let proxy = Option("proxy", "URL", ForwardProxyValue(), help: "send the RReq to the 3DS Server through this forward proxy")
    static let out = Option("out", "DIR", PathValue(), help: "with 'certs': where to write ds-root.pem, ds-root.der, ds-cert.pem, ds.json")
    static let force = Flag("force", help: "with 'certs': replace files that exist (a symlink is replaced, never followed)")
    static let badSignature = Flag("bad-signature", help: "fault: send acsSignedContent with a corrupted signature (SDK negative tests)")
    static let headerTimeout = Option("header-timeout", "SECONDS", DurationValue.timeout,
                                      help: "answer 408 when a started request is not complete in time (default 30)")
    static let idleTimeout = Option("idle-timeout", "SECONDS", DurationValue.timeout, help: "close idle keep-alive connections (default 120)")
    static let quiet = Flag("quiet", help: "do not log each message")

    /// `rsa` or `ec`, as `--ds-key` takes it (sandbox and ca export).
    static let dsKeyChoice = ChoiceValue<DSKeyType>([("rsa", .rsa), ("ec", .ec)], refusal: { option, _ in "--\(option): expected rsa or ec" })

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        let listens = args.positionals.first == "certs" ? [] : try args.listenAddresses(Self.listen, default: "127.0.0.1:9443")
        let authorization = listens.isEmpty ? nil : try args.listenAuthorization(listens) // before any key is made
        let dsKey = try args.value(Self.dsKey, default: .rsa)
        if args.positionals.first == "certs" {
            guard let out = try args.value(Self.out) else { throw InvalidArguments("sandbox certs needs --out DIR") }
            if !args.has(Self.force) { try refuseExistingClientCertificates(in: out) }
            try sandboxKeys().writeClientCertificates(to: out, dsKeyType: dsKey, replace: args.has(Self.force))
            io.out("wrote ds-root.pem, ds-root.der, ds-cert.pem (\(dsKey.rawValue)) and ds.json to \(TerminalText.escaped(out))")
            return 0
        }
        if let p = args.positionals.first { throw InvalidArguments("unknown action '\(p)'; expected 'certs' or nothing") }
        let keys = try sandboxKeys()
        var o = SandboxOptions()
        o.dsKeyType = dsKey
        o.signing = try args.value(Self.sign, default: .ps256)
        if let d = try args.value(Self.aresDelay) { o.aresDelay = d }
        if let t = try args.value(Self.headerTimeout) { o.headerTimeout = t }
        if let t = try args.value(Self.idleTimeout) { o.idleTimeout = t }
        o.keylog = try args.value(Self.keylog)
        if let secret = try args.value(Self.gatewaySecret) { o.gatewayJWTSecret = secret }
        o.badSignature = args.has(Self.badSignature)
        o.outgoingProxy = try args.value(Self.proxy)
        o.authorization = authorization
        o.maxConnections = try args.maxConnections()
        o.maxBufferedBytes = try args.maxBuffered()
        let stack = try ServiceStack.foreground()
        let quiet = args.has(Self.quiet)
        let sandbox = Sandbox(keys: keys, options: o, loop: stack.loop) { line in
            if !quiet { StandardStreams.out(Data("sandbox: \(TerminalText.escaped(line))\n".utf8)) } // lines quote what clients sent
        }
        let bound = try sandbox.start(on: listens[0].bound, tls: args.has(Self.tls))
        io.err("sandbox DS + ACS on \(sandbox.baseURL) (DS key \(dsKey.rawValue), acsSignedContent \(o.signing.rawValue)); bound \(bound)")
        // Over TLS the client trusts the sandbox's certificate through the DS root `certs` writes (it issued both).
        let trust = args.has(Self.tls) ? " --ca DIR/ds-root.pem" : ""
        io.err("clients: '3dstape sandbox certs --out DIR' then '3dstape client --ds \(sandbox.baseURL) --certs DIR\(trust) --card PAN'")
        stack.runUntilSignal()
        return 0
    }
}

/// `3dstape client`: an SDK-like client plus 3DS Server.
struct ClientCommand: Command {
    let spec = CommandSpec(name: "client", abstract: "Play a 3DS SDK and 3DS Server: AReq, acsSignedContent check, the encrypted challenge, RReq",
                           usage: "--ds URL --card PAN --certs DIR [--channel app|browser] [--message-version V] [--enc A128CBC-HS256|A128GCM] [--answer TEXT | --select N... | --oob] [--cancel] [--proxy URL] [--ca PEM] [--timeout D] [--ares-timeout D] [--cres-timeout D] [--rreq-timeout D] [--rreq-listen HOST:PORT] [--misbehave WHAT] [--gateway pxp|trustpayments] [--gateway-secret S] [--json]",
                           maxPositionals: 0, usesUserKeys: true,
                           options: [ds.spec, card.spec, certs.spec, channel.spec, messageVersion.spec, enc.spec, answer.spec, select.spec, oob.spec,
                                     cancel.spec, proxy.spec, ca.spec, timeout.spec, aresTimeout.spec, cresTimeout.spec, rreqTimeout.spec,
                                     rreqListen.spec, allowRemote.spec, misbehave.spec, gateway.spec, gatewaySecret.spec, json.spec])
    static let ds = Option("ds", "URL", TextValue(), help: "the DS (its /ds/areq, or the base URL)")
    static let card = Option("card", "PAN", TextValue(), help: "the card number (see the sandbox test cards)")
    static let certs = Option("certs", "DIR", PathValue(), help: "a directory as 'sandbox certs' writes it (DS root, DS certificate, ds.json)")
    /// true for the browser channel.
    static let channel = Option("channel", "app|browser",
                                ChoiceValue([("app", false), ("browser", true)], refusal: { "--\($0) \($1): expected app or browser" }),
                                default: false, help: "device channel (default app)")
    static let messageVersion = Option("message-version", "V",
                                       ChoiceValue([("2.1.0", "2.1.0"), ("2.2.0", "2.2.0"), ("2.3.1", "2.3.1")],
                                                   refusal: { "--\($0) \($1): expected 2.1.0, 2.2.0 or 2.3.1" }),
                                       default: "2.2.0", help: "2.1.0, 2.2.0 (default) or 2.3.1")
    static let enc = Option("enc", "ENC", CustomValue { (e, o) throws(InvalidArguments) -> ContentEncryption in
        guard let enc = ContentEncryption(rawValue: e) else { throw InvalidArguments("--\(o) \(e): expected A128CBC-HS256 or A128GCM") }
        return enc
    }, help: "app-channel JWE enc: A128CBC-HS256 (default) or A128GCM")
    static let answer = Option("answer", "TEXT", TextValue(), help: "the OTP (text and HTML challenges)")
    static let select = Option("select", "N", TextValue(), variadic: true, help: "the choices (select challenges)")
    static let oob = Flag("oob", help: "confirm an out-of-band challenge")
    static let cancel = Flag("cancel", help: "cancel the challenge (challengeCancel 01)")
    static let proxy = Option("proxy", "URL", ForwardProxyValue(), help: "send everything through this HTTP proxy (e.g. 3dstape record)")
    static let ca = Option("ca", "PEM", PathValue(), repeatable: true, help: "extra TLS roots for https URLs (e.g. 3dstape's interception CA)")
    static let timeout = Option("timeout", "DURATION", DurationValue.timeout,
                                help: "the SDK's challenge timeout, first CReq to final CRes (default 300s); on expiry Erro 402 and challengeCancel 08 are sent")
    static let aresTimeout = Option("ares-timeout", "DURATION", DurationValue.timeout, help: "the 3DS Server's wait for the ARes (default 10s)")
    static let cresTimeout = Option("cres-timeout", "DURATION", DurationValue.timeout,
                                    help: "the SDK's wait for each CRes (default 10s, the spec's); on expiry as for --timeout")
    static let rreqTimeout = Option("rreq-timeout", "DURATION", DurationValue.timeout,
                                    help: "the 3DS Server's wait for the ACS's RReq after a challenge or a decoupled ARes (default 10s)")
    static let rreqListen = Option("rreq-listen", "HOST:PORT", HostPortValue(), help: "where the 3DS Server takes the RReq (default 127.0.0.1 on a free port)")
    static let allowRemote = Flag("allow-remote", help: "let --rreq-listen be an address other machines can reach")
    /// Each comma-separated behaviour, checked.
    static let misbehave = Option("misbehave", "WHAT[,WHAT]", CustomValue { (text, o) throws(InvalidArguments) -> [Misbehaviour] in
        var out: [Misbehaviour] = []
        for m in text.split(separator: ",").map(String.init) {
            guard let b = Misbehaviour(rawValue: m) else {
                throw InvalidArguments("--\(o) \(m): expected \(Misbehaviour.allCases.map(\.rawValue).joined(separator: " or "))")
            }
            out.append(b)
        }
        return out
    }, repeatable: true, help: "play a non-conformant SDK to see '3dstape check' fail: no-erro (never sends an Erro), "
        + "ignore-cres-errors (takes a CRes with a wrong counter, stops quietly on one that does not decrypt), "
        + "trust-unverified-jwt (trusts a Trust Payments-style response JWT without verifying it)")
    static let gateway = Option("gateway", "NAME", gatewayChoice,
                                help: "wrap the authentication in the sandbox's PXP-style (pxp) or Trust Payments-style (trustpayments) gateway calls")
    static let gatewaySecret = Option("gateway-secret", "S", CustomValue { (secret, o) throws(InvalidArguments) -> String in
        guard !secret.isEmpty else { throw InvalidArguments("--\(o): an empty secret signs nothing; give the gateway's HS256 secret") }
        return secret
    }, help: "the Trust Payments-style gateway's HS256 secret (default: the sandbox's test secret)")
    static let json = Flag("json", help: "print the outcome as JSON")

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        guard let ds = try args.value(Self.ds), let dsURL = HTTPURL(ds) else { throw InvalidArguments("--ds URL is required (http://host:port)") }
        guard let card = try args.value(Self.card) else { throw InvalidArguments("--card PAN is required") }
        guard let certs = try args.value(Self.certs) else { throw InvalidArguments("--certs DIR is required: '3dstape sandbox certs --out DIR' against the sandbox, "
                                                                                   + "'3dstape ca export --ds DIR' against a replay") }
        var o = ClientOptions(dsURL: dsURL, card: card, certsDirectory: certs)
        o.browser = try args.value(Self.channel, default: false)
        o.messageVersion = try args.value(Self.messageVersion, default: "2.2.0")
        if let enc = try args.value(Self.enc) { o.enc = enc }
        o.answer = try args.value(Self.answer)
        o.select = try args.all(Self.select).flatMap { $0.split(separator: ",").map(String.init) }
        o.oob = args.has(Self.oob)
        o.cancel = args.has(Self.cancel)
        o.proxy = try args.value(Self.proxy)
        for path in try args.all(Self.ca) { o.extraRoots += try Certificate.parseAll(try readInput(path)) }
        if let t = try args.value(Self.timeout) { o.timeout = t }
        if let t = try args.value(Self.aresTimeout) { o.aresTimeout = t }
        if let t = try args.value(Self.cresTimeout) { o.cresTimeout = t }
        if let t = try args.value(Self.rreqTimeout) { o.rreqTimeout = t }
        o.rreqListen = try args.singleListenAddress(Self.rreqListen, default: "127.0.0.1:0",
                                                    remedy: "the 3DS Server's RReq listener would take RReqs from other machines; add --allow-remote").bound
        for b in try args.all(Self.misbehave).flatMap({ $0 }) { o.misbehaviour.insert(b) }
        if let gateway = try args.value(Self.gateway) { o.gateway = gateway }
        if let secret = try args.value(Self.gatewaySecret) { o.gatewayJWTSecret = secret }
        let result = try SDKClient(options: o).run()
        // What the DS and ACS sent back is printed with card numbers masked (an Erro's errorDetail may quote one).
        if args.has(Self.json) {
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
        if args.has(Self.json) { io.err(line) } else { io.out(line) }
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
