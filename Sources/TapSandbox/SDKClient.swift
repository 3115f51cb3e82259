import Foundation
import Synchronization
import TapCore
import TapCrypto
import TapEMV
import TapHTTP
import TapHTTPService
import TapIdentity
import TapJOSE
import TapNet

/// What the SDK-like client is told to do.
public struct ClientOptions: Sendable {
    public var dsURL: HTTPURL
    public var card: String
    /// A directory as `sandbox certs` writes it.
    public var certsDirectory: String
    public var browser = false
    /// `messageVersion` as given (the CLI accepts the versions 3dstape speaks); `version` is its typed reading.
    public var messageVersion = MessageVersion.v2_2.wire
    public var enc: ContentEncryption = .a128cbcHS256
    public var answer: String?
    public var select: [String] = []
    public var oob = false
    public var cancel = false
    /// A forward proxy for everything the client sends.
    public var proxy: HostPort?
    /// Extra TLS roots for https URLs.
    public var extraRoots: [Certificate] = []
    /// The challenge timeout in seconds (the SDK's 5 minutes by default): from the first CReq to the final CRes.
    public var timeout: Double = 300
    /// How long the 3DS Server waits for the ARes (its read timeout on the DS).
    public var aresTimeout: Double = 10
    /// How long the SDK waits for each CRes (the spec's 10 s per round trip), within the challenge timeout.
    public var cresTimeout: Double = 10
    /// How long the 3DS Server waits for the ACS's RReq after the challenge (or for a decoupled result).
    public var rreqTimeout: Double = 10
    /// Where the 3DS Server's RReq and notification listener listens (port 0: a free port).
    public var rreqListen = HostPort(host: "127.0.0.1", port: 0)
    /// Deliberate departures from the protocol, to see `3dstape check` fail (empty: a conformant SDK).
    public var misbehaviour: Set<Misbehaviour> = []
    /// A payment gateway around the authentication (the sandbox's PXP- or Trust Payments-style endpoints), or nil.
    public var gateway: Gateway?
    /// The Trust Payments-style gateway's HS256 secret.
    public var gatewayJWTSecret = SandboxGateways.defaultJWTSecret

    public init(dsURL: HTTPURL, card: String, certsDirectory: String) {
        self.dsURL = dsURL
        self.card = card
        self.certsDirectory = certsDirectory
    }
}

/// A deliberate departure from the protocol (`client --misbehave`), to show what `3dstape check` catches.
public enum Misbehaviour: String, Sendable, CaseIterable {
    /// Never sends an Erro to the ACS (not after a bad CRes, not on a timeout).
    case noErro = "no-erro"
    /// Takes a CRes whose counter is wrong as if it were right, and stops quietly on one it cannot decrypt.
    case ignoreCResErrors = "ignore-cres-errors"
    /// Trusts a Trust Payments-style response JWT without verifying its signature (the guide: verify before trusting).
    case trustUnverifiedJWT = "trust-unverified-jwt"
}

/// The outcome, as `client --json` prints it.
public struct ClientResult: Sendable {
    public var transStatus: String?
    public var transStatusReason: String?
    public var eci: String?
    public var authenticationValue: String?
    public var challenge = false
    public var acsUiType: String?
    public var messageVersion: String
    public var error: JSON?
    public var rreqReceived = false
    public var timings: [(String, Double)] = []
    public var notes: [String] = []
    /// Why the run failed, in the terms the seed SDKs map to their own codes (nil: no failure).
    public var failure: ClientFailureKind?
    /// What the gateway calls returned, for the SDK's view of them.
    public var gatewayView = GatewayView()

    public var json: JSON {
        .object([
            ("transStatus", transStatus.map(JSON.string) ?? .null), ("transStatusReason", transStatusReason.map(JSON.string) ?? .null),
            ("eci", eci.map(JSON.string) ?? .null),
            ("authenticationValue", authenticationValue.map { _ in JSON.string("***") } ?? .null),
            ("challenge", .bool(challenge)), ("acsUiType", acsUiType.map(JSON.string) ?? .null),
            ("messageVersion", .string(messageVersion)), ("error", error ?? .null), ("rreqReceived", .bool(rreqReceived)),
            ("timings", .object(timings.map { ($0.0, .number(String(format: "%.1f", $0.1))) })),
        ])
    }

