import TapCore
import TapEMV

/// Why a client run failed, in the terms the seed SDKs (Cake3DS2, PXP Checkout, Trust Payments) map to their own
/// codes and callbacks: where the failure happened, not how it was worded.
public enum ClientFailureKind: Sendable, Equatable {
    /// The DS answered the AReq with an Erro (no challenge started).
    case dsErro(String)
    /// The DS did not answer, answered an HTTP error, or answered something that is no ARes.
    case dsFailure
    /// The ARes of a challenge was rejected: acsSignedContent does not verify, is signed outside the DS root, or names another key.
    case aresRejected
    /// The ACS answered a CReq with an Erro.
    case acsErro(String)
    /// The SDK rejected a CRes and told the ACS with this Erro code (302 …).
    case sdkErro(String)
    /// The SDK's CRes or challenge timeout expired.
    case challengeTimedOut
    /// The challenge failed outside the protocol's errors (a page without a form, a body that does not parse …).
    case challengeRuntime
    /// The challenge ended but no RReq came, so the 3DS Server has no result.
    case noResult
    /// A connection failed or timed out.
    case network
    /// Anything else.
    case unexpected
    /// A gateway endpoint answered an error in its own shape: HTTP status and its `errorCode`.
    case gateway(path: String, status: Int, code: String?)
    /// A gateway endpoint answered a body that is not the JSON it documents.
    case gatewayUnexpected(path: String)
    /// PXP pre-initiation answered a state in which the authentication does not go on (AuthenticationRejected …).
    case gatewayState(String)
    /// PXP pre-initiation waived SCA for an exemption.
    case scaExemption
    /// A Trust Payments-style request before the authentication answered a non-zero errorcode.
    case gatewayRefused
    /// A Trust Payments-style response JWT did not verify with the shared secret.
    case jwtUnverified
}

/// What the gateway calls of a client run returned, kept for the SDK's view of them.
public struct GatewayView: Sendable {
    /// One Trust Payments-style response: its request type, errorcode and message, and the field an invalid-field error names.
    public struct TPResponse: Sendable {
        public var type: String
        public var errorcode: String
        public var errormessage: String?
        public var field: String?
    }
    /// PXP pre-initiation's `state`.
    public var authenticationState: String?
    /// PXP authorisation's `state` (Authorised, Captured, Refused, Failed).
    public var authorisationState: String?
    /// Trust Payments: whether the last response JWT verified (nil: none received, or not checked).
    public var verified: Bool?
    public var responses: [TPResponse] = []
    public init() {}
}

extension ClientResult {
    /// `transStatus` typed (the final one: the RReq's after a challenge, else the ARes's).
    var status: TransStatus? { transStatus.map(TransStatus.init(wire:)) }

    /// The `3dstape-result` object: `outcome` success or failure, and in `sdk` what the seed SDK for this gateway would
    /// surface to the app: Cake3DS2's receiver outcome without a gateway, PXP Checkout's error code or submit result with
    /// `pxp`, Trust Payments' response list (errorcode per request type, whether the JWT verified) with `trustpayments`.
    public func surfaced(gateway: Gateway?, cancelled: Bool) -> JSON {
        let sdk: JSON
        var success = error == nil && status?.isAuthentication == true
        switch gateway {
        case nil: sdk = cakeView(cancelled: cancelled)
        case .pxp?:
            let (member, value) = pxpView()
            sdk = .object([("name", .string("PXP Checkout")), (member, .string(value))])
            success = success && (value == "AuthorisedSubmitResult" || value == "CapturedSubmitResult")
        case .trustPayments?:
            sdk = trustPaymentsView()
            // The guide's v2 case: a failed SUBSCRIPTION does not undo an AUTH that succeeded.
            let auth = gatewayView.responses.last { $0.type == "AUTH" }
            success = success && gatewayView.verified != false && auth?.errorcode == "0"
        }
        return .object([("outcome", .string(success ? "success" : "failure")), ("sdk", sdk)])
    }

