import Foundation
import Synchronization
import TapCore
import TapCrypto
import TapEMV
import TapHTTP
import TapHTTPService
import TapJOSE
import TapStore

/// What the replayer answers when nothing recorded matches a live request.
public enum MissAnswer: Sendable, Equatable {
    /// 404 with a JSON body naming the closest recorded exchanges and the fields that differed.
    case notFound
    /// The Erro a DS or ACS would send (305 for an AReq, 301 for a message of an unknown transaction), same detail.
    case erro
    /// Forward the request to this base URL; the new exchange is recorded (VCR's new_episodes).
    case forward(String)
}

/// What to do when identical requests outnumber their recordings.
public enum RepeatMode: String, Sendable, CaseIterable {
    /// Serve the last recording again.
    case last
    /// Start again from the first.
    case cycle
    /// Treat as a miss.
    case miss
}

/// Everything that shapes a replay besides the session.
public struct ReplayOptions: Sendable {
    public var schedule = ReplaySchedule()
    public var onMiss: MissAnswer = .notFound
    public var repeatMode: RepeatMode = .last
    /// Fields ignored when comparing JSON bodies of non-3DS requests.
    public var ignoreFields: Set<String> = []
    /// The replayer's address as written into acsURL and similar fields for clients pointed at it directly.
    public var publicURL: String?
    /// Faults injected into matching answers (`--fault`, `--faults`, `--scenario`).
    public var faults: [FaultRule] = []
    public init() {}
}

/// The certificate the replayer signs acsSignedContent with, as the ACS (chained to the test DS root the client trusts).
public struct ReplayACSIdentity: Sendable {
    public let key: PrivateKey
    public let certificate: Certificate
    public let signing: SignatureAlgorithm
    /// The x5c header for the certificate, made once.
    let x5c: JSON
    public init(key: PrivateKey, certificate: Certificate, signing: SignatureAlgorithm) {
        self.key = key
        self.certificate = certificate
        self.signing = signing
        x5c = JWS.x5cHeader([certificate])
    }
}

/// A live request as the engine sees it.
public struct LiveRequest: Sendable {
    public var method: String
    /// As received: absolute-form from a proxy client (or inside an intercepted tunnel), origin-form from a direct client.
    public var target: String
    public var headers: [(String, String)]
    public var body: [UInt8]
    public init(method: String, target: String, headers: [(String, String)] = [], body: [UInt8]) {
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
    }
    /// True when the client uses the replayer as a proxy.
    public var viaProxy: Bool { ReplayURL.schemeEnd(Array(target.utf8)) != nil }
}

/// An RReq the replayer sends as the ACS, after the answer that completes the challenge.
public struct PlannedRReq: Sendable {
    public var url: String
    public var body: [UInt8]
    /// Seconds after the triggering answer is sent.
    public var after: Double
    public var recordedExchangeID: Int64
}

/// The engine's decision for one live request.
public struct ReplayAnswer: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]
    public var recordedExchangeID: Int64?
    public var matchedBy: String?
    /// Why nothing matched (closest exchanges and differing fields).
    public var miss: String?
    /// Seconds to wait before the first byte.
    public var delay: Double
    public var rreq: PlannedRReq?
    /// Forward the live request to this absolute URL instead of answering (a live endpoint, or `--on-miss forward:`).
    public var forwardTo: String?
    /// The live request and the answer as JSON when the engine parsed or built them (handed to the session writer).
    public var requestJSON: JSON? = nil
    public var responseJSON: JSON? = nil
    /// The faults applied to this answer (and to the RReq it triggers), as written on the command line.
    public var faults: [String] = []
    /// A TCP or HTTP fault the server applies when sending.
    public var transport: HTTPReply.TransportFault? = nil
    /// Never answer (the connection stays open until the client gives up).
    public var hang = false
}

/// The replay decisions, free of I/O: a live request in, the answer, its delay and any RReq out. It matches AReqs
/// to recorded transactions (3DS-aware), ties the rest of a transaction to the same recording, rewrites IDs, acts as the
/// ACS on the app channel with fresh keys, and matches other exchanges on method, path, query and body.
///
/// `@unchecked Sendable`: all state except `channelKeys` is used by one thread (the replayer's loop); `channelKeys`
/// is a Mutex because the session writer reads it to store the live CReq/CRes in clear.
public final class ReplayEngine: ChannelKeySource, @unchecked Sendable {
    public let catalog: ReplayCatalog
    public let options: ReplayOptions
    let identity: ReplayACSIdentity
    private var flowUses: [Int]
    private var live: [String: LiveFlow] = [:]
    private var liveOrigins: [String: Int] = [:]
    /// How often each recorded exchange (by index) has been served.
    private var served: [Int]
    private var plainCursor: [String: Int] = [:]
    private let channelKeys = Locked<[String: [UInt8]]>([:])

    public var method: String { "replay (fresh keys)" }

    final class LiveFlow {
        let flow: Int
        /// Recorded text → live text: IDs, URLs, threeDSSessionData (in order, for text bodies).
        var map: [(String, String)] { didSet { index() } }
        /// The entries that are URLs, replaced by prefix in JSON string values (a handful: a linear scan beats hashing).
        private(set) var prefixes: [(String, String)] = []
        var cipher: AppChannelCipher?
        var next = 0
        var typeCounts: [String: Int] = [:]
        let threeDSServerURL: String?
        var keys: [String] = []
        init(flow: Int, map: [(String, String)], threeDSServerURL: String?) {
            self.flow = flow
            self.map = map
            self.threeDSServerURL = threeDSServerURL
            index()
        }

        private func index() {
            prefixes = map.filter { ReplayURL.schemeEnd(Array($0.0.utf8)) != nil }
        }

