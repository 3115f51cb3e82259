import Foundation
import Testing
import TapCore
@testable import TapSandbox

/// The `3dstape-result` object (issue 28): each failure kind and result mapped to what Cake3DS2, PXP Checkout and
/// Trust Payments surface, and the outcome the guides call success.
@Suite struct ClientSDKViewTests {
    static func result(_ failure: ClientFailureKind? = nil, transStatus: String? = "Y", challenge: Bool = true,
                       _ edit: (inout ClientResult) -> Void = { _ in }) -> ClientResult {
        var r = ClientResult(messageVersion: "2.2.0")
        r.failure = failure
        r.error = failure == nil ? nil : .object([("message", .string("failed"))])
        r.transStatus = transStatus
        r.challenge = challenge
        edit(&r)
        return r
    }

    static func sdk(_ r: ClientResult, _ gateway: Gateway?, cancelled: Bool = false) -> String { r.surfaced(gateway: gateway, cancelled: cancelled)["sdk"]?.compact ?? "" }

    @Test func cake3DS2ReceiverOutcomes() {
        #expect(Self.sdk(Self.result(), nil) == #"{"name":"Cake3DS2","outcome":"completed","transStatus":"Y"}"#)
        #expect(Self.sdk(Self.result(transStatus: "N"), nil, cancelled: true) == #"{"name":"Cake3DS2","outcome":"cancelled","transStatus":"N"}"#)
        #expect(Self.sdk(Self.result(.challengeTimedOut, transStatus: nil), nil) == #"{"name":"Cake3DS2","outcome":"timedOut"}"#)
        #expect(Self.sdk(Self.result(.sdkErro("302")), nil) == #"{"name":"Cake3DS2","outcome":"protocolError","code":"302"}"#)
        #expect(Self.sdk(Self.result(.aresRejected), nil) == #"{"name":"Cake3DS2","outcome":"runtimeError"}"#)
        #expect(Self.sdk(Self.result(.dsErro("305"), transStatus: nil, challenge: false), nil) == #"{"name":"Cake3DS2","outcome":"noChallenge","code":"305"}"#)
        #expect(Self.sdk(Self.result(challenge: false), nil) == #"{"name":"Cake3DS2","outcome":"frictionless","transStatus":"Y"}"#)
        // The device saw the challenge complete; without an RReq the server has no result, so the outcome is failure.
        let noRReq = Self.result(.noResult).surfaced(gateway: nil, cancelled: false)
        #expect(noRReq["outcome"]?.stringValue == "failure" && noRReq["sdk"]?["outcome"]?.stringValue == "completed")
    }

    @Test func pxpCheckoutCodesAndSubmitResults() {
        let cases: [(ClientResult, String)] = [
            (Self.result(.gateway(path: "/pxp/tokens", status: 503, code: "TokenVaultUnavailable")), #""error":"TOKEN_VAULT_EXCEPTION""#),
            (Self.result(.gateway(path: "/pxp/tokens", status: 400, code: "InvalidCard")), #""error":"VALIDATION_EXCEPTION""#),
            (Self.result(.gateway(path: "/pxp/tokens", status: 500, code: "InternalError")), #""error":"UNEXPECTED_SDK_EXCEPTION""#),
            (Self.result(.gateway(path: "/pxp/authentication/pre-initiate", status: 422, code: "PreInitiateFailed")),
             #""error":"PRE_INITIATE_AUTHENTICATION_FAILED""#),
            (Self.result(.gatewayState("AuthenticationRejected")), #""error":"TRANSACTION_AUTHENTICATION_REJECTED""#),
            (Self.result(.gatewayState("AuthenticationFailed")), #""error":"TRANSACTION_AUTHENTICATION_INVALID""#),
            (Self.result(.scaExemption), #""error":"TRANSACTION_AUTHENTICATION_REQUIRES_SCA_EXEMPTION""#),
            (Self.result(.network), #""error":"NETWORK_SDK_EXCEPTION""#),
            (Self.result(.challengeTimedOut), #""error":"CHALLENGE_TIMEOUT""#),
            (Self.result(.dsErro("305")), #""error":"AUTHENTICATION_FAILED""#),
            (Self.result(transStatus: "N") { $0.gatewayView.authorisationState = "Refused" }, #""error":"AUTHENTICATION_REJECTED""#),
            (Self.result { $0.gatewayView.authorisationState = "Authorised" }, #""result":"AuthorisedSubmitResult""#),
            (Self.result { $0.gatewayView.authorisationState = "Captured" }, #""result":"CapturedSubmitResult""#),
            (Self.result { $0.gatewayView.authorisationState = "Refused" }, #""result":"RefusedSubmitResult""#),
            (Self.result(.gateway(path: "/pxp/transactions", status: 502, code: nil)), #""result":"FailedSubmitResult""#),
        ]
        for (r, want) in cases { #expect(Self.sdk(r, .pxp) == #"{"name":"PXP Checkout","# + want + "}", "\(r.failure.map { "\($0)" } ?? "-")") }
        #expect(Self.result { $0.gatewayView.authorisationState = "Captured" }.surfaced(gateway: .pxp, cancelled: false)["outcome"]?.stringValue == "success")
        #expect(Self.result { $0.gatewayView.authorisationState = "Refused" }.surfaced(gateway: .pxp, cancelled: false)["outcome"]?.stringValue == "failure")
    }

    @Test func trustPaymentsVerificationAndTheSubscriptionCase() {
        func tp(_ codes: [(String, String, String?)], verified: Bool? = true, _ failure: ClientFailureKind? = nil) -> JSON {
            Self.result(failure) { r in
                r.gatewayView.verified = verified
                r.gatewayView.responses = codes.map { .init(type: $0.0, errorcode: $0.1, errormessage: nil, field: $0.2) }
            }.surfaced(gateway: .trustPayments, cancelled: false)
        }
        // The guide's v2 case: AUTH succeeded, SUBSCRIPTION failed: the payment stands.
        let sub = tp([("THREEDQUERY", "0", nil), ("AUTH", "0", nil), ("SUBSCRIPTION", "30000", "subscriptiontype")])
        #expect(sub["outcome"]?.stringValue == "success" && sub["sdk"]?["payment"]?.stringValue == "authorised"
                && sub["sdk"]?["error"]?.stringValue == "invalidField" && sub["sdk"]?["field"]?.stringValue == "subscriptiontype")
        let declined = tp([("AUTH", "70000", nil)])
        #expect(declined["outcome"]?.stringValue == "failure" && declined["sdk"]?["payment"]?.stringValue == "declined"
                && declined["sdk"]?["error"]?.stringValue == "gatewayError")
        let unverified = tp([], verified: false, .jwtUnverified)
        #expect(unverified["outcome"]?.stringValue == "failure" && unverified["sdk"]?["verified"] == .bool(false)
                && unverified["sdk"]?["error"]?.stringValue == "unverifiedJWT")
        // Not checked: no `verified` member at all (an app that skips the check cannot say it verified).
        #expect(tp([("AUTH", "0", nil)], verified: nil)["sdk"]?["verified"] == nil)
    }
}
