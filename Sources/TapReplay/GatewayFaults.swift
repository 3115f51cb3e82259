import TapCore

/// The gateway fault actions' vocabulary: the PXP-style error codes and states, the Trust Payments-style request types
/// and errorcodes, and the paths each action changes (the sandbox's gateways, README "Gateways around the authentication").
public enum GatewayFaults {
    /// PXP-style error codes and the HTTP status each is answered with.
    public static let pxpErrors: [String: Int] = [
        "InvalidCard": 400, "InvalidRequest": 400, "Unauthorised": 401, "PreInitiateFailed": 422, "InternalError": 500,
        "TokenVaultUnavailable": 503, "ProviderUnavailable": 503,
    ]
    /// PXP-style states: of the pre-initiation (the guide's five) and of the authorisation.
    public static let pxpStates = ["AuthenticationSuccessful", "AuthenticationFailed", "AuthenticationRejected", "PendingCustomerChallenge",
                                   "PendingClientData", "Authorised", "Captured", "Refused", "Failed"]
    /// The states of a PXP-style authorisation answer (the others are the pre-initiation's).
    static let authorisationStates: Set<String> = ["Authorised", "Captured", "Refused", "Failed"]
    /// The request types of a Trust Payments-style request.
    public static let tpRequestTypes = ["RISKDEC", "ACCOUNTCHECK", "THREEDQUERY", "AUTH", "SUBSCRIPTION"]
    /// Trust Payments errorcodes and the errormessage each carries (codes outside the table get "Error").
    static let tpMessages: [String: String] = ["0": "Ok", "30000": "Invalid field", "30006": "Invalid JWT", "60010": "Bank system error",
                                               "60022": "Unauthorised", "70000": "Decline", "99999": "Unknown error"]
    public static let pxpPaths = ["/pxp/tokens", "/pxp/authentication/pre-initiate", "/pxp/transactions"]
    public static let tpPath = "/tp/jwt/"

    static func isName(_ s: String) -> Bool {
        !s.isEmpty && s.count <= 64 && s.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) }
    }

    /// Parses the argument of `tp-errorcode:REQUESTTYPE=CODE[/FIELD]`.
    static func tpErrorcode(_ a: String) throws(ReplayError) -> FaultAction {
        let usage = "tp-errorcode:REQUESTTYPE=CODE[/FIELD]: REQUESTTYPE one of \(tpRequestTypes.joined(separator: ", ")), CODE a number of 1 to 5 digits, "
            + "FIELD a field name (e.g. tp-errorcode:AUTH=70000, tp-errorcode:THREEDQUERY=30000/pan)"
        guard let eq = a.firstIndex(of: "=") else { throw ReplayError(usage) }
        let type = String(a[..<eq])
        var code = String(a[a.index(after: eq)...])
        var field: String?
        if let slash = code.firstIndex(of: "/") {
            field = String(code[code.index(after: slash)...])
            code = String(code[..<slash])
        }
        guard tpRequestTypes.contains(type), (1...5).contains(code.count), code.allSatisfy({ $0.isASCII && $0.isNumber }),
              field.map({ isName($0) }) ?? true else { throw ReplayError(usage) }
        return .tpErrorcode(type: type, code: code, field: field)
    }
}

extension FaultAction {
    /// The request paths whose answers a gateway action changes (nil: not a gateway action).
    var gatewayPaths: [String]? {
        switch self {
        case .pxpError: return GatewayFaults.pxpPaths
        case let .pxpState(s): return GatewayFaults.authorisationStates.contains(s) ? ["/pxp/transactions"] : ["/pxp/authentication/pre-initiate"]
        case .scaExemption: return ["/pxp/authentication/pre-initiate"]
        case .authRefused, .authFailed: return ["/pxp/transactions", GatewayFaults.tpPath]
        case .tpErrorcode, .jwtBadSignature: return [GatewayFaults.tpPath]
        default: return nil
        }
    }
}
