import Foundation
import TapCore
import TapCrypto
import TapEMV
import TapHTTP
import TapHTTPService
import TapIdentity
import TapJOSE
import TapNet

/// One recorded 3DS transaction as `client-replay` re-sends it: the recorded AReq and what the cardholder answered,
/// with the masked values already resolved (the full card number, the secret entries).
public struct ClientReplayScript: Sendable {
    /// The recorded AReq (its acctNumber already the full number).
    public var areq: JSON
    /// Where the AReq goes (the recorded DS URL with `--target` applied).
    public var dsURL: HTTPURL
    /// The deviceData to encrypt for the target DS: the recorded one decrypted, or nil for a minimal one.
    public var deviceData: JSON?
    /// Why `deviceData` is what it is (for the transaction's notes).
    public var deviceDataNote: String
    /// App channel: each recorded CReq's entries in order (everything but the IDs, the version and the type).
    public var creqEntries: [[(String, JSON)]]
    /// Browser channel: the recorded creq form's CReq and each challenge-page form posted after it, in order.
    public var browserCReq: JSON?
    public var browserForms: [[(String, String)]]
    /// The recorded transaction IDs (a form field holding one takes the live page's value).
    public var recordedIDs: Set<String>
    /// The value that replaces an entry masked in the recording (`***`), if the user gave one.
    public var secret: String?
    /// Whether the recording holds an RReq for this transaction (the replay then waits for the live one).
    public var expectsRReq: Bool
    /// The app channel's content encryption the recorded CReqs used (nil: A128CBC-HS256).
    public var creqEncryption: ContentEncryption?
    /// The recorded transaction IDs by name (threeDSServerTransID …), which the live ones replace in the calls.
    public var recordedIDsByName: [String: String] = [:]

    /// The recorded value of one transaction ID, if the recording had it.
    func recordedID(_ field: TransactionIDField) -> String? { recordedIDsByName[field.rawValue] }
    /// The transaction's non-3DS calls recorded before its AReq (gateway token and pre-initiation, 3DS Method) and
    /// after its 3DS exchanges (the gateway's authorisation), re-sent in their place.
    public var callsBefore: [ClientReplayCall] = []
    public var callsAfter: [ClientReplayCall] = []

    public init(areq: JSON, dsURL: HTTPURL) {
        self.areq = areq
        self.dsURL = dsURL
        deviceData = nil
        deviceDataNote = ""
        creqEntries = []
        browserCReq = nil
        browserForms = []
        recordedIDs = []
        secret = nil
        expectsRReq = false
    }
}

/// One live HTTP exchange of a client-replayed transaction, with the 3DS message in clear on each side.
public struct ClientReplayExchange: Sendable {
    public var method = "POST"
    public var url: String
    public var requestHeaders: [(String, String)]
    public var requestBody: [UInt8]
    /// The 3DS message sent (in clear, also for an app-channel JWE), for the comparison.
    public var request: JSON?
    public var status: Int?
    public var responseHeaders: [(String, String)] = []
    public var responseBody: [UInt8] = []
    public var response: JSON?
    /// Whether the bodies are app-channel JWEs (`request`/`response` then hold their plaintext).
    public var appChannel = false
    public var started: Double
    public var done: Double?
    public var error: String?
    /// The recorded non-3DS call this exchange re-sent (its answer is compared with the recorded one), or nil.
    public var call: ClientReplayCall? = nil
}

/// What the live run of one transaction did.
public struct ClientReplayRun: Sendable {
    public var exchanges: [ClientReplayExchange] = []
    /// Why the run stopped short (a network failure, an acsSignedContent that does not verify …), nil when it ran through.
    public var failure: String?
    public var notes: [String] = []
    /// The recorded IDs and their live values, as the run learned them (the comparison of the calls' answers uses it).
    public var ids = ClientReplayIDMap()
    public init() {}
}

/// The client side of `client-replay`: plays the SDK and the 3DS Server of recorded transactions against live servers
/// (fresh IDs, a fresh SDK key, deviceData encrypted to the target DS, the challenge answered with the recorded entries
/// sealed with live keys), and takes the RReqs on a listener of its own. One value serves many transactions at once.
public final class ClientReplayer: Sendable {
    /// The target DS as `sandbox certs` / `ca export --ds` writes it (TapIdentity's reader, under the name client-replay's
    /// callers use).
    public typealias DSIdentity = TapIdentity.DSIdentity