        /// A JSON string value with recorded IDs and URLs replaced.
        func value(_ s: String) -> String {
            for (r, l) in map where r == s { return l }
            for (r, l) in prefixes where s.hasPrefix(r) { return l + s.dropFirst(r.count) }
            return s
        }
    }

    public init(catalog: ReplayCatalog, options: ReplayOptions, identity: ReplayACSIdentity) {
        self.catalog = catalog
        self.options = options
        self.identity = identity
        flowUses = Array(repeating: 0, count: catalog.flows.count)
        served = Array(repeating: 0, count: catalog.exchanges.count)
    }

    public func cek(for acsTransID: String) -> [UInt8]? { channelKeys.withLock { $0[acsTransID.lowercased()] } }

    /// Transactions still in progress (for tests and the summary).
    public var liveTransactions: Int { Set(live.values.map { ObjectIdentifier($0) }).count }

    // MARK: dispatch

    /// Decides the answer to one live request. `selfURL` is where a direct client reached the replayer.
    public func handle(_ req: LiveRequest, selfURL: String) -> ReplayAnswer {
        if let origin = ReplayURL.origin(req.target), liveOrigins[origin] != nil {
            return ReplayAnswer(status: 0, headers: [], body: [], matchedBy: "live endpoint of the transaction (forwarded)", delay: 0,
                                forwardTo: req.target)
        }
        let first = req.body.first { $0 != 0x20 && $0 != 0x09 && $0 != 0x0D && $0 != 0x0A }
        if first == UInt8(ascii: "{"), let json = try? JSON.parse(req.body), json.isObject {
            if json["messageType"]?.stringValue == "AReq" { return aReq(json, req, selfURL: selfURL) }
            if json["messageType"]?.stringValue == "Erro", let lf = ["acsTransID", "threeDSServerTransID"].lazy
                .compactMap({ json[$0]?.stringValue }).compactMap({ self.live[$0] }).first {
                // The SDK's own Erro, posted in clear to the acsURL: acknowledged as an ACS does, and the challenge is over.
                // The ACS's RReq then says why: challengeCancel 08 when the SDK timed out (Erro 402), 06 otherwise.
                let code = json["errorCode"]?.stringValue ?? "?"
                var a = ReplayAnswer(status: 200, headers: [], body: [], matchedBy: "SDK Erro \(code) acknowledged; the transaction ends", delay: 0)
                a.requestJSON = json
                let flow = catalog.flows[lf.flow]
                if flow.rreq != nil, lf.next < flow.followUps.count || !flow.followUps.isEmpty {
                    lf.next = flow.followUps.count
                    plan(&a, rreqOf: lf, after: flow.followUps.last ?? flow.areq,
                         override: .object([("transStatus", .string("N")), ("challengeCancel", .string(code == "402" ? "08" : "06"))]))
                }
                finish(lf)
                return a
            }
            for key in ["acsTransID", "threeDSServerTransID"] {
                if let v = json[key]?.stringValue, let lf = live[v] { return followUp(lf, req, creq: nil) }
            }
        }
        if first != UInt8(ascii: "{"), !req.body.isEmpty, let answer = tiedByText(req) { return answer }
        if !live.isEmpty, let lf = live.first(where: { req.target.contains($0.key) })?.value { return followUp(lf, req, creq: nil) }
        return plain(req)
    }

