import Dispatch
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

/// How the sandbox runs.
public struct SandboxOptions: Sendable {
    /// The DS key that deviceData must be encrypted to.
    public var dsKeyType: DSKeyType = .rsa
    /// The acsSignedContent algorithm: PS256 (RSA ACS key) or ES256 (EC ACS key).
    public var signing: SignatureAlgorithm = .ps256
    /// Seconds before the ARes for the delayed-ARes card.
    public var aresDelay: Double = 2
    /// Seconds before the decoupled card's RReq.
    public var decoupledDelay: Double = 1
    /// Where app-channel keys are logged (`CEK <acsTransID> <hex>`), or nil.
    public var keylog: String?
    /// A forward proxy for the RReq the ACS sends to the 3DS Server (so a recorder sees it), or nil.
    public var outgoingProxy: HostPort?
    /// TLS roots for RReq to an https threeDSServerURL (nil: system roots).
    public var outgoingRoots: [Certificate]?
    /// A fault for SDK testing: acsSignedContent is sent with a corrupted signature.
    public var badSignature = false
    /// A request begun and not complete in this many seconds gets 408 (slow clients).
    public var headerTimeout: Double = 30
    /// Idle keep-alive connections are closed after this many seconds.
    public var idleTimeout: Double = 120
    /// Credentials clients must present (`--auth`), or nil.
    public var authorization: ClientAuthorization?
    /// Connections served at once; more get 503.
    public var maxConnections = 1024
    /// Request bytes held in memory across all connections; past it, 503.
    public var maxBufferedBytes = 512 << 20
    /// The HS256 secret of the Trust Payments-style gateway (`/tp/jwt/`): it verifies requests and signs responses.
    /// A test value, as the sandbox's keys are.
    public var gatewayJWTSecret = SandboxGateways.defaultJWTSecret

    public init() {}
}

/// The built-in DS + ACS simulator: AReq/ARes, PReq/PRes, the app-channel CReq/CRes JWE, the browser
/// creq/cres forms, the 3DS Method, and RReq to the 3DS Server; requests checked as a DS and an ACS
/// check them, answered with Erro 101/102/201/203/301/302/305 where they fail.
/// Its state is touched only on its event loop's thread.
public final class Sandbox: @unchecked Sendable {
    // Safe: `transactions` and the other mutable fields (the RReq sender among them) are used only from
    // handlers and timers on its loop thread; the key log is written under `keylogLock`.
    public let keys: SandboxKeys
    public let options: SandboxOptions
    let loop: EventLoop
    /// `http(s)://host:port` the sandbox is reached at (set when it starts).
    public private(set) var baseURL = ""
    var transactions: [String: Transaction] = [:]
    let log: @Sendable (String) -> Void
    private var server: HTTPServer?
    /// The ACS's RReqs to 3DS Servers, on the loop with kept-alive connections (nil until the first; `rreqSender()`).
    var rreqs: RReqSender?
    /// RReqs the ACS is due to send: counted from the moment a challenge (or decoupled authentication) ends until the RRes,
    /// or why there is none, is in (`scheduleRReq`, `finish`). Read from any thread.
    public let rreqsDue = PendingCount()
    private let keylogLock = Locked(0)

    final class Transaction {
        let areq: JSON
        var ares: JSON
        let card: TestCard
        let version: MessageVersion
        let app: Bool
        var cipher: AppChannelCipher?
        var rounds = 0
        var resends = 0
        var finished = false
        var uiType: ACSUIType
        var sessionData: String?

        init(areq: JSON, ares: JSON, card: TestCard, version: MessageVersion, app: Bool, uiType: ACSUIType) {
            self.areq = areq
            self.ares = ares
            self.card = card
            self.version = version
            self.app = app
            self.uiType = uiType
        }
    }

    public init(keys: SandboxKeys, options: SandboxOptions, loop: EventLoop, log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.keys = keys
        self.options = options
        self.loop = loop
        // Every line quotes the wire (an Erro's detail, an SDK's Erro, an RRes): card numbers masked (the last four kept, so
        // a test card stays recognisable) and control characters shown as `?`, whoever prints it.
        self.log = { line in log(ThreeDSContent.printable(line)) }
    }

