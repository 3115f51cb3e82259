import TapCore
import TapEMV
import TapStore

/// One problem `3dstape validate` found: where (exchange, message, element as a JSON pointer), which rule, how bad.
public struct Finding: Sendable, Equatable {
    public enum Severity: String, Sendable { case error, warning }
    public var exchangeID: Int64
    /// `AReq`, `CRes` …
    public var message: String
    /// JSON pointer of the element, `""` for the whole message.
    public var pointer: String
    /// `AReq.acctNumber.required`, `tx.sdk-counter` …
    public var rule: String
    public var severity: Severity
    public var detail: String
    // Made only by the validator: Swift's memberwise initialiser (internal) is all it needs.

    public var json: JSON {
        .object([("exchange", .number(String(exchangeID))), ("message", .string(message)), ("element", .string(pointer)),
                 ("rule", .string(rule)), ("severity", .string(severity.rawValue)), ("detail", .string(detail))])
    }
}

/// A rule across the messages of one transaction, with the id findings carry.
public struct TransactionRule: Sendable {
    public let id: String
    public let summary: String
    let check: @Sendable (ThreeDSTransaction) -> [Finding]
}

/// A rule on one message as a whole, beyond its elements' own rules (`ValidationRules`), with the id findings carry.
public struct MessageRule: Sendable {
    public let id: String
    public let summary: String
    /// The elements of the message (kind, JSON, context) that break the rule, each with what is wrong.
    let check: @Sendable (MessageKind?, JSON, MessageContext) -> [(element: String, detail: String)]
}

/// Checks 3DS messages against `ValidationRules` and the transaction rules below.
public enum Validator {
    /// Every finding for a session's exchanges, in exchange order.
    public static func validate(_ exchanges: [StoredExchange]) -> [Finding] {
        validate(transactions: ThreeDSTransaction.group(exchanges))
    }

    public static func validate(transactions: [ThreeDSTransaction]) -> [Finding] {
        var out: [Finding] = []
        for tx in transactions {
            for m in tx.messages { out += validate(m, in: tx) }
            for rule in transactionRules { out += rule.check(tx) }
        }
        return out.sorted { ($0.exchangeID, $0.severity == .error ? 0 : 1) < ($1.exchangeID, $1.severity == .error ? 0 : 1) }
    }

    /// The element rules for one message.
    static func validate(_ m: InspectedMessage, in tx: ThreeDSTransaction) -> [Finding] {
        guard let json = m.json else { return [] } // still encrypted: nothing to check
        guard json.isObject else {
            return [Finding(exchangeID: m.exchangeID, message: m.type, pointer: "", rule: "\(m.type).object", severity: .error,
                            detail: "the message is not a JSON object")]
        }
        let context = MessageContext(json: json, channel: tx.channel ?? channel(inferredFrom: m),
                                     category: tx.messageCategory.map(MessageCategory.init(wire:)),
                                     version: (m.version ?? tx.version).map(MessageVersion.init(wire:)))
        var out: [Finding] = []
        func add(_ rule: String, _ element: String, _ severity: Finding.Severity, _ detail: String) {
            out.append(Finding(exchangeID: m.exchangeID, message: m.type, pointer: element.isEmpty ? "" : "/" + element, rule: rule,
                               severity: severity, detail: detail))
        }
        for rule in m.kind.flatMap({ ValidationRules.byKind[$0] }) ?? [] {
            let value = json[rule.member]
            let defined = rule.since.map { context.versionOrLatest >= $0 } ?? true
            guard let value, value != .null else {
                let required: Bool
                switch rule.presence {
                case .required: required = true
                case .optional: required = false
                case let .when(c): required = c.holds(context)
                }
                if required && defined {
                    var why = "required"
                    if case let .when(c) = rule.presence { why += " when \(c)" }
                    add(rule.id + ".required", rule.element, .error, why + " and missing")
                }
                continue
            }
            if !defined {
                add(rule.id + ".version", rule.element, .warning, "not defined before \(rule.since!.wire) (message is \(context.version?.wire ?? "?"))")
            }
            // Masked by the recorder or import: present, and its format known only when the mask carries the verdict
            // judged before masking (sessions written before issue 29 have plain masks).
            if MaskedFormat.byElement[rule.element] != nil, let s = value.stringValue, let problem = MaskVerdict.problem(in: s) {
                add(rule.id + ".format", rule.element, .error, problem + " (judged when it was masked)")
                continue
            }
            if isMasked(value, element: rule.element) { continue }
            if let problem = rule.format.problem(value, version: context.version) {
                add(rule.id + ".format", rule.element, .error, problem)
            } else if let warning = rule.format.warning(value) {
                add(rule.id + ".rfc4122", rule.element, .warning, warning)
            }
        }
        for rule in messageRules {
            for (element, detail) in rule.check(m.kind, json, context) { add(rule.id, element, .error, detail) }
        }
        return out
    }

