import Foundation
import TapCore
import TapEMV
import TapNet
import TapReplay
import TapSandbox
import TapStore

/// Which recorded non-3DS exchanges (gateway API calls, 3DS Method posts) belong to which transaction, and before or
/// after its 3DS messages.
///
/// In recorded order: an exchange tied to no transaction waits for the next AReq and is re-sent before it, unless it
/// closes the transaction before it: its request carries an authentication result (transStatus, eci, a Trust Payments
/// threedresponse) or a value one of that transaction's answers issued (a gateway token, an authentication ID, a
/// 3DS transaction ID). Exchanges to the 3DS Server's own endpoints (the AReq's notificationURL and threeDSServerURL
/// origin) are live in a replay and not re-sent; those left after the last AReq close the last transaction.
enum ClientReplayCallPlan {
    /// Per flow (as `catalog.flows`), the exchange indices re-sent before its AReq and after its 3DS messages.
    static func assign(_ catalog: ReplayCatalog) -> [(before: [Int], after: [Int])] {
        var out = Array(repeating: (before: [Int](), after: [Int]()), count: catalog.flows.count)
        guard !catalog.flows.isEmpty else { return out }
        let flowAt = Dictionary(catalog.flows.enumerated().map { ($0.element.areq, $0.offset) }, uniquingKeysWith: { a, _ in a })
        let plain = Set(catalog.plain)
        var pending: [Int] = []
        var current: Int?
        var issued = Set<String>() // the current flow's IDs and what its answers issued
        for i in catalog.exchanges.indices {
            let x = catalog.exchanges[i]
            if let f = flowAt[i] {
                out[f].before = pending
                current = f
                issued = Set(catalog.flows[f].ids.values)
                for p in pending { issued.formUnion(freshValues(catalog.exchanges[p].responseBody)) }
                pending = []
                continue
            }
            guard plain.contains(i) else { continue }
            let request = ClientReplayCallBody.comparable(x.requestBody)
            if let c = current, let request, carriesOutcome(request) || !issued.isDisjoint(with: strings(request)) {
                out[c].after.append(i)
                issued.formUnion(freshValues(x.responseBody))
            } else {
                pending.append(i)
            }
        }
        if let last = current { out[last].after += pending }
        for f in out.indices {
            out[f].before.removeAll { isOwnEndpoint(catalog.exchanges[$0], of: catalog.flows[f]) }
            out[f].after.removeAll { isOwnEndpoint(catalog.exchanges[$0], of: catalog.flows[f]) }
        }
        return out
    }

    /// Members that carry a transaction's authentication result into a gateway call.
    static let outcomeMembers: Set<String> = ["transStatus", "eci", "authenticationValue", "threedresponse", "threeDSecureData"]

    static func carriesOutcome(_ json: JSON) -> Bool {
        switch json {
        case .object(let m): return m.contains { outcomeMembers.contains($0.0) || carriesOutcome($0.1) }
        case .array(let a): return a.contains(where: carriesOutcome)
        default: return false
        }
    }

    static func strings(_ json: JSON) -> Set<String> {
        switch json {
        case .object(let m): return m.reduce(into: Set<String>()) { $0.formUnion(strings($1.1)) }
        case .array(let a): return a.reduce(into: Set<String>()) { $0.formUnion(strings($1)) }
        case .string(let s): return [s]
        default: return []
        }
    }

    /// The ID-like strings an answer issued (8 characters or more with a digit and a letter).
    static func freshValues(_ body: [UInt8]) -> Set<String> {
        guard let json = ClientReplayCallBody.comparable(body) else { return [] }
        return strings(json).filter { s in
            s.utf8.count >= 8 && s.utf8.count <= 512 && s.contains(where: \.isNumber) && s.contains(where: \.isLetter) && !s.contains(" ")
        }
    }

    /// An exchange to the transaction's own 3DS Server or merchant page: the replayer's listener takes those live.
    static func isOwnEndpoint(_ x: StoredExchange, of flow: ReplayCatalog.RecordedFlow) -> Bool {
        let origin = ClientReplayPlan.origin(x.url)
        return ["notificationURL", "threeDSServerURL"].contains { k in
            flow.areqJSON[k]?.stringValue.flatMap(ClientReplayPlan.origin) == origin && origin != nil
        }
    }

    /// The recorded exchange as a call of the live run: its URL rewritten, masked card numbers resolved with `--card`.
    /// Nil and why when it cannot be sent (not an http(s) URL, a card number masked and not given).
    static func call(_ x: StoredExchange, dsOrigin: String?, inputs: ClientReplayPlan.Inputs) -> (ClientReplayCall?, String?) {
        guard let url = ClientReplayPlan.liveURL(x.url, dsOrigin: dsOrigin, inputs: inputs) else {
            return (nil, "the recorded call \(Masking.maskText(x.url)) is not an http(s) URL")
        }
        let path = HTTPURL(x.url)?.path ?? "/"
        let label = "\(x.method) \(path)"
        var body = x.requestBody
        if let json = try? JSON.parse(body), json.isObject {
            var missing: String?
            let resolved = resolveCards(json, cards: inputs.cards, missing: &missing)
            if let missing { return (nil, "\(label): the recording masked a card number (\(missing)); give --card with the full number") }
            body = resolved.bytes
        }
        let contentType = x.requestHeaders.first { $0.0.lowercased() == "content-type" }?.1
        return (ClientReplayCall(method: x.method, url: url, label: label, contentType: contentType, body: body, recordedStatus: x.status,
                                 recordedResponse: x.responseBody), nil)
    }

    /// Every masked card number (first 6, `*`, last 4) replaced by the `--card` that fits, else by the one of 3dstape's test
    /// cards that does (as in the AReq: the sandbox's gateway sessions replay without --card); the first that none fits in
    /// `missing`.
    static func resolveCards(_ json: JSON, cards: [String], missing: inout String?) -> JSON {
        switch json {
        case .object(let m): return .object(m.map { ($0.0, resolveCards($0.1, cards: cards, missing: &missing)) })
        case .array(let a): return .array(a.map { resolveCards($0, cards: cards, missing: &missing) })
        case .string(let s):
            guard s.count >= 12, s.count <= 19, s.prefix(6).allSatisfy(\.isNumber), s.suffix(4).allSatisfy(\.isNumber),
                  s.dropFirst(6).dropLast(4).allSatisfy({ $0 == "*" }), s.contains("*") else { return json }
            func fits(_ full: String) -> Bool { full.count == s.count && full.prefix(6) == s.prefix(6) && full.suffix(4) == s.suffix(4) }
            if let full = cards.first(where: fits) ?? TestCard.all.map(\.pan).first(where: fits) { return .string(full) }
            missing = missing ?? s
            return json
        default: return json
        }
    }
}