    /// Cake3DS2: the CKDSChallengeStatusReceiver call for a challenge; `frictionless` or `noChallenge` when none ran.
    func cakeView(cancelled: Bool) -> JSON {
        var m: [(String, JSON)] = [("name", .string("Cake3DS2"))]
        switch failure {
        case nil, .noResult?:
            // noResult: the device saw the challenge complete; the server side has no result (the outcome says failure).
            m.append(("outcome", .string(!challenge ? "frictionless" : cancelled ? "cancelled" : "completed")))
            if let transStatus { m.append(("transStatus", .string(transStatus))) }
        case .challengeTimedOut?: m.append(("outcome", .string("timedOut")))
        case let .sdkErro(code)?, let .acsErro(code)?: m += [("outcome", .string("protocolError")), ("code", .string(code))]
        case .aresRejected?, .challengeRuntime?: m.append(("outcome", .string("runtimeError")))
        case .network? where challenge: m.append(("outcome", .string("runtimeError")))
        case let .dsErro(code)?: m += [("outcome", .string("noChallenge")), ("code", .string(code))]
        default: m.append(("outcome", .string("noChallenge")))
        }
        return .object(m)
    }

    /// PXP Checkout: `error` and a BaseSdkException errorCode, or `result` and the BaseSubmitResult of the authorisation.
    func pxpView() -> (String, String) {
        // An authentication the ACS rejected is the SDK's error, whatever the authorisation after it said.
        if status?.isRefusal == true, failure == nil || failure.map({ if case .gateway("/pxp/transactions", _, _) = $0 { return true }; return false }) == true {
            return ("error", "AUTHENTICATION_REJECTED")
        }
        switch failure {
        case let .gateway(path, status, code)?:
            if path == "/pxp/transactions" { return ("result", "FailedSubmitResult") }
            if status == 400 { return ("error", "VALIDATION_EXCEPTION") }
            if status >= 500 && code == "InternalError" { return ("error", "UNEXPECTED_SDK_EXCEPTION") }
            return ("error", path == "/pxp/tokens" ? "TOKEN_VAULT_EXCEPTION" : "PRE_INITIATE_AUTHENTICATION_FAILED")
        case .gatewayUnexpected?, .unexpected?: return ("error", "UNEXPECTED_SDK_EXCEPTION")
        case let .gatewayState(state)?:
            return ("error", state == "AuthenticationRejected" ? "TRANSACTION_AUTHENTICATION_REJECTED" : "TRANSACTION_AUTHENTICATION_INVALID")
        case .scaExemption?: return ("error", "TRANSACTION_AUTHENTICATION_REQUIRES_SCA_EXEMPTION")
        case .network?: return ("error", "NETWORK_SDK_EXCEPTION")
        case .challengeTimedOut?: return ("error", "CHALLENGE_TIMEOUT")
        case .dsErro?, .dsFailure?, .aresRejected?, .acsErro?, .sdkErro?, .challengeRuntime?, .noResult?, .gatewayRefused?, .jwtUnverified?:
            return ("error", "AUTHENTICATION_FAILED")
        case nil:
            if status?.isAuthentication != true { return ("error", "AUTHENTICATION_FAILED") }
            switch gatewayView.authorisationState {
            case "Authorised"?: return ("result", "AuthorisedSubmitResult")
            case "Captured"?: return ("result", "CapturedSubmitResult")
            case "Refused"?: return ("result", "RefusedSubmitResult")
            default: return ("result", "FailedSubmitResult")
            }
        }
    }

    /// Trust Payments: whether the response JWT verified, each request type's errorcode, the first error as the guide's
    /// TPError names it (invalidField with its field, or gatewayError), and whether the payment (AUTH) went through.
    func trustPaymentsView() -> JSON {
        let v = gatewayView
        var m: [(String, JSON)] = [("name", .string("Trust Payments"))]
        if let verified = v.verified { m.append(("verified", .bool(verified))) }
        var codes: [(String, JSON)] = []
        for r in v.responses where !codes.contains(where: { $0.0 == r.type }) { codes.append((r.type, .string(r.errorcode))) }
        m.append(("responses", .object(codes)))
        if failure == .jwtUnverified {
            m.append(("error", .string("unverifiedJWT")))
        } else if let bad = v.responses.first(where: { $0.errorcode != "0" }) {
            m.append(("error", .string(bad.errorcode == "30000" ? "invalidField" : "gatewayError")))
            m.append(("errorRequest", .string(bad.type)))
            if let field = bad.field { m.append(("field", .string(field))) }
        } else if failure != nil {
            m.append(("error", .string("apiClientError")))
        }
        let payment: String
        switch v.responses.last(where: { $0.type == "AUTH" }) {
        case nil: payment = "not authorised"
        case let auth?: payment = auth.errorcode == "0" && v.verified != false ? "authorised" : "declined"
        }
        m.append(("payment", .string(payment)))
        return .object(m)
    }
}
