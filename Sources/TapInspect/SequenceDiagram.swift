import Foundation
import TapCore
import TapEMV
import TapRecording
import TapStore

/// A session (or one transaction) as a sequence diagram: the 3DS roles (SDK, Browser, 3DS Server, DS, ACS) and any
/// other hosts, each exchange a request arrow and a response arrow labelled with message types, statuses and
/// timings. One model, drawn as Mermaid text (`export --format mermaid`) and as SVG (`3dstape web`).
public struct SequenceDiagram: Sendable {
    /// A lifeline: a short alias and the name shown.
    public struct Participant: Sendable, Equatable {
        public var alias: String
        public var name: String
        public init(alias: String, name: String) {
            self.alias = alias
            self.name = name
        }
    }

    /// What a line of the diagram is.
    public enum Item: Sendable {
        /// A note spanning two lifelines (the start of a transaction).
        case note(from: String, to: String, text: String)
        /// A message from one lifeline to another.
        case arrow(Arrow)
    }

    /// One message between lifelines.
    public struct Arrow: Sendable {
        public enum Kind: Sendable { case request, response, failure }
        public var from: String
        public var to: String
        public var label: String
        public var kind: Kind
        public var exchangeID: Int64
        /// Milliseconds since the first exchange of the diagram (requests) or the exchange's duration (responses).
        public var timing: String
        /// In a replay session: the recorded exchange the answer came from, its delays and faults.
        public var replay: String?
        public init(from: String, to: String, label: String, kind: Kind, exchangeID: Int64, timing: String, replay: String? = nil) {
            self.from = from
            self.to = to
            self.label = label
            self.kind = kind
            self.exchangeID = exchangeID
            self.timing = timing
            self.replay = replay
        }
    }

    public var participants: [Participant]
    public var items: [Item]

    /// The roles in the order they are drawn, with their aliases.
    static let roles: [Participant] = [.init(alias: "SDK", name: "SDK"), .init(alias: "Browser", name: "Browser"),
                                       .init(alias: "Server", name: "3DS Server"), .init(alias: "DS", name: "DS"),
                                       .init(alias: "ACS", name: "ACS")]

    /// The diagram of these exchanges (a whole session, or the exchanges of one transaction), in their order; the
    /// transactions' notes are numbered from `firstTransaction` (a transaction drawn alone keeps its number in the session).
    public init(_ exchanges: [StoredExchange], firstTransaction: Int = 1) {
        let transactions = ThreeDSTransaction.group(exchanges)
        var txOf: [Int64: (Int, ThreeDSTransaction)] = [:]
        for (i, t) in transactions.enumerated() {
            for m in t.messages where txOf[m.exchangeID] == nil { txOf[m.exchangeID] = (i + firstTransaction, t) }
        }
        var originRole: [String: String] = [:] // URL origin → role, learnt from 3DS exchanges
        var items: [Item] = []
        var used: [String] = []
        var others: [String: String] = [:] // origin → alias for hosts without a 3DS role
        func use(_ alias: String) { if !used.contains(alias) { used.append(alias) } }
        var announced = Set<Int>()
        var lastFromBrowser = false
        let t0 = exchanges.first?.requestStart ?? 0
        for x in exchanges {
            let req = x.messages.first { $0.messageDirection == .request && $0.type != nil }
            let browserTx = txOf[x.id]?.1.channel == .browser
            var pair = req.flatMap { Self.roles(for: $0, exchangeURL: x.url, browser: browserTx, known: originRole) }
            let origin = Self.origin(x.url)
            if let pair { originRole[origin] = pair.1 }
            if pair == nil {
                let to = originRole[origin] ?? others[origin] ?? {
                    let alias = "H\(others.count + 1)"
                    others[origin] = alias
                    return alias
                }()
                pair = (to == "ACS" || lastFromBrowser ? "Browser" : "Client", to)
            }
            let (from, to) = pair!
            use(from); use(to)
            if let (n, t) = txOf[x.id], announced.insert(n).inserted {
                let channel = t.channel?.shortName ?? "?"
                items.append(.note(from: from, to: to, text: "transaction \(n) · \(channel) \(t.version ?? "") · \(t.outcome)"))
            }
            let reqLabel = x.messages.filter { $0.messageDirection == .request }.map(Self.label).joined(separator: ", ")
            let respLabel = x.messages.filter { $0.messageDirection == .response }.map(Self.label).joined(separator: ", ")
            let path = URLComponents(string: x.url)?.path ?? x.url
            items.append(.arrow(Arrow(from: from, to: to, label: reqLabel.isEmpty ? "\(x.method) \(path)" : reqLabel, kind: .request,
                                      exchangeID: x.id, timing: "T+\(String(format: "%.0f", (x.requestStart - t0) * 1000)) ms", replay: nil)))
            let took = x.durationMs.map { String(format: "%.1f ms", $0) } ?? ""
            if let e = x.error, x.status == nil {
                items.append(.arrow(Arrow(from: to, to: from, label: e, kind: .failure, exchangeID: x.id, timing: took,
                                          replay: x.replay.map(Self.describe))))
            } else {
                let status = x.status.map { "HTTP \($0)" } ?? "no response"
                items.append(.arrow(Arrow(from: to, to: from, label: respLabel.isEmpty ? status : respLabel, kind: .response,
                                          exchangeID: x.id, timing: took, replay: x.replay.map(Self.describe))))
            }
            lastFromBrowser = from == "Browser" || to == "Browser"
        }
        var participants = Self.roles.filter { used.contains($0.alias) }
        if used.contains("Client") { participants.insert(Participant(alias: "Client", name: "Client"), at: 0) }
        for (origin, alias) in others.sorted(by: { $0.value < $1.value }) where used.contains(alias) {
            participants.append(Participant(alias: alias, name: origin))
        }
        self.participants = participants
        self.items = items
    }

