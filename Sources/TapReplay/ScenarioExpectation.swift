import TapCore

/// One machine-checkable statement about what a client does in a failure scenario, judged by `3dstape check` from the
/// replay session (and, for the last three, from the command's exit status and its `3dstape-result:` line).
public enum ExpectationClause: Sendable, Equatable {
    /// The client sends an Erro with this errorCode (errorComponent C) to the ACS for the faulted transaction.
    case erroSent(code: String)
    /// After its Erro the client sends no further CReq for that transaction, except a CReq that cancels with one of
    /// these challengeCancel codes (SDKs legitimately differ: some follow an Erro 402 with a challengeCancel 08).
    case noCReqAfterErro(allowCancel: [String])
    /// The client sends no CReq at all: the challenge never starts.
    case noCReq
    /// The client gives up on the hung answer within this many seconds (closes the connection or sends the Erro).
    case givesUp(withinSeconds: Double)
    /// The challenge runs to its end: the final CRes (challengeCompletionInd Y, or the browser's cres) is read.
    case challengeCompletes
    /// An RReq the replayer sends for the transaction is taken and answered with an RRes (the client is the 3DS Server
    /// too, or its 3DS Server is pointed at the replayer).
    case rreqAnswered
    /// The command reports the failure: a non-zero exit status, or a `3dstape-result:` line whose `outcome` is not
    /// `success` (a UI test that asserts the app shows the error sets `exit-status` 0 instead).
    case reportsFailure
    /// The command exits with exactly this status.
    case exitStatus(Int32)
    /// The client retries: at least this many answers are requested again (the same recorded exchange matched twice).
    case retries(atLeast: Int)
    /// The command's `3dstape-result: {json}` line has this value at this dotted path (e.g. `sdk.error`).
    case result(field: String, equals: String)

    /// The clause's name in `--expect` files and `scenarios --json`; clauses of one kind replace each other.
    public var kind: String {
        switch self {
        case .erroSent: return "erro-sent"
        case .noCReqAfterErro: return "no-creq-after-erro"
        case .noCReq: return "no-creq"
        case .givesUp: return "gives-up"
        case .challengeCompletes: return "challenge-completes"
        case .rreqAnswered: return "rreq-answered"
        case .reportsFailure: return "reports-failure"
        case .exitStatus: return "exit-status"
        case .retries: return "retries"
        case let .result(field, _): return "result:\(field)"
        }
    }

    public static let kinds = ["erro-sent", "no-creq-after-erro", "no-creq", "gives-up", "challenge-completes", "rreq-answered", "reports-failure",
                        "exit-status", "retries", "result"]

    /// What the clause asks, in a line of the report.
    public var description: String {
        switch self {
        case let .erroSent(code): return "Erro \(code) sent to the ACS"
        case let .noCReqAfterErro(allow):
            return "no CReq after the Erro" + (allow.isEmpty ? "" : " (a challengeCancel \(allow.joined(separator: "/")) CReq allowed)")
        case .noCReq: return "no CReq (the challenge never starts)"
        case let .givesUp(d): return "gives up within \(CheckedDuration.describe(d))"
        case .challengeCompletes: return "the challenge completes (final CRes read)"
        case .rreqAnswered: return "the RReq is answered with an RRes"
        case .reportsFailure: return "the command reports failure (exit status not 0)"
        case let .exitStatus(s): return "exit status \(s)"
        case let .retries(n): return "retries at least \(counted(n, "time"))"
        case let .result(field, value): return "3dstape-result \(field) = \(value)"
        }
    }

    /// The clause in a few words, for a table cell.
    public var brief: String {
        switch self {
        case let .erroSent(code): return "Erro \(code)"
        case let .noCReqAfterErro(allow): return "no CReq after it" + (allow.isEmpty ? "" : " (cancel \(allow.joined(separator: "/")) ok)")
        case .noCReq: return "no CReq"
        case let .givesUp(d): return "gives up ≤ \(CheckedDuration.describe(d))"
        case .challengeCompletes: return "final CRes read"
        case .rreqAnswered: return "RReq answered"
        case .reportsFailure: return "exit ≠ 0"
        case let .exitStatus(s): return "exit \(s)"
        case let .retries(n): return "retries ≥ \(n)"
        case let .result(field, value): return "\(field) = \(value)"
        }
    }

