import Foundation
import TapCore
import TapStore

/// What a fault rule does to the answer it matches: at the TCP, HTTP or 3DS layer.
public enum FaultAction: Sendable, Equatable, CustomStringConvertible {
    // transport
    case hang, reset, close
    case dribble(Double), delay(Double)
    // HTTP
    case status(Int), truncate(Int), malformed
    // 3DS
    case erro(String), transStatus(String), challengeCancel(String)
    case badSignature, untrustedSigner, wrongEphemeralKey, badCounter, wrongKey
    case dropRReq, rreqDelay(Double), acsTimeout
    // gateways (PXP-style /pxp/…, Trust Payments-style /tp/jwt/)
    /// A PXP error answer in the gateway's shape: its HTTP status and `{"errorCode", "message", "correlationId"}`.
    case pxpError(String)
    /// The `state` of a PXP pre-initiation or authorisation answer.
    case pxpState(String)
    /// A PXP pre-initiation answer that waives SCA: `scaMandated` false and this exemption applicable.
    case scaExemption(String)
    /// The authorisation refused (PXP state Refused; Trust Payments AUTH errorcode 70000) or failed (PXP state Failed;
    /// Trust Payments AUTH errorcode 60010).
    case authRefused, authFailed
    /// A Trust Payments response list whose response for this request type carries this errorcode (and field), re-signed.
    case tpErrorcode(type: String, code: String, field: String?)
    /// A Trust Payments response JWT whose HS256 signature does not verify.
    case jwtBadSignature

    /// Parses `hang`, `status:503`, `erro:402`, `dribble:2s` …; nil for anything unknown or malformed.
    public static func parse(_ text: String) -> FaultAction? { try? read(text) }

    /// Parses an action, or says what is wrong: an unknown action, or the allowed values of a known one's argument
    /// (a duration from 0 to 24 hours, a status from 100 to 599 …).
    public static func read(_ text: String) throws(ReplayError) -> FaultAction {
        let (name, arg): (String, String?) = {
            guard let c = text.firstIndex(of: ":") else { return (text, nil) }
            return (String(text[..<c]), String(text[text.index(after: c)...]))
        }()
        func duration(_ a: String) throws(ReplayError) -> Double {
            do { return try CheckedDuration.parse(a) } catch { throw ReplayError("\(name):D: \(error)") }
        }
        switch (name, arg) {
        case ("hang", nil): return .hang
        case ("reset", nil): return .reset
        case ("close", nil): return .close
        case ("dribble", let a?): return .dribble(try duration(a))
        case ("delay", let a?): return .delay(try duration(a))
        case ("status", let a?):
            guard let n = Int(a), (100...599).contains(n) else { throw ReplayError("status:CODE: expected an HTTP status from 100 to 599") }
            return .status(n)
        case ("truncate", let a?):
            guard let n = Int(a), n >= 0 else { throw ReplayError("truncate:BYTES: expected a whole number of bytes, 0 or more") }
            return .truncate(n)
        case ("malformed", nil): return .malformed
        case ("erro", let a?):
            guard a.count == 3, let n = Int(a), (101...405).contains(n) else { throw ReplayError("erro:CODE: expected a three-digit error code from 101 to 405") }
            return .erro(a)
        case ("trans-status", let a?):
            guard FaultAction.transStatuses.contains(a) else { throw ReplayError("trans-status:X: expected one of \(FaultAction.transStatuses.joined(separator: ", "))") }
            return .transStatus(a)
        case ("challenge-cancel", let a?):
            guard FaultAction.cancelCodes.contains(a) else { throw ReplayError("challenge-cancel:NN: expected 01 to 08") }
            return .challengeCancel(a)
        case ("bad-signature", nil): return .badSignature
        case ("untrusted-signer", nil): return .untrustedSigner
        case ("wrong-ephemeral-key", nil): return .wrongEphemeralKey
        case ("bad-counter", nil): return .badCounter
        case ("wrong-key", nil): return .wrongKey
        case ("drop-rreq", nil): return .dropRReq
        case ("rreq-delay", let a?): return .rreqDelay(try duration(a))
        case ("acs-timeout", nil): return .acsTimeout
        case ("pxp-error", let a?):
            guard GatewayFaults.pxpErrors[a] != nil else {
                throw ReplayError("pxp-error:CODE: expected one of \(GatewayFaults.pxpErrors.keys.sorted().joined(separator: ", "))")
            }
            return .pxpError(a)
        case ("pxp-state", let a?):
            guard GatewayFaults.pxpStates.contains(a) else { throw ReplayError("pxp-state:STATE: expected one of \(GatewayFaults.pxpStates.joined(separator: ", "))") }
            return .pxpState(a)
        case ("sca-exemption", let a?):
            guard GatewayFaults.isName(a) else { throw ReplayError("sca-exemption:NAME: expected an exemption name of letters, such as LowValue") }
            return .scaExemption(a)
        case ("auth-refused", nil): return .authRefused
        case ("auth-failed", nil): return .authFailed
        case ("tp-errorcode", let a?): return try GatewayFaults.tpErrorcode(a)
        case ("jwt-bad-signature", nil): return .jwtBadSignature
        default:
            throw ReplayError("unknown action '\(text)'; expected hang, reset, close, dribble:D, delay:D, status:CODE, "
                              + "truncate:BYTES, malformed, erro:CODE, trans-status:X, challenge-cancel:NN, bad-signature, untrusted-signer, "
                              + "wrong-ephemeral-key, bad-counter, wrong-key, drop-rreq, rreq-delay:D, acs-timeout, pxp-error:CODE, pxp-state:STATE, "
                              + "sca-exemption:NAME, auth-refused, auth-failed, tp-errorcode:REQUESTTYPE=CODE[/FIELD] or jwt-bad-signature")
        }
    }

