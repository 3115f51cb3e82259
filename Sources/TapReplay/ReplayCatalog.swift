import Foundation
import TapCore
import TapEMV
import TapRecording
import TapStore

/// A recorded session, read once and arranged for replay: its 3DS transactions (the AReq, the exchanges tied to it
/// in order, the RReq) and every other exchange.
public struct ReplayCatalog: Sendable {
    public let path: String
    /// Whether the session was stored masked (the default): live requests are then compared masked too.
    public let masked: Bool
    public let exchanges: [StoredExchange]
    public let flows: [RecordedFlow]
    /// Indices into `exchanges` of those tied to no 3DS transaction.
    public let plain: [Int]

    /// One recorded 3DS transaction.
    public struct RecordedFlow: Sendable {
        /// Index of the AReq exchange.
        public var areq: Int
        public var areqJSON: JSON
        public var aresJSON: JSON?
        /// Indices of the exchanges served for this transaction after the ARes (CReqs, forms, 3DS Method …), in order.
        public var followUps: [Int] = []
        /// Index of the RReq exchange the ACS sent, if any.
        public var rreq: Int?
        /// The recorded transaction IDs (threeDSServerTransID, dsTransID, acsTransID, sdkTransID) present.
        public var ids: [String: String] = [:]

        public var messageVersion: String { matchKey.messageVersion }
        public var deviceChannel: String { matchKey.deviceChannel }
        public var messageCategory: String { matchKey.messageCategory }
        /// The card as stored (first 6 / last 4).
        public var maskedCard: String { matchKey.maskedCard }
        /// What a live AReq must share with this recording to replay it.
        public let matchKey: AReqKey
        /// The acsURL of the recorded acsSignedContent (app challenges), read once.
        public let acsURL: String?
        /// The recorded AReq's URLs a live one replaces (notificationURL, threeDSServerURL), read once.
        public let liveURLFields: [(key: String, recorded: String)]
        /// The recorded ARes serialised once, open where a replay writes something else (`answerTemplate`).
        public internal(set) var aresTemplate: JSONTemplate?

        /// The ARes's template: open at every string that is a recorded ID or starts with a URL the live transaction
        /// may replace (the AReq's notificationURL and threeDSServerURL, the origins of the exchanges that follow),
        /// at masked authentication values, and at the top-level acsSignedContent. A string left open that the live
        /// transaction does not change is filled with itself.
        func answerTemplate(_ exchanges: [StoredExchange]) -> JSONTemplate? {
            guard let ares = aresJSON else { return nil }
            let recordedIDs = Set(ids.values)
            let urls = ["notificationURL", "threeDSServerURL"].compactMap { areqJSON[$0]?.stringValue }
                + followUps.compactMap { ReplayURL.origin(exchanges[$0].url) }
            return JSONTemplate(ares) { key, value, depth in
                recordedIDs.contains(value) || urls.contains { value.hasPrefix($0) }
                    || (key == "authenticationValue" && MaskVerdict.isSecretMask(value)) || (depth == 1 && key == "acsSignedContent")
            }
        }

        init(areq: Int, areqJSON: JSON, aresJSON: JSON?) {
            self.areq = areq
            self.areqJSON = areqJSON
            self.aresJSON = aresJSON
            matchKey = AReqKey(areqJSON)
            acsURL = aresJSON?["acsSignedContent"]?.stringValue.flatMap { try? ACSSignedContent(unverified: $0).acsURL }
            liveURLFields = ["notificationURL", "threeDSServerURL"].compactMap { k in areqJSON[k]?.stringValue.map { (k, $0) } }
        }
    }

    /// The fields that identify a transaction across runs: messageVersion, deviceChannel, messageCategory and
    /// the masked card. Everything else in an AReq (IDs, keys, dates, device data) is fresh every run.
    public struct AReqKey: Hashable, Sendable {
        public var messageVersion: String
        public var deviceChannel: String
        public var messageCategory: String
        public var maskedCard: String