    /// A non-JSON body tied to a live transaction: an app-channel CReq (by its JWE kid), a browser creq form (by the
    /// acsTransID inside), or any other form or text that carries one of the transaction's live IDs.
    func tiedByText(_ req: LiveRequest) -> ReplayAnswer? {
        let text = String(decoding: req.body.prefix(64 * 1024), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if req.body.lazy.filter({ $0 == 0x2E }).count == 4, let jwe = try? JWE(compact: text) {
            if let kid = jwe.keyID, let lf = live[kid] { return appCReq(lf, jwe, req) }
            return miss(req, detail: "app-channel CReq for acsTransID \(jwe.keyID ?? "(no kid)"), which is no live transaction of this replay",
                        erroCode: "301", about: "CReq")
        }
        if let fields = FormBody.parse(text) {
            if let creq = fields.first(where: { $0.0 == "creq" })?.1, let b = Base64URL.decode(creq), let json = try? JSON.parse(b),
               let id = json["acsTransID"]?.stringValue, let lf = live[id] {
                return followUp(lf, req, creq: nil, sessionData: fields.first { $0.0 == "threeDSSessionData" }?.1)
            }
            for (_, v) in fields { if let lf = live[v] { return followUp(lf, req, creq: nil) } }
        }
        if let lf = live.first(where: { text.contains($0.key) })?.value { return followUp(lf, req, creq: nil) }
        return nil
    }

    // MARK: AReq

    func aReq(_ areq: JSON, _ req: LiveRequest, selfURL: String) -> ReplayAnswer {
        let key = ReplayCatalog.AReqKey(areq)
        let candidates = catalog.flowsByKey[key] ?? []
        var chosen = candidates.first { flowUses[$0] == 0 }
        if chosen == nil, !candidates.isEmpty {
            switch options.repeatMode {
            case .last: chosen = candidates.last
            case .cycle: chosen = candidates[candidates.map { flowUses[$0] }.reduce(0, +) % candidates.count]
            case .miss: break
            }
        }
        guard let f = chosen else {
            let ranked = catalog.flows.indices.map { ($0, key.differences(from: catalog.flows[$0].matchKey)) }.sorted { $0.1.count < $1.1.count }.prefix(3)
            let detail = ranked.isEmpty ? "the session has no AReq"
                : ranked.map { "exchange #\(catalog.exchanges[catalog.flows[$0.0].areq].id) differs in "
                    + ($0.1.isEmpty ? "nothing but was already replayed (--repeat miss)" : $0.1.joined(separator: "; ")) }.joined(separator: " | ")
            return miss(req, detail: "no recorded AReq matches: " + detail, erroCode: "305", about: "AReq", message: areq)
        }
        flowUses[f] += 1
        let flow = catalog.flows[f]
        let x = catalog.exchanges[flow.areq]
        // IDs: the live ones echoed, the ACS's and DS's fresh from the seed.
        var rng = SeededRandom(seed: options.schedule.seed, stream: UInt64(bitPattern: x.id), index: UInt64(flowUses[f]))
        var map: [(String, String)] = []
        for key in ["threeDSServerTransID", "sdkTransID"] {
            if let r = flow.ids[key], let l = areq[key]?.stringValue { map.append((r, l)) }
        }
        for key in ["acsTransID", "dsTransID"] { if let r = flow.ids[key] { map.append((r, rng.uuid())) } }
        for key in ["notificationURL", "threeDSServerURL"] {
            if let r = flow.areqJSON[key]?.stringValue, let l = areq[key]?.stringValue, r != l { map.append((r, l)) }
        }
        // Servers the recording reached (the ACS) are written as the replayer's address for clients pointed at it directly.
        if !req.viaProxy || options.publicURL != nil {
            let mine = options.publicURL ?? selfURL
            for i in flow.followUps { if let o = ReplayURL.origin(catalog.exchanges[i].url), !map.contains(where: { $0.0 == o }) { map.append((o, mine)) } }
        }
        let lf = LiveFlow(flow: f, map: map, threeDSServerURL: areq["threeDSServerURL"]?.stringValue)
        guard var ares = flow.aresJSON.map({ rewrite($0, lf, &rng) }) else {
            return miss(req, detail: "recorded exchange #\(x.id) has no ARes to replay", erroCode: "305", about: "AReq", message: areq)
        }
        var note = "AReq: version, channel, category, card, order"
        let faults = faultsFor(flow.areq, type: ares["messageType"]?.stringValue ?? "ARes", lf)
        if let code = faults.compactMap({ if case let .erro(c) = $0 { return c }; return nil }).first {
            // The DS answers the AReq with an Erro instead: the transaction ends there.
            let erro = Erro.make(code: code, component: "D", description: ReplayEngine.erroDescription(code),
                                 detail: "fault injected by 3dstape replay (erro:\(code))", about: areq, messageType: "AReq",
                                 version: areq["messageVersion"]?.stringValue)
            var a = answer(flow.areq, body: erro.bytes, type: "ARes", lf, matchedBy: note + "; fault erro:\(code)")
            a.requestJSON = areq
            a.responseJSON = erro
            return applyTransport(faults, to: a)
        }
        for case let .transStatus(status) in faults { ares = ares.setting("transStatus", to: .string(status)) }
        if let signed = ares["acsSignedContent"]?.stringValue {
            do {
                var (content, cipher) = try freshChannel(signed, areq: areq, acsTransID: ares["acsTransID"]?.stringValue ?? "", lf,
                                                         faults: faults)
                if faults.contains(.badSignature) { content = ReplayEngine.flipSignatureBit(content) }
                ares = ares.setting("acsSignedContent", to: .string(content))
                lf.cipher = cipher
                channelKeys.withLock { $0[cipher.acsTransID.lowercased()] = cipher.cek }
                note += "; fresh app-channel keys"
            } catch {
                return miss(req, detail: "cannot set up the app channel for the live SDK: \(error)", erroCode: "305", about: "AReq", message: areq)
            }
        }
        if !flow.followUps.isEmpty || flow.rreq != nil {
            for (r, l) in map where flow.ids.values.contains(r) {
                live[l] = lf
                lf.keys.append(l)
            }
            for key in ["notificationURL", "threeDSServerURL"] {
                if let u = areq[key]?.stringValue, let o = ReplayURL.origin(u) { liveOrigins[o, default: 0] += 1; lf.keys.append("origin:" + o) }
            }
        }
        var answer = answer(flow.areq, body: ares.bytes, type: ares["messageType"]?.stringValue ?? "ARes", lf, matchedBy: note)
        answer.requestJSON = areq
        answer.responseJSON = ares
        if flow.followUps.isEmpty { plan(&answer, rreqOf: lf, after: flow.areq) }
        return applyTransport(faults, to: answer)
    }

    /// A new acsSignedContent for the live SDK: the recorded acsURL (rewritten), a fresh acsEphemPubKey, the live
    /// sdkEphemPubKey, signed by 3dstape's ACS certificate; and the ACS side of the channel.
    func freshChannel(_ recorded: String, areq: JSON, acsTransID: String, _ lf: LiveFlow, faults: [FaultAction] = []) throws -> (String, AppChannelCipher) {
        let acsURL = try catalog.flows[lf.flow].acsURL ?? ACSSignedContent(unverified: recorded).acsURL
        guard let sdkKeyJSON = areq["sdkEphemPubKey"], let sdkRef = areq["sdkReferenceNumber"]?.stringValue else {
            throw ReplayError("the live AReq has no sdkEphemPubKey or sdkReferenceNumber")
        }
        let (cipher, acsEphemPubKey) = try ACSChannel.open(sdkEphemPubKey: sdkKeyJSON, sdkReferenceNumber: sdkRef, acsTransID: acsTransID)
        // Faults: a foreign sdkEphemPubKey in the signed content, or a signer outside the DS root.
        let echoedKey = faults.contains(.wrongEphemeralKey) ? JWK(publicKey: try PrivateKey.generateP256().publicKey).json() : sdkKeyJSON
        let signer = faults.contains(.untrustedSigner) ? try untrustedIdentity() : identity
        let signed = try ACSSignedContent(acsEphemPubKey: acsEphemPubKey, sdkEphemPubKey: echoedKey, acsURL: lf.value(acsURL))
            .sign(key: signer.key, x5c: signer.x5c, algorithm: signer.signing)
        return (signed, cipher)
    }

    /// A self-signed ACS certificate that no DS root vouches for (the `untrusted-signer` fault), made once.
    private var untrusted: ReplayACSIdentity?
    func untrustedIdentity() throws -> ReplayACSIdentity {
        if let untrusted { return untrusted }
        let key = try PrivateKey.generateP256()
        let ca = try CertificateAuthority.selfSigned(commonName: "3dstape untrusted ACS (fault)", key: key)
        let id = ReplayACSIdentity(key: key, certificate: ca.certificate, signing: .es256)
        untrusted = id
        return id
    }

    /// The compact JWS with one bit of its signature flipped: the chain still validates, the signature does not.
    static func flipSignatureBit(_ compact: String) -> String {
        var parts = compact.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, var sig = Base64URL.decode(parts[2]), !sig.isEmpty else { return compact }
        sig[sig.count / 2] ^= 0x01
        parts[2] = Base64URL.encode(sig)
        return parts.joined(separator: ".")
    }

    // MARK: the rest of a transaction

    func appCReq(_ lf: LiveFlow, _ compact: JWE, _ req: LiveRequest) -> ReplayAnswer {
        guard var cipher = lf.cipher else {
            return miss(req, detail: "a CReq JWE for a transaction without an app channel", erroCode: "301", about: "CReq")
        }
        let creq: JSON
        do {
            creq = try cipher.openRequest(compact)
            lf.cipher = cipher
        } catch {
            let ids = JSON.object([("threeDSServerTransID", .string(lf.value(catalog.flows[lf.flow].ids["threeDSServerTransID"] ?? ""))),
                                   ("acsTransID", .string(cipher.acsTransID))])
            let erro = Erro.make(error.code, component: "A", description: "Data decryption failure", detail: error.message, about: ids,
                                 messageType: "CReq", version: catalog.flows[lf.flow].messageVersion)
            return ReplayAnswer(status: 200, headers: [("Content-Type", "application/json")], body: erro.bytes, matchedBy: "CReq refused",
                                miss: "CReq does not open: \(error.message)", delay: 0)
        }
        if let cancel = creq["challengeCancel"]?.stringValue, !recordedNextCancels(lf) {
            return cancelled(lf, creq: creq, cancel: cancel, req: req)
        }
        return followUp(lf, req, creq: creq)
    }

    /// Whether the recording's next CReq cancelled too (then the recording is followed as it is).
    func recordedNextCancels(_ lf: LiveFlow) -> Bool {
        let flow = catalog.flows[lf.flow]
        guard lf.next < flow.followUps.count else { return false }
        return catalog.exchanges[flow.followUps[lf.next]].messages.contains { $0.direction == "request" && $0.json?["challengeCancel"] != nil }
    }

    /// A live CReq that cancels where the recording did not: the ACS ends the challenge as the protocol says, with a
    /// final CRes N and an RReq N carrying the SDK's challengeCancel (01 cardholder, 08 SDK timeout …).
    func cancelled(_ lf: LiveFlow, creq: JSON, cancel: String, req: LiveRequest) -> ReplayAnswer {
        let flow = catalog.flows[lf.flow]
        guard var cipher = lf.cipher, let last = flow.followUps.last else {
            return miss(req, detail: "a cancelling CReq for a transaction without an app channel", erroCode: "301", about: "CReq")
        }
        let final = JSON.object(["threeDSServerTransID", "acsTransID", "sdkTransID"].compactMap { k in creq[k].map { (k, $0) } }
                                + [("challengeCompletionInd", .string("Y")), ("messageType", .string("CRes")),
                                   ("messageVersion", .string(flow.messageVersion)), ("transStatus", .string("N"))])
        let body: [UInt8]
        do { body = Array(try cipher.seal(final).utf8) } catch {
            return miss(req, detail: "cannot encrypt the CRes: \(error.message)", erroCode: "301", about: "CReq")
        }
        lf.cipher = cipher
        lf.next = flow.followUps.count
        var a = answer(last, body: body, type: "CRes", lf, matchedBy: "transaction: challengeCancel \(cancel) from the SDK; final CRes N",
                       headers: [("Content-Type", "application/jose; charset=UTF-8")])
        // transStatusReason 01 (card authentication failed) when the cardholder cancelled; none claimed for other causes.
        plan(&a, rreqOf: lf, after: last, override: .object([("transStatus", .string("N")), ("challengeCancel", .string(cancel))]
                                                             + (cancel == "01" ? [("transStatusReason", .string("01"))] : [])))
        if flow.rreq == nil { finish(lf) }
        return a
    }

    func followUp(_ lf: LiveFlow, _ req: LiveRequest, creq: JSON?, sessionData: String? = nil) -> ReplayAnswer {
        let flow = catalog.flows[lf.flow]
        let (path, _) = ReplayURL.pathAndQuery(req.target)
        let remaining = flow.followUps[min(lf.next, flow.followUps.count)...]
        guard let idx = remaining.firstIndex(where: { i in
            let x = catalog.exchanges[i]
            return x.method == req.method && ReplayURL.pathAndQuery(x.url).path == path
        }) else {
            let expected = remaining.first.map { "the recording continues with \(catalog.exchanges[$0].method) \(ReplayURL.pathAndQuery(catalog.exchanges[$0].url).path) (#\(catalog.exchanges[$0].id))" }
                ?? "the recorded transaction has no more exchanges"
            return miss(req, detail: "\(req.method) \(path) in transaction \(flow.ids["threeDSServerTransID"] ?? "?"): \(expected)",
                        erroCode: "301", about: creq == nil ? nil : "CReq")
        }
        lf.next = idx + 1
        let i = flow.followUps[idx]
        let x = catalog.exchanges[i]
        if let sessionData, let recorded = FormBody.parse(String(decoding: x.requestBody, as: UTF8.self))?
            .first(where: { $0.0 == "threeDSSessionData" })?.1, recorded != sessionData {
            lf.map.append((recorded, sessionData))
        }
        var rng = SeededRandom(seed: options.schedule.seed, stream: UInt64(bitPattern: x.id), index: UInt64(served[i]))
        var body: [UInt8]
        let cres = x.messages.first(where: { $0.direction == "response" && $0.location == "jwe" })
        let type: String? = cres != nil ? "CRes" : x.messages.first { $0.direction == "response" }?.type
        var headers = ReplayEngine.replayableHeaders(x.responseHeaders)
        let faults = faultsFor(i, type: type ?? path, lf)
        var rreqOverride: JSON?
        if let code = faults.compactMap({ if case let .erro(c) = $0 { return c }; return nil }).first {
            // The ACS answers with an Erro in clear, as ACSs do, and the challenge ends there.
            let about = JSON.object(["threeDSServerTransID", "acsTransID", "sdkTransID"].compactMap { k in
                flow.ids[k].map { (k, JSON.string(lf.value($0))) } })
            let erro = Erro.make(code: code, component: "A", description: ReplayEngine.erroDescription(code),
                                 detail: "fault injected by 3dstape replay (erro:\(code))", about: about, messageType: creq == nil ? nil : "CReq",
                                 version: flow.messageVersion)
            lf.next = flow.followUps.count
            finish(lf)
            var a = answer(i, body: erro.bytes, type: type ?? path, lf, matchedBy: "transaction: fault erro:\(code)")
            a.responseJSON = erro
            return applyTransport(faults, to: a)
        }
        if let cres, var cipher = lf.cipher {
            guard var plaintext = cres.json.map({ rewrite($0, lf, &rng) }), cres.isDecrypted else {
                return miss(req, detail: "recorded CRes #\(x.id) was not decrypted", erroCode: "301", about: "CReq")
            }
            if faults.contains(.acsTimeout) {
                // The ACS ends the challenge itself: a final CRes N, and an RReq N / 14 / challengeCancel 04.
                plaintext = .object(["threeDSServerTransID", "acsTransID", "sdkTransID"].compactMap { k in plaintext[k].map { (k, $0) } }
                                    + [("challengeCompletionInd", .string("Y")), ("messageType", .string("CRes")),
                                       ("messageVersion", .string(flow.messageVersion)), ("transStatus", .string("N"))])
                lf.next = flow.followUps.count
                rreqOverride = .object([("transStatus", .string("N")), ("transStatusReason", .string("14")), ("challengeCancel", .string("04"))])
            }
            for case let .transStatus(st) in faults where plaintext["challengeCompletionInd"]?.stringValue == "Y" {
                plaintext = plaintext.setting("transStatus", to: .string(st))
            }
            do {
                if faults.contains(.wrongKey) {
                    var stranger = AppChannelCipher(role: .acs, cek: Digest.randomBytes(32), acsTransID: cipher.acsTransID, enc: cipher.enc)
                    body = Array(try stranger.seal(plaintext).utf8)
                    _ = try cipher.seal(plaintext) // the real channel moves on as if the CRes had been sent
                } else {
                    body = Array(try cipher.seal(plaintext, counterOffset: faults.contains(.badCounter) ? 1 : 0).utf8)
                }
                lf.cipher = cipher
            } catch {
                return miss(req, detail: "cannot encrypt the CRes: \(error.message)", erroCode: "301", about: "CReq")
            }
        } else if cres != nil {
            return miss(req, detail: "a CReq for a transaction without an app channel", erroCode: "301", about: "CReq")
        } else if let json = try? JSON.parse(x.responseBody), json.isObject {
            body = rewrite(json, lf, &rng).bytes
        } else {
            body = Array(rewriteText(String(decoding: x.responseBody, as: UTF8.self), lf, &rng).utf8)
        }
        if headers.isEmpty { headers = [("Content-Type", "application/octet-stream")] }
        var a = answer(i, body: body, type: type ?? path, lf, matchedBy: "", headers: headers)
        a.matchedBy = "transaction: \(type ?? x.method + " " + path) #\(lf.typeCounts[type ?? path] ?? 1)"
        if lf.next >= flow.followUps.count {
            plan(&a, rreqOf: lf, after: i, override: rreqOverride)
            if flow.rreq == nil { finish(lf) }
        }
        return applyTransport(faults, to: a)
    }

    // MARK: faults

    /// The fault rules that hit this answer, their probabilities drawn from the seed (per rule, recorded exchange and
    /// occurrence, so that the same seed hits the same answers whatever the order of arrival).
    func faultsFor(_ i: Int, type: String?, _ lf: LiveFlow?) -> [FaultAction] {
        guard !options.faults.isEmpty else { return [] }
        let x = catalog.exchanges[i]
        let occurrence = type.map { t in (lf?.typeCounts[t] ?? 0) + 1 } ?? 1
        let a = ScheduledAnswer(recordedExchangeID: x.id, recordedWait: 0, messageType: type, occurrence: occurrence,
                                path: ReplayURL.pathAndQuery(x.url).path, servedBefore: served[i])
        return options.faults.enumerated().filter { n, rule in
            guard rule.match.applies(to: a) else { return false }
            guard rule.probability < 1 else { return true }
            var rng = SeededRandom(seed: options.schedule.seed ^ 0xFA17, stream: UInt64(bitPattern: x.id) &+ UInt64(n) &* 0x9E37, index: UInt64(served[i]))
            return rng.nextUnit() < rule.probability
        }.map(\.1.action)
    }

    /// Applies the transport and HTTP faults to an answer and lists every fault applied.
    func applyTransport(_ faults: [FaultAction], to answer: ReplayAnswer) -> ReplayAnswer {
        var a = answer
        a.faults = faults.map(\.description) + a.faults
        for f in faults {
            switch f {
            case .hang: a.hang = true
            case .reset: a.transport = .reset
            case .close: a.transport = .close
            case let .dribble(d): a.transport = .dribble(d)
            case let .delay(d): a.delay = d
            case let .status(code):
                a.status = code
                a.headers = [("Content-Type", "application/json")]
                a.body = JSON.object([("error", .string(HTTPResponseHead.reasonPhrase(code))),
                                      ("detail", .string("fault injected by 3dstape replay (status:\(code))"))]).bytes
                a.responseJSON = nil
            case let .truncate(n):
                a.transport = .raw(Array(HTTPReply(status: a.status, headers: a.headers, body: a.body).bytes(keepAlive: false).prefix(n)))
            case .malformed:
                a.transport = .raw(Array("HTTP/1.1 2OO 0K\r\nContent-Length: x\r\n\r\n".utf8) + a.body.prefix(16))
            default: break // 3DS faults are applied where the message is built
            }
        }
        return a
    }

    /// The errorDescription an EMV component writes for a code (SPEC Table A.4).
    static func erroDescription(_ code: String) -> String {
        switch code {
        case "101": return "Message received invalid"
        case "102": return "Message version number not supported"
        case "103": return "Sent messages limit exceeded"
        case "201": return "Required data element missing"
        case "202": return "Critical message extension not recognised"
        case "203": return "Format of one or more data elements is invalid"
        case "204": return "Duplicate data element"
        case "301": return "Transaction ID not recognised"
        case "302": return "Data decryption failure"
        case "303": return "Access denied, invalid endpoint"
        case "304": return "ISO code invalid"
        case "305": return "Transaction data not valid"
        case "306": return "Merchant category code (MCC) not valid for payment system"
        case "307": return "Serial number not valid"
        case "402": return "Transaction timed out"
        case "403": return "Transient system failure"
        case "404": return "Permanent system failure"
        case "405": return "System connection failure"
        default: return "Error"
        }
    }

    /// Plans the transaction's RReq on the answer that triggers it, with its faults (`drop-rreq`, `rreq-delay`,
    /// `trans-status`, `challenge-cancel`) and any fields an earlier fault decided (`acs-timeout`).
    func plan(_ answer: inout ReplayAnswer, rreqOf lf: LiveFlow, after trigger: Int, override: JSON? = nil) {
        guard let r = catalog.flows[lf.flow].rreq else { return }
        let faults = faultsFor(r, type: "RReq", nil)
        answer.faults += faults.map(\.description)
        guard var planned = planRReq(lf, after: trigger) else { return }
        if faults.contains(.dropRReq) {
            finish(lf)
            return
        }
        if var json = try? JSON.parse(planned.body) {
            for (k, v) in override?.objectMembers ?? [] { json = json.setting(k, to: v) }

            for f in faults {
                switch f {
                case let .transStatus(st): json = json.setting("transStatus", to: .string(st))
                case let .challengeCancel(c): json = json.setting("challengeCancel", to: .string(c))
                case let .rreqDelay(d): planned.after = d
                default: break
                }
            }
            if let st = json["transStatus"]?.stringValue, st != "Y", st != "A" {
                json = json.removing("authenticationValue").setting("eci", to: .string("07")) // a failed authentication carries no CAVV
            }
            planned.body = json.bytes
        }
        answer.rreq = planned
    }

    /// The recorded RReq, rewritten for the live transaction, sent to its threeDSServerURL at the recorded offset.
    func planRReq(_ lf: LiveFlow, after trigger: Int) -> PlannedRReq? {
        let flow = catalog.flows[lf.flow]
        guard let r = flow.rreq, let url = lf.threeDSServerURL,
              let json = catalog.exchanges[r].messages.first(where: { $0.direction == "request" && $0.type == "RReq" })?.json else {
            return nil
        }
        let x = catalog.exchanges[r], t = catalog.exchanges[trigger]
        var rng = SeededRandom(seed: options.schedule.seed, stream: UInt64(bitPattern: x.id), index: UInt64(served[r]))
        served[r] += 1
        let offset = max(0, x.requestStart - (t.done ?? t.requestStart))
        let after = options.schedule.delay(for: ScheduledAnswer(recordedExchangeID: x.id, recordedWait: offset, messageType: "RReq", occurrence: 1,
                                                                path: ReplayURL.pathAndQuery(x.url).path, servedBefore: served[r] - 1))
        return PlannedRReq(url: url, body: rewrite(json, lf, &rng).bytes, after: after, recordedExchangeID: x.id)
    }

    /// Called by the driver once the RReq of a transaction has been answered (or failed): the transaction is over.
    public func rreqDone(for liveServerTransID: String) {
        if let lf = live[liveServerTransID] { finish(lf) }
    }

    func finish(_ lf: LiveFlow) {
        for k in lf.keys {
            if k.hasPrefix("origin:") {
                let o = String(k.dropFirst(7))
                liveOrigins[o, default: 1] -= 1
                if liveOrigins[o] == 0 { liveOrigins[o] = nil }
            } else {
                live[k] = nil
            }
        }
        lf.keys = []
    }

    // MARK: non-3DS exchanges

    func plain(_ req: LiveRequest) -> ReplayAnswer {
        let (path, query) = ReplayURL.pathAndQuery(req.target)
        // Compared as it would have been stored: masked like the recording (card numbers, codes).
        let liveBody = catalog.masked ? ThreeDSContent.prepare(req.body, mask: true).stored : req.body
        var ranked: [(Int, [String])] = []
        for i in catalog.plain {
            let x = catalog.exchanges[i]
            let (rp, rq) = ReplayURL.pathAndQuery(x.url)
            var diff: [String] = []
            if x.method != req.method { diff.append("method: live \(req.method), recorded \(x.method)") }
            if rp != path { diff.append("path: live \(path), recorded \(rp)") }
            if rq != query { diff.append("query: live \(query.isEmpty ? "(none)" : query), recorded \(rq.isEmpty ? "(none)" : rq)") }
            diff += bodyDifferences(live: liveBody, recorded: x.requestBody)
            ranked.append((i, diff))
        }
        let equal = ranked.filter { $0.1.isEmpty }.map(\.0)
        if !equal.isEmpty {
            let key = "\(req.method) \(path)?\(query)#\(equal.first!)"
            let n = plainCursor[key, default: 0]
            var pick: Int?
            if n < equal.count { pick = equal[n] } else {
                switch options.repeatMode {
                case .last: pick = equal.last
                case .cycle: pick = equal[n % equal.count]
                case .miss: pick = nil
                }
            }
            if let i = pick {
                plainCursor[key] = n + 1
                let x = catalog.exchanges[i]
                var rng = SeededRandom(seed: options.schedule.seed, stream: UInt64(bitPattern: x.id), index: UInt64(served[i]))
                // The live request's own IDs and URLs, where they differ from the recorded request's, are echoed in the answer.
                var echo: [(String, String)] = []
                if let a = ReplayEngine.decodedBody(liveBody), let b = ReplayEngine.decodedBody(x.requestBody) {
                    ReplayEngine.echoPairs(live: a, recorded: b, keys: ReplayEngine.freshFields.union(options.ignoreFields), into: &echo)
                }
                let lf = LiveFlow(flow: -1, map: echo, threeDSServerURL: nil)
                let json = (try? JSON.parse(x.responseBody)).flatMap { $0.isObject ? $0 : nil }
                let body = json.map { rewrite($0, lf, &rng).bytes }
                    ?? (echo.isEmpty ? x.responseBody : Array(rewriteText(String(decoding: x.responseBody, as: UTF8.self), lf, &rng).utf8))
                return answer(i, body: body, type: x.messages.first { $0.direction == "response" }?.type, nil,
                              matchedBy: "method, path, query, body (occurrence \(n + 1) of \(equal.count))",
                              headers: ReplayEngine.replayableHeaders(x.responseHeaders), status: x.status ?? 502)
            }
        }
        let closest = ranked.sorted { $0.1.count < $1.1.count }.prefix(3)
        let detail = closest.isEmpty ? "the session has no other exchanges"
            : closest.map { "exchange #\(catalog.exchanges[$0.0].id) differs in " + ($0.1.isEmpty ? "nothing but every recording was served (--repeat miss)" : $0.1.joined(separator: "; ")) }
                .joined(separator: " | ")
        return miss(req, detail: "no recorded exchange matches \(req.method) \(path): \(detail)", erroCode: nil, about: nil)
    }

    /// Fields that are fresh on every run and never decide a match: the transaction IDs and the requestor's own URLs
    /// (in JSON bodies and in the base64url JSON of form fields such as threeDSMethodData).
    static let freshFields: Set<String> = ["threeDSServerTransID", "dsTransID", "acsTransID", "sdkTransID", "threeDSMethodNotificationURL",
                                           "notificationURL", "threeDSServerURL"]

    /// Structural differences between two bodies: JSON (and forms, with base64url JSON values decoded) compared member by
    /// member, ignoring the fresh fields and `--ignore-field`; anything else compared as bytes.
    func bodyDifferences(live: [UInt8], recorded: [UInt8]) -> [String] {
        if live == recorded { return [] }
        if let a = ReplayEngine.decodedBody(live), let b = ReplayEngine.decodedBody(recorded) {
            var out: [String] = []
            ReplayEngine.jsonDiff(a, b, path: "body", ignore: options.ignoreFields.union(ReplayEngine.freshFields), into: &out)
            return out
        }
        if live.isEmpty && recorded.isEmpty { return [] }
        return ["body: \(live.count) bytes live, \(recorded.count) recorded, not equal"]
    }

    /// A body as JSON: a JSON body, or a form whose fields become members (base64url JSON values decoded).
    static func decodedBody(_ bytes: [UInt8]) -> JSON? {
        let first = bytes.first { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }
        if first == UInt8(ascii: "{") || first == UInt8(ascii: "[") { return try? JSON.parse(bytes) }
        guard bytes.count < 1 << 20, bytes.contains(UInt8(ascii: "=")), let fields = FormBody.parse(String(decoding: bytes, as: UTF8.self)) else { return nil }
        return .object(fields.map { name, value in
            if value.count > 8, let b = Base64URL.decode(value), let j = try? JSON.parse(b), j.isObject { return (name, j) }
            return (name, .string(value))
        })
    }

    /// The (recorded, live) string pairs at the same place in two bodies, for the given member names.
    static func echoPairs(live: JSON, recorded: JSON, keys: Set<String>, into out: inout [(String, String)]) {
        guard let lm = live.objectMembers, recorded.isObject else { return }
        for (k, lv) in lm {
            guard let rv = recorded[k] else { continue }
            if keys.contains(k), let l = lv.stringValue, let r = rv.stringValue, l != r, !r.isEmpty, !out.contains(where: { $0.0 == r }) {
                out.append((r, l))
            } else if lv.isObject {
                echoPairs(live: lv, recorded: rv, keys: keys, into: &out)
            }
        }
    }

    static func jsonDiff(_ a: JSON, _ b: JSON, path: String, ignore: Set<String>, into out: inout [String]) {
        guard out.count < 8 else { return }
        if let am = a.objectMembers, let bm = b.objectMembers {
            let keys = (am.map(\.0) + bm.map(\.0).filter { k in !am.contains { $0.0 == k } })
            for k in keys where !ignore.contains(k) {
                let av = a[k], bv = b[k]
                switch (av, bv) {
                case let (x?, y?): jsonDiff(x, y, path: path + "." + k, ignore: ignore, into: &out)
                case (nil, _): out.append("\(path).\(k): missing live")
                case (_, nil): out.append("\(path).\(k): not recorded")
                }
            }
            return
        }
        if case let .array(ax) = a, case let .array(bx) = b {
            if ax.count != bx.count { out.append("\(path): \(ax.count) items live, \(bx.count) recorded"); return }
            for (n, (x, y)) in zip(ax, bx).enumerated() { jsonDiff(x, y, path: "\(path)[\(n)]", ignore: ignore, into: &out) }
            return
        }
        if a != b { out.append("\(path): live \(a.compact.prefix(40)), recorded \(b.compact.prefix(40))") }
    }

    // MARK: answers

    func answer(_ i: Int, body: [UInt8], type: String?, _ lf: LiveFlow?, matchedBy: String,
                headers: [(String, String)] = [("Content-Type", "application/json")], status: Int? = nil) -> ReplayAnswer {
        let x = catalog.exchanges[i]
        let before = served[i]
        served[i] = before + 1
        var occurrence = 1
        if let lf, let type {
            occurrence = lf.typeCounts[type, default: 0] + 1
            lf.typeCounts[type] = occurrence
        }
        let delay = options.schedule.delay(for: ScheduledAnswer(recordedExchangeID: x.id, recordedWait: catalog.recordedWait(i), messageType: type,
                                                                occurrence: occurrence, path: ReplayURL.pathAndQuery(x.url).path,
                                                                servedBefore: before))
        return ReplayAnswer(status: status ?? x.status ?? 200, headers: headers, body: body, recordedExchangeID: x.id, matchedBy: matchedBy,
                            delay: delay)
    }

    func miss(_ req: LiveRequest, detail: String, erroCode: String?, about type: String?, message: JSON? = nil) -> ReplayAnswer {
        let d = String(detail.prefix(2000))
        switch options.onMiss {
        case let .forward(base):
            let (path, query) = ReplayURL.pathAndQuery(req.target)
            return ReplayAnswer(status: 0, headers: [], body: [], miss: d, delay: 0,
                                forwardTo: base.trimmingCharacters(in: CharacterSet(charactersIn: "/")) + path + (query.isEmpty ? "" : "?" + query))
        case .erro where erroCode != nil:
            let erro = Erro.make(code: erroCode!, component: type == "AReq" ? "D" : "A",
                                 description: erroCode == "305" ? "Transaction data not valid" : "Transaction ID not recognised",
                                 detail: d, about: message, messageType: type, version: message?["messageVersion"]?.stringValue ?? "2.2.0")
            return ReplayAnswer(status: 200, headers: [("Content-Type", "application/json")], body: erro.bytes, miss: d, delay: 0)
        default:
            let body = JSON.object([("error", .string("no recorded exchange matches this request")), ("detail", .string(d))])
            return ReplayAnswer(status: 404, headers: [("Content-Type", "application/json")], body: body.bytes, miss: d, delay: 0)
        }
    }

    /// Recorded response headers worth sending again (framing and dates are the replayer's own).
    static func replayableHeaders(_ headers: [(String, String)]) -> [(String, String)] {
        let drop: Set<String> = ["content-length", "transfer-encoding", "connection", "date", "content-encoding", "keep-alive", "server"]
        return headers.filter { !drop.contains($0.0.lowercased()) }
    }

    // MARK: rewriting

    func replaceAll(_ s: String, _ lf: LiveFlow) -> String {
        var out = s
        for (r, l) in lf.map where out.contains(r) { out = out.replacingOccurrences(of: r, with: l) }
        return out
    }

    /// Every string in `json` with recorded IDs and URLs replaced by live ones; masked values regenerated.
    func rewrite(_ json: JSON, _ lf: LiveFlow, _ rng: inout SeededRandom) -> JSON {
        switch json {
        case let .string(s): return .string(lf.value(s))
        case let .array(items): return .array(items.map { rewrite($0, lf, &rng) })
        case let .object(members):
            return .object(members.map { k, v in
                if k == "authenticationValue", v.stringValue == "***" { return (k, .string(ReplayEngine.cavv(&rng))) }
                return (k, rewrite(v, lf, &rng))
            })
        default: return json
        }
    }

    /// HTML or text: base64url JSON in form values (a cres, a creq) rewritten inside, then IDs and URLs replaced.
    func rewriteText(_ text: String, _ lf: LiveFlow, _ rng: inout SeededRandom) -> String {
        var out = ""
        var rest = Substring(text)
        while let r = rest.range(of: "value=\"") {
            out += rest[..<r.upperBound]
            rest = rest[r.upperBound...]
            guard let end = rest.firstIndex(of: "\"") else { break }
            let value = String(rest[..<end])
            if value.count > 16, let b = Base64URL.decode(value), let json = try? JSON.parse(b), json.isObject {
                out += Base64URL.encode(rewrite(json, lf, &rng).bytes)
            } else {
                out += value
            }
            rest = rest[end...]
        }
        out += rest
        return replaceAll(out, lf)
    }

    /// A well-formed authentication value (20 bytes, base64) derived from the seed, in place of a masked one.
    static func cavv(_ rng: inout SeededRandom) -> String { Data(rng.bytes(20)).base64EncodedString() }
}

/// A replay problem with a message for the user.
public struct ReplayError: Error, CustomStringConvertible {
    public let description: String
    public init(_ d: String) { description = d }
}