    /// The `--json` object with the surfaced result beside it as `result`.
    public func json(gateway: Gateway?, cancelled: Bool) -> JSON {
        json.setting("result", to: surfaced(gateway: gateway, cancelled: cancelled))
    }
}

/// What the client's listener received (RReq, cres), by kind and threeDSServerTransID.
final class ReceivedMessages: Sendable {
    let store = Locked<[String: JSON]>([:])
}

/// Plays a 3DS SDK and its 3DS Server together (like Cake3DS2 and its requestor): deviceData JWE to the DS
/// key, the AReq, acsSignedContent validation, the encrypted challenge with scripted answers, the browser
/// forms, and an RReq listener of its own.
public final class SDKClient {
    let options: ClientOptions
    let http: BlockingHTTPClient
    let dsRoot: [Certificate]
    let dsCert: Certificate
    let dsID: String
    let keyID: String
    let listenerThread: LoopThread
    let received = ReceivedMessages()
    var listener: HTTPServer?
    var listenerURL = ""

    public init(options: ClientOptions) throws {
        self.options = options
        let ds = try DSIdentity(directory: options.certsDirectory) // the one reader of a --certs directory
        dsID = ds.directoryServerID
        keyID = ds.keyID
        dsCert = ds.certificate
        dsRoot = ds.roots
        let ctx = try TLSContext(clientRoots: options.extraRoots.isEmpty ? nil : options.extraRoots)
        http = BlockingHTTPClient(tls: ctx, proxy: options.proxy, timeout: 30) // each call below that has its own timeout says so
        listenerThread = try LoopThread(name: "3dstape-client-listener")
    }

    /// Runs the whole authentication and returns its outcome (errors are in the result, not thrown,
    /// unless the client could not start at all).
    public func run() throws -> ClientResult {
        try startListener()
        defer { stopListener() }
        let started = Date()
        var result = ClientResult(messageVersion: options.messageVersion)
        do {
            let serverTransID = EMV.uuid()
            let context = try gatewayBefore(serverTransID: serverTransID, &result)
            try authenticate(&result, serverTransID: serverTransID)
            try gatewayAfter(context, &result)
        } catch let e as ClientFailure {
            result.error = e.json
            result.failure = e.kind
        } catch let e as TimeoutFailure {
            result.error = .object([("message", .string(e.message))])
            result.failure = .network
        } catch {
            result.error = .object([("message", .string("\(error)"))])
            result.failure = .unexpected
        }
        result.timings.append(("total_ms", Date().timeIntervalSince(started) * 1000))
        return result
    }

    struct ClientFailure: Error {
        let json: JSON
        let kind: ClientFailureKind
        init(_ message: String, _ kind: ClientFailureKind) {
            json = .object([("message", .string(message))])
            self.kind = kind
        }
        /// An Erro received: from the DS before any challenge, from the ACS during one.
        init(erro: JSON, challenge: Bool) {
            json = .object([EMVField.errorCode, .errorComponent, .errorDescription, .errorDetail].map { ($0.rawValue, erro[$0] ?? .null) })
            let code = erro[.errorCode]?.stringValue ?? "?"
            kind = challenge ? .acsErro(code) : .dsErro(code)
        }
    }

    // MARK: the RReq / notification listener (the 3DS Server and the merchant page)

    /// What the listener is sent: the ACS's RReq, its 3DS Method notification, the browser's final CRes. Any method, and
    /// whatever follows the path (a query, a transaction's own suffix).
    enum ListenerRoute: Sendable { case rreq, method, notify }

    static let listenerRouter: HTTPRouter<ListenerRoute> = {
        var r = HTTPRouter<ListenerRoute>()
        r.add(nil, "/3ds/rreq*", .rreq)
        r.add(nil, "/3ds/method*", .method)
        r.add(nil, "/3ds/notify*", .notify)
        return r
    }()

