import Foundation
import Testing
@testable import TapCheck
import TapCore
import TapReplay

/// The judge holds each clause against an observation: these build the observations a conformant and a non-conformant
/// client leave, and check the verdicts and the words of the report.
@Suite struct ScenarioJudgeTests {
    typealias Transaction = CheckObservation.Transaction

    static func observation(_ t: Transaction, exit: Int32? = 1) -> CheckObservation {
        var o = CheckObservation()
        o.transactions = [t]
        o.exitStatus = exit
        return o
    }

    static func faulted(_ fault: String = "CRes: bad-counter", at: Double = 10) -> Transaction {
        var t = Transaction(serverTransID: "f9e8cda7-0094-41c5-bf92-ab5315d5accb")
        t.faults = [fault]
        t.faultedAt = at
        return t
    }

    @Test func everyScenarioHasAnExpectationThatRoundTripsThroughJSON() throws {
        for s in ReplayScenario.all {
            #expect(!s.expectation.isEmpty, "\(s.name) has no expectation")
            for c in s.expectation { #expect(try ExpectationClause.read(c.json) == c, "\(s.name): \(c.json.compact)") }
        }
    }

    @Test func counterMismatchPassesWithTheErroAndNothingAfterIt() {
        var t = Self.faulted()
        t.creqs = [(9, nil)]
        t.erros = [("302", 10.1)]
        let v = ScenarioJudge.judge("cres-counter-mismatch", expectation: ReplayScenario.named("cres-counter-mismatch")!.expectation, Self.observation(t))
        #expect(v.outcome == .pass)
        #expect(v.clauses.map(\.observed) == ["Erro 302 sent", "no CReq after the Erro"])
    }

    @Test func counterMismatchFailsWhenTheClientGoesOnWithoutAnErro() {
        var t = Self.faulted()
        t.creqs = [(9, nil), (10.2, nil)]
        let v = ScenarioJudge.judge("cres-counter-mismatch", expectation: ReplayScenario.named("cres-counter-mismatch")!.expectation, Self.observation(t))
        #expect(v.outcome == .fail)
        #expect(v.failureLines == ["expected Erro 302 sent to the ACS; observed no Erro sent",
                                   "expected no CReq after the Erro; observed 1 CReq after the fault"])
    }

    @Test func aWrongErroCodeIsNamed() {
        var t = Self.faulted()
        t.erros = [("203", 10.1)]
        let v = ScenarioJudge.judge("x", expectation: [.erroSent(code: "302")], Self.observation(t))
        #expect(v.outcome == .fail && v.clauses[0].observed == "Erro 203 sent, not 302")
    }

    @Test func challengeTimeoutAllowsTheCancellingCReqAndSaysWhichWasSeen() {
        var t = Self.faulted("CRes: hang")
        t.gaveUpAfter = 10.02
        t.erros = [("402", 20.1)]
        t.creqs = [(10, nil), (20.2, "08")]
        let expectation = ReplayScenario.named("challenge-timeout")!.expectation
        let v = ScenarioJudge.judge("challenge-timeout", expectation: expectation, Self.observation(t))
        #expect(v.outcome == .pass)
        #expect(v.clauses.map(\.observed) == ["gave up after 10.02s", "Erro 402 sent", "a challengeCancel 08 CReq after the Erro (allowed)"])
        t.creqs.append((20.3, "01")) // another cancel code is not one the expectation allows
        #expect(ScenarioJudge.judge("challenge-timeout", expectation: expectation, Self.observation(t)).outcome == .fail)
    }

    @Test func givingUpLateOrNeverFails() {
        var t = Self.faulted("CRes: hang")
        t.gaveUpAfter = 13
        #expect(ScenarioJudge.hold(.givesUp(withinSeconds: 12), [t], Self.observation(t)) == (false, "gave up after 13s, later than 12s"))
        t.gaveUpAfter = nil
        t.hungAnswerWaited = true
        #expect(ScenarioJudge.hold(.givesUp(withinSeconds: 12), [t], Self.observation(t)) == (false, "still waiting when the command ended"))
    }

    @Test func aFaultNeverReachedIsAFailureNotAPass() {
        var t = Transaction(serverTransID: "a")
        t.finalCResRead = true
        let v = ScenarioJudge.judge("slow-acs", expectation: [.challengeCompletes], Self.observation(t, exit: 0))
        #expect(v.outcome == .fail && v.reason?.contains("never applied") == true && v.clauses.isEmpty)
    }

    @Test func rreqClausesTellDeliveredFromRefusedFromNeverSent() {
        var t = Self.faulted("CRes: trans-status:N")
        t.rreq = .answered
        #expect(ScenarioJudge.hold(.rreqAnswered, [t], Self.observation(t)).0)
        t.rreq = .notAnswered("connect to 127.0.0.1:1: Connection refused")
        #expect(ScenarioJudge.hold(.rreqAnswered, [t], Self.observation(t)) == (false, "RReq not answered: connect to 127.0.0.1:1: Connection refused"))
        t.rreq = nil
        #expect(ScenarioJudge.hold(.rreqAnswered, [t], Self.observation(t)) == (false, "no RReq was sent before the command ended"))
    }

    @Test func failureIsReportedByExitStatusOrByTheResultLine() {
        let t = Self.faulted("ARes: erro:101")
        #expect(ScenarioJudge.hold(.reportsFailure, [t], Self.observation(t, exit: 1)) == (true, "exit status 1"))
        #expect(ScenarioJudge.hold(.reportsFailure, [t], Self.observation(t, exit: 0)) == (false, "exit status 0"))
        var o = Self.observation(t, exit: 0)
        o.result = try? JSON.parse(#"{"outcome": "failure", "sdk": {"name": "PXP Checkout", "error": "AUTHENTICATION_FAILED"}}"#)
        #expect(ScenarioJudge.hold(.reportsFailure, [t], o) == (true, "3dstape-result outcome failure"))
        #expect(ScenarioJudge.hold(.result(field: "sdk.error", equals: "AUTHENTICATION_FAILED"), [t], o).0)
        #expect(ScenarioJudge.hold(.result(field: "sdk.error", equals: "CHALLENGE_TIMEOUT"), [t], o) == (false, "sdk.error = AUTHENTICATION_FAILED"))
        #expect(ScenarioJudge.hold(.result(field: "sdk.code", equals: "x"), [t], o) == (true, "not judged: PXP Checkout reports no sdk.code"),
                "a field of Cake3DS2's view, and the command reports PXP Checkout's")
        #expect(ScenarioJudge.hold(.result(field: "sdk.verified", equals: "false"), [t], o) == (false, "3dstape-result has no sdk.verified"),
                "any other missing field fails")
        o.result = try? JSON.parse(#"{"outcome": "failure"}"#)
        #expect(ScenarioJudge.hold(.result(field: "sdk.code", equals: "x"), [t], o) == (false, "3dstape-result has no sdk.code"))
        var timedOut = Self.observation(t, exit: nil)
        timedOut.commandProblem = "did not end within 2s (--command-timeout) and was ended"
        #expect(ScenarioJudge.hold(.exitStatus(0), [t], timedOut) == (false, "the command did not end within 2s (--command-timeout) and was ended"))
    }

    @Test func eitherAStatusOrAResultLineReportsFailure() throws {
        let t = Self.faulted("ARes: status:503")
        var o = Self.observation(t, exit: 1)
        o.result = try JSON.parse(#"{"outcome": "success"}"#)
        #expect(ScenarioJudge.hold(.reportsFailure, [t], o) == (true, "exit status 1, 3dstape-result outcome success"))
        o.exitStatus = 0
        #expect(ScenarioJudge.hold(.reportsFailure, [t], o).0 == false)
    }

    @Test func theStarChangesComeFirstWhateverTheirPlaceInTheFile() throws {
        let text = #"{"ds-unavailable": [{"clause": "exit-status", "value": 1}], "*": [{"clause": "exit-status", "value": 0}, {"clause": "result", "field": "sdk.error", "equals": "X"}], "slow-acs": [{"clause": "result", "drop": true}]}"#
        let file = try ExpectationFile.parse(Array(text.utf8), name: "e", scenarios: ReplayScenario.all.map(\.name)).get()
        #expect(file.expectation(for: "ds-unavailable", defaults: [.noCReq, .reportsFailure]) == [.noCReq, .exitStatus(1), .result(field: "sdk.error", equals: "X")])
        #expect(file.expectation(for: "slow-acs", defaults: [.challengeCompletes]) == [.challengeCompletes, .exitStatus(0)])
    }

    @Test func theResultLineIsTheLastJSONObjectAfterItsPrefix() {
        let out = "starting\n3dstape-result: {\"outcome\": \"success\"}\nnoise 3dstape-result: not json\n3dstape-result: {\"outcome\": \"failure\"}\n"
        #expect(CheckObservation.resultLine(in: Array(out.utf8))?["outcome"]?.stringValue == "failure")
        #expect(CheckObservation.resultLine(in: Array("3dstape-result: [1]\n".utf8)) == nil)
        // Only at the start of a line: a quoted one (a gateway's message echoed in an error line) does not count.
        let quoted = "3dstape-result: {\"outcome\": \"failure\"}\n3dstape: client: HTTP 400 3dstape-result: {\"outcome\": \"success\"}\n"
        #expect(CheckObservation.resultLine(in: Array(quoted.utf8))?["outcome"]?.stringValue == "failure")
        // The last one decides; when it is not a JSON object there is no result.
        #expect(CheckObservation.resultLine(in: Array("3dstape-result: {\"outcome\": \"success\"}\n3dstape-result: {broken\n".utf8)) == nil)
    }

    @Test func theLogIsScannedWholeWithBoundedMemory() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("check-log-\(UUID().uuidString).log").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        var text = "3dstape-result: {\"outcome\": \"failure\", \"sdk\": {\"error\": \"X\"}}\n"
        text += String(repeating: "noise after the app finished, as xcodebuild prints\n", count: 60_000) // about 3 MB
        text += "** TEST SUCCEEDED **"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let (result, last) = CheckObservation.scanLog(path)
        #expect(result?["sdk"]?["error"]?.stringValue == "X", "a result line 3 MB before the end")
        #expect(last == "** TEST SUCCEEDED **")
    }

    @Test func expectFileReplacesAddsAndDropsClauses() throws {
        let names = ReplayScenario.all.map(\.name)
        let text = #"""
        {"*": [{"clause": "exit-status", "value": 0}],
         "challenge-timeout": [{"clause": "gives-up", "within": "35s"}, {"clause": "retries", "at-least": 1}],
         "cres-counter-mismatch": [{"clause": "no-creq-after-erro", "drop": true}]}
        """#
        let file = try ExpectationFile.parse(Array(text.utf8), name: "e.json", scenarios: names).get()
        #expect(file.expectation(for: "challenge-timeout", defaults: ReplayScenario.named("challenge-timeout")!.expectation)
                == [.givesUp(withinSeconds: 35), .erroSent(code: "402"), .noCReqAfterErro(allowCancel: ["08"]), .exitStatus(0), .retries(atLeast: 1)])
        #expect(file.expectation(for: "cres-counter-mismatch", defaults: ReplayScenario.named("cres-counter-mismatch")!.expectation)
                == [.erroSent(code: "302"), .exitStatus(0)])
        // exit-status replaces reports-failure: a UI test that passes when the app shows the error exits 0
        #expect(file.expectation(for: "ds-erro-101", defaults: ReplayScenario.named("ds-erro-101")!.expectation) == [.noCReq, .exitStatus(0)])
    }

    @Test func aResultClauseIsDroppedByItsField() throws {
        let text = #"{"slow-acs": [{"clause": "result", "field": "sdk.error", "drop": true}]}"#
        let file = try ExpectationFile.parse(Array(text.utf8), name: "e", scenarios: ReplayScenario.all.map(\.name)).get()
        #expect(file.expectation(for: "slow-acs", defaults: [.result(field: "sdk.error", equals: "A"), .result(field: "sdk.code", equals: "B")])
                == [.result(field: "sdk.code", equals: "B")])
    }

    @Test func expectFileMistakesAreOneLineEach() {
        let text = #"""
        {"challenge-timout": [],
         "challenge-timeout": [{"clause": "gives-up"}, {"clause": "erro-sent", "code": "999"}, {"clause": "explode"},
                               {"clause": "exit-status", "value": 1, "extra": 2}],
         "slow-acs": {"clause": "no-creq"}}
        """#
        guard case let .failure(e) = ExpectationFile.parse(Array(text.utf8), name: "e.json", scenarios: ReplayScenario.all.map(\.name)) else {
            Issue.record("accepted")
            return
        }
        #expect(e.lines.count == 6, "\(e.lines)")
        #expect(e.lines[0].hasPrefix("e.json: challenge-timout: no such scenario"))
        #expect(e.lines[1] == "e.json: challenge-timeout: clause 1: gives-up needs \"within\": a duration such as \"12s\"")
        #expect(e.lines[2].contains("clause 2: erro-sent needs \"code\""))
        #expect(e.lines[3].contains("clause 3: unknown clause 'explode'"))
        #expect(e.lines[4].contains("clause 4: exit-status: unknown member \"extra\""))
        #expect(e.lines[5] == "e.json: slow-acs: expected a list of clauses")
        if case let .failure(bad) = ExpectationFile.parse(Array("[".utf8), name: "f", scenarios: []) { #expect(bad.lines.count == 1) } else { Issue.record("accepted [") }
    }

    @Test func junitHasOneTestcasePerScenarioWithFailuresAndSkipsEscaped() {
        var failed = ScenarioVerdict(scenario: "cres-counter-mismatch", outcome: .fail, expected: [.erroSent(code: "302")],
                                     clauses: [.init(clause: .erroSent(code: "302"), passed: false, observed: "no Erro sent <&>")])
        failed.seconds = 0.25
        let report = CheckReport(session: "sessions/a\"b.3dstape", command: ["client", "--x", "<y>"],
                                 verdicts: [failed, .skipped("challenge-timeout", reason: "the session has no CRes"),
                                            ScenarioVerdict(scenario: "slow-acs", outcome: .pass, clauses: [])], started: 0)
        let xml = report.junit
        #expect(xml.contains(#"<testsuite name="3dstape check" tests="3" failures="1" errors="0" skipped="1""#))
        #expect(xml.components(separatedBy: "<testcase ").count == 4)
        #expect(xml.contains(#"<failure message="expected Erro 302 sent to the ACS; observed no Erro sent &lt;&amp;&gt;" type="expectation">"#))
        #expect(xml.contains(#"<skipped message="the session has no CRes"/>"#))
        #expect(xml.contains(#"value="sessions/a&quot;b.3dstape""#) && xml.contains("&lt;y&gt;"))
        #expect(!xml.contains("<y>"))
    }
}

/// The README's scenarios table shows each scenario's expectation as the data has it.
@Suite struct ExpectationDocumentationTests {
    @Test func theReadmeTableSaysWhatCheckExpects() throws {
        let readme = try String(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../README.md").standardized, encoding: .utf8)
        guard let header = readme.range(of: "| scenario | rules | the protocol expects | `check` expects | PXP Checkout | Cake3DS2 | Trust Payments |") else {
            Issue.record("no scenarios table with a `check` expects column and the three SDKs' columns")
            return
        }
        var rows: [String: [String]] = [:]
        for line in readme[header.upperBound...].split(separator: "\n").dropFirst().prefix(while: { $0.hasPrefix("| ") }) {
            let parts = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            rows[parts[0]] = parts
        }
        for s in ReplayScenario.all {
            let name = s.name.hasPrefix("ds-erro-") ? "ds-erro-101 … 405" : s.name
            let row = rows[name] ?? []
            #expect(row.count == 7 && row.allSatisfy { !$0.isEmpty }, "\(s.name): every column filled: \(row)")
            guard row.count == 7 else { continue }
            #expect(row[3] == s.expectation.map(\.brief).joined(separator: "; "), "\(s.name): README says \(row[3])")
            // The SDK columns of the gateway and Cake3DS2 scenarios are the data's words (the first rows keep shorter ones).
            if s.gateway != nil || s.name.hasPrefix("challenge-completed-") || s.name == "acs-erro-203" {
                #expect(row[4] == s.surfaces.pxp && row[5] == s.surfaces.cake && row[6] == s.surfaces.trustPayments, "\(s.name): \(row[4...])")
            }
        }
    }
}