        public init(_ areq: JSON) { self.init(field: { areq[$0] }) }

        /// The key of a live AReq, its members read where they lie.
        public init(_ areq: JSONMembers) { self.init(field: { areq[$0] }) }

        init(field: (String) -> JSON?) {
            messageVersion = field("messageVersion")?.stringValue ?? ""
            deviceChannel = field("deviceChannel")?.stringValue ?? ""
            messageCategory = field("messageCategory")?.stringValue ?? ""
            maskedCard = field("acctNumber")?.stringValue.map(Masking.maskPAN) ?? ""
        }

        /// Each field that differs from `recorded`, as `name: live X, recorded Y`.
        public func differences(from recorded: AReqKey) -> [String] {
            var out: [String] = []
            for (name, a, b) in [("messageVersion", messageVersion, recorded.messageVersion), ("deviceChannel", deviceChannel, recorded.deviceChannel),
                                 ("messageCategory", messageCategory, recorded.messageCategory), ("acctNumber", maskedCard, recorded.maskedCard)]
            where a != b {
                out.append("\(name): live \(a.isEmpty ? "(none)" : a), recorded \(b.isEmpty ? "(none)" : b)")
            }
            return out
        }
    }

    /// The message types of every recorded answer (ARes, CRes, RReq …), for checking rules before a replay.
    public var answerTypes: Set<String> {
        Set(exchanges.flatMap { x in x.messages.filter { $0.messageDirection == .response || $0.kind == .rReq }.compactMap(\.type) })
    }

    /// Flows by their match key, in recorded order.
    public let flowsByKey: [AReqKey: [Int]]

    /// Reads `path`; refuses an empty session.
    public static func load(path: String) throws -> ReplayCatalog {
        let reader = try SessionReader(path: path)
        let exchanges = try reader.exchanges()
        guard !exchanges.isEmpty else { throw SessionFileError("\(path) holds no exchanges; there is nothing to replay") }
        return ReplayCatalog(path: path, exchanges: exchanges, masked: reader.meta["masked"] != "no")
    }

    public init(path: String, exchanges: [StoredExchange], masked: Bool = true) {
        self.path = path
        self.masked = masked
        self.exchanges = exchanges
        var flows: [RecordedFlow] = []
        var flowByID: [String: Int] = [:]
        var tied = Set<Int>()
        for (i, x) in exchanges.enumerated() {
            if let areq = x.messages.first(where: { $0.messageDirection == .request && $0.kind == .aReq })?.json,
               areq["threeDSServerTransID"]?.stringValue != nil {
                let ares = x.messages.first { $0.messageDirection == .response }?.json
                var flow = RecordedFlow(areq: i, areqJSON: areq, aresJSON: ares)
                for key in ReplayCatalog.idKeys {
                    if let v = ares?[key]?.stringValue ?? areq[key]?.stringValue { flow.ids[key] = v }
                }
                flows.append(flow)
                for v in flow.ids.values { flowByID[v] = flows.count - 1 }
                tied.insert(i)
                continue
            }
            // Tie by a known ID in any 3DS message of the exchange, else anywhere in its URL or request body.
            var owner: Int?
            for m in x.messages {
                // An app-channel message still encrypted is stored as its JWE header, whose kid is the acsTransID.
                let keys = m.messageLocation == .jwe ? ReplayCatalog.idKeys + ["kid"] : ReplayCatalog.idKeys
                for key in keys { if let v = m.json?[key]?.stringValue, let f = flowByID[v] { owner = f; break } }
                if owner != nil { break }
            }
            if owner == nil {
                let text = x.url + " " + String(decoding: x.requestBody, as: UTF8.self)
                owner = flowByID.first { text.contains($0.key) }?.value
            }
            guard let f = owner else { continue }
            tied.insert(i)
            if x.messages.contains(where: { $0.messageDirection == .request && $0.kind == .rReq }) {
                flows[f].rreq = i
            } else if !ReplayCatalog.isLiveEndpoint(x, of: flows[f]) {
                flows[f].followUps.append(i)
            }
        }
        for i in flows.indices { flows[i].aresTemplate = flows[i].answerTemplate(exchanges) }
        self.flows = flows
        flowsByKey = Dictionary(grouping: flows.indices, by: { flows[$0].matchKey })
        plain = exchanges.indices.filter { !tied.contains($0) }
    }