    func startListener() throws {
        let loop = listenerThread.loop
        let box = received
        let server = HTTPServer(loop: loop) { req, _, respond in
            let route: ListenerRoute?
            if case let .found(r, _) = SDKClient.listenerRouter.route(method: req.head.method, path: req.head.target) { route = r } else { route = nil }
            if route == .rreq, let rreq = try? JSON.parse(req.body) {
                box.store.withLock { $0["rreq:" + (rreq[.threeDSServerTransID]?.stringValue ?? "")] = rreq }
                respond(.json(ThreeDSMessage.rRes(answering: rreq, resultsStatus: "01").bytes))
            } else if route == .method {
                respond(.html("<p>3DS Method complete</p>")) // the ACS's notification that the 3DS Method ran
            } else if route == .notify {
                let fields = FormBody.parse(String(decoding: req.body, as: UTF8.self)) ?? []
                if let cres = fields.first(where: { $0.0 == "cres" })?.1, let b = Base64URL.decode(cres), let j = try? JSON.parse(b) {
                    box.store.withLock { $0["cres:" + (j[.threeDSServerTransID]?.stringValue ?? "")] = j }
                }
                respond(.html("<p>Thank you</p>"))
            } else {
                respond(HTTPReply(status: 404))
            }
        }
        let address = try server.start(on: options.rreqListen)
        listener = server
        listenerURL = "http://\(address)"
        listenerThread.start()
    }

    /// Closes the listener on its own thread and waits for that thread to end, so that nothing it
    /// owns is used after the client is gone (a late RReq is refused by the closed socket).
    func stopListener() {
        let server = listener
        listenerThread.stop { server?.stop() }
        listener = nil
    }