    /// Stops listening and closes its connections (on the loop thread, as a ServiceStack's `onStop` runs it).
    public func stop() {
        server?.stop()
        server = nil
        rreqs?.closeAll()
    }

    /// Starts listening (plain HTTP, or HTTPS with the sandbox TLS certificate). Call before `loop.run()`
    /// or on the loop thread.
    @discardableResult
    public func start(on address: HostPort, tls: Bool) throws -> HostPort {
        let ctx = tls ? try TLSContext(serverCertificate: keys.tls.cert, key: keys.tls.key) : nil
        let s = HTTPServer(loop: loop, tls: ctx) { [weak self] req, peer, respond in self?.handle(req, respond) }
        s.authorization = options.authorization
        s.maxConnections = options.maxConnections
        s.maxBufferedBytes = options.maxBufferedBytes
        s.headerTimeout = options.headerTimeout
        s.idleTimeout = options.idleTimeout
        let log = self.log
        s.onLog = { log($0) }
        let bound = try s.start(on: address)
        server = s
        let host = bound.host == "0.0.0.0" ? "127.0.0.1" : bound.host
        baseURL = "\(tls ? "https" : "http")://\(HostPort(host: host, port: bound.port))"
        return bound
    }


    // MARK: routing

    /// The sandbox's endpoints.
    enum Route: Sendable { case areq, preq, challenge, challengeSubmit, method, gateway, index }

    /// Each endpoint's method, path and route, in the order they are matched and the index lists them.
    static let endpoints: [(method: String, path: String, route: Route)] = [
        ("POST", "/ds/areq", .areq), ("POST", "/ds/preq", .preq), ("POST", "/acs/challenge", .challenge),
        ("POST", "/acs/challenge/submit", .challengeSubmit), ("POST", "/acs/method", .method),
        ("POST", "/pxp/tokens", .gateway), ("POST", "/pxp/authentication/pre-initiate", .gateway), ("POST", "/pxp/transactions", .gateway),
        ("POST", "/tp/jwt/", .gateway), ("GET", "/", .index),
    ]

    static let router: HTTPRouter<Route> = {
        var r = HTTPRouter<Route>()
        for e in endpoints { r.add(e.method, e.path, e.route) }
        return r
    }()

    /// What `GET /` lists: the endpoints a client calls (not the challenge page's own form target, nor the index).
    static let index = JSON.array(endpoints.filter { $0.route != .challengeSubmit && $0.route != .index }.map { .string("\($0.method) \($0.path)") })

    func handle(_ req: HTTPRequest, _ respond: @escaping (HTTPReply) -> Void) {
        let path = req.head.target.split(separator: "?").first.map(String.init) ?? "/"
        guard case let .found(route, _) = Sandbox.router.route(method: req.head.method, path: path) else {
            // A known path asked with another method is no endpoint either (the sandbox has always answered it 404).
            respond(HTTPErrorAnswer.reply(status: 404, "no such endpoint"))
            return
        }
        switch route {
        case .areq: handleAReq(req.body, respond)
        case .preq: respond(handlePReq(req.body))
        case .challenge: handleChallenge(req, respond)
        case .challengeSubmit: handleBrowserSubmit(req.body, respond)
        case .method: respond(handleMethod(req.body))
        case .gateway: respond(SandboxGateways.handle(path, req.body, secret: options.gatewayJWTSecret, log: log))
        case .index:
            respond(.json(JSON.object([("sandbox", .string("3dstape DS + ACS")), ("endpoints", Sandbox.index)]).bytes))
        }
    }

    func erroReply(_ code: EMVErrorCode, _ component: String, _ description: String, _ detail: String, about message: JSON?,
                   type: MessageKind?) -> HTTPReply {
        log("Erro \(code.rawValue) \(description): \(detail)")
        return .json(Erro.make(code, component: component, description: description, detail: detail, about: message,
                               messageType: type?.rawValue, version: message?.messageVersion?.wire).bytes)
    }

