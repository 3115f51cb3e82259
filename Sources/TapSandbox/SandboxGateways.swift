import Foundation
import TapCore
import TapEMV
import TapHTTPService
import TapJOSE

/// Payment-gateway endpoints beside the DS and ACS, shaped like the two gateway APIs of the seed guides that wrap
/// a 3DS authentication, so that sessions of both kinds can be recorded and shown with `show --profile`:
/// - PXP Checkout style: card tokenisation (`/pxp/tokens`), pre-initiation (`/pxp/authentication/pre-initiate`) and
///   the authorisation (`/pxp/transactions`) that carries the 3DS result;
/// - Trust Payments style: one JSON endpoint (`/tp/jwt/`) whose requests carry an HS256 JWT and a list of request
///   types (RISKDEC, ACCOUNTCHECK, THREEDQUERY, AUTH, SUBSCRIPTION), answered by an HS256-signed JWT with one
///   response per type, each with its `errorcode` and `errormessage`.
/// The shapes follow what the guides show; the field names beyond them are the sandbox's own. Stateless.
public enum SandboxGateways {
    /// The sandbox's test secret (documented in the README; it protects nothing).
    public static let defaultJWTSecret = "3dstape-sandbox-gateway-secret"

    static func handle(_ path: String, _ body: [UInt8], secret: String, log: @Sendable (String) -> Void) -> HTTPReply {
        guard let request = try? JSON.parse(body), request.isObject else {
            return .json(JSON.object([("error", .string("the body is not a JSON object"))]).bytes, status: 400)
        }
        switch path {
        case "/pxp/tokens": return pxpToken(request)
        case "/pxp/authentication/pre-initiate": return pxpPreInitiate(request)
        case "/pxp/transactions": return pxpTransaction(request, log)
        default: return trustPayments(request, secret: secret, log)
        }
    }

    // MARK: PXP Checkout style

    static func pxpToken(_ r: JSON) -> HTTPReply {
        guard let number = r["card"]?["number"]?.stringValue else {
            return .json(JSON.object([("errorCode", .string("InvalidCard")), ("message", .string("card.number is required"))]).bytes, status: 400)
        }
        return .json(JSON.object([("gatewayTokenId", .string(EMV.uuid())), ("maskedCard", .string(Masking.maskPAN(number))),
                                  ("cardScheme", .string("Visa"))]).bytes)
    }

    static func pxpPreInitiate(_ r: JSON) -> HTTPReply {
        guard r["gatewayTokenId"]?.stringValue != nil, r["providerId"]?.stringValue != nil else {
            return .json(JSON.object([("errorCode", .string("InvalidRequest")), ("message", .string("gatewayTokenId and providerId are required"))]).bytes,
                         status: 400)
        }
        return .json(JSON.object([("authenticationId", .string(EMV.uuid())), ("state", .string("PendingClientData")),
                                  ("scaMandated", .bool(true)), ("applicableExemptions", .array([])),
                                  ("threeDSServerTransID", r["threeDSServerTransID"] ?? .null)]).bytes)
    }

    static func pxpTransaction(_ r: JSON, _ log: @Sendable (String) -> Void) -> HTTPReply {
        let status = r["threeDSecureData"]?.transStatus
        let authorised = status?.isAuthentication == true
        log("PXP authorisation: 3DS \(status?.wire ?? "none") → \(authorised ? "Authorised" : "Refused")")
        return .json(JSON.object([
            ("state", .string(authorised ? "Authorised" : "Refused")), ("transactionReference", .string(EMV.uuid())),
            ("providerResponse", .object([("code", .string(authorised ? "00" : "05")), ("message", .string(authorised ? "Approved" : "Do not honour"))])),
            ("authenticationConfirmation", .bool(authorised)),
        ]).bytes)
    }

    // MARK: Trust Payments style

