import Foundation
import TapCore
import TapEMV
import TapHTTP
import TapJOSE

extension ReplayEngine {
    // MARK: gateway faults

    /// Applies the gateway faults to the answer of a gateway call (a PXP-style `/pxp/…` or Trust Payments-style `/tp/jwt/`
    /// exchange): an error answer in the gateway's shape, a changed state or result field, a Trust Payments response list
    /// with a changed errorcode, re-signed with `--jwt-secret`, or a response JWT that does not verify. Returns the
    /// faults that changed nothing (a request type the answer does not carry), which are then not recorded as applied.
    func applyGateway(_ faults: [FaultAction], to answer: inout ReplayAnswer, path: String) -> [FaultAction] {
        var unapplied: [FaultAction] = []
        var tpChanges: [(type: String, code: String, field: String?)] = []
        var badSignature = false
        for f in faults {
            switch f {
            case let .pxpError(code):
                let status = GatewayFaults.pxpErrors[code] ?? 500
                answer.status = status
                answer.headers = [("Content-Type", "application/json")]
                answer.body = JSON.object([("errorCode", .string(code)),
                                           ("message", .string("\(HTTPResponseHead.reasonPhrase(status)): fault injected by 3dstape replay (pxp-error:\(code))")),
                                           ("correlationId", .string("3dstape-replay-fault"))]).bytes
            case let .pxpState(state):
                if !setMembers(&answer, [("state", .string(state))] + (state == "Refused" ? refusal : [])) { unapplied.append(f) }
            case let .scaExemption(name):
                if !setMembers(&answer, [("scaMandated", .bool(false)), ("applicableExemptions", .array([.string(name)]))]) { unapplied.append(f) }
            case .authRefused where path == GatewayFaults.tpPath: tpChanges.append(("AUTH", "70000", nil))
            case .authFailed where path == GatewayFaults.tpPath: tpChanges.append(("AUTH", "60010", nil))
            case .authRefused:
                if !setMembers(&answer, [("state", .string("Refused"))] + refusal) { unapplied.append(f) }
            case .authFailed:
                if !setMembers(&answer, [("state", .string("Failed")), ("errorReason", .string("fault injected by 3dstape replay (auth-failed)")),
                                         ("authenticationConfirmation", .bool(false))]) { unapplied.append(f) }
            case let .tpErrorcode(type, code, field): tpChanges.append((type, code, field))
            case .jwtBadSignature: badSignature = true
            default: break
            }
        }
        if !tpChanges.isEmpty || badSignature {
            let missing = resignTrustPayments(&answer, tpChanges, badSignature: badSignature)
            unapplied += faults.filter { f in
                switch f {
                case let .tpErrorcode(type, _, _): return missing.contains(type)
                case .authRefused, .authFailed: return missing.contains("AUTH")
                case .jwtBadSignature: return missing.contains("*")
                default: return false
                }
            }
        }
        return unapplied
    }

    /// What a PXP-style refusal carries beside its state.
    var refusal: [(String, JSON)] {
        [("providerResponse", .object([("code", .string("05")), ("message", .string("Do not honour"))])), ("authenticationConfirmation", .bool(false))]
    }

    /// Sets members of a JSON object answer; false when the answer is no JSON object.
    func setMembers(_ answer: inout ReplayAnswer, _ members: [(String, JSON)]) -> Bool {
        guard var json = try? JSON.parse(answer.body), json.isObject else { return false }
        for (k, v) in members { json = json.setting(k, to: v) }
        answer.body = json.bytes
        return true
    }

    /// Rewrites a Trust Payments-style answer `{"jwt": …}`: the responses of the named request types get the errorcode,
    /// its errormessage and the field, and the JWT is signed again with `--jwt-secret` (then one bit of its signature is
    /// flipped for `jwt-bad-signature`). Returns the request types the answer does not carry ("*": no response JWT at all).
    func resignTrustPayments(_ answer: inout ReplayAnswer, _ changes: [(type: String, code: String, field: String?)], badSignature: Bool) -> Set<String> {
        guard let outer = try? JSON.parse(answer.body), let text = outer["jwt"]?.stringValue,
              case let parts = text.split(separator: ".", omittingEmptySubsequences: false), parts.count == 3,
              let payloadBytes = Base64URL.decode(String(parts[1])), var payload = try? JSON.parse(payloadBytes),
              case let .array(responses)? = payload["payload"]?["response"] else {
            return Set(changes.map(\.type) + ["*"])
        }
        var missing = Set<String>()
        var list = responses
        for c in changes {
            guard let n = list.firstIndex(where: { $0["requesttypedescription"]?.stringValue == c.type }) else { missing.insert(c.type); continue }
            var r = list[n].setting("errorcode", to: .string(c.code)).setting("errormessage", to: .string(GatewayFaults.tpMessages[c.code] ?? "Error"))
            r = c.field.map { r.setting("errordata", to: .array([.string($0)])) } ?? (c.code == "0" ? r.removing("errordata") : r)
            if c.type == "AUTH" {
                r = r.setting("settlestatus", to: .string(c.code == "0" ? "0" : "3"))
                r = c.code == "0" ? r : r.removing("authcode")
            }
            list[n] = r
        }
        payload = payload.setting("payload", to: (payload["payload"] ?? .object([])).setting("response", to: .array(list)))
        guard var jwt = try? JWS.signHS256(payload: payload.bytes, secret: Array(options.jwtSecret.utf8), extraHeader: [("typ", .string("JWT"))]).compact else {
            return Set(changes.map(\.type) + ["*"])
        }
        if badSignature { jwt = SignatureFault.flippingSignatureBit(jwt) }
        answer.body = outer.setting("jwt", to: .string(jwt)).bytes
        return missing
    }
}
