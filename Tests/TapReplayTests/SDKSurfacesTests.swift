import Testing
@testable import TapReplay

/// What the SDKs surface for an outcome several scenarios share is said once (`SDKSurfaces`): scenarios that end the
/// same way carry the same words, and a parameterised outcome keeps each scenario's own code or status.
@Suite struct SDKSurfacesTests {
    func surfaces(_ name: String) throws -> SDKSurfaces { try #require(ReplayScenario.named(name), "\(name)").surfaces }

    @Test func scenariosThatEndAlikeSurfaceAlike() throws {
        for n in ["acs-signature-invalid", "acs-untrusted-signer", "acs-ephemeral-key-mismatch"] { #expect(try surfaces(n) == .aresRejected, "\(n)") }
        for n in ["challenge-timeout", "pxp-challenge-timeout"] { #expect(try surfaces(n) == .challengeTimedOut, "\(n)") }
        for n in ["challenge-rejected", "acs-timeout", "pxp-authentication-rejected"] {
            #expect(try surfaces(n) == .challengeCompleted(transStatus: "N"), "\(n)")
        }
        #expect(try surfaces("cres-counter-mismatch") == surfaces("cres-undecryptable"))
        #expect(try surfaces("pxp-authentication-failed") == surfaces("ds-erro-305"))
    }

    @Test func parameterisedOutcomesKeepTheirCodeAndStatus() throws {
        #expect(try surfaces("cres-counter-mismatch") == SDKSurfaces(pxp: "AUTHENTICATION_FAILED", cake: "protocol error 302 (CKDSProtocolErrorEvent)",
                                                                     trustPayments: "APIClientError (3-D Secure authentication error)"))
        #expect(try surfaces("acs-erro-203").cake == "protocol error 203 (CKDSProtocolErrorEvent)")
        #expect(try surfaces("ds-erro-402").pxp == "AUTHENTICATION_FAILED (timed out)")
        #expect(try surfaces("ds-erro-305").pxp == "AUTHENTICATION_FAILED")
        #expect(try surfaces("challenge-completed-a") == SDKSurfaces(pxp: "success (AuthorisedSubmitResult after authorisation)",
                                                                     cake: "completed (CKDSCompletionEvent) with transactionStatus A",
                                                                     trustPayments: "threedresponse A; AUTH authorised"))
        #expect(try surfaces("challenge-completed-u").pxp == "AUTHENTICATION_FAILED")
        #expect(try surfaces("challenge-completed-r").trustPayments == "threedresponse R; AUTH declined")
        #expect(try surfaces("pxp-token-vault-exception").cake == "not applicable (no PXP gateway)")
        #expect(try surfaces("tp-auth-declined").cake == "not applicable (no Trust Payments gateway)")
    }
}
