import Foundation
import TapCore
import TapEMV
import TapHTTP
import TapJOSE
import TapNet

/// The payment gateways the client can wrap an authentication in (the sandbox's `SandboxGateways`).
public enum Gateway: String, Sendable, CaseIterable {
    /// PXP Checkout style: tokenise the card, pre-initiate, the 3DS Method (browser), authenticate, authorise.
    case pxp
    /// Trust Payments style: RISKDEC, ACCOUNTCHECK and THREEDQUERY in one JWT request, authenticate, then AUTH and SUBSCRIPTION.
    case trustPayments = "trustpayments"
}

extension SDKClient {
    /// What the gateway calls before the authentication learnt, for the calls after it.
    struct GatewayContext {
        var tokenID: String?
        var authenticationID: String?
    }

    func gatewayURL(_ path: String) -> HTTPURL {
        HTTPURL(tls: options.dsURL.tls, address: options.dsURL.address, path: path)
    }

    /// One gateway call: its JSON answer, or a failure that says which endpoint answered what (an error answer in the
    /// gateway's shape, a body that is not JSON, or no answer at all: a network failure).
    func gatewayJSON(_ path: String, _ body: JSON) throws -> JSON {
        let r: HTTPResponse
        do { r = try post(gatewayURL(path), body.bytes, contentType: "application/json") } catch let e as TimeoutFailure {
            throw ClientFailure("\(path): \(e.message)", .network)
        }
        guard let json = try? JSON.parse(r.body), json.isObject else {
            throw ClientFailure("\(path): HTTP \(r.head.status) without a JSON object", .gatewayUnexpected(path: path))
        }
        guard r.head.status == 200 else {
            throw ClientFailure("\(path): HTTP \(r.head.status) \(json["message"]?.stringValue ?? json.compact)",
                                .gateway(path: path, status: r.head.status, code: json["errorCode"]?.stringValue))
        }
        return json
    }

    /// The Trust Payments-style merchant JWT: HS256 over the site's request fields.
    func merchantJWT(_ types: [String]) throws -> String {
        let payload = JSON.object([("iat", .number(String(Int(Date().timeIntervalSince1970)))), ("iss", .string("3dstape-merchant")),
                                   ("payload", .object([("sitereference", .string("test_3dstape00001")), ("accounttypedescription", .string("ECOM")),
                                                        ("currencyiso3a", .string("EUR")), ("baseamount", .string("1234")),
                                                        ("requesttypedescriptions", .array(types.map(JSON.string)))]))])
        return try JWS.signHS256(payload: payload.bytes, secret: Array(options.gatewayJWTSecret.utf8), extraHeader: [("typ", .string("JWT"))]).compact
    }

    /// One Trust Payments-style call: the request types, card fields and extras beside the merchant JWT; the
    /// response JWT verified with the shared secret and its responses returned.
    func trustPaymentsCall(_ types: [String], extra: [(String, JSON)], _ result: inout ClientResult) throws -> [JSON] {
        let request = JSON.object([("requesttypedescriptions", .array(types.map(JSON.string))), ("pan", .string(options.card)),
                                   ("expirydate", .string("12/30")), ("securitycode", .string("123"))] + extra)
        let body = JSON.object([("alias", .string("3dstape-merchant")), ("jwt", .string(try merchantJWT(types))), ("version", .string("1.00")),
                                ("request", .array([request]))])
        let answer = try gatewayJSON("/tp/jwt/", body)
        guard let text = answer["jwt"]?.stringValue, let jws = try? JWS(compact: text) else {
            throw ClientFailure("/tp/jwt/: no response JWT", .gatewayUnexpected(path: "/tp/jwt/"))
        }
        if options.misbehaviour.contains(.trustUnverifiedJWT) {
            result.gatewayView.verified = nil // not checked: the content is trusted as it is (--misbehave trust-unverified-jwt)
        } else {
            do { try jws.verifyHS256(secret: Array(options.gatewayJWTSecret.utf8)) } catch {
                result.gatewayView.verified = false
                throw ClientFailure("/tp/jwt/: the response JWT does not verify with the shared secret", .jwtUnverified)
            }
            result.gatewayView.verified = true
        }
        guard case let .array(responses)? = jws.payloadJSON?["payload"]?["response"] else {
            throw ClientFailure("/tp/jwt/: no responses in the JWT", .gatewayUnexpected(path: "/tp/jwt/"))
        }
        for r in responses {
            if let type = r["requesttypedescription"]?.stringValue {
                result.gatewayView.responses.append(.init(type: type, errorcode: r["errorcode"]?.stringValue ?? "?",
                                                          errormessage: r["errormessage"]?.stringValue,
                                                          field: r["errordata"]?.arrayValue?.first?.stringValue))
            }
        }
        return responses
    }

