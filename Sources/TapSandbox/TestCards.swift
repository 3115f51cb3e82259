import TapEMV

/// What a sandbox test card does.
public enum CardBehaviour: Sendable, Equatable {
    /// Frictionless with this transStatus (Y, N, U, A, R, I).
    case frictionless(TransStatus)
    /// A challenge with this acsUiType ("01" … "07").
    case challenge(uiType: ACSUIType)
    /// Decoupled: ARes transStatus D, then an RReq with Y after a moment (2.2.0 and later).
    case decoupled
    /// Frictionless Y, after the sandbox's `--ares-delay`.
    case delayedARes
    /// A challenge (text OTP) whose ACS never answers the CReq.
    case acsNeverAnswers
    /// The DS answers the AReq with Erro 305 (transaction data not valid).
    case erro
}

/// A sandbox test card: a Luhn-valid test PAN, what it does, and the answer that passes its challenge.
public struct TestCard: Sendable {
    public let pan: String
    public let behaviour: CardBehaviour
    public let summary: String
    /// The challenge answer that gives Y (client flags).
    public let passingAnswer: String
    /// The oldest messageVersion that supports it.
    public let minimumVersion: MessageVersion

    /// The documented test cards (README "Sandbox test cards").
    public static let all: [TestCard] = [
        TestCard(pan: "4000000000001000", behaviour: .frictionless(.authenticated), summary: "frictionless, authenticated (Y)", passingAnswer: "-", minimumVersion: .v2_1),
        TestCard(pan: "4000000000001018", behaviour: .frictionless(.notAuthenticated), summary: "frictionless, not authenticated (N)", passingAnswer: "-", minimumVersion: .v2_1),
        TestCard(pan: "4000000000001026", behaviour: .frictionless(.couldNotPerform), summary: "frictionless, could not be performed (U)", passingAnswer: "-", minimumVersion: .v2_1),
        TestCard(pan: "4000000000001034", behaviour: .frictionless(.attempted), summary: "frictionless, attempts (A)", passingAnswer: "-", minimumVersion: .v2_1),
        TestCard(pan: "4000000000001042", behaviour: .frictionless(.rejected), summary: "frictionless, rejected (R)", passingAnswer: "-", minimumVersion: .v2_1),
        TestCard(pan: "4000000000001059", behaviour: .frictionless(.informational), summary: "frictionless, informational only (I)", passingAnswer: "-", minimumVersion: .v2_2),
        TestCard(pan: "4000000000001067", behaviour: .challenge(uiType: .text), summary: "challenge, text OTP (01)", passingAnswer: "--answer 1234", minimumVersion: .v2_1),
        TestCard(pan: "4000000000001075", behaviour: .challenge(uiType: .singleSelect), summary: "challenge, single select (02)", passingAnswer: "--select 2", minimumVersion: .v2_1),
        TestCard(pan: "4000000000001083", behaviour: .challenge(uiType: .multiSelect), summary: "challenge, multi select (03)", passingAnswer: "--select 1 3", minimumVersion: .v2_1),
        TestCard(pan: "4000000000001091", behaviour: .challenge(uiType: .oob), summary: "challenge, out of band (04)", passingAnswer: "--oob", minimumVersion: .v2_1),
        TestCard(pan: "4000000000001109", behaviour: .challenge(uiType: .html), summary: "challenge, HTML (05)", passingAnswer: "--answer 1234", minimumVersion: .v2_1),
        TestCard(pan: "4000000000001117", behaviour: .challenge(uiType: .htmlOOB), summary: "challenge, HTML out of band (06)", passingAnswer: "--oob", minimumVersion: .v2_3),
        TestCard(pan: "4000000000001125", behaviour: .challenge(uiType: .information), summary: "challenge, information (07)", passingAnswer: "(continue; no flag)", minimumVersion: .v2_3),
        TestCard(pan: "4000000000001133", behaviour: .decoupled, summary: "decoupled (D), then RReq Y", passingAnswer: "-", minimumVersion: .v2_2),
        TestCard(pan: "4000000000001141", behaviour: .delayedARes, summary: "frictionless Y after --ares-delay", passingAnswer: "-", minimumVersion: .v2_1),
        TestCard(pan: "4000000000001158", behaviour: .acsNeverAnswers, summary: "challenge whose ACS never answers the CReq", passingAnswer: "(client times out: challengeCancel 08)", minimumVersion: .v2_1),
        TestCard(pan: "4000000000001166", behaviour: .erro, summary: "the DS answers Erro 305", passingAnswer: "-", minimumVersion: .v2_1),
    ]

    public static func find(_ pan: String) -> TestCard? { all.first { $0.pan == pan } }

    /// The OTP that passes text and HTML challenges.
    public static let otp = "1234"
    /// The select answers that pass.
    public static let singleSelectAnswer = "2"
    public static let multiSelectAnswer = "1,3"
}
