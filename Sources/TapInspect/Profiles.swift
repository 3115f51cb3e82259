import Foundation
import TapCore
import TapEMV
import TapJOSE
import TapRecording
import TapStore

/// `show --profile pxp`: each exchange labelled with the step of PXP Checkout's nine-step 3DS flow it belongs to and
/// the SDK callbacks that step drives (from the PXP Checkout iOS guide).
public enum PXPProfile {
    public struct Label: Sendable, Equatable {
        /// `4 pre-initiation`, `6 authentication: challenge` …
        public var step: String
        /// `onPreInitiateAuthentication → onPostInitiateAuthentication` …
        public var callback: String
    }

    public static func label(_ x: StoredExchange) -> Label? {
        let path = (URLComponents(string: x.url)?.path ?? x.url).lowercased()
        let types = Set(x.messages.compactMap(\.type))
        let locations = Set(x.messages.map(\.messageLocation))
        if path.contains("token") { return Label(step: "2 card tokenisation", callback: "- (the SDK tokenises the card)") }
        if path.contains("pre-initiate") || path.contains("preinitiate") {
            return Label(step: "4 pre-initiation", callback: "onPreInitiateAuthentication → onPostInitiateAuthentication")
        }
        if locations.contains(.form(field: "threeDSMethodData")) || path.hasSuffix("/method") {
            return Label(step: "5 fingerprinting (3DS Method)", callback: "- (device data collected by the SDK)")
        }
        if types.contains("AReq") || types.contains("ARes") {
            return Label(step: "6 authentication", callback: "onPreAuthentication → onPostAuthentication")
        }
        if types.contains("CReq") || types.contains("CRes") || path.contains("/challenge") {
            return Label(step: "6 authentication: challenge", callback: "- (the SDK presents the challenge)")
        }
        if types.contains("RReq") || types.contains("RRes") {
            return Label(step: "7 authentication result", callback: "onPostAuthentication (AuthenticationResult)")
        }
        if path.contains("/transactions") || path.contains("authoris") || path.contains("authoriz") {
            let state = (try? JSON.parse(x.responseBody))?["state"]?.stringValue
            let result = ["Authorised": "AuthorisedSubmitResult", "Captured": "CapturedSubmitResult", "Refused": "RefusedSubmitResult"][state ?? ""]
                ?? "FailedSubmitResult"
            return Label(step: "8 authorisation → 9 result (\(state ?? "no state"))", callback: "onPreAuthorisation → onPostAuthorisation (\(result))")
        }
        return nil
    }
}

/// `show --profile trustpayments`: Trust Payments' JWT request and response bodies decoded, the request types and each
/// response's errorcode and message, and the HS256 signatures checked with the shared secret (from the Trust Payments
/// iOS guide: every response JWT must be verified before it is trusted).
public enum TrustPaymentsProfile {
    /// What a JWT's signature says.
    public enum Signature: Sendable, Equatable, CustomStringConvertible {
        case verified
        case doesNotVerify
        /// Stored without its signature: 3dstape masked a card number or code in its payload.
        case masked
        case notChecked
        public var description: String {
            switch self {
            case .verified: return "verified"
            case .doesNotVerify: return "DOES NOT VERIFY"
            case .masked: return "masked by 3dstape (not verifiable)"
            case .notChecked: return "not checked (give --jwt-secret)"
            }
        }
    }

    public struct Response: Sendable, Equatable {
        public var type: String
        public var errorCode: String
        public var errorMessage: String
    }

    public struct Call: Sendable {
        public var requestTypes: [String]
        public var requestSignature: Signature?
        public var responses: [Response]
        public var responseSignature: Signature?
        /// The decoded payloads, for `--json`.
        public var requestPayload: JSON?
        public var responsePayload: JSON?
    }

    /// The call in an exchange whose request or response body holds a `jwt`, or nil.
    public static func decode(_ x: StoredExchange, secret: [UInt8]?) -> Call? {
        let request = try? JSON.parse(x.requestBody), response = try? JSON.parse(x.responseBody)
        let requestJWT = request?["jwt"]?.stringValue, responseJWT = response?["jwt"]?.stringValue
        guard requestJWT != nil || responseJWT != nil else { return nil }
        let (requestPayload, requestSignature) = open(requestJWT, secret)
        let (responsePayload, responseSignature) = open(responseJWT, secret)
        var types = strings(requestPayload?["payload"]?["requesttypedescriptions"])
        if types.isEmpty, case let .array(items)? = request?["request"], let first = items.first {
            types = strings(first["requesttypedescriptions"])
        }
        var responses: [Response] = []
        if case let .array(items)? = responsePayload?["payload"]?["response"] {
            responses = items.map { r in
                Response(type: r["requesttypedescription"]?.stringValue ?? "?", errorCode: r["errorcode"]?.stringValue ?? "?",
                         errorMessage: r["errormessage"]?.stringValue ?? "")
            }
        }
        return Call(requestTypes: types, requestSignature: requestSignature, responses: responses, responseSignature: responseSignature,
                    requestPayload: requestPayload, responsePayload: responsePayload)
    }

    static func open(_ text: String?, _ secret: [UInt8]?) -> (JSON?, Signature?) {
        guard let text else { return (nil, nil) }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let bytes = Base64URL.decode(parts[1]), let payload = try? JSON.parse(bytes) else { return (nil, .doesNotVerify) }
        if parts[2].isEmpty { return (payload, .masked) }
        guard let secret else { return (payload, .notChecked) }
        guard let jws = try? JWS(compact: text), (try? jws.verifyHS256(secret: secret)) != nil else { return (payload, .doesNotVerify) }
        return (payload, .verified)
    }

    static func strings(_ v: JSON?) -> [String] {
        guard case let .array(items)? = v else { return [] }
        return items.compactMap(\.stringValue)
    }
}
