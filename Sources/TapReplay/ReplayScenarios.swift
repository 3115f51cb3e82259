import TapStore

/// The gateway a scenario needs in the session (its rules change that gateway's answers, or its codes are that SDK's).
public enum ScenarioGateway: String, Sendable {
    case pxp
    case trustPayments = "trustpayments"

    /// The path prefix of the gateway's recorded calls.
    public var pathPrefix: String { self == .pxp ? "/pxp/" : "/tp/jwt/" }
    public var title: String { self == .pxp ? "PXP Checkout" : "Trust Payments" }
}

/// What the SDKs whose guides 3dstape started from surface to the app for one scenario: PXP Checkout's BaseSdkException
/// errorCode or submit result, Cake3DS2's CKDSChallengeStatusReceiver call, Trust Payments' errorcode and TPError ("not
/// applicable" where the SDK never sees the case). An outcome several scenarios share is named once, below.
public struct SDKSurfaces: Sendable, Equatable {
    public let pxp: String
    public let cake: String
    public let trustPayments: String
}

extension SDKSurfaces {
    private static let tpAuthenticationError = "APIClientError (3-D Secure authentication error)"
    private static let tpThreeDQueryFails = "THREEDQUERY fails (gatewayError)"

    /// The DS gives no answer the 3DS Server can use (none, or an HTTP error): its call fails before any challenge.
    static func dsCallFails(pxp: String) -> SDKSurfaces {
        SDKSurfaces(pxp: pxp, cake: "no challenge starts; the app's server call fails", trustPayments: tpThreeDQueryFails)
    }

    /// The DS answers the AReq with an Erro with this code.
    static func dsErro(_ code: String) -> SDKSurfaces {
        SDKSurfaces(pxp: code == "402" ? "AUTHENTICATION_FAILED (timed out)" : "AUTHENTICATION_FAILED",
                    cake: "no challenge starts; the app's server call fails with the Erro", trustPayments: tpThreeDQueryFails)
    }

    /// The SDK rejects the ARes (its acsSignedContent) and starts no challenge.
    static let aresRejected = SDKSurfaces(pxp: "AUTHENTICATION_FAILED", cake: "runtime error (CKDSRuntimeErrorEvent)",
                                          trustPayments: tpAuthenticationError)

    /// The challenge ends on an Erro with this code: the SDK's own (302) or the ACS's.
    static func challengeEndsWithErro(_ code: String) -> SDKSurfaces {
        SDKSurfaces(pxp: "AUTHENTICATION_FAILED", cake: "protocol error \(code) (CKDSProtocolErrorEvent)", trustPayments: tpAuthenticationError)
    }

    /// The SDK's CRes or challenge timeout fires.
    static let challengeTimedOut = SDKSurfaces(pxp: "CHALLENGE_TIMEOUT", cake: "transactionDidTimeOut",
                                               trustPayments: tpAuthenticationError + "; no AUTH")

    /// The challenge completes with this transStatus (N, U, A or R), which the 3DS Server takes from the RReq.
    static func challengeCompleted(transStatus st: String) -> SDKSurfaces {
        SDKSurfaces(pxp: st == "A" ? "success (AuthorisedSubmitResult after authorisation)"
                        : st == "U" ? "AUTHENTICATION_FAILED" : "AUTHENTICATION_REJECTED",
                    cake: "completed (CKDSCompletionEvent) with transactionStatus \(st)",
                    trustPayments: st == "A" ? "threedresponse A; AUTH authorised" : "threedresponse \(st); AUTH declined")
    }

    /// A case of the PXP-style gateway's own, which Cake3DS2 (no gateway) never sees.
    static func pxpGateway(_ pxp: String, trustPayments: String = "not applicable (no Trust Payments gateway)") -> SDKSurfaces {
        SDKSurfaces(pxp: pxp, cake: "not applicable (no PXP gateway)", trustPayments: trustPayments)
    }

    /// A case of the Trust Payments-style gateway's own, which Cake3DS2 (no gateway) never sees.
    static func trustPaymentsGateway(_ trustPayments: String, pxp: String) -> SDKSurfaces {
        SDKSurfaces(pxp: pxp, cake: "not applicable (no Trust Payments gateway)", trustPayments: trustPayments)
    }
}