    static func trustPayments(_ r: JSON, secret: String, _ log: @Sendable (String) -> Void) -> HTTPReply {
        let key = Array(secret.utf8)
        var responses: [JSON] = []
        let jwtOK: Bool = {
            guard let text = r["jwt"]?.stringValue, let jws = try? JWS(compact: text) else { return false }
            return (try? jws.verifyHS256(secret: key)) != nil
        }()
        guard case let .array(requests)? = r["request"], let first = requests.first else {
            return signed([error("30000", "Invalid field", field: "request")], key: key)
        }
        if !jwtOK {
            responses.append(error("30006", "Invalid JWT", field: "jwt"))
        } else {
            let types = (first["requesttypedescriptions"].flatMap { v -> [String]? in
                guard case let .array(a) = v else { return nil }
                return a.compactMap(\.stringValue)
            }) ?? []
            let pan = first["pan"]?.stringValue ?? ""
            for type in types { responses.append(response(type, request: first, pan: pan)) }
        }
        log("Trust Payments-style request → " + responses.map { "\($0["requesttypedescription"]?.stringValue ?? "?") \($0["errorcode"]?.stringValue ?? "?")" }
            .joined(separator: ", "))
        return signed(responses, key: key)
    }

    static func response(_ type: String, request: JSON, pan: String) -> JSON {
        var m: [(String, JSON)] = [("requesttypedescription", .string(type)), ("transactionreference", .string("3-9-" + String(EMV.uuid().prefix(8))))]
        let masked = JSON.string(String(Masking.maskPAN(pan).map { $0 == "*" ? "#" : $0 }))
        switch type {
        case "RISKDEC":
            m += [("errorcode", .string("0")), ("errormessage", .string("Ok")), ("fraudcontrolshieldstatuscode", .string("ACCEPT"))]
        case "ACCOUNTCHECK":
            m += [("errorcode", .string("0")), ("errormessage", .string("Ok")), ("maskedpan", masked), ("securityresponsesecuritycode", .string("2"))]
        case "THREEDQUERY":
            m += [("errorcode", .string("0")), ("errormessage", .string("Ok")), ("maskedpan", masked), ("enrolled", .string("Y")),
                  ("threedversion", request["threedversion"] ?? .string("2.2.0"))]
        case "AUTH":
            let status = request["threedresponse"]?["transStatus"]?.stringValue
            let ok = status.map { TransStatus(wire: $0).isAuthentication } == true
            m += [("errorcode", .string(ok ? "0" : "70000")), ("errormessage", .string(ok ? "Ok" : "Decline")), ("maskedpan", masked),
                  ("authcode", ok ? .string("TEST34") : .null), ("settlestatus", .string(ok ? "0" : "3")), ("status", .string(status ?? "-"))]
        case "SUBSCRIPTION":
            // As in the guide's example: THREEDQUERY and AUTH succeed, the SUBSCRIPTION fails on a field.
            m += [("errorcode", .string("30000")), ("errormessage", .string("Invalid field")), ("errordata", .array([.string("subscriptiontype")]))]
        default:
            m += [("errorcode", .string("60018")), ("errormessage", .string("Invalid requesttype"))]
        }
        return .object(m.filter { $0.1 != .null })
    }

    static func error(_ code: String, _ message: String, field: String) -> JSON {
        .object([("requesttypedescription", .string("ERROR")), ("errorcode", .string(code)), ("errormessage", .string(message)),
                 ("errordata", .array([.string(field)]))])
    }

    /// `{"version": "1.00", "jwt": <HS256 JWT whose payload holds the responses>}`.
    static func signed(_ responses: [JSON], key: [UInt8]) -> HTTPReply {
        let payload = JSON.object([("iat", .number(String(Int(Date().timeIntervalSince1970)))), ("iss", .string("3dstape-sandbox")),
                                   ("payload", .object([("requestreference", .string("W" + String(EMV.uuid().prefix(8)))), ("version", .string("1.00")),
                                                        ("response", .array(responses))]))])
        let jwt = (try? JWS.signHS256(payload: payload.bytes, secret: key, extraHeader: [("typ", .string("JWT"))]).compact) ?? ""
        return .json(JSON.object([("version", .string("1.00")), ("jwt", .string(jwt))]).bytes)
    }
}
