import TapCore
import TapReplay

/// The verdict on one scenario: pass, fail or skip, with each clause and what was observed against it.
public struct ScenarioVerdict: Sendable {
    public enum Outcome: String, Sendable { case pass, fail, skip }

    /// One clause of the expectation, held against the observation.
    public struct ClauseResult: Sendable {
        public var clause: ExpectationClause
        public var passed: Bool
        /// What was seen, in words (`Erro 302 sent`, `waited 30.0 s and did not give up` …).
        public var observed: String
    }

    public var scenario: String
    public var outcome: Outcome
    /// The expectation's clauses (all of them, also when the run failed before any could be judged).
    public var expected: [ExpectationClause] = []
    /// The clauses judged, with what was observed.
    public var clauses: [ClauseResult]
    /// Why a scenario was skipped, or what made it fail before any clause could be judged (the fault never reached).
    public var reason: String?
    public var observation: CheckObservation?
    /// Seconds the scenario's runs took.
    public var seconds: Double = 0
    /// The replay sessions and command logs of its runs.
    public var sessions: [String] = []
    public var logs: [String] = []
    /// Runs that passed, of how many (with `--runs N`).
    public var runsPassed = 0, runs = 0

    /// A run that failed before anything could be judged (its replay session could not be read).
    public static func failed(_ scenario: String, expected: [ExpectationClause], reason: String) -> ScenarioVerdict {
        ScenarioVerdict(scenario: scenario, outcome: .fail, expected: expected, clauses: [], reason: reason)
    }

    public static func skipped(_ scenario: String, reason: String) -> ScenarioVerdict {
        ScenarioVerdict(scenario: scenario, outcome: .skip, clauses: [], reason: reason)
    }

    /// The failed clauses, or the reason, in one line each.
    public var failureLines: [String] {
        var lines = reason.map { [$0] } ?? []
        lines += clauses.filter { !$0.passed }.map { "expected \($0.clause.description); observed \($0.observed)" }
        return lines
    }
}

/// Holds an expectation's clauses against what a client did in one replay.
public enum ScenarioJudge {
    /// The verdict of one run: fail when no fault of the scenario was applied (the client never asked for the faulted
    /// answer, so the scenario was not exercised), otherwise pass when every clause holds for every faulted transaction.
    public static func judge(_ scenario: String, expectation: [ExpectationClause], _ o: CheckObservation) -> ScenarioVerdict {
        var verdict = ScenarioVerdict(scenario: scenario, outcome: .pass, expected: expectation, clauses: [], observation: o)
        let faulted = o.transactions.filter { !$0.faults.isEmpty }
        if let problem = o.commandProblem, o.exitStatus == nil, faulted.isEmpty {
            verdict.outcome = .fail
            verdict.reason = "the command \(problem)"
            return verdict
        }
        if faulted.isEmpty {
            verdict.outcome = .fail
            verdict.reason = "the scenario's fault was never applied: the command did not ask for the faulted answer "
                + "(\(o.transactions.isEmpty ? "no 3DS transaction reached the replayer" : "\(o.transactions.count) transaction(s), none faulted"))"
                + (o.exitStatus.map { "; the command exited \($0)" } ?? "")
                + (o.lastOutputLine.map { ", its last line: \($0)" } ?? "")
            return verdict
        }
        for clause in expectation {
            let (passed, observed) = hold(clause, faulted, o)
            verdict.clauses.append(.init(clause: clause, passed: passed, observed: observed))
        }
        if verdict.clauses.contains(where: { !$0.passed }) { verdict.outcome = .fail }
        return verdict
    }

    /// The fields of Cake3DS2's view in a result line: the scenarios that name them apply to every app session, gateway
    /// sessions too, where the client reports PXP Checkout's or Trust Payments' view instead.
    static let cake3DS2Fields: Set<String> = ["sdk.outcome", "sdk.transStatus", "sdk.code"]