/// A named 3DS failure scenario: the fault rules it stands for, what the protocol expects of the client, and what the
/// SDKs whose guides 3dstape started from surface to the app (PXP Checkout's error codes, Cake3DS2's callbacks, Trust
/// Payments' response list).
public struct ReplayScenario: Sendable {
    public let name: String
    public let rules: [String]
    public let summary: String
    /// What an SDK and its 3DS Server must do, per the EMV protocol (or, for a gateway's own answers, per its guide).
    public let expected: String
    /// What the integration sees in each SDK.
    public let surfaces: SDKSurfaces
    /// The gateway whose recorded calls the scenario needs (nil: any session with the messages its rules change).
    public var gateway: ScenarioGateway? = nil

    /// Why a session lacks the gateway this scenario needs (nil: it has its calls, or the scenario needs none).
    public func missingGateway(in catalog: ReplayCatalog) -> String? {
        guard let g = gateway, !catalog.exchanges.contains(where: { ReplayURL.pathAndQuery($0.url).path.hasPrefix(g.pathPrefix) }) else { return nil }
        return "the scenario needs a \(g.title) gateway session (no \(g.pathPrefix)… exchange recorded)"
    }

    /// The rules, parsed.
    public func faultRules() throws(ReplayError) -> [FaultRule] { try rules.map { (r) throws(ReplayError) in try FaultRule.parse(r) } }

    /// Which of this scenario's rules can apply to a session, and why each other one cannot (`challenge-rejected` on a
    /// browser session: its RReq rule applies, its CRes rule cannot, the session has no app-channel CRes). `replay
    /// --scenario NAME --partial` applies the first list; a runner of scenarios skips one whose rules all fall in the second.
    public func applicability(to catalog: ReplayCatalog) throws(ReplayError)
        -> (applicable: [FaultRule], notApplicable: [(rule: FaultRule, reason: String)]) {
        try applicability(to: RuleCoverage(catalog))
    }

    /// As `applicability(to:)`, on a catalog's answers indexed once (for a runner that asks for every scenario).
    public func applicability(to coverage: RuleCoverage) throws(ReplayError)
        -> (applicable: [FaultRule], notApplicable: [(rule: FaultRule, reason: String)]) {
        var applicable: [FaultRule] = []
        var notApplicable: [(rule: FaultRule, reason: String)] = []
        // A gateway scenario's 3DS rules (ARes=erro:305 for AUTHENTICATION_FAILED) would apply anywhere; its codes are the gateway SDK's.
        if let missing = missingGateway(in: coverage.catalog) { return ([], try faultRules().map { ($0, missing) }) }
        for rule in try faultRules() {
            if let why = coverage.whyNever(rule) { notApplicable.append((rule, why)) } else { applicable.append(rule) }
        }
        return (applicable, notApplicable)
    }
}

extension ReplayScenario {
    /// Every scenario, in the order `3dstape scenarios` lists them.
    public static let all: [ReplayScenario] = base + dsErros + cake + pxpCodes + trustPaymentsCodes

    public static func named(_ name: String) -> ReplayScenario? { all.first { $0.name == name } }