    // MARK: DS: AReq

    static let commonRequired: [MessageMember] = [.id(.threeDSServerTransID)] + [
        EMVField.deviceChannel, .messageCategory, .acctNumber, .threeDSServerRefNumber, .threeDSServerURL, .threeDSRequestorID,
        .threeDSRequestorName, .acquirerBIN, .acquirerMerchantID, .mcc, .merchantCountryCode, .merchantName,
    ].map(MessageMember.field)
    static let purchaseRequired = [EMVField.purchaseAmount, .purchaseCurrency, .purchaseExponent, .purchaseDate].map(MessageMember.field)
    static let appRequired = [EMVField.sdkAppID, .sdkEncData, .sdkEphemPubKey, .sdkMaxTimeout, .sdkReferenceNumber].map(MessageMember.field)
        + [.id(.sdkTransID), .field(.deviceRenderOptions)]
    static let browserRequired = [EMVField.notificationURL, .browserAcceptHeader, .browserUserAgent, .browserLanguage].map(MessageMember.field)

    func handleAReq(_ body: [UInt8], _ respond: @escaping (HTTPReply) -> Void) {
        guard let areq = try? JSON.parse(body), areq.isObject else {
            return respond(erroReply(.messageInvalid, "D", "Message not recognised", "the body is not a JSON object", about: nil, type: nil))
        }
        guard areq.messageKind == .aReq else {
            return respond(erroReply(.messageInvalid, "D", "Message not recognised",
                                     "messageType \(areq[.messageType]?.compact ?? "missing") at /ds/areq", about: areq, type: nil))
        }
        guard let version = areq.messageVersion, version.isKnown else {
            return respond(erroReply(.versionNotSupported, "D", "Message version not supported",
                                     "messageVersion \(areq[.messageVersion]?.compact ?? "missing"); supported: "
                                     + MessageVersion.known.map(\.wire).joined(separator: ", "),
                                     about: areq, type: .aReq))
        }
        let channel = DeviceChannel(areq[.deviceChannel])
        let category = MessageCategory(areq[.messageCategory])
        var required = Sandbox.commonRequired
        if category == .payment { required += Sandbox.purchaseRequired }
        if channel == .app { required += Sandbox.appRequired } else if channel == .browser { required += Sandbox.browserRequired }
        let missing = EMV.missing(required, in: areq)
        guard missing.isEmpty else {
            return respond(erroReply(.requiredElementMissing, "D", "Required element missing", EMV.names(missing),
                                     about: areq, type: .aReq))
        }
        var bad: [MessageMember] = []
        if !(TransactionID(areq[.threeDSServerTransID])?.isWellFormed ?? false) { bad.append(.id(.threeDSServerTransID)) }
        if channel == .app, !(TransactionID(areq[.sdkTransID])?.isWellFormed ?? false) { bad.append(.id(.sdkTransID)) }
        if !(channel?.isKnown ?? false) { bad.append(.field(.deviceChannel)) }
        if !(category?.isKnown ?? false) { bad.append(.field(.messageCategory)) }
        let pan = areq[.acctNumber]?.stringValue ?? ""
        if !(13...19).contains(pan.count) || !pan.allSatisfy(\.isASCIIDigitCharacter) { bad.append(.field(.acctNumber)) }
        if channel == .app, areq[.sdkEphemPubKey].map({ !$0.isObject }) ?? true { bad.append(.field(.sdkEphemPubKey)) }
        // The URLs the ACS posts to (the browser's final CRes, the RReq): fully qualified http(s) URLs, nothing a page could run.
        for field in (channel == .browser ? [EMVField.threeDSServerURL, .notificationURL] : [.threeDSServerURL])
            where HTTPURL(areq[field]?.stringValue ?? "") == nil { bad.append(.field(field)) }
        guard bad.isEmpty else {
            return respond(erroReply(.formatInvalid, "D", "Format or value invalid", EMV.names(bad), about: areq, type: .aReq))
        }
        if channel == .app {
            do { _ = try decryptDeviceData(areq[.sdkEncData]!.stringValue ?? "") } catch {
                return respond(erroReply(.decryptionFailure, "D", "Data decryption failure", "sdkEncData: \(error)", about: areq, type: .aReq))
            }
        }
        let card = TestCard.find(pan) ?? TestCard(pan: pan, behaviour: .frictionless(.couldNotPerform), summary: "unknown card", passingAnswer: "-",
                                                  minimumVersion: .v2_1)
        if card.behaviour == .erro {
            return respond(erroReply(.transactionDataInvalid, "D", "Transaction data not valid", "test card \(Masking.maskPAN(pan)) always answers Erro 305",
                                     about: areq, type: .aReq))
        }
        let reply: HTTPReply
        do { reply = try buildARes(areq, card: card, version: version, app: channel == .app) } catch {
            return respond(erroReply(.transientFailure, "A", "Transient system failure", "\(error)", about: areq, type: .aReq))
        }
        if card.behaviour == .delayedARes {
            loop.schedule(after: options.aresDelay) { respond(reply) }
        } else {
            respond(reply)
        }
    }