    /// The clause as `scenarios --json` shows it and `--expect` files write it.
    public var json: JSON {
        var members: [(String, JSON)] = [("clause", .string(kind))]
        switch self {
        case let .erroSent(code): members.append(("code", .string(code)))
        case let .noCReqAfterErro(allow): members.append(("allow-cancel", .array(allow.map(JSON.string))))
        case let .givesUp(d): members.append(("within", .string(CheckedDuration.describe(d))))
        case let .exitStatus(s): members.append(("value", .number(String(s))))
        case let .retries(n): members.append(("at-least", .number(String(n))))
        case let .result(field, value):
            members = [("clause", .string("result")), ("field", .string(field)), ("equals", .string(value))]
        case .noCReq, .challengeCompletes, .rreqAnswered, .reportsFailure: break
        }
        return .object(members)
    }

    /// Reads a clause object of an `--expect` file, or says what is wrong with it.
    public static func read(_ json: JSON) throws(ReplayError) -> ExpectationClause {
        guard case let .object(members) = json else { throw ReplayError("a clause is an object such as {\"clause\": \"erro-sent\", \"code\": \"302\"}") }
        guard let kind = json["clause"]?.stringValue else { throw ReplayError("a clause needs \"clause\": one of \(kinds.joined(separator: ", "))") }
        let allowed: Set<String>
        let clause: ExpectationClause
        switch kind {
        case "erro-sent":
            guard let code = json["code"]?.stringValue, code.count == 3, let n = Int(code), (101...405).contains(n) else {
                throw ReplayError("erro-sent needs \"code\": a three-digit error code from 101 to 405, as a string")
            }
            (clause, allowed) = (.erroSent(code: code), ["code"])
        case "no-creq-after-erro":
            var allow: [String] = []
            if let a = json["allow-cancel"] {
                guard case let .array(items) = a, let codes = Optional(items.compactMap(\.stringValue)), codes.count == items.count,
                      codes.allSatisfy({ $0.count == 2 && Int($0).map { (1...10).contains($0) } == true }) else {
                    throw ReplayError("no-creq-after-erro: \"allow-cancel\" is a list of challengeCancel codes such as [\"08\"]")
                }
                allow = codes
            }
            (clause, allowed) = (.noCReqAfterErro(allowCancel: allow), ["allow-cancel"])
        case "no-creq": (clause, allowed) = (.noCReq, [])
        case "gives-up":
            guard let text = json["within"]?.stringValue else { throw ReplayError("gives-up needs \"within\": a duration such as \"12s\"") }
            do { clause = .givesUp(withinSeconds: try CheckedDuration.parse(text)) } catch { throw ReplayError("gives-up: \"within\" \(text): \(error)") }
            allowed = ["within"]
        case "challenge-completes": (clause, allowed) = (.challengeCompletes, [])
        case "rreq-answered": (clause, allowed) = (.rreqAnswered, [])
        case "reports-failure": (clause, allowed) = (.reportsFailure, [])
        case "exit-status":
            guard case let .number(t)? = json["value"], let n = Int32(t), (0...255).contains(n) else {
                throw ReplayError("exit-status needs \"value\": a whole number from 0 to 255")
            }
            (clause, allowed) = (.exitStatus(n), ["value"])
        case "retries":
            guard case let .number(t)? = json["at-least"], let n = Int(t), (1...100).contains(n) else {
                throw ReplayError("retries needs \"at-least\": a whole number from 1 to 100")
            }
            (clause, allowed) = (.retries(atLeast: n), ["at-least"])
        case "result":
            guard let field = json["field"]?.stringValue, !field.isEmpty, let value = json["equals"]?.stringValue else {
                throw ReplayError("result needs \"field\" (a dotted path such as sdk.error) and \"equals\" (a string)")
            }
            (clause, allowed) = (.result(field: field, equals: value), ["field", "equals"])
        default:
            throw ReplayError("unknown clause '\(kind)'; expected one of \(kinds.joined(separator: ", "))")
        }
        if let extra = members.map(\.0).first(where: { $0 != "clause" && $0 != "drop" && !allowed.contains($0) }) {
            throw ReplayError("\(kind): unknown member \"\(extra)\"")
        }
        return clause
    }
}

extension ReplayScenario {
    /// What a conformant client does in this scenario, as clauses `3dstape check` judges.
    public var expectation: [ExpectationClause] { ReplayScenario.expectations[name] ?? [] }

    /// The spec's 10 s CRes timeout (the SDK's per-message wait) plus a 2 s margin.
    public static let cresTimeoutAllowance = 12.0
    /// A 3DS Server's read timeout on the DS (10 s is usual; 30 s is the longest a checker allows by default).
    public static let aresTimeoutAllowance = 30.0