    static let transStatuses = ["Y", "N", "U", "A", "C", "D", "R", "I"]
    static let cancelCodes = ["01", "02", "03", "04", "05", "06", "07", "08"]

    public var description: String {
        switch self {
        case .hang: return "hang"
        case .reset: return "reset"
        case .close: return "close"
        case let .dribble(d): return "dribble:\(ReplayFaults.text(d))"
        case let .delay(d): return "delay:\(ReplayFaults.text(d))"
        case let .status(c): return "status:\(c)"
        case let .truncate(n): return "truncate:\(n)"
        case .malformed: return "malformed"
        case let .erro(c): return "erro:\(c)"
        case let .transStatus(s): return "trans-status:\(s)"
        case let .challengeCancel(c): return "challenge-cancel:\(c)"
        case .badSignature: return "bad-signature"
        case .untrustedSigner: return "untrusted-signer"
        case .wrongEphemeralKey: return "wrong-ephemeral-key"
        case .badCounter: return "bad-counter"
        case .wrongKey: return "wrong-key"
        case .dropRReq: return "drop-rreq"
        case let .rreqDelay(d): return "rreq-delay:\(ReplayFaults.text(d))"
        case .acsTimeout: return "acs-timeout"
        case let .pxpError(c): return "pxp-error:\(c)"
        case let .pxpState(st): return "pxp-state:\(st)"
        case let .scaExemption(e): return "sca-exemption:\(e)"
        case .authRefused: return "auth-refused"
        case .authFailed: return "auth-failed"
        case let .tpErrorcode(type, code, field): return "tp-errorcode:\(type)=\(code)" + (field.map { "/\($0)" } ?? "")
        case .jwtBadSignature: return "jwt-bad-signature"
        }
    }

    /// The message types an action can change, for checking rules against a session before the replay starts
    /// (nil: any answer).
    var appliesTo: Set<String>? {
        switch self {
        case .hang, .reset, .close, .dribble, .delay, .status, .truncate, .malformed, .erro: return nil
        case .pxpError, .pxpState, .scaExemption, .authRefused, .authFailed, .tpErrorcode, .jwtBadSignature: return [] // gateway answers: by path
        case .transStatus: return ["ARes", "CRes", "RReq"]
        case .challengeCancel, .dropRReq, .rreqDelay: return ["RReq"]
        case .badSignature, .untrustedSigner, .wrongEphemeralKey: return ["ARes"]
        case .badCounter, .wrongKey, .acsTimeout: return ["CRes"]
        }
    }
}

