import Foundation
import TapCore
import TapEMV
import TapRecording
import TapStore

/// One answer a replay of a catalog gives (or the RReq it sends), as fault and delay rules see it: its message type
/// (the path for an untyped answer within a transaction, as the engine counts them), its occurrence among the answers of
/// that type in its transaction, its recorded exchange and path. Rules are checked against these before a replay starts.
public struct AnswerSlot: Sendable, Equatable {
    /// Where the answer comes from, which decides the faults that can change it.
    public enum Kind: Sendable, Equatable {
        /// The ARes of a transaction (`signed`: with acsSignedContent, an app challenge).
        case ares(signed: Bool)
        /// An answer later in a transaction: a CRes, a challenge page, a 3DS Method answer.
        case followUp
        /// The RReq the replayer sends as the ACS.
        case rreq
        /// An exchange tied to no 3DS transaction.
        case plain
    }
    public let kind: Kind
    /// Index into the catalog's exchanges.
    public let exchange: Int
    public let recordedExchangeID: Int64
    public let messageType: String?
    /// `messageType` typed (nil for none, or one the specification does not name).
    var messageKind: MessageKind? { messageType.flatMap(MessageKind.init(rawValue:)) }
    public let occurrence: Int
    public let path: String

    /// `CRes #2 (recorded exchange #9)`.
    public var label: String {
        (messageType.map { "\($0) #\(occurrence)" } ?? "the answer") + " (recorded exchange #\(recordedExchangeID))"
    }

    func matched(by match: DelayRule.Match) -> Bool {
        match.applies(to: ScheduledAnswer(recordedExchangeID: recordedExchangeID, recordedWait: 0, messageType: messageType,
                                          occurrence: occurrence, path: path, servedBefore: 0))
    }
}

extension ReplayCatalog {
    /// Every answer a replay of this session can give, in recorded order, typed and counted as the engine does.
    /// Exchanges to a transaction's own 3DS Server or merchant page are forwarded live and have none.
    public var answerSlots: [AnswerSlot] {
        var slots: [AnswerSlot] = []
        func path(_ i: Int) -> String { ReplayURL.pathAndQuery(exchanges[i].url).path }
        for flow in flows {
            var counts: [String: Int] = [:]
            func add(_ kind: AnswerSlot.Kind, _ i: Int, _ type: String) {
                counts[type, default: 0] += 1
                slots.append(AnswerSlot(kind: kind, exchange: i, recordedExchangeID: exchanges[i].id, messageType: type,
                                        occurrence: counts[type]!, path: path(i)))
            }
            add(.ares(signed: flow.aresJSON?["acsSignedContent"]?.stringValue != nil), flow.areq, flow.aresJSON?["messageType"]?.stringValue ?? "ARes")
            for i in flow.followUps {
                let x = exchanges[i]
                let type = x.messages.contains { $0.messageDirection == .response && $0.messageLocation == .jwe } ? "CRes"
                    : x.messages.first { $0.messageDirection == .response }?.type
                add(.followUp, i, type ?? path(i))
            }
            if let r = flow.rreq {
                slots.append(AnswerSlot(kind: .rreq, exchange: r, recordedExchangeID: exchanges[r].id, messageType: "RReq", occurrence: 1, path: path(r)))
            }
        }
        for i in plain {
            slots.append(AnswerSlot(kind: .plain, exchange: i, recordedExchangeID: exchanges[i].id,
                                    messageType: exchanges[i].messages.first { $0.messageDirection == .response }?.type, occurrence: 1, path: path(i)))
        }
        return slots
    }
}

extension FaultAction {
    /// Whether this action changes the answer at all (the engine applies each action only where it means something).
    func canChange(_ slot: AnswerSlot) -> Bool {
        switch self {
        case .hang, .reset, .close, .dribble, .delay, .status, .truncate, .malformed: return slot.kind != .rreq
        case .erro: return slot.kind != .rreq && slot.kind != .plain
        case .transStatus:
            if case .ares = slot.kind { return true }
            return slot.kind == .rreq || (slot.kind == .followUp && slot.messageKind == .cRes)
        case .challengeCancel, .dropRReq, .rreqDelay: return slot.kind == .rreq
        case .badSignature, .untrustedSigner, .wrongEphemeralKey: return slot.kind == .ares(signed: true)
        case .badCounter, .wrongKey, .acsTimeout: return slot.kind == .followUp && slot.messageKind == .cRes
        case .pxpError, .pxpState, .scaExemption, .authRefused, .authFailed, .tpErrorcode, .jwtBadSignature:
            return slot.kind == .plain && (gatewayPaths ?? []).contains(slot.path) // the engine changes them where it answers plain exchanges
        }
    }