    /// One expectation per scenario name (a test checks every scenario has one).
    static let expectations: [String: [ExpectationClause]] = {
        let noChallenge: [ExpectationClause] = [.noCReq]
        let dsFailure: [ExpectationClause] = [.noCReq, .reportsFailure]
        var table: [String: [ExpectationClause]] = [
            "ds-timeout": [.givesUp(withinSeconds: aresTimeoutAllowance)] + dsFailure,
            "ds-unavailable": dsFailure,
            "acs-signature-invalid": noChallenge,
            "acs-untrusted-signer": noChallenge,
            "acs-ephemeral-key-mismatch": noChallenge,
            "challenge-timeout": [.givesUp(withinSeconds: cresTimeoutAllowance), .erroSent(code: "402"), .noCReqAfterErro(allowCancel: ["08"])],
            "cres-counter-mismatch": [.erroSent(code: "302"), .noCReqAfterErro(allowCancel: [])],
            "cres-undecryptable": [.erroSent(code: "302"), .noCReqAfterErro(allowCancel: [])],
            "challenge-rejected": [.challengeCompletes, .rreqAnswered],
            "acs-timeout": [.challengeCompletes, .rreqAnswered],
            "rreq-missing": [.challengeCompletes, .reportsFailure],
            "rreq-late": [.challengeCompletes, .rreqAnswered],
            "slow-acs": [.challengeCompletes, .rreqAnswered],
        ]
        for s in dsErros { table[s.name] = dsFailure }
        // Where the client reports what its SDK surfaced (a `3dstape-result` line), the code is part of the verdict.
        func sdk(_ field: String, _ value: String) -> ExpectationClause { .result(field: "sdk." + field, equals: value) }
        for st in ["U", "A", "R"] {
            table["challenge-completed-\(st.lowercased())"] = [.challengeCompletes, .rreqAnswered, sdk("outcome", "completed"), sdk("transStatus", st)]
        }
        table["acs-erro-203"] = [.noCReqAfterErro(allowCancel: []), .reportsFailure, sdk("outcome", "protocolError"), sdk("code", "203")]
        let beforeAuthentication = ["pxp-token-vault-exception": "TOKEN_VAULT_EXCEPTION", "pxp-validation-exception": "VALIDATION_EXCEPTION",
                                    "pxp-unexpected-exception": "UNEXPECTED_SDK_EXCEPTION", "pxp-network-exception": "NETWORK_SDK_EXCEPTION",
                                    "pxp-pre-initiate-failed": "PRE_INITIATE_AUTHENTICATION_FAILED",
                                    "pxp-transaction-authentication-rejected": "TRANSACTION_AUTHENTICATION_REJECTED",
                                    "pxp-transaction-authentication-invalid": "TRANSACTION_AUTHENTICATION_INVALID",
                                    "pxp-requires-sca-exemption": "TRANSACTION_AUTHENTICATION_REQUIRES_SCA_EXEMPTION",
                                    "pxp-authentication-failed": "AUTHENTICATION_FAILED"]
        for (name, code) in beforeAuthentication { table[name] = [.noCReq, .reportsFailure, sdk("error", code)] }
        table["pxp-challenge-timeout"] = [.givesUp(withinSeconds: cresTimeoutAllowance), .erroSent(code: "402"), .noCReqAfterErro(allowCancel: ["08"]),
                                          sdk("error", "CHALLENGE_TIMEOUT")]
        table["pxp-authentication-rejected"] = [.challengeCompletes, .rreqAnswered, .reportsFailure, sdk("error", "AUTHENTICATION_REJECTED")]
        table["pxp-authorised"] = [.result(field: "outcome", equals: "success"), sdk("result", "AuthorisedSubmitResult")]
        table["pxp-captured"] = [.result(field: "outcome", equals: "success"), sdk("result", "CapturedSubmitResult")]
        table["pxp-refused"] = [.reportsFailure, sdk("result", "RefusedSubmitResult")]
        table["pxp-failed"] = [.reportsFailure, sdk("result", "FailedSubmitResult")]
        table["tp-auth-declined"] = [.reportsFailure, sdk("responses.AUTH", "70000"), sdk("payment", "declined")]
        table["tp-invalid-field"] = [.noCReq, .reportsFailure, sdk("error", "invalidField"), sdk("field", "pan")]
        table["tp-subscription-failed"] = [.result(field: "outcome", equals: "success"), sdk("payment", "authorised"), sdk("responses.SUBSCRIPTION", "30000")]
        table["tp-jwt-unverified"] = [.noCReq, .reportsFailure, sdk("verified", "false")]
        table["tp-gateway-error"] = [.reportsFailure, sdk("error", "gatewayError"), sdk("responses.AUTH", "60010")]
        return table
    }()
}