    /// One clause against the faulted transactions (every one must satisfy it) or the command's own status.
    static func hold(_ clause: ExpectationClause, _ faulted: [CheckObservation.Transaction], _ o: CheckObservation) -> (Bool, String) {
        func each(_ test: (CheckObservation.Transaction) -> (Bool, String)) -> (Bool, String) {
            let results = faulted.map(test)
            let text = results.count == 1 ? results[0].1
                : zip(faulted, results).map { "\($0.serverTransID.count == 36 ? String($0.serverTransID.prefix(8)) : $0.serverTransID): \($1.1)" }
                    .joined(separator: "; ")
            return (results.allSatisfy(\.0), text)
        }
        switch clause {
        case let .erroSent(code):
            return each { t in
                let codes = t.erros.map(\.code)
                if codes.contains(code) { return (true, "Erro \(code) sent") }
                return (false, codes.isEmpty ? "no Erro sent" : "Erro \(codes.joined(separator: ", ")) sent, not \(code)")
            }
        case let .noCReqAfterErro(allow):
            return each { t in
                let from = t.erros.first?.at ?? t.faultedAt ?? 0
                let after = t.creqs.filter { $0.at > from }
                let point = t.erros.isEmpty ? "the fault" : "the Erro"
                let disallowed = after.filter { c in !(c.cancel.map(allow.contains) ?? false) }
                if !disallowed.isEmpty {
                    return (false, "\(counted(disallowed.count, "CReq")) after \(point)"
                        + (disallowed.compactMap(\.cancel).isEmpty ? "" : " (challengeCancel \(disallowed.compactMap(\.cancel).joined(separator: ", ")))"))
                }
                if let seen = after.first?.cancel { return (true, "a challengeCancel \(seen) CReq after \(point) (allowed)") }
                return (true, "no CReq after \(point)")
            }
        case .noCReq:
            return each { t in t.creqs.isEmpty ? (true, "no CReq") : (false, "\(counted(t.creqs.count, "CReq")) sent") }
        case let .givesUp(within):
            return each { t in
                if let after = t.gaveUpAfter {
                    let text = "gave up after \(CheckedDuration.describe((after * 1000).rounded() / 1000))"
                    return after <= within ? (true, text) : (false, text + ", later than \(CheckedDuration.describe(within))")
                }
                if t.hungAnswerWaited { return (false, "still waiting when the command ended") }
                return (false, "nothing hung in this transaction")
            }
        case .challengeCompletes:
            return each { t in t.finalCResRead ? (true, "final CRes read") : (false, "no final CRes read") }
        case .rreqAnswered:
            return each { t in
                switch t.rreq {
                case .answered?: return (true, "RReq answered")
                case let .notAnswered(why)?: return (false, "RReq not answered: \(why)")
                case nil: return (false, "no RReq was sent before the command ended")
                }
            }
        case .reportsFailure:
            // Either says it: a status other than 0, or a result line whose outcome is not success.
            let outcome = o.result?["outcome"]?.stringValue
            if let status = o.exitStatus, status != 0 { return (true, "exit status \(status)" + (outcome.map { ", 3dstape-result outcome \($0)" } ?? "")) }
            if let outcome, outcome != "success" { return (true, "3dstape-result outcome \(outcome)") }
            guard let status = o.exitStatus else { return (false, "the command \(o.commandProblem ?? "has no exit status")") }
            return (false, "exit status \(status)" + (outcome.map { ", 3dstape-result outcome \($0)" } ?? ""))
        case let .exitStatus(want):
            guard let status = o.exitStatus else { return (false, "the command \(o.commandProblem ?? "has no exit status")") }
            return (status == want, "exit status \(status)")
        case let .retries(n):
            return each { t in (t.retries >= n, t.retries == 0 ? "no retry" : counted(t.retries, "retry", "retries")) }
        case let .result(field, want):
            guard let r = o.result else { return (false, "no 3dstape-result line") }
            var v: JSON? = r
            for part in field.split(separator: ".") { v = v?[String(part)] }
            guard let got = v.flatMap({ $0.stringValue ?? $0.compact }) else {
                // An SDK's own view has its own fields (Cake3DS2's outcome, PXP Checkout's error): a field the named SDK does
                // not report is not its to judge (a PXP app in a Cake3DS2 scenario), and the report says so.
                if ScenarioJudge.cake3DS2Fields.contains(field), let name = r["sdk"]?["name"]?.stringValue, name != "Cake3DS2" {
                    return (true, "not judged: \(name) reports no \(field)")
                }
                return (false, "3dstape-result has no \(field)")
            }
            return (got == want, "\(field) = \(got)")
        }
    }
}