    static let base: [ReplayScenario] = [
        ReplayScenario(name: "ds-timeout", rules: ["ARes=hang"], summary: "the DS never answers the AReq",
                       expected: "the 3DS Server gives up at its read timeout (typically 10 s) and reports Erro 402, transaction timed out",
                       surfaces: .dsCallFails(pxp: "AUTHENTICATION_FAILED or NETWORK_SDK_EXCEPTION (from the 3DS Server's failure)")),
        ReplayScenario(name: "ds-unavailable", rules: ["ARes=status:503"], summary: "the DS answers HTTP 503",
                       expected: "the 3DS Server treats it as a system connection failure (Erro 405) and may retry",
                       surfaces: .dsCallFails(pxp: "AUTHENTICATION_FAILED or NETWORK_SDK_EXCEPTION")),
        ReplayScenario(name: "acs-signature-invalid", rules: ["ARes=bad-signature"], summary: "acsSignedContent whose signature does not verify",
                       expected: "the SDK rejects the ARes (signature check, SPEC §6.2.3.2) and does not start the challenge",
                       surfaces: .aresRejected),
        ReplayScenario(name: "acs-untrusted-signer", rules: ["ARes=untrusted-signer"], summary: "acsSignedContent signed outside the DS root",
                       expected: "the SDK rejects the ARes: the x5c chain does not reach the DS root it was given",
                       surfaces: .aresRejected),
        ReplayScenario(name: "acs-ephemeral-key-mismatch", rules: ["ARes=wrong-ephemeral-key"],
                       summary: "acsSignedContent carries an sdkEphemPubKey that is not the SDK's",
                       expected: "a conformant SDK compares sdkEphemPubKey with its own key and rejects the ARes (Stripe's SDKs do not check)",
                       surfaces: .aresRejected),
        ReplayScenario(name: "challenge-timeout", rules: ["CRes#1=hang"], summary: "the ACS never answers the first CReq",
                       expected: "the SDK's CRes timeout (10 s per round trip) or its challenge timeout fires: it sends Erro 402 (component C) and "
                       + "ends the challenge; the ACS's RReq, if any, carries challengeCancel 08",
                       surfaces: .challengeTimedOut),
        ReplayScenario(name: "cres-counter-mismatch", rules: ["CRes#1=bad-counter"], summary: "a CRes whose acsCounterAtoS is not the expected one",
                       expected: "the SDK sends Erro 302 (counters are not equal) to the ACS and ends the challenge",
                       surfaces: .challengeEndsWithErro("302")),
        ReplayScenario(name: "cres-undecryptable", rules: ["CRes#1=wrong-key"], summary: "a CRes encrypted with a key the SDK does not have",
                       expected: "the SDK sends Erro 302 (data decryption failure) to the ACS and ends the challenge",
                       surfaces: .challengeEndsWithErro("302")),
        challengeCompleted("challenge-rejected", transStatus: "N"),
        ReplayScenario(name: "acs-timeout", rules: ["CRes#1=acs-timeout"], summary: "the ACS ends the challenge itself (its own timer)",
                       expected: "final CRes N; RReq with transStatus N, transStatusReason 14, challengeCancel 04",
                       surfaces: .challengeCompleted(transStatus: "N")),
        ReplayScenario(name: "rreq-missing", rules: ["RReq=drop-rreq"], summary: "the ACS never sends the RReq after the challenge",
                       expected: "the 3DS Server has no authentication result: it must not report success (it waits, then fails or retries)",
                       surfaces: SDKSurfaces(pxp: "AUTHENTICATION_FAILED (the merchant backend has no result)",
                                             cake: "completed on the device; the server side has no result",
                                             trustPayments: "not applicable (the gateway is the 3DS Server: its AUTH fails)")),
        ReplayScenario(name: "rreq-late", rules: ["RReq=rreq-delay:8s"], summary: "the RReq arrives 8 s after the challenge",
                       expected: "a 3DS Server that waits less than 8 s for the RReq has no result; one that waits longer gets it",
                       surfaces: SDKSurfaces(pxp: "AUTHENTICATION_FAILED if the backend gave up first",
                                             cake: "completed on the device; the server side decides",
                                             trustPayments: "not applicable (the gateway is the 3DS Server)")),
        ReplayScenario(name: "slow-acs", rules: ["CRes=delay:3s"], summary: "every CRes takes 3 s",
                       expected: "the SDK keeps waiting (each round trip is under its 10 s CRes timeout) and the challenge completes",
                       surfaces: SDKSurfaces(pxp: "success, slowly", cake: "completed (CKDSCompletionEvent)", trustPayments: "success, slowly")),
    ]

    /// An Erro from the DS instead of the ARes, for each code a DS sends.
    static let dsErros: [ReplayScenario] = ["101", "102", "201", "203", "303", "305", "402", "403", "404", "405"].map { code in
        ReplayScenario(name: "ds-erro-\(code)", rules: ["ARes=erro:\(code)"],
                       summary: "the DS answers the AReq with Erro \(code) (\(ReplayEngine.erroDescription(code)))",
                       expected: "the 3DS Server reports the Erro to the requestor; no challenge starts", surfaces: .dsErro(code))
    }

    /// The challenge ends with transStatus `st` (N, U, A or R): the final CRes and the RReq carry it.
    static func challengeCompleted(_ name: String, transStatus st: String) -> ReplayScenario {
        ReplayScenario(name: name, rules: ["CRes=trans-status:\(st)", "RReq=trans-status:\(st)"],
                       summary: "the challenge ends with transStatus \(st) (final CRes and RReq)",
                       expected: "the SDK completes the challenge; the 3DS Server takes \(st) from the RReq"
                           + (st == "A" ? " (attempts: authenticated for liability)" : " and the payment is not authenticated"),
                       surfaces: .challengeCompleted(transStatus: st))
    }

