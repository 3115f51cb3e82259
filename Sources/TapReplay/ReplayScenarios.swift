/// A named 3DS failure scenario: the fault rules it stands for, what the protocol expects of the client, and what the
/// SDKs whose guides 3dstape started from surface to the app (PXP Checkout's error codes, Cake3DS2's callbacks).
public struct ReplayScenario: Sendable {
    public let name: String
    public let rules: [String]
    public let summary: String
    /// What an SDK and its 3DS Server must do, per the EMV protocol.
    public let expected: String
    /// What the integration sees: PXP Checkout's BaseSdkException errorCode, Cake3DS2's CKDSChallengeStatusReceiver call.
    public let pxp: String
    public let cake: String

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
        for rule in try faultRules() {
            if let why = coverage.whyNever(rule) { notApplicable.append((rule, why)) } else { applicable.append(rule) }
        }
        return (applicable, notApplicable)
    }
}

extension ReplayScenario {
    /// Every scenario, in the order `3dstape scenarios` lists them.
    public static let all: [ReplayScenario] = base + dsErros

    public static func named(_ name: String) -> ReplayScenario? { all.first { $0.name == name } }

    static let base: [ReplayScenario] = [
        ReplayScenario(name: "ds-timeout", rules: ["ARes=hang"], summary: "the DS never answers the AReq",
                       expected: "the 3DS Server gives up at its read timeout (typically 10 s) and reports Erro 402, transaction timed out",
                       pxp: "AUTHENTICATION_FAILED or NETWORK_SDK_EXCEPTION (from the 3DS Server's failure)", cake: "no challenge starts; the app's server call fails"),
        ReplayScenario(name: "ds-unavailable", rules: ["ARes=status:503"], summary: "the DS answers HTTP 503",
                       expected: "the 3DS Server treats it as a system connection failure (Erro 405) and may retry",
                       pxp: "AUTHENTICATION_FAILED or NETWORK_SDK_EXCEPTION", cake: "no challenge starts; the app's server call fails"),
        ReplayScenario(name: "acs-signature-invalid", rules: ["ARes=bad-signature"], summary: "acsSignedContent whose signature does not verify",
                       expected: "the SDK rejects the ARes (signature check, SPEC §6.2.3.2) and does not start the challenge",
                       pxp: "AUTHENTICATION_FAILED", cake: "runtime error (CKDSRuntimeErrorEvent)"),
        ReplayScenario(name: "acs-untrusted-signer", rules: ["ARes=untrusted-signer"], summary: "acsSignedContent signed outside the DS root",
                       expected: "the SDK rejects the ARes: the x5c chain does not reach the DS root it was given",
                       pxp: "AUTHENTICATION_FAILED", cake: "runtime error (CKDSRuntimeErrorEvent)"),
        ReplayScenario(name: "acs-ephemeral-key-mismatch", rules: ["ARes=wrong-ephemeral-key"],
                       summary: "acsSignedContent carries an sdkEphemPubKey that is not the SDK's",
                       expected: "a conformant SDK compares sdkEphemPubKey with its own key and rejects the ARes (Stripe's SDKs do not check)",
                       pxp: "AUTHENTICATION_FAILED", cake: "runtime error (CKDSRuntimeErrorEvent)"),
        ReplayScenario(name: "challenge-timeout", rules: ["CRes#1=hang"], summary: "the ACS never answers the first CReq",
                       expected: "the SDK's CRes timeout (10 s per round trip) or its challenge timeout fires: it sends Erro 402 (component C) and "
                       + "ends the challenge; the ACS's RReq, if any, carries challengeCancel 08",
                       pxp: "CHALLENGE_TIMEOUT", cake: "transactionDidTimeOut"),
        ReplayScenario(name: "cres-counter-mismatch", rules: ["CRes#1=bad-counter"], summary: "a CRes whose acsCounterAtoS is not the expected one",
                       expected: "the SDK sends Erro 302 (counters are not equal) to the ACS and ends the challenge",
                       pxp: "AUTHENTICATION_FAILED", cake: "protocol error 302 (CKDSProtocolErrorEvent)"),
        ReplayScenario(name: "cres-undecryptable", rules: ["CRes#1=wrong-key"], summary: "a CRes encrypted with a key the SDK does not have",
                       expected: "the SDK sends Erro 302 (data decryption failure) to the ACS and ends the challenge",
                       pxp: "AUTHENTICATION_FAILED", cake: "protocol error 302 (CKDSProtocolErrorEvent)"),
        ReplayScenario(name: "challenge-rejected", rules: ["CRes=trans-status:N", "RReq=trans-status:N"],
                       summary: "the challenge ends with transStatus N (final CRes and RReq)",
                       expected: "the SDK completes the challenge; the 3DS Server takes N from the RReq and the payment is not authenticated",
                       pxp: "AUTHENTICATION_REJECTED", cake: "completed (CKDSCompletionEvent) with transactionStatus N"),
        ReplayScenario(name: "acs-timeout", rules: ["CRes#1=acs-timeout"], summary: "the ACS ends the challenge itself (its own timer)",
                       expected: "final CRes N; RReq with transStatus N, transStatusReason 14, challengeCancel 04",
                       pxp: "AUTHENTICATION_REJECTED", cake: "completed (CKDSCompletionEvent) with transactionStatus N"),
        ReplayScenario(name: "rreq-missing", rules: ["RReq=drop-rreq"], summary: "the ACS never sends the RReq after the challenge",
                       expected: "the 3DS Server has no authentication result: it must not report success (it waits, then fails or retries)",
                       pxp: "AUTHENTICATION_FAILED (the merchant backend has no result)", cake: "completed on the device; the server side has no result"),
        ReplayScenario(name: "rreq-late", rules: ["RReq=rreq-delay:8s"], summary: "the RReq arrives 8 s after the challenge",
                       expected: "a 3DS Server that waits less than 8 s for the RReq has no result; one that waits longer gets it",
                       pxp: "AUTHENTICATION_FAILED if the backend gave up first", cake: "completed on the device; the server side decides"),
        ReplayScenario(name: "slow-acs", rules: ["CRes=delay:3s"], summary: "every CRes takes 3 s",
                       expected: "the SDK keeps waiting (each round trip is under its 10 s CRes timeout) and the challenge completes",
                       pxp: "success, slowly", cake: "completed (CKDSCompletionEvent)"),
    ]

    /// An Erro from the DS instead of the ARes, for each code a DS sends.
    static let dsErros: [ReplayScenario] = ["101", "102", "201", "203", "303", "305", "402", "403", "404", "405"].map { code in
        ReplayScenario(name: "ds-erro-\(code)", rules: ["ARes=erro:\(code)"],
                       summary: "the DS answers the AReq with Erro \(code) (\(ReplayEngine.erroDescription(code)))",
                       expected: "the 3DS Server reports the Erro to the requestor; no challenge starts",
                       pxp: code == "402" ? "AUTHENTICATION_FAILED (timed out)" : "AUTHENTICATION_FAILED",
                       cake: "no challenge starts; the app's server call fails with the Erro")
    }
}