    func decryptDeviceData(_ compact: String) throws -> JSON {
        let plaintext = try JWE(compact: compact).decryptDeviceData(rsaKey: keys.dsKeys[.rsa]?.key, ecKey: keys.dsKeys[.ec]?.key,
                                                                    directoryServerID: keys.directoryServerID)
        return try JSON.parse(plaintext)
    }

    func buildARes(_ areq: JSON, card: TestCard, version: MessageVersion, app: Bool) throws -> HTTPReply {
        let acsTransID = EMV.uuid(), dsTransID = EMV.uuid()
        var behaviour = card.behaviour
        if version < card.minimumVersion { behaviour = .frictionless(.couldNotPerform) }
        var status: TransStatus
        var uiType = ACSUIType.text
        switch behaviour {
        case let .frictionless(s): status = s
        case let .challenge(ui): status = .challenge; uiType = ui
        case .acsNeverAnswers: status = .challenge
        case .decoupled: status = .decoupled
        case .delayedARes: status = .authenticated
        case .erro: status = .couldNotPerform
        }
        var ares = ThreeDSMessage.ARes(ids: MessageIDs(threeDSServerTransID: areq[.threeDSServerTransID]!, dsTransID: .string(dsTransID),
                                                       acsTransID: .string(acsTransID), sdkTransID: app ? areq[.sdkTransID]! : nil),
                                       version: version, acsReferenceNumber: "3DSTAPE-SANDBOX-ACS", acsOperatorID: "3DSTAPE-ACS-OP",
                                       dsReferenceNumber: "3DSTAPE-SANDBOX-DS", transStatus: status)
        switch status {
        case .authenticated: (ares.eci, ares.authenticationValue, ares.authenticationType) = ("05", Sandbox.cavv(), "02")
        case .attempted: (ares.eci, ares.authenticationValue) = ("06", Sandbox.cavv())
        case .notAuthenticated, .rejected: (ares.eci, ares.transStatusReason) = ("07", "01")
        case .couldNotPerform: (ares.eci, ares.transStatusReason) = ("07", card.summary == "unknown card" ? "08" : "16")
        case .informational: (ares.eci, ares.transStatusReason) = ("07", "22")
        case .decoupled: (ares.acsChallengeMandated, ares.acsDecConInd, ares.cardholderInfo) = ("Y", "Y", "Approve the payment in your banking app")
        default: break
        }
        let tx = Transaction(areq: areq, ares: .null, card: card, version: version, app: app, uiType: uiType)
        if status == .challenge {
            ares.acsChallengeMandated = "Y"
            let acsURL = baseURL + "/acs/challenge"
            if app {
                let (cipher, acsEphemPubKey) = try ACSChannel.open(sdkEphemPubKey: areq[.sdkEphemPubKey]!,
                                                                    sdkReferenceNumber: areq[.sdkReferenceNumber]!.stringValue ?? "",
                                                                    acsTransID: acsTransID)
                let (key, cert) = options.signing == .es256 ? keys.acsEC : keys.acsRSA
                let compact = try ACSSignedContent(acsEphemPubKey: acsEphemPubKey, sdkEphemPubKey: areq[.sdkEphemPubKey]!, acsURL: acsURL)
                    .sign(key: key, certificate: cert, algorithm: options.signing)
                ares.acsSignedContent = options.badSignature ? SignatureFault.flippingSignatureBit(compact) : compact
                // Table A.1: required for an app challenge in every version (2.1.0 included).
                ares.acsRenderingType = ThreeDSMessage.ARes.renderingType(interface: uiType.acsInterface, template: uiType.wire)
                tx.cipher = cipher
                writeKeylog("CEK \(acsTransID) \(Hex.encode(cipher.cek))")
            } else {
                ares.acsURL = acsURL
            }
        }
        tx.ares = ares.json
        if status == .challenge || status == .decoupled { transactions[acsTransID] = tx }
        if status == .decoupled {
            scheduleRReq(after: options.decoupledDelay, tx, status: .authenticated, cancel: nil)
        }
        log("AReq \(card.pan.prefix(6))… \(app ? "app" : "browser") \(version) → ARes \(status)")
        return .json(tx.ares.bytes)
    }