    /// Cake3DS2's receiver outcomes the base scenarios do not reach: completed with each other transStatus, and a
    /// protocol error from an Erro the ACS sends.
    static let cake: [ReplayScenario] = ["U", "A", "R"].map { st in challengeCompleted("challenge-completed-\(st.lowercased())", transStatus: st) } + [
        ReplayScenario(name: "acs-erro-203", rules: ["CRes#1=erro:203"], summary: "the ACS answers the first CReq with Erro 203 (a data element invalid)",
                       expected: "the SDK ends the challenge and reports the ACS's protocol error; it sends nothing more to the ACS",
                       surfaces: .challengeEndsWithErro("203")),
    ]

    /// One gateway's scenarios, from rows of (name, rules, summary, expected, what the SDKs surface).
    static func onGateway(_ gateway: ScenarioGateway, _ rows: [(name: String, rules: [String], summary: String, expected: String, surfaces: SDKSurfaces)])
        -> [ReplayScenario] {
        rows.map { ReplayScenario(name: $0.name, rules: $0.rules, summary: $0.summary, expected: $0.expected, surfaces: $0.surfaces, gateway: gateway) }
    }

    /// PXP Checkout: every `handleSubmitError` code and the four submit results, on a session through the PXP-style
    /// gateway. The guide names the codes but not their causes; where it does not say, the closest gateway or protocol
    /// cause is the rule (said in `expected`).
    static let pxpCodes = onGateway(.pxp, [
        ("pxp-token-vault-exception", ["path:/pxp/tokens=pxp-error:TokenVaultUnavailable"], "card tokenisation answers 503 TokenVaultUnavailable",
         "the SDK stops before any authentication (the guide does not say what triggers it: the token vault failing to store the card is the closest cause)",
         .pxpGateway("TOKEN_VAULT_EXCEPTION")),
        ("pxp-validation-exception", ["path:/pxp/tokens=pxp-error:InvalidCard"], "card tokenisation answers 400 InvalidCard",
         "the SDK stops before any authentication (the guide does not say: a request the gateway refuses as invalid, HTTP 400)",
         .pxpGateway("VALIDATION_EXCEPTION")),
        ("pxp-unexpected-exception", ["path:/pxp/tokens=pxp-error:InternalError"], "card tokenisation answers 500 InternalError",
         "the SDK stops (the guide does not say: a gateway error it has no code for)", .pxpGateway("UNEXPECTED_SDK_EXCEPTION")),
        ("pxp-network-exception", ["path:/pxp/tokens=reset"], "the gateway resets the connection of the tokenisation call",
         "the SDK stops and reports a network failure (the guide does not say: no answer at all)", .pxpGateway("NETWORK_SDK_EXCEPTION")),
        ("pxp-pre-initiate-failed", ["path:/pxp/authentication/pre-initiate=pxp-error:PreInitiateFailed"],
         "pre-initiation answers 422 PreInitiateFailed",
         "onPostInitiateAuthentication gets a FailedAuthenticationResult; no AReq is sent", .pxpGateway("PRE_INITIATE_AUTHENTICATION_FAILED")),
        ("pxp-transaction-authentication-rejected", ["path:/pxp/authentication/pre-initiate=pxp-state:AuthenticationRejected"],
         "pre-initiation answers state AuthenticationRejected",
         "no AReq is sent (the guide does not say: the gateway's own authentication state Rejected is the closest cause)",
         .pxpGateway("TRANSACTION_AUTHENTICATION_REJECTED")),
        ("pxp-transaction-authentication-invalid", ["path:/pxp/authentication/pre-initiate=pxp-state:AuthenticationFailed"],
         "pre-initiation answers state AuthenticationFailed",
         "no AReq is sent (the guide does not say: a state in which the authentication cannot go on is the closest cause)",
         .pxpGateway("TRANSACTION_AUTHENTICATION_INVALID")),
        ("pxp-requires-sca-exemption", ["path:/pxp/authentication/pre-initiate=sca-exemption:LowValue"],
         "pre-initiation answers scaMandated false with the LowValue exemption applicable",
         "no AReq is sent (the guide does not say: SCA waived for an exemption is the closest cause)",
         .pxpGateway("TRANSACTION_AUTHENTICATION_REQUIRES_SCA_EXEMPTION")),
        ("pxp-authentication-failed", ["ARes=erro:305"], "the DS answers the AReq with Erro 305 on a PXP payment",
         "the 3DS Server reports the Erro; no challenge starts; no authorisation", .dsErro("305")),
        ("pxp-challenge-timeout", ["CRes#1=hang"], "the ACS never answers the first CReq of a PXP payment",
         "the SDK times out: Erro 402 to the ACS, challengeCancel 08; no authorisation", .challengeTimedOut),
        ("pxp-authentication-rejected", ["CRes=trans-status:N", "RReq=trans-status:N"], "the challenge of a PXP payment ends with transStatus N",
         "the challenge completes; the 3DS Server takes N from the RReq; the payment is not authenticated", .challengeCompleted(transStatus: "N")),
        ("pxp-authorised", ["path:/pxp/transactions=pxp-state:Authorised"], "the authorisation answers state Authorised",
         "onPostAuthorisation gets the authorised result; the payment stands", .pxpGateway("AuthorisedSubmitResult", trustPayments: "AUTH errorcode 0")),
        ("pxp-captured", ["path:/pxp/transactions=pxp-state:Captured"], "the authorisation answers state Captured",
         "onPostAuthorisation gets the captured result; the payment stands", .pxpGateway("CapturedSubmitResult", trustPayments: "AUTH errorcode 0")),
        ("pxp-refused", ["path:/pxp/transactions=auth-refused"], "the authorisation answers state Refused (05 Do not honour)",
         "onPostAuthorisation gets the refusal with its stateData; the payment is declined",
         .pxpGateway("RefusedSubmitResult", trustPayments: "AUTH errorcode 70000 (see tp-auth-declined)")),
        ("pxp-failed", ["path:/pxp/transactions=auth-failed"], "the authorisation answers state Failed",
         "onPostAuthorisation gets the failure with its errorReason; no payment",
         .pxpGateway("FailedSubmitResult", trustPayments: "AUTH errorcode 60010 (see tp-gateway-error)")),
    ])

