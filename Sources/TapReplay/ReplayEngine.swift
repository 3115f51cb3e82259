import Foundation
import TapCore
import TapCrypto
import TapEMV
import TapHTTP
import TapHTTPService
import TapJOSE
import TapRecording
import TapStore

/// The replay decisions, free of I/O: a live request in, the answer, its delay and any RReq out. It matches AReqs
/// to recorded transactions (3DS-aware), ties the rest of a transaction to the same recording, rewrites IDs, acts as the
/// ACS on the app channel with fresh keys, and matches other exchanges on method, path, query and body.
///
/// `@unchecked Sendable`: all state except `channelKeys` is used by one thread (the replayer's loop); `channelKeys`
/// is `Locked` because the session writer reads it to store the live CReq/CRes in clear.
public final class ReplayEngine: ChannelKeySource, @unchecked Sendable {
    public let catalog: ReplayCatalog
    public let options: ReplayOptions
    let identity: ReplayACSIdentity
    var flowUses: [Int]
    var live: [String: LiveFlow] = [:]
    var liveOrigins: [String: Int] = [:]
    /// How often each recorded exchange (by index) has been served.
    var served: [Int]
    var plainCursor: [String: Int] = [:]
    private let channelKeys = Locked<[String: [UInt8]]>([:])
    /// Transactions that have ended, by the IDs they were live under, so that what a conformant client still sends after
    /// the end (an Erro, a challengeCancel CReq after its Erro) is answered as an ACS would and not taken for a miss.
    /// The most recent `endedLimit` are kept (oldest forgotten first): memory stays bounded however long the replay runs.
    var ended: [String: LiveFlow] = [:]
    var endedOrder: [(ids: [String], flow: LiveFlow)] = []
    var endedOrderStart = 0
    static let endedLimit = 4096

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
        /// The transaction's RReq is planned (or dropped by a fault): one per transaction, whatever ends it.
        var rreqPlanned = false
        /// Why the transaction ended (`the SDK's Erro 402`, `the RReq`), once it has.
        var endedBy: String?
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
            // On UTF-8 bytes: URLs, where String.hasPrefix's Unicode comparison cost more than the rest of the rewrite.
            for (r, l) in prefixes where s.utf8.starts(with: r.utf8) {
                return l + String(decoding: s.utf8.dropFirst(r.utf8.count), as: UTF8.self)
            }
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
            return .forward(to: req.target, matchedBy: "live endpoint of the transaction (forwarded)")
        }
        let first = req.body.first { $0 != 0x20 && $0 != 0x09 && $0 != 0x0D && $0 != 0x0A }
        // The members located, not built: an AReq's answer reads a dozen of its forty.
        if first == UInt8(ascii: "{"), let json = try? JSONMembers(req.body) {
            let kind = MessageKind(json["messageType"])
            if kind == .aReq { return aReq(json, req, selfURL: selfURL) }
            if kind == .erro, let lf = ["acsTransID", "threeDSServerTransID"].lazy
                .compactMap({ json[$0]?.stringValue }).compactMap({ self.live[$0] }).first {
                // The SDK's own Erro, posted in clear to the acsURL: acknowledged as an ACS does, and the challenge is over.
                // The ACS's RReq then says why: challengeCancel 08 when the SDK timed out (Erro 402), 06 otherwise; unless
                // it is already on its way (an Erro about the final CRes, as after bad-counter on it): one RReq per transaction.
                let code = json["errorCode"]?.stringValue ?? "?"
                var a = ReplayAnswer(status: 200, headers: [], body: [], matchedBy: "SDK Erro \(code) acknowledged; the transaction ends", delay: 0)
                a.closing = true
                let flow = catalog.flows[lf.flow]
                if flow.rreq != nil, !flow.followUps.isEmpty {
                    lf.next = flow.followUps.count
                    plan(&a, rreqOf: lf, after: flow.followUps.last ?? flow.areq,
                         override: [.transStatus(.notAuthenticated), .challengeCancel(code == "402" ? "08" : "06")])
                }
                finish(lf, endedBy: "the SDK's Erro \(code)")
                return a
            }
            if kind == .erro, let lf = ["acsTransID", "threeDSServerTransID"].lazy
                .compactMap({ json[$0]?.stringValue }).compactMap({ self.ended[$0] }).first {
                // An Erro for a transaction already over (the SDK rejected the final CRes after the RReq went out):
                // acknowledged as an ACS does; nothing more happens.
                let code = json["errorCode"]?.stringValue ?? "?"
                var a = ReplayAnswer(status: 200, headers: [], body: [],
                                     matchedBy: "SDK Erro \(code) after \(lf.endedBy ?? "the end of the transaction"): acknowledged as an ACS", delay: 0)
                a.closing = true
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
        // An app-channel CReq is parsed from the body's bytes; only other bodies are made text.
        if req.body.withUnsafeBufferPointer({ b in b.reduce(0) { $0 + ($1 == 0x2E ? 1 : 0) } }) == 4, let jwe = try? JWE(compact: req.body) {
            if let kid = jwe.keyID, let lf = live[kid] { return appCReq(lf, jwe, req) }
            if let kid = jwe.keyID, let lf = ended[kid] {
                if let a = cReqAfterEnd(lf, jwe) { return a }
                return miss(req, detail: "app-channel CReq for acsTransID \(kid), whose transaction ended with \(lf.endedBy ?? "its last answer"); "
                            + "after the end an ACS expects at most a challengeCancel", erroCode: "301", about: "CReq")
            }
            return miss(req, detail: "app-channel CReq for acsTransID \(jwe.keyID ?? "(no kid)"), which is no live transaction of this replay",
                        erroCode: "301", about: "CReq")
        }
        // Decoded from a contiguous buffer (an ArraySlice takes the standard library's slow path) and trimmed on bytes.
        let text = req.body.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0.prefix(64 * 1024)), as: UTF8.self) }
            .trimmingWhitespace
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

    func aReq(_ areq: JSONMembers, _ req: LiveRequest, selfURL: String) -> ReplayAnswer {
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
            return miss(req, detail: "no recorded AReq matches: " + detail, erroCode: "305", about: "AReq", message: areq.tree)
        }
        flowUses[f] += 1
        let flow = catalog.flows[f]
        let recordedID = catalog.exchanges[flow.areq].id
        // IDs: the live ones echoed, the ACS's and DS's fresh from the seed.
        var rng = SeededRandom(seed: options.schedule.seed, stream: UInt64(bitPattern: recordedID), index: UInt64(flowUses[f]))
        var map: [(String, String)] = []
        for key in ["threeDSServerTransID", "sdkTransID"] {
            if let r = flow.ids[key], let l = areq[key]?.stringValue { map.append((r, l)) }
        }
        for key in ["acsTransID", "dsTransID"] { if let r = flow.ids[key] { map.append((r, rng.uuid())) } }
        for (key, r) in flow.liveURLFields {
            if let l = areq[key]?.stringValue, r != l { map.append((r, l)) }
        }
        // Servers the recording reached (the ACS) are written as the replayer's address for clients pointed at it directly.
        if !req.viaProxy || options.publicURL != nil {
            let mine = options.publicURL ?? selfURL
            for i in flow.followUps { if let o = ReplayURL.origin(catalog.exchanges[i].url), !map.contains(where: { $0.0 == o }) { map.append((o, mine)) } }
        }
        let lf = LiveFlow(flow: f, map: map, threeDSServerURL: areq["threeDSServerURL"]?.stringValue)
        guard let recordedARes = flow.aresJSON else {
            return miss(req, detail: "recorded exchange #\(recordedID) has no ARes to replay", erroCode: "305", about: "AReq", message: areq.tree)
        }
        let aresType = recordedARes["messageType"]?.stringValue ?? "ARes"
        var note = "AReq: version, channel, category, card, order"
        let faults = faultsFor(flow.areq, type: aresType, lf)
        if let code = faults.compactMap({ if case let .erro(c) = $0 { return c }; return nil }).first {
            // The DS answers the AReq with an Erro instead: the transaction ends there.
            let erro = Erro.make(code: code, component: "D", description: ReplayEngine.erroDescription(code),
                                 detail: "fault injected by 3dstape replay (erro:\(code))", about: areq.tree, messageType: "AReq",
                                 version: areq["messageVersion"]?.stringValue)
            let a = answer(flow.areq, body: erro.bytes, type: "ARes", lf, matchedBy: note + "; fault erro:\(code)")
            return applyTransport(faults, to: a)
        }
        var signedContent: String?
        if let signed = recordedARes["acsSignedContent"]?.stringValue {
            do {
                var (content, cipher) = try freshChannel(signed, areq: areq, acsTransID: lf.value(recordedARes["acsTransID"]?.stringValue ?? ""), lf,
                                                         faults: faults)
                if faults.contains(.badSignature) { content = SignatureFault.flippingSignatureBit(content) }
                signedContent = content
                lf.cipher = cipher
                channelKeys.withLock { $0[cipher.acsTransID.lowercased()] = cipher.cek }
                note += "; fresh app-channel keys"
            } catch {
                return miss(req, detail: "cannot set up the app channel for the live SDK: \(error)", erroCode: "305", about: "AReq", message: areq.tree)
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
        let body = aresBody(flow, lf, &rng, transStatus: faults.compactMap { if case let .transStatus(s) = $0 { return s }; return nil },
                            signedContent: signedContent)
        var answer = answer(flow.areq, body: body, type: aresType, lf, matchedBy: note)
        if flow.followUps.isEmpty { plan(&answer, rreqOf: lf, after: flow.areq) }
        return applyTransport(faults, to: answer)
    }

    /// A new acsSignedContent for the live SDK: the recorded acsURL (rewritten), a fresh acsEphemPubKey, the live
    /// sdkEphemPubKey, signed by 3dstape's ACS certificate; and the ACS side of the channel.
    func freshChannel(_ recorded: String, areq: JSONMembers, acsTransID: String, _ lf: LiveFlow, faults: [FaultAction] = []) throws -> (String, AppChannelCipher) {
        let acsURL = try catalog.flows[lf.flow].acsURL ?? ACSSignedContent(unverified: recorded).acsURL
        guard let sdkKeyJSON = areq["sdkEphemPubKey"], let sdkRef = areq["sdkReferenceNumber"]?.stringValue else {
            throw ReplayError("the live AReq has no sdkEphemPubKey or sdkReferenceNumber")
        }
        let (cipher, acsEphemPubKey) = try ACSChannel.open(sdkEphemPubKey: sdkKeyJSON, sdkReferenceNumber: sdkRef, acsTransID: acsTransID)
        // Faults: a foreign sdkEphemPubKey in the signed content, or a signer outside the DS root.
        let echoedKey = faults.contains(.wrongEphemeralKey) ? JWK(publicKey: try PrivateKey.generateP256().publicKey).json() : sdkKeyJSON
        let content = ACSSignedContent(acsEphemPubKey: acsEphemPubKey, sdkEphemPubKey: echoedKey, acsURL: lf.value(acsURL))
        if faults.contains(.untrustedSigner) {
            let stranger = try untrustedIdentity()
            return (try content.sign(key: stranger.key, protectedHeader: stranger.protectedHeader, algorithm: stranger.signing), cipher)
        }
        return (try content.sign(signer: try preparedSigner(), protectedHeader: identity.protectedHeader), cipher)
    }

    /// The ACS identity's key prepared for signing, made on the first challenge (used on the loop thread only).
    var identitySigner: PreparedSigner?
    func preparedSigner() throws -> PreparedSigner {
        if let identitySigner { return identitySigner }
        let s = try PreparedSigner(key: identity.key, algorithm: identity.signing)
        identitySigner = s
        return s
    }

    /// A self-signed ACS certificate that no DS root vouches for (the `untrusted-signer` fault), made once.
    var untrusted: ReplayACSIdentity?
    func untrustedIdentity() throws -> ReplayACSIdentity {
        if let untrusted { return untrusted }
        let key = try PrivateKey.generateP256()
        let ca = try CertificateAuthority.selfSigned(commonName: "3dstape untrusted ACS (fault)", key: key)
        let id = ReplayACSIdentity(key: key, certificate: ca.certificate, signing: .es256)
        untrusted = id
        return id
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
        var a: ReplayAnswer
        if let cancel = creq["challengeCancel"]?.stringValue, !recordedNextCancels(lf) {
            a = cancelled(lf, creq: creq, cancel: cancel, req: req)
        } else {
            a = followUp(lf, req, creq: creq)
        }
        a.requestPlaintext = creq
        return a
    }

    /// Whether the recording's next CReq cancelled too (then the recording is followed as it is).
    func recordedNextCancels(_ lf: LiveFlow) -> Bool {
        let flow = catalog.flows[lf.flow]
        guard lf.next < flow.followUps.count else { return false }
        return catalog.exchanges[flow.followUps[lf.next]].messages.contains { $0.messageDirection == .request && $0.json?["challengeCancel"] != nil }
    }

    /// A live CReq that cancels where the recording did not: the ACS ends the challenge as the protocol says, with a
    /// final CRes N and an RReq N carrying the SDK's challengeCancel (01 cardholder, 08 SDK timeout …).
    func cancelled(_ lf: LiveFlow, creq: JSON, cancel: String, req: LiveRequest) -> ReplayAnswer {
        let flow = catalog.flows[lf.flow]
        guard let last = flow.followUps.last else {
            return miss(req, detail: "a cancelling CReq for a transaction without an app channel", erroCode: "301", about: "CReq")
        }
        let (body, sealed): ([UInt8], JSON)
        do { (body, sealed) = try finalCResN(lf, answering: creq) } catch {
            return miss(req, detail: error.description, erroCode: "301", about: "CReq")
        }
        lf.next = flow.followUps.count
        var a = answer(last, body: body, type: "CRes", lf, matchedBy: "transaction: challengeCancel \(cancel) from the SDK; final CRes N",
                       headers: [("Content-Type", "application/jose; charset=UTF-8")])
        a.responsePlaintext = sealed
        // transStatusReason 01 (card authentication failed) when the cardholder cancelled; none claimed for other causes.
        plan(&a, rreqOf: lf, after: last, override: [.transStatus(.notAuthenticated), .challengeCancel(cancel)]
                                                    + (ChallengeCancel(wire: cancel) == .cardholderCancelled ? [.transStatusReason("01")] : []))
        if flow.rreq == nil { finish(lf, endedBy: "challengeCancel \(cancel)") }
        return a
    }

    /// The final CRes with transStatus N an ACS sends to end a challenge the SDK cancelled, sealed on the transaction's channel.
    func finalCResN(_ lf: LiveFlow, answering creq: JSON) throws(ReplayError) -> (body: [UInt8], plaintext: JSON) {
        guard var cipher = lf.cipher else { throw ReplayError("a cancelling CReq for a transaction without an app channel") }
        let final = ThreeDSMessage.finalCRes(ids: MessageIDs(of: creq, [.threeDSServerTransID, .acsTransID, .sdkTransID]),
                                             version: MessageVersion(wire: catalog.flows[lf.flow].messageVersion), transStatus: .notAuthenticated)
        do {
            let s = try cipher.sealed(final)
            lf.cipher = cipher
            return (Array(s.compact.utf8), s.plaintext)
        } catch {
            throw ReplayError("cannot encrypt the CRes: \(error.message)")
        }
    }

    /// An app-channel CReq for a transaction that has ended. A challengeCancel CReq (an SDK that timed out sends Erro 402
    /// and then challengeCancel 08, best effort) is answered as an ACS would, with a final CRes N, and no second RReq: the
    /// one the end planned stands. Any other CReq, or one that does not open, is left to the caller as a miss (nil).
    func cReqAfterEnd(_ lf: LiveFlow, _ compact: JWE) -> ReplayAnswer? {
        guard var cipher = lf.cipher, let creq = try? cipher.openRequest(compact), let cancel = creq["challengeCancel"]?.stringValue,
              let last = catalog.flows[lf.flow].followUps.last else { return nil }
        lf.cipher = cipher
        guard let (body, sealed) = try? finalCResN(lf, answering: creq) else { return nil }
        var a = answer(last, body: body, type: "CRes", lf,
                       matchedBy: "challengeCancel \(cancel) after \(lf.endedBy ?? "the end of the transaction"): answered as an ACS (final CRes N)",
                       headers: [("Content-Type", "application/jose; charset=UTF-8")])
        a.requestPlaintext = creq
        a.responsePlaintext = sealed
        a.closing = true
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
        let cres = x.messages.first(where: { $0.messageDirection == .response && $0.messageLocation == .jwe })
        let type: String? = cres != nil ? "CRes" : x.messages.first { $0.messageDirection == .response }?.type
        var headers = ReplayEngine.replayableHeaders(x.responseHeaders)
        let faults = faultsFor(i, type: type ?? path, lf)
        var rreqOverride: [MessageChange] = []
        if let code = faults.compactMap({ if case let .erro(c) = $0 { return c }; return nil }).first {
            // The ACS answers with an Erro in clear, as ACSs do, and the challenge ends there.
            let about = JSON.object(["threeDSServerTransID", "acsTransID", "sdkTransID"].compactMap { k in
                flow.ids[k].map { (k, JSON.string(lf.value($0))) } })
            let erro = Erro.make(code: code, component: "A", description: ReplayEngine.erroDescription(code),
                                 detail: "fault injected by 3dstape replay (erro:\(code))", about: about, messageType: creq == nil ? nil : "CReq",
                                 version: flow.messageVersion)
            lf.next = flow.followUps.count
            finish(lf, endedBy: "the ACS's Erro \(code) (fault)")
            let a = answer(i, body: erro.bytes, type: type ?? path, lf, matchedBy: "transaction: fault erro:\(code)")
            return applyTransport(faults, to: a)
        }
        var sealedCRes: JSON?
        if let cres, var cipher = lf.cipher {
            guard var plaintext = cres.json.map({ rewrite($0, lf, &rng) }), cres.decryptionState?.isDecrypted == true else {
                return miss(req, detail: "recorded CRes #\(x.id) was not decrypted", erroCode: "301", about: "CReq")
            }
            if faults.contains(.acsTimeout) {
                // The ACS ends the challenge itself: a final CRes N, and an RReq N / 14 / challengeCancel 04.
                plaintext = ThreeDSMessage.finalCRes(ids: MessageIDs(of: plaintext, [.threeDSServerTransID, .acsTransID, .sdkTransID]),
                                                     version: MessageVersion(wire: flow.messageVersion), transStatus: .notAuthenticated)
                lf.next = flow.followUps.count
                rreqOverride = [.transStatus(.notAuthenticated), .transStatusReason("14"), .challengeCancel("04")]
            }
            for case let .transStatus(st) in faults where plaintext.completesChallenge {
                plaintext = plaintext.applying([.transStatus(TransStatus(wire: st))])
            }
            do {
                if faults.contains(.wrongKey) {
                    var stranger = AppChannelCipher(role: .acs, cek: Digest.randomBytes(32), acsTransID: cipher.acsTransID, enc: cipher.enc)
                    body = Array(try stranger.seal(plaintext).utf8)
                    _ = try cipher.seal(plaintext) // the real channel moves on as if the CRes had been sent
                } else {
                    let s = try cipher.sealed(plaintext, counterOffset: faults.contains(.badCounter) ? 1 : 0)
                    body = Array(s.compact.utf8)
                    sealedCRes = s.plaintext
                }
                // A CRes that never leaves (hang, reset, close) does not move the ACS's counter: the final CRes N an ACS
                // sends for the SDK's cancel then carries the counter the SDK expects.
                if !faults.contains(where: { $0 == .hang || $0 == .reset || $0 == .close }) { lf.cipher = cipher }
            } catch {
                return miss(req, detail: "cannot encrypt the CRes: \(error.message)", erroCode: "301", about: "CReq")
            }
        } else if cres != nil {
            return miss(req, detail: "a CReq for a transaction without an app channel", erroCode: "301", about: "CReq")
        } else if let json = try? JSON.parse(x.responseBody), json.isObject {
            body = rewrite(json, lf, &rng).bytes
        } else {
            body = Array(rewriteText(String(decoding: x.responseBody, as: UTF8.self), lf, &rng,
                                     contentType: headers.first { $0.0.caseInsensitiveEquals("Content-Type") }?.1).utf8)
        }
        if headers.isEmpty { headers = [("Content-Type", "application/octet-stream")] }
        var a = answer(i, body: body, type: type ?? path, lf, matchedBy: "", headers: headers)
        a.responsePlaintext = sealedCRes
        a.matchedBy = "transaction: \(type ?? x.method + " " + path) #\(lf.typeCounts[type ?? path] ?? 1)"
        if lf.next >= flow.followUps.count {
            plan(&a, rreqOf: lf, after: i, override: rreqOverride)
            if flow.rreq == nil { finish(lf, endedBy: "the final \(type ?? "answer")") }
        }
        return applyTransport(faults, to: a)
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
            return .forward(to: base.trimmingCharacters(in: CharacterSet(charactersIn: "/")) + path + (query.isEmpty ? "" : "?" + query), miss: d)
        case .erro where erroCode != nil:
            let erro = Erro.make(code: erroCode!, component: type.flatMap(MessageKind.init(rawValue:)) == .aReq ? "D" : "A",
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
        headers.filter { !notReplayed.contains($0.0.lowercased()) }
    }
    static let notReplayed: Set<String> = ["content-length", "transfer-encoding", "connection", "date", "content-encoding", "keep-alive", "server"]

}