    /// The answers this action can change, in words, for the refusal of a rule that covers none of them.
    var changes: String {
        switch self {
        case .hang, .reset, .close, .dribble, .delay, .status, .truncate, .malformed:
            return "answers the replayer sends, not the RReq it sends itself (use rreq-delay or drop-rreq)"
        case .erro: return "an ARes or a later answer of a 3DS transaction"
        case .transStatus: return "ARes, CRes or RReq"
        case .challengeCancel, .dropRReq, .rreqDelay: return "RReq"
        case .badSignature, .untrustedSigner, .wrongEphemeralKey: return "an app-channel ARes (one with acsSignedContent)"
        case .badCounter, .wrongKey, .acsTimeout: return "app-channel CRes"
        case .pxpError, .pxpState, .scaExemption, .authRefused, .authFailed, .tpErrorcode, .jwtBadSignature:
            return "the answers of " + (gatewayPaths ?? []).joined(separator: " or ") + " (match them by path:)"
        }
    }
}

/// The answers of one catalog, indexed for rules: which answers a match covers, and why one covers none.
public struct RuleCoverage: Sendable {
    public let catalog: ReplayCatalog
    public let slots: [AnswerSlot]
    private let byType: [String: [Int]]
    private let byExchange: [Int64: [Int]]
    private let byPath: [String: [Int]]

    public init(_ catalog: ReplayCatalog) {
        self.catalog = catalog
        slots = catalog.answerSlots
        var t: [String: [Int]] = [:], x: [Int64: [Int]] = [:], p: [String: [Int]] = [:]
        for (n, s) in slots.enumerated() {
            if let m = s.messageType { t[m, default: []].append(n) }
            x[s.recordedExchangeID, default: []].append(n)
            p[s.path, default: []].append(n)
        }
        (byType, byExchange, byPath) = (t, x, p)
    }

    /// Indices into `slots` of the answers `match` covers.
    public func covered(by match: DelayRule.Match) -> [Int] {
        switch match {
        case let .messageType(t): return byType[t] ?? []
        case let .occurrence(t, n): return (byType[t] ?? []).filter { slots[$0].occurrence == n }
        case let .exchange(id): return byExchange[id] ?? []
        case let .path(p): return byPath[p] ?? []
        }
    }

    /// Why `match` covers no answer of this session (nil when it covers some).
    public func whyNone(_ match: DelayRule.Match) -> String? {
        guard covered(by: match).isEmpty else { return nil }
        switch match {
        case let .messageType(t), let .occurrence(t, _):
            guard let present = byType[t], !present.isEmpty else {
                let types = Set(slots.compactMap(\.messageType).filter { !$0.hasPrefix("/") }).sorted()
                return "the session has no \(t) (it has \(types.isEmpty ? "no 3DS answers" : types.joined(separator: ", ")))"
            }
            let most = present.map { slots[$0].occurrence }.max() ?? 0
            return "the session has at most \(most) \(t) per transaction"
        case let .exchange(id):
            guard catalog.exchanges.contains(where: { $0.id == id }) else { return "the session has no exchange \(id)" }
            return "exchange \(id) went to the transaction's own 3DS Server or merchant page, which a replay forwards live and never answers"
        case let .path(p):
            guard catalog.exchanges.contains(where: { ReplayURL.pathAndQuery($0.url).path == p }) else { return "no recorded request has the path \(p)" }
            return "requests to \(p) go to a transaction's own 3DS Server or merchant page, which a replay forwards live and never answers"
        }
    }

    /// Why a fault rule can never change anything on this session (nil when it can): its match covers no answer, or
    /// only answers its action does not change.
    public func whyNever(_ rule: FaultRule) -> String? {
        if let why = whyNone(rule.match) { return why }
        let covered = self.covered(by: rule.match)
        guard !covered.contains(where: { rule.action.canChange(slots[$0]) }) else { return nil }
        let what = Set(covered.map { n -> String in
            let s = slots[n]
            switch s.kind {
            case .plain: return "exchanges outside any 3DS transaction"
            case .ares(signed: false): return "\(s.messageType ?? "ARes") without acsSignedContent (browser or 3RI)"
            default: return s.messageType ?? "the answer of exchange \(s.recordedExchangeID)"
            }
        }).sorted()
        return "\(rule.action) changes only \(rule.action.changes); \(rule.match) matches only \(what.joined(separator: ", "))"
    }
}
