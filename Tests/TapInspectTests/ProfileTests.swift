import Foundation
import Testing
import TapCore
import TapJOSE
import TapStore
@testable import TapInspect

/// The seeds' flows on the sample sessions the sandbox's gateways produce (sessions/demo-pxp, demo-trustpayments).
@Suite struct ProfileTests {
    static let secret = Array("3dstape-sandbox-gateway-secret".utf8)

    @Test func pxpStepsInTheOrderOfTheGuide() throws {
        #expect(Fixtures.pxp.count == 25)
        let labels = Fixtures.pxp.map { PXPProfile.label($0) }
        #expect(labels.allSatisfy { $0 != nil }, "every exchange of a PXP flow belongs to a step")
        let steps = labels.compactMap { $0?.step.split(separator: " ").first.map(String.init) }
        // The browser challenge (second flow): tokenise, pre-initiate, 3DS Method, authenticate, challenge, result, authorise.
        #expect(Array(steps[4..<14]) == ["2", "4", "5", "5", "6", "6", "6", "6", "7", "8"])
        #expect(labels[1]?.callback == "onPreInitiateAuthentication → onPostInitiateAuthentication")
        #expect(labels[2]?.callback == "onPreAuthentication → onPostAuthentication")
        #expect(labels[3]?.callback.contains("AuthorisedSubmitResult") == true)
        #expect(labels.last??.callback.contains("RefusedSubmitResult") == true, "the N card's authorisation is refused")
    }

    @Test func trustPaymentsRequestTypesResponsesAndSignatures() throws {
        let calls = Fixtures.trustPayments.compactMap { TrustPaymentsProfile.decode($0, secret: Self.secret) }
        #expect(calls.count == 8)
        #expect(calls.allSatisfy { $0.requestSignature == .verified && $0.responseSignature == .verified })
        #expect(calls[0].requestTypes == ["RISKDEC", "ACCOUNTCHECK", "THREEDQUERY"])
        #expect(calls[0].responses.map(\.errorCode) == ["0", "0", "0"])
        #expect(calls[1].requestTypes == ["AUTH", "SUBSCRIPTION"])
        #expect(calls[1].responses.last == TrustPaymentsProfile.Response(type: "SUBSCRIPTION", errorCode: "30000", errorMessage: "Invalid field"))
        #expect(calls.last?.responses.first?.errorCode == "70000", "the N card's AUTH is declined")
        // Without the secret nothing is claimed; with another, every response is flagged.
        #expect(TrustPaymentsProfile.decode(Fixtures.trustPayments[0], secret: nil)?.responseSignature == .notChecked)
        #expect(TrustPaymentsProfile.decode(Fixtures.trustPayments[0], secret: Array("other".utf8))?.responseSignature == .doesNotVerify)
    }

    @Test func aTamperedResponseIsFlagged() throws {
        var x = try #require(Fixtures.trustPayments.first { TrustPaymentsProfile.decode($0, secret: nil) != nil })
        let body = try JSON.parse(x.responseBody)
        let parts = body["jwt"]!.stringValue!.split(separator: ".").map(String.init)
        let payload = String(decoding: Base64URL.decode(parts[1])!, as: UTF8.self).replacingOccurrences(of: "\"errorcode\":\"0\"", with: "\"errorcode\":\"1\"")
        x.responseBody = body.setting("jwt", to: .string(parts[0] + "." + Base64URL.encode(payload) + "." + parts[2])).bytes
        let call = try #require(TrustPaymentsProfile.decode(x, secret: Self.secret))
        #expect(call.responseSignature == .doesNotVerify)
        #expect(call.responses.first?.errorCode == "1", "the payload is still shown, flagged")
    }

    @Test func aJWTMaskedOnRecordIsSaidToBe() throws {
        let jwt = try JWS.signHS256(payload: Array(#"{"payload":{"response":[]}}"#.utf8), secret: Self.secret).compact
        var x = Fixtures.trustPayments[0]
        let parts = jwt.split(separator: ".")
        x.responseBody = JSON.object([("jwt", .string("\(parts[0]).\(parts[1]).")) ]).bytes
        #expect(TrustPaymentsProfile.decode(x, secret: Self.secret)?.responseSignature == .masked)
    }

    @Test func gatewaySessionsValidateClean() {
        #expect(Validator.validate(Fixtures.pxp).isEmpty)
        #expect(Validator.validate(Fixtures.trustPayments).isEmpty)
    }
}