    func gatewayBefore(serverTransID: String, _ result: inout ClientResult) throws -> GatewayContext {
        var context = GatewayContext()
        switch options.gateway {
        case nil: break
        case .pxp?:
            let token = try gatewayJSON("/pxp/tokens", .object([("card", .object([
                ("number", .string(options.card)), ("expiryMonth", .string("12")), ("expiryYear", .string("2030")), ("securityCode", .string("123")),
            ]))]))
            context.tokenID = token["gatewayTokenId"]?.stringValue
            let pre = try gatewayJSON("/pxp/authentication/pre-initiate", .object([
                ("providerId", .string("3dstape-provider")), ("gatewayTokenId", .string(context.tokenID ?? "")),
                ("merchantTransactionId", .string(EMV.uuid())), ("amount", .object([("value", .number("12.34")), ("currency", .string("EUR"))])),
                ("threeDSServerTransID", .string(serverTransID)),
            ]))
            context.authenticationID = pre["authenticationId"]?.stringValue
            let state = pre["state"]?.stringValue ?? "?"
            result.notes.append("PXP pre-initiation: \(state)")
            result.gatewayView.authenticationState = state
            // The SDK goes on to the authentication only from a pending (or already successful) state; a gateway that
            // waives SCA for an exemption, or rejects or fails the authentication, ends the flow here.
            switch state {
            case "PendingClientData", "PendingCustomerChallenge", "AuthenticationSuccessful": break
            case "AuthenticationRejected": throw ClientFailure("PXP pre-initiation: the gateway rejected the authentication (\(state))", .gatewayState(state))
            default: throw ClientFailure("PXP pre-initiation: state \(state)", .gatewayState(state))
            }
            if pre["scaMandated"] == .bool(false), let exemptions = pre["applicableExemptions"]?.arrayValue, !exemptions.isEmpty {
                throw ClientFailure("PXP pre-initiation: SCA is not mandated and \(exemptions.compactMap(\.stringValue).joined(separator: ", ")) applies",
                                    .scaExemption)
            }
            if options.browser { try threeDSMethod(serverTransID: serverTransID) }
        case .trustPayments?:
            let responses = try trustPaymentsCall(["RISKDEC", "ACCOUNTCHECK", "THREEDQUERY"], extra: [("threedversion", .string(options.messageVersion))],
                                                  &result)
            result.notes.append("Trust Payments: " + responses.map { "\($0["requesttypedescription"]?.stringValue ?? "?") \($0["errorcode"]?.stringValue ?? "?")" }
                .joined(separator: ", "))
            // Without a THREEDQUERY that succeeded there is nothing to authenticate.
            if let failed = responses.first(where: { $0["errorcode"]?.stringValue != "0" }) {
                let type = failed["requesttypedescription"]?.stringValue ?? "?"
                throw ClientFailure("Trust Payments: \(type) errorcode \(failed["errorcode"]?.stringValue ?? "?") "
                                    + "(\(failed["errormessage"]?.stringValue ?? "no errormessage")); the authentication does not start", .gatewayRefused)
            }
        }
        return context
    }

    func gatewayAfter(_ context: GatewayContext, _ result: inout ClientResult) throws {
        guard let gateway = options.gateway, result.error == nil else { return }
        let threeDS = JSON.object([("transStatus", result.transStatus.map(JSON.string) ?? .null), ("eci", result.eci.map(JSON.string) ?? .null)])
        switch gateway {
        case .pxp:
            let t = try gatewayJSON("/pxp/transactions", .object([
                ("intent", .string("Authorisation")), ("authenticationId", .string(context.authenticationID ?? "")),
                ("gatewayTokenId", .string(context.tokenID ?? "")), ("amount", .object([("value", .number("12.34")), ("currency", .string("EUR"))])),
                ("threeDSecureData", threeDS),
            ]))
            result.notes.append("PXP authorisation: \(t["state"]?.stringValue ?? "?")")
            result.gatewayView.authorisationState = t["state"]?.stringValue ?? "?"
        case .trustPayments:
            let responses = try trustPaymentsCall(["AUTH", "SUBSCRIPTION"], extra: [("threedresponse", threeDS)], &result)
            result.notes.append("Trust Payments: " + responses.map { "\($0["requesttypedescription"]?.stringValue ?? "?") \($0["errorcode"]?.stringValue ?? "?")" }
                .joined(separator: ", "))
        }
    }

    /// The browser's 3DS Method: threeDSMethodData posted to the ACS in a hidden iframe, and the ACS's notification
    /// form posted on to the 3DS Server (the client's listener), as a browser would.
    func threeDSMethod(serverTransID: String) throws {
        let data = Base64URL.encode(JSON.object([("threeDSServerTransID", .string(serverTransID)),
                                                 ("threeDSMethodNotificationURL", .string(listenerURL + "/3ds/method"))]).bytes)
        let page = try post(gatewayURL("/acs/method"), FormBody.encode([("threeDSMethodData", data)]), contentType: "application/x-www-form-urlencoded")
        let html = String(decoding: page.body, as: UTF8.self)
        guard let action = HTMLForm.action(in: html), let notify = HTTPURL(action) else { throw ClientFailure("the 3DS Method page has no form", .challengeRuntime) }
        _ = try post(notify, FormBody.encode(HTMLForm.inputs(in: html)), contentType: "application/x-www-form-urlencoded")
    }
}