    /// How the replayer reaches the servers.
    public struct Options: Sendable {
        public var proxy: HostPort?
        public var extraRoots: [Certificate] = []
        public var rreqListen = HostPort(host: "127.0.0.1", port: 0)
        /// Each request's timeout.
        public var requestTimeout: Double = 10
        /// How long a transaction waits for its RReq after the challenge (or a decoupled ARes).
        public var rreqTimeout: Double = 10
        /// The HS256 secret gateway JWTs (Trust Payments style) are signed again with; nil: sent as recorded.
        public var jwtSecret: [UInt8]?
        public init() {}
    }

    let ds: DSIdentity
    let options: Options
    let http: BlockingHTTPClient
    /// The target DS roots as one verification store, and the ACS certificates seen in acsSignedContent, parsed once per run.
    let trust: TrustedCertificates
    /// The listener's loop thread, started once and stopped once (`stop`), behind a lock.
    let listenerThread: Locked<LoopThread?>
    let listenerServer: Locked<HTTPServer?> = Locked(nil)
    /// RReqs taken by the listener, by `rreq:` and threeDSServerTransID, until their transaction takes them.
    let received = RReqMailbox()
    /// The listener's base URL (`http://127.0.0.1:PORT`).
    public let listenerURL: String

    public init(ds: DSIdentity, options: Options) throws {
        self.ds = ds
        self.options = options
        // Keep-alive per target: a new TCP connection per request was a fifth of a flow's CPU.
        http = BlockingHTTPClient(tls: try TLSContext(clientRoots: options.extraRoots.isEmpty ? nil : options.extraRoots), proxy: options.proxy,
                                  timeout: options.requestTimeout, pool: BlockingConnectionPool())
        trust = try TrustedCertificates(roots: ds.roots)
        let thread = try LoopThread(name: "3dstape-creplay")
        let box = received
        let base = Locked("") // the listener's own URL, known once it is bound (never the request's Host header)
        let server = HTTPServer(loop: thread.loop) { req, _, respond in
            let started = Date().timeIntervalSince1970
            let path = req.head.target
            var x = ClientReplayExchange(url: base.withLock { $0 } + path, requestHeaders: req.head.headers.fields.map { ($0.name, $0.value) }, requestBody: req.body, started: started)
            if path.hasPrefix("/3ds/rreq"), let rreq = try? JSON.parse(req.body), rreq.isObject {
                let rres = ClientReplayer.rres(for: rreq)
                x.request = rreq
                x.response = rres
                x.status = 200
                x.responseHeaders = [("Content-Type", "application/json")]
                x.responseBody = rres.bytes
                x.done = Date().timeIntervalSince1970
                // Kept until its transaction takes it; one no transaction waits for (the recording had none) is dropped
                // once 10 000 are waiting, so that a long --repeat does not grow without bound.
                box.deliver(x, for: rreq[.threeDSServerTransID]?.stringValue ?? "")
                respond(.json(rres.bytes))
            } else if path.hasPrefix("/3ds/notify") || path.hasPrefix("/3ds/method") {
                respond(.html("<p>Thank you</p>")) // the browser's cres post: the run itself sent it and holds the exchange
            } else {
                respond(HTTPReply(status: 404))
            }
        }
        let url = "http://\(try server.start(on: options.rreqListen))"
        listenerURL = url
        base.withLock { $0 = url }
        listenerServer.withLock { $0 = server }
        thread.start()
        listenerThread = Locked(thread)
    }

    /// Closes the listener and waits for its thread to end.
    public func stop() {
        http.pool?.closeAll()
        let server = listenerServer.withLock { s in defer { s = nil }; return s }
        listenerThread.withLock { t in
            t?.stop { server?.stop() }
            t = nil
        }
    }

    /// The 3DS Server's answer to an RReq.
    static func rres(for rreq: JSON) -> JSON {
        ThreeDSMessage.rRes(ids: MessageIDs(of: rreq), version: rreq[.messageVersion], resultsStatus: "01")
    }

    struct Stop: Error { let message: String }

    /// Runs one transaction as recorded; what happened is in the result, never thrown.
    public func run(_ script: ClientReplayScript) -> ClientReplayRun {
        var run = ClientReplayRun()
        let serverTransID = Digest.randomUUID()
        run.ids.learn(recorded: script.recordedID(.threeDSServerTransID), live: serverTransID)
        do {
            try send(script.callsBefore, &run)
            try play(script, serverTransID: serverTransID, &run)
            if let ares = run.exchanges.first(where: { $0.response?.messageKind == .aRes })?.response {
                for f in [TransactionIDField.dsTransID, .acsTransID, .sdkTransID] { run.ids.learn(recorded: script.recordedID(f), live: ares[f]?.stringValue) }
            }
            try send(script.callsAfter, &run)
        } catch let e as Stop { run.failure = e.message } catch { run.failure = "\(error)" }
        return run
    }