    // MARK: rules on a message as a whole

    public static let messageRules: [MessageRule] = [
        MessageRule(id: "CRes.final-elements", summary: "a final CRes carries only IDs, counter, completion indicator and transStatus") { kind, json, _ in
            guard kind == .cRes, json.completesChallenge, let members = json.objectMembers else { return [] }
            return members.compactMap { name, _ in
                ValidationRules.finalCResElements.contains(name) ? nil
                    : (name, "a final CRes carries only IDs, counter, completion and transStatus (SDKs answer Erro 101)")
            }
        },
        MessageRule(id: "ARes.3ri-status", summary: "transStatus C, D or S is not valid for a 3RI transaction") { kind, json, context in
            guard kind == .aRes, context.channel == .requestorInitiated, let s = json[.transStatus]?.stringValue, ["C", "S", "D"].contains(s) else { return [] }
            return [(EMVField.transStatus.rawValue, "transStatus \(s) is not valid for a 3RI transaction")]
        },
    ]

    /// The JSON pointer of a top-level member: `/transStatus`.
    static func pointer(_ member: MessageMember) -> String { "/" + member.name }

    /// A CReq/CRes without an AReq in the session: the channel from where it was found.
    static func channel(inferredFrom m: InspectedMessage) -> DeviceChannel? {
        if m.messageLocation == .jwe { return .app }
        if m.messageLocation.isForm { return .browser }
        return DeviceChannel(m.json?[.deviceChannel]) ?? (m.json?[.sdkTransID] != nil ? .app : nil)
    }

    /// What the recorder masked (`***`, `400000******1067`): present, but its format cannot be checked (but for the verdict
    /// a mask may carry, `MaskVerdict`, read before this is asked).
    /// Only where masking writes one: a secret element's `***` (with or without its verdict), or a card number's
    /// `400000******1067` inside any value. Stars anywhere else (`Q***` as a transStatus) are the value itself, and judged.
    static func isMasked(_ v: JSON, element: String) -> Bool {
        guard let s = v.stringValue, s.contains("***") else { return false }
        if Masking.isSecretElement(element), MaskVerdict.isSecretMask(s) { return true }
        return containsMaskedPAN(s)
    }

    /// Whether `s` holds a masked card number: six digits, a run of stars, four digits.
    static func containsMaskedPAN(_ s: String) -> Bool {
        let b = Array(s.utf8)
        var i = 0
        while i < b.count {
            guard b[i] == UInt8(ascii: "*") else { i += 1; continue }
            var j = i
            while j < b.count, b[j] == UInt8(ascii: "*") { j += 1 }
            func digits(_ r: Range<Int>) -> Bool { r.lowerBound >= 0 && r.upperBound <= b.count && b[r].allSatisfy { (0x30...0x39).contains($0) } }
            if j - i >= 3, digits((i - 6)..<i), digits(j..<(j + 4)) { return true }
            i = j
        }
        return false
    }

    // MARK: rules across a transaction