/// One `--fault MATCH=ACTION[@P]` rule: which answers (as for `--delay`), what happens to them, and how often.
public struct FaultRule: Sendable, Equatable, CustomStringConvertible {
    public var match: DelayRule.Match
    public var action: FaultAction
    /// The probability that a matching answer is hit, drawn from `--seed` (1 = always).
    public var probability: Double
    public var note: String?

    public init(match: DelayRule.Match, action: FaultAction, probability: Double = 1, note: String? = nil) {
        self.match = match
        self.action = action
        self.probability = probability
        self.note = note
    }

    public var description: String {
        "\(match)=\(action)" + (probability < 1 ? "@\(probability)" : "")
    }

    /// Parses `MATCH=ACTION[@P]`, e.g. `CRes#2=bad-counter`, `ARes=erro:402@0.5`, `path:/acs/challenge=hang`.
    public static func parse(_ text: String) throws(ReplayError) -> FaultRule {
        guard let eq = text.firstIndex(of: "=") else {
            throw ReplayError("--fault \(text): expected MATCH=ACTION[@P], e.g. CRes#2=bad-counter or ARes=erro:402@0.5")
        }
        let lhs = String(text[..<eq])
        var rhs = String(text[text.index(after: eq)...])
        var p = 1.0
        if let at = rhs.lastIndex(of: "@") {
            guard let v = Double(rhs[rhs.index(after: at)...]), v > 0, v <= 1 else {
                throw ReplayError("--fault \(text): the probability after @ must be a number above 0, up to 1 (at 0 the rule never applies)")
            }
            p = v
            rhs = String(rhs[..<at])
        }
        guard let match = DelayRule.Match.parse(lhs) else {
            throw ReplayError("--fault \(text): MATCH '\(lhs)' is not a message type (ARes), an occurrence (CRes#2), exchange:N or path:/p")
        }
        let action: FaultAction
        do { action = try FaultAction.read(rhs) } catch { throw ReplayError("--fault \(text): \(error)") }
        return FaultRule(match: match, action: action, probability: p)
    }

    /// Rules from a JSON file: an array of `{"match", "action", "probability"?, "description"?}`; lines starting
    /// with `//` are comments.
    public static func parseFile(_ bytes: [UInt8], name: String) throws(ReplayError) -> [FaultRule] {
        let text = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//") }.joined(separator: "\n")
        let json: JSON
        do { json = try JSON.parse(text) } catch { throw ReplayError("\(name): \(error)") }
        guard case let .array(items) = json else { throw ReplayError("\(name): expected a JSON array of rules") }
        var rules: [FaultRule] = []
        for (n, item) in items.enumerated() {
            guard let m = item["match"]?.stringValue, let a = item["action"]?.stringValue else {
                throw ReplayError("\(name): rule \(n + 1) needs \"match\" and \"action\"")
            }
            if let unknown = item.objectMembers?.map(\.0).first(where: { !["match", "action", "probability", "description"].contains($0) }) {
                throw ReplayError("\(name): rule \(n + 1): unknown member \"\(TerminalText.escaped(unknown))\" (a rule has match, action, probability, description)")
            }
            var rule = try FaultRule.parse("\(m)=\(a)")
            if let p = item["probability"] {
                guard case let .number(t) = p, let v = Double(t), v > 0, v <= 1 else {
                    throw ReplayError("\(name): rule \(n + 1): probability must be a number above 0, up to 1 (at 0 the rule never applies)")
                }
                rule.probability = v
            }
            rule.note = item["description"]?.stringValue
            rules.append(rule)
        }
        return rules
    }
}