    static let idKeys = ["threeDSServerTransID", "dsTransID", "acsTransID", "sdkTransID"]

    /// An exchange sent to the transaction's own 3DS Server or merchant page (threeDSServerURL, notificationURL):
    /// in a replay those are live, so the replayer does not play them.
    static func isLiveEndpoint(_ x: StoredExchange, of flow: RecordedFlow) -> Bool {
        for key in ["notificationURL", "threeDSServerURL"] {
            if let u = flow.areqJSON[key]?.stringValue, let base = ReplayURL.origin(u), ReplayURL.origin(x.url) == base { return true }
        }
        return false
    }

    /// One line per transaction whose app-channel messages were never decrypted: replay needs their plaintexts.
    public func undecryptedProblems() -> [String] {
        var lines: [String] = []
        for flow in flows where DeviceChannel(wire: flow.deviceChannel) == .app {
            let stuck = flow.followUps.filter { i in
                exchanges[i].messages.contains(where: \.isEncrypted)
            }
            guard !stuck.isEmpty else { continue }
            let id = flow.ids["threeDSServerTransID"] ?? "?"
            let numbers = stuck.map { "#\(exchanges[$0].id)" }.joined(separator: ", ")
            lines.append("transaction \(id): app-channel CReq/CRes \(numbers) not decrypted; record with "
                         + "'record --decrypt substitute', or run '3dstape decrypt \(path) --keylog FILE'")
        }
        return lines
    }

    /// The recorded wait of an exchange's answer: first response byte minus request sent (seconds).
    public func recordedWait(_ i: Int) -> Double {
        let x = exchanges[i]
        if let first = x.firstByte, let sent = x.requestSent ?? x.upstreamConnect ?? Optional(x.requestStart) { return max(0, first - sent) }
        if let done = x.done { return max(0, done - x.requestStart) }
        return 0
    }
}

/// Small URL helpers for matching (no percent-decoding: recorded and live URLs are compared as sent).
public enum ReplayURL {
    /// `scheme://authority` of an absolute URL, lowercased; nil for origin-form.
    public static func origin(_ url: String) -> String? {
        let u = Array(url.utf8)
        guard let sep = schemeEnd(u) else { return nil }
        var end = sep + 3
        while end < u.count, u[end] != 0x2F, u[end] != 0x3F, u[end] != 0x23 { end += 1 }
        return String(decoding: u[0..<end].map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// The path and the query of an absolute or origin-form target.
    public static func pathAndQuery(_ target: String) -> (path: String, query: String) {
        let u = Array(target.utf8)
        var start = 0
        if let sep = schemeEnd(u) {
            start = sep + 3
            while start < u.count, u[start] != 0x2F, u[start] != 0x3F { start += 1 }
        }
        var q = start
        while q < u.count, u[q] != 0x3F { q += 1 }
        let path = q > start ? String(decoding: u[start..<q], as: UTF8.self) : "/"
        let query = q < u.count ? String(decoding: u[(q + 1)...], as: UTF8.self) : ""
        return (path, query)
    }

    /// The index of `://` when `u` starts with a scheme.
    static func schemeEnd(_ u: [UInt8]) -> Int? {
        var i = 0
        while i < u.count, i < 16 {
            let c = u[i]
            if c == 0x3A { return i + 2 < u.count && u[i + 1] == 0x2F && u[i + 2] == 0x2F && i > 0 ? i : nil }
            guard (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || (c >= 0x30 && c <= 0x39) || c == 0x2B || c == 0x2D || c == 0x2E else { return nil }
            i += 1
        }
        return nil
    }
}