    func waitFor(_ key: String, seconds: Double) -> JSON? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let v = received.store.withLock({ $0[key] }) { return v }
            usleep(10_000)
        }
        return nil
    }

    // MARK: the flow

    func post(_ url: HTTPURL, _ body: [UInt8], contentType: String, timeout: Double? = nil) throws -> HTTPResponse {
        do {
            return try http.send("POST", url, headers: [("Content-Type", contentType)], body: body, timeout: timeout)
        } catch {
            if error.kind == .timeout { throw TimeoutFailure(message: error.message) }
            throw ClientFailure("\(url): \(error.message)", .network)
        }
    }

    struct TimeoutFailure: Error { let message: String }

    func authenticate(_ result: inout ClientResult, serverTransID: String) throws {
        let o = options
        let sdkTransID = EMV.uuid()
        let sdkRef = "3DS_LOA_SDK_3DSTAPE_020300_00001"
        let sdkKey = try PrivateKey.generateP256()
        var areq = ThreeDSMessage.AReq(
            threeDSServerTransID: serverTransID, version: o.version, deviceChannel: o.browser ? .browser : .app, messageCategory: .payment,
            threeDSCompInd: o.browser ? "Y" : "U", threeDSRequestorAuthenticationInd: "01", threeDSRequestorID: "3dstape-requestor",
            threeDSRequestorName: "3dstape Test Merchant", threeDSRequestorURL: "https://merchant.example.test",
            threeDSServerRefNumber: "3DSTAPE-SERVER", threeDSServerOperatorID: "3DSTAPE-OP", threeDSServerURL: listenerURL + "/3ds/rreq",
            acquirerBIN: "412345", acquirerMerchantID: "3DSTAPE-MERCHANT-1", mcc: "5999", merchantCountryCode: "826",
            merchantName: "3dstape Test Shop", acctNumber: o.card, cardExpiryDate: "3012", acctType: "02", purchaseAmount: "1234",
            purchaseCurrency: "978", purchaseExponent: "2", purchaseDate: Self.purchaseDate(), transType: "01")
        if o.browser {
            areq.browser = .init(notificationURL: listenerURL + "/3ds/notify", browserAcceptHeader: "text/html", browserUserAgent: "3dstape-client",
                                 browserLanguage: "en-GB", browserIP: "192.0.2.10", browserJavaEnabled: false, browserColorDepth: "24",
                                 browserScreenHeight: "900", browserScreenWidth: "1440", browserTZ: "0",
                                 browserJavascriptEnabled: o.version >= .v2_2 ? true : nil)
        } else {
            let device = JSON.object([("DV", .string("1.6")), ("DD", .object([
                ("C001", .string("Linux")), ("C002", .string("3dstape client")), ("C004", .string("1")), ("C005", .string("en-GB")),
                ("C016", .string(sdkRef)), ("C018", .string(sdkTransID)),
            ])), ("DPNA", .object([])), ("SW", .array([]))])
            let dsKey = try dsCert.publicKey
            let jwe = dsKey.type == .rsa
                ? try JWE.encryptRSAOAEP256(plaintext: device.bytes, recipient: dsKey, enc: .a128cbcHS256, keyID: keyID)
                : try JWE.encryptEMVECDH(plaintext: device.bytes, recipient: dsKey, directoryServerID: dsID, enc: .a128cbcHS256, keyID: keyID)
            areq.app = .init(sdkAppID: "9063b12c-fcde-43c7-b28e-8d0af5520e8a", sdkEncData: jwe.compact,
                             sdkEphemPubKey: JWK(publicKey: sdkKey.publicKey).json(), sdkMaxTimeout: "05", sdkReferenceNumber: sdkRef,
                             sdkTransID: sdkTransID,
                             deviceRenderOptions: .object([("sdkInterface", .string("03")), ("sdkUiType", .array(["01", "02", "03", "04", "05"].map(JSON.string)))]))
        }
        var dsURL = o.dsURL
        if dsURL.path == "/" { dsURL.path = "/ds/areq" }
        let t0 = Date()
        let aresResponse: HTTPResponse
        do {
            aresResponse = try post(dsURL, areq.json.bytes, contentType: "application/json; charset=utf-8", timeout: o.aresTimeout)
        } catch let e as TimeoutFailure {
            throw ClientFailure("no ARes within \(CheckedDuration.describe(o.aresTimeout)) (--ares-timeout): \(e.message)", .dsFailure)
        }
        result.timings.append(("ares_ms", Date().timeIntervalSince(t0) * 1000))
        guard aresResponse.head.status == 200, let ares = try? JSON.parse(aresResponse.body), ares.isObject else {
            throw ClientFailure("the DS answered HTTP \(aresResponse.head.status) without an ARes or Erro", .dsFailure)
        }
        if ares.messageKind == .erro { throw ClientFailure(erro: ares, challenge: false) }
        guard ares.messageKind == .aRes else { throw ClientFailure("expected an ARes, got \(ares[.messageType]?.compact ?? "nothing")", .dsFailure) }
        result.transStatus = ares[.transStatus]?.stringValue
        result.transStatusReason = ares[.transStatusReason]?.stringValue
        result.eci = ares[.eci]?.stringValue
        result.authenticationValue = ares[.authenticationValue]?.stringValue
        switch result.status {
        case .challenge?:
            result.challenge = true
            let t1 = Date()
            if o.browser { try browserChallenge(ares, &result) } else { try appChallenge(ares, sdkKey: sdkKey, sdkRef: sdkRef, &result) }
            result.timings.append(("challenge_ms", Date().timeIntervalSince(t1) * 1000))
        case .decoupled?:
            guard let rreq = waitFor("rreq:" + serverTransID, seconds: o.rreqTimeout) else {
                throw ClientFailure("decoupled authentication: no RReq from the ACS within \(CheckedDuration.describe(o.rreqTimeout)) (--rreq-timeout), "
                                    + "so the 3DS Server has no result", .noResult)
            }
            result.transStatus = rreq[.transStatus]?.stringValue
            result.eci = rreq[.eci]?.stringValue
            result.authenticationValue = rreq[.authenticationValue]?.stringValue
            result.rreqReceived = true
            result.notes.append("decoupled: result from the RReq")
            return
        default:
            return
        }
        guard result.error == nil, result.transStatus != nil else { return }
        // The 3DS Server takes the challenge's result from the RReq, not from the SDK: without one it has none to
        // give the merchant (the final CRes only tells the SDK that the challenge ended).
        guard let rreq = waitFor("rreq:" + serverTransID, seconds: o.rreqTimeout) else {
            throw ClientFailure("the challenge ended (CRes transStatus \(result.transStatus ?? "-")) but no RReq came from the ACS within "
                                + "\(CheckedDuration.describe(o.rreqTimeout)) (--rreq-timeout), so the 3DS Server has no authentication result", .noResult)
        }
        result.rreqReceived = true
        if let st = rreq[.transStatus]?.stringValue { result.transStatus = st }
        result.eci = rreq[.eci]?.stringValue
        result.authenticationValue = rreq[.authenticationValue]?.stringValue
        result.transStatusReason = rreq[.transStatusReason]?.stringValue
    }

    func appChallenge(_ ares: JSON, sdkKey: PrivateKey, sdkRef: String, _ result: inout ClientResult) throws {
        let o = options
        guard let signed = ares[.acsSignedContent]?.stringValue else { throw ClientFailure("challenge ARes without acsSignedContent", .aresRejected) }
        let content: ACSSignedContent
        do {
            content = try ACSSignedContent.verify(signed, roots: dsRoot).content
        } catch {
            throw ClientFailure("acsSignedContent rejected: \(error.message)", .aresRejected)
        }
        guard let acsURL = HTTPURL(content.acsURL) else { throw ClientFailure("acsSignedContent: acsURL \(content.acsURL) is not usable", .aresRejected) }
        guard let theirs = try? JWK(json: content.sdkEphemPubKey), theirs.material == JWK(publicKey: sdkKey.publicKey).material else {
            throw ClientFailure("acsSignedContent: sdkEphemPubKey is not this SDK's key", .aresRejected)
        }
        let acsKey = try JWK(json: content.acsEphemPubKey).publicKey()
        guard let acsTransID = ares[.acsTransID]?.stringValue else { throw ClientFailure("ARes without acsTransID", .aresRejected) }
        guard let serverTransID = ares[.threeDSServerTransID] else { throw ClientFailure("ARes without threeDSServerTransID", .aresRejected) }
        var cipher = try AppChannelCipher(role: .sdk, privateKey: sdkKey, peerPublicKey: acsKey, sdkReferenceNumber: sdkRef,
                                          acsTransID: acsTransID, enc: o.enc)
        let base = ThreeDSMessage.CReq(threeDSServerTransID: serverTransID, acsTransID: .string(acsTransID), version: o.version,
                                       sdkTransID: ares[.sdkTransID] ?? .null)
        var extra: [ThreeDSMessage.ChallengeEntry] = []
        let deadline = Date().addingTimeInterval(o.timeout)
        for round in 0..<6 {
            var creq = base
            creq.entries = extra
            let sealed = try cipher.seal(creq.json)
            let remaining = deadline.timeIntervalSinceNow
            let response: HTTPResponse
            do {
                guard remaining > 0 else { throw TimeoutFailure(message: "challenge timed out") }
                response = try post(acsURL, Array(sealed.utf8), contentType: "application/jose; charset=UTF-8", timeout: min(o.cresTimeout, remaining))
            } catch let e as TimeoutFailure {
                // The SDK's CRes timeout (10 s per round trip) or its challenge timeout: it tells the ACS with an Erro 402
                // (component C) and a CReq with challengeCancel 08, both best effort (SDKs fire and forget them).
                let which = remaining <= o.cresTimeout ? "the challenge timeout (\(CheckedDuration.describe(o.timeout)))"
                    : "the CRes timeout (\(CheckedDuration.describe(o.cresTimeout)))"
                result.transStatus = nil
                if o.misbehaviour.contains(.noErro) { throw ClientFailure("challenge timed out at \(which) (\(e.message)); sent nothing (--misbehave no-erro)", .challengeTimedOut) }
                sendErro(.timedOut, "Transaction timed out", "the SDK's \(which) expired", to: acsURL, ares: ares)
                var cancel = base
                cancel.entries = [.cancel("08")]
                if let c = try? cipher.seal(cancel.json) {
                    _ = try? post(acsURL, Array(c.utf8), contentType: "application/jose; charset=UTF-8", timeout: 2)
                }
                throw ClientFailure("challenge timed out at \(which) (\(e.message)); sent Erro 402 and challengeCancel 08", .challengeTimedOut)
            }
            let body = String(decoding: response.body, as: UTF8.self)
            if (response.head.headers["Content-Type"] ?? "").lowercased().hasPrefix("application/json") || body.hasPrefix("{") {
                if let erro = try? JSON.parse(response.body), erro.messageKind == .erro { throw ClientFailure(erro: erro, challenge: true) }
                throw ClientFailure("the ACS answered HTTP \(response.head.status) in JSON without an Erro", .challengeRuntime)
            }
            let cres: JSON
            let ignoring = o.misbehaviour.contains(.ignoreCResErrors) // not what an SDK may do: no counter check, no Erro
            do { cres = ignoring ? try cipher.decrypt(body) : try cipher.open(body) } catch {
                if ignoring { throw ClientFailure("CRes does not decrypt; stopped quietly (--misbehave ignore-cres-errors)", .challengeRuntime) }
                // As an SDK must: the ACS is told with an Erro (302 for a counter or decryption failure), then the challenge ends.
                sendErro(error.code, error.code == .decryptionFailure ? "Data decryption failure" : "Message invalid", error.message,
                         to: acsURL, ares: ares)
                throw ClientFailure("CRes rejected (\(error.code.rawValue)): \(error.message); "
                                    + (o.misbehaviour.contains(.noErro) ? "sent no Erro (--misbehave no-erro)" : "sent Erro \(error.code.rawValue) to the ACS"),
                                    .sdkErro(error.code.rawValue))
            }
            guard cres.messageKind == .cRes else { throw ClientFailure("expected a CRes", .challengeRuntime) }
            if cres.completesChallenge {
                result.transStatus = cres[.transStatus]?.stringValue
                result.eci = nil
                result.authenticationValue = nil
                return
            }
            let ui = cres[.acsUiType]?.stringValue ?? "01"
            result.acsUiType = ui
            if o.cancel {
                extra = [.cancel("01")]
                continue
            }
            extra = nextEntry(ui: ui, round: round)
        }
        throw ClientFailure("no final CRes after 6 rounds", .challengeRuntime)
    }

    /// Posts the SDK's own Erro (errorComponent C) to the ACS in clear, fire and forget, as SDKs do.
    func sendErro(_ code: EMVErrorCode, _ description: String, _ detail: String, to acsURL: HTTPURL, ares: JSON) {
        if options.misbehaviour.contains(.noErro) { return }
        let erro = Erro.make(code, component: "C", description: description, detail: detail, about: ares, messageType: "CRes",
                             version: options.messageVersion)
        _ = try? post(acsURL, erro.bytes, contentType: "application/json; charset=utf-8", timeout: 2)
    }

    /// The CReq fields that answer a challenge screen, from the scripted answers.
    func nextEntry(ui: String, round: Int) -> [ThreeDSMessage.ChallengeEntry] {
        let o = options
        switch ACSUIType(wire: ui) {
        case .singleSelect, .multiSelect:
            return o.select.isEmpty ? [.noEntry] : [.dataEntry(o.select.joined(separator: ","))]
        case .oob, .htmlOOB:
            if o.oob { return [.oobContinue(o.version >= .v2_3 ? OOBContinue.clicked.json : .bool(true))] }
            return [.noEntry]
        case .html:
            return o.answer.map { [.htmlDataEntry("otp=\($0)")] } ?? [.noEntry]
        case .information:
            return o.version >= .v2_3 ? [.infoContinue] : [.noEntry]
        default:
            return o.answer.map { [.dataEntry($0)] } ?? [.noEntry]
        }
    }

    func browserChallenge(_ ares: JSON, _ result: inout ClientResult) throws {
        let o = options
        guard let acsURLText = ares[.acsURL]?.stringValue, let acsURL = HTTPURL(acsURLText) else { throw ClientFailure("ARes without acsURL", .aresRejected) }
        guard let serverTransID = ares[.threeDSServerTransID], let acsTransID = ares[.acsTransID] else {
            throw ClientFailure("ARes without threeDSServerTransID or acsTransID", .aresRejected)
        }
        let creq = ThreeDSMessage.CReq(threeDSServerTransID: serverTransID, acsTransID: acsTransID,
                                       version: o.version, challengeWindowSize: "05").json
        let session = Base64URL.encode(Array("merchant-session-\(EMV.uuid().prefix(8))".utf8))
        let page: HTTPResponse
        do {
            page = try post(acsURL, FormBody.encode([("creq", Base64URL.encode(creq.bytes)), ("threeDSSessionData", session)]),
                            contentType: "application/x-www-form-urlencoded", timeout: o.timeout)
        } catch let e as TimeoutFailure {
            throw ClientFailure("challenge timed out after \(Checked.clampedInt(o.timeout)) s (\(e.message))", .challengeTimedOut)
        }
        let html = String(decoding: page.body, as: UTF8.self)
        if html.hasPrefix("{"), let erro = try? JSON.parse(page.body), erro.messageKind == .erro { throw ClientFailure(erro: erro, challenge: true) }
        guard let action = HTMLForm.action(in: html), let submitURL = HTTPURL(action) else { throw ClientFailure("the challenge page has no form", .challengeRuntime) }
        var fields = HTMLForm.inputs(in: html).filter { $0.0 != "answer" }
        result.acsUiType = fields.first { $0.0 == "uiType" }?.1
        let answer: String
        switch result.acsUiType.map(ACSUIType.init(wire:)) {
        case .singleSelect, .multiSelect: answer = o.select.joined(separator: ",")
        case .oob, .htmlOOB: answer = o.oob ? "oob" : ""
        default: answer = o.answer ?? ""
        }
        fields.append(("answer", answer))
        fields.append(("action", o.cancel ? "cancel" : "submit"))
        let final = try post(submitURL, FormBody.encode(fields), contentType: "application/x-www-form-urlencoded")
        let finalHTML = String(decoding: final.body, as: UTF8.self)
        guard let notify = HTMLForm.action(in: finalHTML), let notifyURL = HTTPURL(notify),
              let cresValue = HTMLForm.inputs(in: finalHTML).first(where: { $0.0 == "cres" })?.1 else {
            throw ClientFailure("the ACS did not return the final cres form", .challengeRuntime)
        }
        let echoed = HTMLForm.inputs(in: finalHTML).first { $0.0 == "threeDSSessionData" }?.1
        if echoed != session { result.notes.append("threeDSSessionData was not echoed") }
        // As the browser would: post the cres to the notificationURL.
        _ = try post(notifyURL, FormBody.encode([("cres", cresValue)] + (echoed.map { [("threeDSSessionData", $0)] } ?? [])),
                     contentType: "application/x-www-form-urlencoded")
        guard let b = Base64URL.decode(cresValue), let cres = try? JSON.parse(b) else { throw ClientFailure("cres is not base64url JSON", .challengeRuntime) }
        result.transStatus = cres[.transStatus]?.stringValue
        result.eci = nil
        result.authenticationValue = nil
    }

    static func purchaseDate() -> String {
        let f = DateFormatter()
        f.dateFormat = "yyyyMMddHHmmss"
        f.timeZone = TimeZone(identifier: "UTC")
        return f.string(from: Date())
    }
}

extension ClientOptions {
    /// `messageVersion` as a typed, ordered version.
    var version: MessageVersion { MessageVersion(wire: messageVersion) }
}