/// Checks and picks fault rules.
public enum ReplayFaults {
    /// A duration as the options take it: `250ms`, `2s`, `2.5s` (`CheckedDuration.describe`: no value traps).
    public static func describe(_ seconds: Double) -> String { CheckedDuration.describe(seconds) }

    static func text(_ seconds: Double) -> String { CheckedDuration.describe(seconds) }

    /// Problems that make a set of rules unusable on this session, fault rules and `--delay` rules alike: a rule that
    /// can never apply (a CRes rule on a session without challenges, `CRes#9` where transactions have at most 2 CRes, an
    /// action on answers it does not change, an exchange the replay forwards live), and two rules that change the same layer
    /// of one answer (by the answers their matches cover: `CRes` and `CRes#1` overlap on CRes #1; two delays on one answer
    /// too). One line each for the first `limit`, then one line counting the rest: time and memory stay linear in the
    /// number of rules (a file of 3,000 identical rules has 4.5 million overlapping pairs, which were each written out before).
    public static func problems(_ rules: [FaultRule], delays: [DelayRule] = [], catalog: ReplayCatalog, limit: Int = 5) -> [String] {
        problems(rules, delays: delays, coverage: RuleCoverage(catalog), limit: limit)
    }

    /// As `problems(_:delays:catalog:limit:)`, on a catalog's answers indexed once.
    public static func problems(_ rules: [FaultRule], delays: [DelayRule] = [], coverage: RuleCoverage, limit: Int = 5) -> [String] {
        var out: [String] = []
        var unshown = 0
        func add(_ line: @autoclosure () -> String) {
            if out.count < limit { out.append(line()) } else { unshown += 1 }
        }
        // Fault rules and delays in one list: a delay is a rule of its own layer that changes every answer it matches.
        struct Entry { let match: DelayRule.Match; let layer: String; let action: FaultAction?; let text: String; let ordinal: Int }
        let entries = rules.enumerated().map { Entry(match: $0.1.match, layer: $0.1.action.layer, action: $0.1.action, text: "\($0.1)", ordinal: $0.0 + 1) }
            + delays.enumerated().map { Entry(match: $0.1.match, layer: "delay", action: nil,
                                              text: "\($0.1.match)=\(ReplayFaults.text($0.1.seconds))", ordinal: $0.0 + 1) }
        func option(_ e: Entry) -> String { e.action == nil ? "--delay" : "--fault" }
        func pair(_ a: Entry, _ b: Entry, _ what: String) -> String {
            let which = a.action == nil ? "--delay options \(a.ordinal) and \(b.ordinal)" : "rules \(a.ordinal) and \(b.ordinal)"
            let does = a.action == nil ? "both set the delay of" : "both change the \(a.layer) of"
            return "\(option(a)) \(a.text) and \(b.text) overlap (\(which)): \(does) \(what); keep one"
        }
        // Rules with the same match and layer form a group; a group covers the answers its match covers that its action
        // changes (the first rule's: actions of one layer change the same kinds of answer).
        struct Group: Hashable { let match: DelayRule.Match; let layer: String }
        var groups: [Group: [Int]] = [:]
        var order: [Group] = []
        var place: [Int] = []
        place.reserveCapacity(entries.count)
        for (i, e) in entries.enumerated() {
            let g = Group(match: e.match, layer: e.layer)
            if groups[g] == nil { order.append(g) }
            place.append(groups[g]?.count ?? 0)
            groups[g, default: []].append(i)
        }
        var groupCovers: [Group: [Int]] = [:]
        for g in order {
            let first = entries[groups[g]![0]]
            groupCovers[g] = coverage.covered(by: g.match).filter { first.action?.canChange(coverage.slots[$0]) ?? true }
        }
        for (i, e) in entries.enumerated() {
            let g = Group(match: e.match, layer: e.layer)
            if let action = e.action {
                if let why = coverage.whyNever(FaultRule(match: e.match, action: action)) { add("--fault \(e.text) can never apply: \(why)"); continue }
            } else if let why = coverage.whyNone(e.match) {
                add("--delay \(e.text) can never apply: \(why)")
                continue
            }
            let group = groups[g]!
            let later = group[(place[i] + 1)...]
            let shown = later.prefix(max(0, limit - out.count))
            for j in shown { add(pair(e, entries[j], "the same answers")) }
            unshown += later.count - shown.count
        }
        // Different matches of one layer that cover a common answer (CRes and CRes#1, exchange:8 and path:/acs/challenge):
        // each answer is covered by at most one match of each kind, so the pairs of groups found stay few.
        var byLayer: [String: [Int: [Group]]] = [:]
        for g in order { for s in groupCovers[g]! { byLayer[g.layer, default: [:]][s, default: []].append(g) } }
        struct GroupPair: Hashable { let a: Int; let b: Int }
        var seen = Set<GroupPair>()
        let rank = Dictionary(uniqueKeysWithValues: order.enumerated().map { ($1, $0) })
        var crossing: [(Group, Group, Int)] = []
        for g in order {
            for s in groupCovers[g]! {
                for h in byLayer[g.layer]![s]! where rank[h]! > rank[g]! && seen.insert(GroupPair(a: rank[g]!, b: rank[h]!)).inserted {
                    crossing.append((g, h, s))
                }
            }
        }
        for (g, h, s) in crossing {
            let a = groups[g]!, b = groups[h]!
            var shown = 0
            outer: for i in a { for j in b {
                guard out.count < limit else { break outer }
                let (x, y) = i < j ? (entries[i], entries[j]) : (entries[j], entries[i])
                add(pair(x, y, coverage.slots[s].label))
                shown += 1
            } }
            unshown += a.count * b.count - shown
        }
        if unshown > 0 {
            out.append("… and \(counted(unshown, "more problem")) with these \(entries.count) rules")
        }
        return out
    }
}