    static func cavv() -> String { ThreeDSMessage.authenticationValue(Digest.randomBytes(20)) }

    func writeKeylog(_ line: String) {
        guard let path = options.keylog else { return }
        keylogLock.withLock { _ in
            // Created 0600 from the start (it holds channel keys), never through a symlink.
            do { try SecureFile.append(path, Array((line + "\n").utf8), mode: 0o600) } catch { log("key log: \(error)") }
        }
    }

    // MARK: DS: PReq

    func handlePReq(_ body: [UInt8]) -> HTTPReply {
        guard let preq = try? JSON.parse(body), preq.messageKind == .pReq else {
            return erroReply(.messageInvalid, "D", "Message not recognised", "expected a PReq", about: nil, type: nil)
        }
        let missing = EMV.missing([.id(.threeDSServerTransID), .field(.threeDSServerRefNumber), .field(.messageVersion)], in: preq)
        guard missing.isEmpty else {
            return erroReply(.requiredElementMissing, "D", "Required element missing", EMV.names(missing), about: preq, type: .pReq)
        }
        let range = ThreeDSMessage.CardRange(startRange: "4000000000001000", endRange: "4000000000001999", actionInd: "A",
                                             acsStartProtocolVersion: .v2_1, acsEndProtocolVersion: .v2_3,
                                             threeDSMethodURL: baseURL + "/acs/method", acsInfoInd: ["01", "02"])
        return .json(ThreeDSMessage.pRes(threeDSServerTransID: preq[.threeDSServerTransID]!, dsTransID: EMV.uuid(),
                                         version: preq[.messageVersion]!, serialNum: "1", dsProtocolVersions: MessageVersion.known,
                                         cardRangeData: [range]).bytes)
    }

    // MARK: ACS: 3DS Method

    func handleMethod(_ body: [UInt8]) -> HTTPReply {
        let fields = FormBody.parse(String(decoding: body, as: UTF8.self)) ?? []
        guard let data = fields.first(where: { $0.0 == "threeDSMethodData" })?.1, let bytes = Base64URL.decode(data),
              let json = try? JSON.parse(bytes), let id = json[.threeDSServerTransID]?.stringValue,
              let notify = json[.threeDSMethodNotificationURL]?.stringValue else {
            return .html("<p>threeDSMethodData missing or malformed</p>", status: 400)
        }
        guard HTTPURL(notify) != nil else { return .html("<p>threeDSMethodNotificationURL is not an http(s) URL</p>", status: 400) }
        let back = Base64URL.encode(JSON.object(MessageIDs(threeDSServerTransID: .string(id)).members).bytes)
        return .html(HTMLForm.autoPost(action: notify, fields: [("threeDSMethodData", back)], title: "3DS Method"))
    }
}

extension Character {
    var isASCIIDigitCharacter: Bool { asciiValue.map { $0 >= 48 && $0 <= 57 } ?? false }
}