    /// Trust Payments: the v2 response list's cases, on a session through the Trust Payments-style gateway (the guide:
    /// verify every response JWT, then read each response's errorcode).
    static let trustPaymentsCodes = onGateway(.trustPayments, [
        ("tp-auth-declined", ["path:/tp/jwt/=auth-refused"], "the AUTH response carries errorcode 70000 (Decline)",
         "the payment is declined; the app says so",
         .trustPaymentsGateway("AUTH errorcode 70000; TPError gatewayError", pxp: "RefusedSubmitResult (see pxp-refused)")),
        ("tp-invalid-field", ["path:/tp/jwt/=tp-errorcode:THREEDQUERY=30000/pan"], "the THREEDQUERY response carries errorcode 30000 for the field pan",
         "no authentication starts; the app names the invalid field",
         .trustPaymentsGateway("THREEDQUERY errorcode 30000; TPError invalidField (pan)", pxp: "VALIDATION_EXCEPTION (see pxp-validation-exception)")),
        ("tp-subscription-failed", ["path:/tp/jwt/=tp-errorcode:SUBSCRIPTION=30000/subscriptiontype"],
         "THREEDQUERY and AUTH succeed, the SUBSCRIPTION response carries errorcode 30000",
         "the payment stands: the app must not say it failed (the guide's v2 case); it says the subscription is not set up",
         .trustPaymentsGateway("AUTH errorcode 0, SUBSCRIPTION errorcode 30000; TPError invalidField (subscriptiontype)",
                               pxp: "not applicable (no subscription request)")),
        ("tp-jwt-unverified", ["path:/tp/jwt/=jwt-bad-signature"], "the response JWT's HS256 signature does not verify",
         "the app must not trust the response: it verifies every response JWT first and stops",
         .trustPaymentsGateway("verification fails; nothing in the responses is used", pxp: "not applicable (no response JWT)")),
        ("tp-gateway-error", ["path:/tp/jwt/=tp-errorcode:AUTH=60010"], "the AUTH response carries errorcode 60010 (Bank system error)",
         "no payment; the app reports the gateway's error",
         .trustPaymentsGateway("AUTH errorcode 60010; TPError gatewayError", pxp: "FailedSubmitResult (see pxp-failed)")),
    ])
}