extension FaultAction {
    /// Rules on the same answers conflict when they act on the same layer.
    var layer: String {
        switch self {
        case .hang, .reset, .close, .dribble, .delay, .status, .truncate, .malformed: return "transport"
        case .erro, .transStatus, .acsTimeout: return "3DS outcome"
        case .badSignature, .untrustedSigner, .wrongEphemeralKey: return "acsSignedContent"
        case .badCounter, .wrongKey: return "app-channel encryption"
        case .challengeCancel: return "RReq challengeCancel"
        case .dropRReq, .rreqDelay: return "RReq delivery"
        case .pxpError, .pxpState, .scaExemption, .authRefused, .authFailed, .tpErrorcode: return "gateway answer"
        case .jwtBadSignature: return "gateway signature"
        }
    }
}

extension DelayRule.Match: CustomStringConvertible {
    /// `ARes`, `CRes#2`, `exchange:7`, `path:/acs/challenge`.
    public static func parse(_ text: String) -> DelayRule.Match? {
        guard !text.isEmpty else { return nil }
        if text.hasPrefix("exchange:") { return Int64(text.dropFirst(9)).map { .exchange($0) } }
        if text.hasPrefix("path:") { return text.count > 5 ? .path(String(text.dropFirst(5))) : nil }
        if let hash = text.firstIndex(of: "#") {
            guard let n = Int(text[text.index(after: hash)...]), n >= 1 else { return nil }
            return .occurrence(String(text[..<hash]), n)
        }
        return .messageType(text)
    }

    public var description: String {
        switch self {
        case let .messageType(t): return t
        case let .occurrence(t, n): return "\(t)#\(n)"
        case let .exchange(id): return "exchange:\(id)"
        case let .path(p): return "path:\(p)"
        }
    }

    func applies(to answer: ScheduledAnswer) -> Bool {
        switch self {
        case let .messageType(t): return answer.messageType == t
        case let .occurrence(t, n): return answer.messageType == t && answer.occurrence == n
        case let .exchange(id): return answer.recordedExchangeID == id
        case let .path(p): return answer.path == p
        }
    }
}