    public static let transactionRules: [TransactionRule] = [
        TransactionRule(id: "tx.same-ids", summary: "dsTransID, acsTransID and sdkTransID keep the values the ARes gave them") { tx in
            guard let ares = tx.ares?.json else { return [] }
            var out: [Finding] = []
            for m in tx.messages where m.kind != .aReq && m.kind != .aRes {
                for id in [TransactionIDField.dsTransID, .acsTransID, .sdkTransID] {
                    guard let want = ares[id]?.stringValue, let got = m.string(id), got != want else { continue }
                    out.append(Finding(exchangeID: m.exchangeID, message: m.type, pointer: pointer(.id(id)), rule: "tx.same-ids", severity: .error,
                                       detail: "\(got) differs from the ARes's \(want)"))
                }
            }
            return out
        },
        TransactionRule(id: "tx.same-version", summary: "every message of a transaction has the AReq's messageVersion") { tx in
            guard let v = tx.areq?.version else { return [] }
            return tx.messages.compactMap { m in
                guard let got = m.version, got != v else { return nil }
                return Finding(exchangeID: m.exchangeID, message: m.type, pointer: pointer(.field(.messageVersion)), rule: "tx.same-version", severity: .error,
                               detail: "\(got), but the AReq was \(v)")
            }
        },
        TransactionRule(id: "tx.sdk-counter", summary: "CReq sdkCounterStoA counts 000, 001 … in order") { tx in
            counterFindings(tx, type: .cReq, element: .sdkCounterStoA, rule: "tx.sdk-counter")
        },
        TransactionRule(id: "tx.acs-counter", summary: "CRes acsCounterAtoS counts 000, 001 … in order") { tx in
            counterFindings(tx, type: .cRes, element: .acsCounterAtoS, rule: "tx.acs-counter")
        },
        TransactionRule(id: "tx.final-cres-rreq", summary: "the RReq's transStatus is the final CRes's") { tx in
            guard let cres = tx.messages.last(where: { $0.kind == .cRes && $0.string(.transStatus) != nil }),
                  let rreq = tx.messages.last(where: { $0.kind == .rReq }),
                  let a = cres.string(.transStatus), let b = rreq.string(.transStatus), a != b else { return [] }
            return [Finding(exchangeID: rreq.exchangeID, message: "RReq", pointer: pointer(.field(.transStatus)), rule: "tx.final-cres-rreq", severity: .error,
                            detail: "RReq says \(b), the final CRes (exchange \(cres.exchangeID)) said \(a)")]
        },
        TransactionRule(id: "tx.challenge-status", summary: "a CReq follows only an ARes with transStatus C") { tx in
            guard let ares = tx.ares, let s = ares.string(.transStatus), s != "C",
                  let creq = tx.messages.first(where: { $0.kind == .cReq }) else { return [] }
            return [Finding(exchangeID: creq.exchangeID, message: "CReq", pointer: "", rule: "tx.challenge-status", severity: .error,
                            detail: "a challenge after an ARes with transStatus \(s)")]
        },
    ]

    /// Counters of one side: 000 for the first message, one more for each next.
    static func counterFindings(_ tx: ThreeDSTransaction, type: MessageKind, element: EMVField, rule: String) -> [Finding] {
        guard (tx.channel ?? .app) == .app else { return [] }
        var expected = 0
        var out: [Finding] = []
        for m in tx.messages where m.kind == type && m.json != nil {
            guard let s = m.string(element), let n = Int(s) else { continue } // missing or malformed: the element rules say so
            if n != expected {
                out.append(Finding(exchangeID: m.exchangeID, message: type.rawValue, pointer: pointer(.field(element)), rule: rule, severity: .error,
                                   detail: "\(s), expected \(String(format3: expected))"))
            }
            expected = n + 1
        }
        return out
    }
}

extension String {
    init(format3 n: Int) { self = n < 10 ? "00\(n)" : (n < 100 ? "0\(n)" : String(n)) }
}