    func post(_ url: HTTPURL, _ body: [UInt8], contentType: String, request: JSON?, appChannel: Bool = false,
              _ run: inout ClientReplayRun) throws -> (HTTPResponse, Int) {
        let headers = [("Content-Type", contentType)]
        var x = ClientReplayExchange(url: url.description, requestHeaders: headers, requestBody: body, request: request, appChannel: appChannel,
                                     started: Date().timeIntervalSince1970)
        do {
            let r = try http.send("POST", url, headers: headers, body: body)
            x.status = r.head.status
            x.responseHeaders = r.head.headers.fields.map { ($0.name, $0.value) }
            x.responseBody = r.body
            x.done = Date().timeIntervalSince1970
            run.exchanges.append(x)
            return (r, run.exchanges.count - 1)
        } catch {
            x.error = error.message
            x.done = Date().timeIntervalSince1970
            run.exchanges.append(x)
            throw Stop(message: "\(url): \(error.message)")
        }
    }

    func play(_ s: ClientReplayScript, serverTransID: String, _ run: inout ClientReplayRun) throws {
        let sdkTransID = Digest.randomUUID()
        let app = DeviceChannel(s.areq[.deviceChannel]) == .app
        var areq = s.areq
        areq = areq.setting(.threeDSServerTransID, to: .string(serverTransID)).setting(.purchaseDate, to: .string(Self.purchaseDate()))
        if areq[.threeDSServerURL] != nil { areq = areq.setting(.threeDSServerURL, to: .string(listenerURL + "/3ds/rreq")) }
        if areq[.notificationURL] != nil { areq = areq.setting(.notificationURL, to: .string(listenerURL + "/3ds/notify")) }
        var sdkKey: PrivateKey?
        if app {
            let key = try PrivateKey.generateP256()
            sdkKey = key
            areq = areq.setting(.sdkTransID, to: .string(sdkTransID)).setting(.sdkEphemPubKey, to: JWK(publicKey: key.publicKey).json())
            if areq[.sdkAppID] != nil { areq = areq.setting(.sdkAppID, to: .string(Digest.randomUUID())) }
            var device = s.deviceData ?? .object([("DV", .string("1.0")), ("DD", .object([]))])
            if let dd = device["DD"], dd["C018"] != nil { device = device.setting("DD", to: dd.setting("C018", to: .string(sdkTransID))) }
            if s.deviceData == nil || !s.deviceDataNote.isEmpty { run.notes.append(s.deviceDataNote.isEmpty ? "deviceData: a minimal one" : s.deviceDataNote) }
            let dsKey = try ds.certificate.publicKey
            let jwe = dsKey.type == .rsa
                ? try JWE.encryptRSAOAEP256(plaintext: device.bytes, recipient: dsKey, enc: .a128cbcHS256, keyID: ds.keyID)
                : try JWE.encryptEMVECDH(plaintext: device.bytes, recipient: dsKey, directoryServerID: ds.directoryServerID, enc: .a128cbcHS256,
                                         keyID: ds.keyID)
            areq = areq.setting(.sdkEncData, to: .string(jwe.compact))
        }
        let (aresHTTP, _) = try post(s.dsURL, areq.bytes, contentType: "application/json; charset=utf-8", request: areq, &run)
        guard let ares = try? JSON.parse(aresHTTP.body), ares.isObject else {
            throw Stop(message: "the DS answered HTTP \(aresHTTP.head.status) without an ARes or Erro")
        }
        run.exchanges[run.exchanges.count - 1].response = ares
        guard ares.messageKind == .aRes else { return } // an Erro: compared as recorded
        // The answer must be to this AReq: the comparison ignores IDs (they are fresh), so a foreign one would pass unseen.
        try Self.expectIDs(in: ares, "ARes", [(.threeDSServerTransID, serverTransID)] + (app ? [(.sdkTransID, sdkTransID)] : []))
        switch ares.transStatus {
        case .challenge?:
            if app, let sdkKey { try appChallenge(s, ares: ares, sdkKey: sdkKey, serverTransID: serverTransID, sdkTransID: sdkTransID, &run) } else if !app { try browserChallenge(s, ares: ares, &run) }
        case .decoupled?: break
        default: return
        }
        if s.expectsRReq { try waitForRReq(serverTransID, &run) }
    }