    /// Who sends and who answers an exchange, from its request message.
    static func roles(for m: RecordedMessage, exchangeURL: String, browser: Bool, known: [String: String]) -> (String, String)? {
        switch m.kind {
        case .aReq, .pReq: return ("Server", "DS")
        case .rReq: return ("DS", "Server")
        case .cReq: return m.messageLocation == .jwe ? ("SDK", "ACS") : ("Browser", "ACS")
        case .cRes: return ("Browser", "Server") // a browser final CRes posted to the notificationURL
        case .erro:
            let to = known[origin(exchangeURL)] ?? "DS"
            return (to == "ACS" ? (browser ? "Browser" : "SDK") : "Server", to)
        default: return nil
        }
    }

    /// A message's label: its type, transStatus, errorCode, challengeCancel, and where it was carried.
    static func label(_ m: RecordedMessage) -> String {
        var s = m.type ?? "?"
        if m.isEncrypted { return s + " (JWE)" }
        if let v = m.json?[.transStatus]?.stringValue { s += " " + v }
        if let e = m.json?[.errorCode]?.stringValue { s += " " + e }
        if let c = m.json?[.challengeCancel]?.stringValue { s += " cancel " + c }
        if m.messageLocation.isForm { s += " (form)" }
        return s
    }

    /// A replayed answer's provenance: `from #12 · scheduled 120.0 ms · actual 121.3 ms · fault …`.
    static func describe(_ r: ReplayAnnotation) -> String {
        var parts: [String] = []
        if let id = r.recordedExchangeID { parts.append("from #\(id)" + (r.matchedBy.map { " (\($0))" } ?? "")) }
        if let miss = r.miss { parts.append("miss: \(miss)") }
        if let s = r.scheduledDelayMs { parts.append(String(format: "scheduled %.1f ms", s)) }
        if let a = r.actualDelayMs { parts.append(String(format: "actual %.1f ms", a)) }
        if let f = r.faults, !f.isEmpty { parts.append("fault \(f)") }
        return parts.joined(separator: " · ")
    }

    static func origin(_ url: String) -> String {
        guard let c = URLComponents(string: url), let host = c.host else { return url }
        return "\(c.scheme ?? "http")://\(host)\(c.port.map { ":\($0)" } ?? "")"
    }
}