    /// Stops the transaction when `message` carries another value for one of `ids` than the one this run sent.
    static func expectIDs(in message: JSON, _ what: String, _ ids: [(TransactionIDField, String)]) throws {
        for (field, sent) in ids {
            let got = message[field]?.stringValue
            guard got == sent else {
                throw Stop(message: "\(what) carries \(field.rawValue) \(got.map { TerminalText.escaped($0) } ?? "absent"), not the \(sent) this run sent")
            }
        }
    }

    func waitForRReq(_ id: String, _ run: inout ClientReplayRun) throws {
        // Woken by the listener when the RReq arrives (polling every 5 ms had each flow wait 2.5 ms on average for nothing).
        guard let x = received.take(id, waitingUntil: Date().addingTimeInterval(options.rreqTimeout)) else {
            throw Stop(message: "no RReq from the ACS within \(CheckedDuration.describe(options.rreqTimeout)) (--rreq-timeout)")
        }
        run.exchanges.append(x)
    }

    /// A recorded entry as sent now: a masked value (`***`) takes the secret.
    static func unmasked(_ value: JSON, secret: String?) throws -> JSON {
        guard let text = value.stringValue, MaskVerdict.isSecretMask(text) else { return value }
        guard let secret else { throw Stop(message: "the recording masked a challenge entry (\(text)); give --secret with what the cardholder typed") }
        return .string(secret)
    }

    func appChallenge(_ s: ClientReplayScript, ares: JSON, sdkKey: PrivateKey, serverTransID: String, sdkTransID: String,
                      _ run: inout ClientReplayRun) throws {
        guard let signed = ares[.acsSignedContent]?.stringValue else { throw Stop(message: "challenge ARes without acsSignedContent") }
        let content: ACSSignedContent
        do { content = try ACSSignedContent.verify(signed, trust: trust).content } catch {
            throw Stop(message: "acsSignedContent rejected: \(error.message)")
        }
        guard let acsURL = HTTPURL(content.acsURL) else { throw Stop(message: "acsSignedContent: acsURL is not an http(s) URL") }
        guard let theirs = try? JWK(json: content.sdkEphemPubKey), theirs.material == JWK(publicKey: sdkKey.publicKey).material else {
            throw Stop(message: "acsSignedContent: sdkEphemPubKey is not this SDK's key")
        }
        guard let acsTransID = ares[.acsTransID]?.stringValue else { throw Stop(message: "ARes without acsTransID") }
        let enc = s.creqEncryption ?? .a128cbcHS256
        var cipher = try AppChannelCipher(role: .sdk, privateKey: sdkKey, peerPublicKey: try JWK(json: content.acsEphemPubKey).publicKey(),
                                          sdkReferenceNumber: s.areq[.sdkReferenceNumber]?.stringValue ?? "", acsTransID: acsTransID, enc: enc)
        var base = ThreeDSMessage.CReq(threeDSServerTransID: .string(serverTransID), acsTransID: .string(acsTransID), version: .v2_2,
                                       sdkTransID: .string(sdkTransID))
        base.messageVersion = s.areq[.messageVersion] ?? base.messageVersion // the recorded AReq's, as it was
        let sentIDs: [(TransactionIDField, String)] = [(.threeDSServerTransID, serverTransID), (.acsTransID, acsTransID), (.sdkTransID, sdkTransID)]
        for (round, entries) in s.creqEntries.enumerated() {
            var creq = base
            creq.entries = try entries.map { .recorded(name: $0.0, value: try Self.unmasked($0.1, secret: s.secret)) }
            let sealed = try cipher.sealed(creq.json) // the plaintext as sealed: with the counter
            let (r, i) = try post(acsURL, Array(sealed.compact.utf8), contentType: "application/jose; charset=UTF-8", request: sealed.plaintext,
                                  appChannel: true, &run)
            let body = String(decoding: r.body, as: UTF8.self)
            if body.hasPrefix("{") {
                // In the clear only an Erro may come (the ACS could not open the CReq); a CRes must be a JWE, with its counter.
                let plain = try? JSON.parse(r.body)
                guard let plain, plain.messageKind == .erro else {
                    let type = plain?[.messageType]?.stringValue.map { TerminalText.escaped($0) } ?? "no messageType"
                    throw Stop(message: "answer #\(round + 1) to a CReq is plain JSON (\(type)), not a JWE CRes (HTTP \(r.head.status))")
                }
                run.exchanges[i].appChannel = false
                run.exchanges[i].response = plain
                return // an Erro from the ACS: compared as recorded
            }
            let cres: JSON
            do { cres = try cipher.open(body) } catch {
                throw Stop(message: "CRes #\(round + 1) rejected (HTTP \(r.head.status)): \(error.message)")
            }
            run.exchanges[i].response = cres
            try Self.expectIDs(in: cres, "CRes #\(round + 1)", sentIDs)
            if cres.completesChallenge { return }
        }
        if !s.creqEntries.isEmpty { run.notes.append("the ACS asked for more than the \(s.creqEntries.count) CReqs the recording holds") }
    }

    func browserChallenge(_ s: ClientReplayScript, ares: JSON, _ run: inout ClientReplayRun) throws {
        guard let acsText = ares[.acsURL]?.stringValue, let acsURL = HTTPURL(acsText) else { throw Stop(message: "ARes without a usable acsURL") }
        guard let recorded = s.browserCReq else { return } // the recorded client never posted the creq form
        var creq = recorded
        for f in [TransactionIDField.threeDSServerTransID, .acsTransID] { creq = creq.setting(f, to: ares[f] ?? .null) }
        let session = Base64URL.encode(Array("client-replay-\(Digest.randomUUID().prefix(8).uppercased())".utf8))
        var (page, _) = try post(acsURL, FormBody.encode([("creq", Base64URL.encode(creq.bytes)), ("threeDSSessionData", session)]),
                                 contentType: "application/x-www-form-urlencoded", request: creq, &run)
        for recordedFields in s.browserForms {
            let html = String(decoding: page.body, as: UTF8.self)
            guard let action = HTMLForm.action(in: html), let url = HTTPURL(action) else { throw Stop(message: "the challenge page has no form to post") }
            let live = HTMLForm.inputs(in: html)
            if live.contains(where: { $0.0 == "cres" }) { break } // the final form already
            var fields: [(String, String)] = []
            for (name, value) in recordedFields {
                if s.recordedIDs.contains(value), let l = live.first(where: { $0.0 == name }) {
                    fields.append((name, l.1))
                } else if MaskVerdict.isSecretMask(value) {
                    guard let secret = s.secret else { throw Stop(message: "the recording masked the form field \(name); give --secret") }
                    fields.append((name, secret))
                } else {
                    fields.append((name, value))
                }
            }
            for (name, value) in live where !fields.contains(where: { $0.0 == name }) && name != "answer" { fields.append((name, value)) }
            (page, _) = try post(url, FormBody.encode(fields), contentType: "application/x-www-form-urlencoded", request: nil, &run)
        }
        let html = String(decoding: page.body, as: UTF8.self)
        let inputs = HTMLForm.inputs(in: html)
        guard let action = HTMLForm.action(in: html), let notify = HTTPURL(action), inputs.contains(where: { $0.0 == "cres" }) else {
            throw Stop(message: "the ACS did not return the final cres form")
        }
        // As the browser would: the cres to the notificationURL (this replayer's listener; the recording does not tie that post
        // to the transaction, so it is stored, not compared).
        _ = try post(notify, FormBody.encode(inputs), contentType: "application/x-www-form-urlencoded", request: nil, &run)
    }

    /// Now in UTC as `yyyyMMddHHmmss`, from the C library (a DateFormatter made per transaction was a tenth of a flow's CPU).
    static func purchaseDate() -> String {
        var now = time(nil)
        var t = tm()
        gmtime_r(&now, &t)
        return String(format: "%04d%02d%02d%02d%02d%02d", Int(t.tm_year) + 1900, Int(t.tm_mon) + 1, Int(t.tm_mday), Int(t.tm_hour), Int(t.tm_min),
                      Int(t.tm_sec))
    }
}

/// The RReqs the listener took, by threeDSServerTransID, until their transaction takes them; a transaction waiting for its
/// RReq is woken when it arrives. One no transaction waits for (the recording had none) is dropped once 10 000 are held,
/// so that a long --repeat does not grow without bound.
///
/// `@unchecked Sendable` is safe because `held` is only read or written while `condition`'s lock is held.
final class RReqMailbox: @unchecked Sendable {
    private let condition = NSCondition()
    private var held: [String: ClientReplayExchange] = [:]

    func deliver(_ exchange: ClientReplayExchange, for transID: String) {
        condition.lock()
        if held.count >= 10_000 { held.removeAll() }
        held[transID] = exchange
        condition.broadcast()
        condition.unlock()
    }

    /// The RReq of `transID`, waiting for it until `deadline`; nil when it has not come by then.
    func take(_ transID: String, waitingUntil deadline: Date) -> ClientReplayExchange? {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let x = held.removeValue(forKey: transID) { return x }
            if !condition.wait(until: deadline) { return held.removeValue(forKey: transID) }
        }
    }
}
