import Foundation
import Testing
import TapCore

/// `3dstape check` end to end: the checked-in demo app session, every applicable scenario, against `3dstape client`
/// as a conformant SDK and as one that ignores counter errors and never sends an Erro (issue 24).
@Suite struct CheckEndToEndTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized

    /// A scratch home with the DS identity the client trusts, and a copy of the demo app session.
    static func setUp() throws -> (dir: URL, env: [String: String], certs: String, session: String) {
        let dir = try CLIRunner.tempDir()
        let env = ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path]
        let certs = dir.appendingPathComponent("certs").path
        #expect(try CLIRunner.run(["ca", "export", "--ds", certs], environment: env).status == 0)
        let session = dir.appendingPathComponent("demo-app.3dstape").path
        try FileManager.default.copyItem(atPath: root.appendingPathComponent("sessions/demo-app.3dstape").path, toPath: session)
        return (dir, env, certs, session)
    }

    /// The client as a check runs it: a challenge card, a CRes timeout above slow-acs's 3 s and an RReq wait above rreq-late's 8 s.
    static func client(certs: String, cresTimeout: String = "4", _ extra: [String] = []) -> [String] {
        [CLIRunner.binary.path, "client", "--ds", "{url}", "--card", "4000000000001067", "--answer", "1234", "--certs", certs,
         "--cres-timeout", cresTimeout, "--ares-timeout", "2", "--rreq-timeout", "9"] + extra
    }

    /// The JUnit file's test cases: name -> failed, skipped.
    static func junitCases(_ path: String) throws -> [String: (failed: Bool, skipped: Bool)] {
        let xml = try String(contentsOfFile: path, encoding: .utf8)
        var out: [String: (Bool, Bool)] = [:]
        for part in xml.components(separatedBy: "<testcase ").dropFirst() {
            guard let r = part.range(of: " name=\""), let end = part[r.upperBound...].firstIndex(of: "\"") else { continue }
            let body = part.components(separatedBy: "</testcase>")[0]
            out[String(part[r.upperBound..<end])] = (body.contains("<failure"), body.contains("<skipped"))
        }
        return out
    }

    @Test func theConformantClientPassesEveryScenario() throws {
        let (dir, env, certs, session) = try Self.setUp()
        defer { try? FileManager.default.removeItem(at: dir) }
        let junit = dir.appendingPathComponent("junit.xml").path, report = dir.appendingPathComponent("report").path
        let r = try CLIRunner.run(["check", session, "--junit", junit, "--report", report, "--json", "--"] + Self.client(certs: certs), environment: env)
        let json = try JSON.parse(r.stdout)
        guard case let .array(scenarios)? = json["scenarios"] else { Issue.record("no scenarios: \(r.stdout) \(r.stderr)"); return }
        let failed = scenarios.filter { $0["verdict"]?.stringValue == "fail" }.map { $0.compact }
        #expect(r.status == 0 && failed.isEmpty, "exit \(r.status); not passed: \(failed)")
        // 27 apply to the app session; the 20 that need a gateway session are skipped.
        #expect(scenarios.count == 47 && json["passed"]?.compact == "27" && json["skipped"]?.compact == "20", "\(json["passed"]?.compact ?? "")")
        let cases = try Self.junitCases(junit)
        #expect(cases.count == 47 && cases.values.allSatisfy { !$0.failed } && cases.values.filter(\.skipped).count == 20)
        // Which of the allowed behaviours was seen is in the report, and each run left its session and log.
        let timeout = scenarios.first { $0["name"]?.stringValue == "challenge-timeout" }
        #expect(timeout?.compact.contains("a challengeCancel 08 CReq after the Erro (allowed)") == true)
        // The hung CRes was never answered: `show` gives its actual delay as "-", not -1.0.
        let shown = try CLIRunner.run(["show", (report as NSString).appendingPathComponent("challenge-timeout.3dstape")], environment: env).stdout
        #expect(shown.contains("/- ms, fault hang") && !shown.contains("/-1.0"), "\(shown)")
        for name in ["challenge-timeout.3dstape", "challenge-timeout.log", "report.json", "index.html"] {
            #expect(FileManager.default.fileExists(atPath: (report as NSString).appendingPathComponent(name)), "\(name)")
        }
    }

    @Test func aClientThatIgnoresCounterErrorsAndNeverSendsErroFailsExactlyThose() throws {
        let (dir, env, certs, session) = try Self.setUp()
        defer { try? FileManager.default.removeItem(at: dir) }
        let junit = dir.appendingPathComponent("junit.xml").path
        let r = try CLIRunner.run(["check", session, "--junit", junit, "--report", dir.appendingPathComponent("report").path, "--"]
                                  + Self.client(certs: certs, ["--misbehave", "no-erro,ignore-cres-errors"]), environment: env)
        #expect(r.status == 1, "exit \(r.status): \(r.stderr.suffix(500))")
        let cases = try Self.junitCases(junit)
        #expect(Set(cases.filter { $0.value.failed }.keys) == ["cres-counter-mismatch", "cres-undecryptable", "challenge-timeout"], "\(cases)")
        #expect(cases.count == 47)
        #expect(r.stdout.contains("24 passed, 3 failed, 20 skipped"))
        let xml = try String(contentsOfFile: junit, encoding: .utf8)
        #expect(xml.contains("expected Erro 302 sent to the ACS; observed no Erro sent"))
    }

    /// A replay that cannot run (here: the home's interception CA is unreadable) fails its scenario with the reason, and the
    /// JUnit file and report are still written (in CI on 9d7e7d1 such a run ended with exit 1 and no JUnit file at all).
    @Test func aReplayThatCannotRunFailsItsScenarioWithTheReasonAndTheReportIsWritten() throws {
        let (dir, env, certs, session) = try Self.setUp()
        defer { try? FileManager.default.removeItem(at: dir) }
        let ca = dir.appendingPathComponent("home/ca")
        try FileManager.default.createDirectory(at: ca, withIntermediateDirectories: true)
        try Data("not a certificate".utf8).write(to: ca.appendingPathComponent("ca-cert.pem"))
        try Data("not a key".utf8).write(to: ca.appendingPathComponent("ca-key.pem"))
        let junit = dir.appendingPathComponent("junit.xml").path, report = dir.appendingPathComponent("report").path
        let r = try CLIRunner.run(["check", session, "--scenario", "slow-acs", "--scenario", "ds-timeout", "--junit", junit, "--report", report, "--"]
                                  + Self.client(certs: certs), environment: env)
        #expect(r.status == 1, "exit \(r.status): \(r.stderr.suffix(500))")
        let cases = try Self.junitCases(junit)
        #expect(cases.count == 2 && cases.values.allSatisfy(\.failed), "\(cases)")
        let xml = try String(contentsOfFile: junit, encoding: .utf8)
        #expect(xml.contains("the replay could not run") && xml.contains("unreadable"), "\(xml.prefix(1500))")
        #expect(FileManager.default.fileExists(atPath: (report as NSString).appendingPathComponent("report.json")))
    }

    @Test func theBrowserDemoPassesWhatAppliesSkipsTheRestAndUsageErrorsExit2() throws {
        let (dir, env, certs, _) = try Self.setUp()
        defer { try? FileManager.default.removeItem(at: dir) }
        let browser = dir.appendingPathComponent("b.3dstape").path
        try FileManager.default.copyItem(atPath: Self.root.appendingPathComponent("sessions/demo-browser.3dstape").path, toPath: browser)
        let junit = dir.appendingPathComponent("j.xml").path
        let report = dir.appendingPathComponent("r").path
        // The browser demo: every scenario that applies whole passes against the browser client; the app-channel ones (9, and
        // issue 28's Cake3DS2 four) and the 20 gateway ones skip.
        let client = [CLIRunner.binary.path, "client", "--ds", "{url}", "--card", "4000000000001067", "--answer", "1234", "--channel", "browser",
                      "--certs", certs, "--ares-timeout", "2", "--rreq-timeout", "9"]
        let r = try CLIRunner.run(["check", browser, "--junit", junit, "--report", report, "--"] + client, environment: env)
        #expect(r.status == 0 && r.stdout.contains("14 passed, 0 failed, 33 skipped"), "\(r.stdout) \(r.stderr)")
        #expect(r.stdout.contains("changes only an app-channel ARes (one with acsSignedContent)"))
        #expect(r.stdout.contains("the session has no CRes"))
        #expect(try Self.junitCases(junit)["cres-counter-mismatch"]?.skipped == true)
        // Asked for by name, a scenario that cannot apply is a usage error, not a skip that leaves CI green.
        let named = try CLIRunner.run(["check", browser, "--scenario", "cres-counter-mismatch", "--scenario", "ds-erro-203", "--"] + client,
                                      environment: env)
        #expect(named.status == 2 && named.stderr.contains("--scenario cres-counter-mismatch does not apply to this session"), "\(named.stderr)")
        // A report directory that holds a report already is not mixed with a second run's files.
        let again = try CLIRunner.run(["check", browser, "--scenario", "ds-erro-203", "--report", report, "--"] + client, environment: env)
        #expect(again.status == 2 && again.stderr.contains("already holds a report"), "\(again.stderr)")

        let expect = dir.appendingPathComponent("e.json").path
        try #"{"challenge-timeout": [{"clause": "gives-up"}], "nope": []}"#.write(toFile: expect, atomically: true, encoding: .utf8)
        for (args, says, lines) in [(["--expect", expect], "gives-up needs \"within\"", 2),
                                    (["--scenario", "nope"], "no such scenario", 1),
                                    (["--runs", "0"], "--runs 0: expected a whole number from 1 to 100", 1),
                                    (["--command-timeout", "forever"], "--command-timeout forever", 1)] {
            let bad = try CLIRunner.run(["check", browser] + args + ["--", "true"], environment: env)
            #expect(bad.status == 2 && bad.stderr.contains(says) && bad.stderr.split(separator: "\n").count == lines, "\(args): \(bad.status) \(bad.stderr)")
        }
        #expect(try CLIRunner.run(["check", browser], environment: env).status == 2) // no command
        let missing = try CLIRunner.run(["check", browser, "--report", dir.appendingPathComponent("never").path, "--", "/nonexistent/sdk-ui-test"],
                                        environment: env)
        #expect(missing.status == 2 && missing.stderr.contains("cannot start /nonexistent/sdk-ui-test: no such file"), "\(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("never").path), "nothing ran, no report")
    }

    @Test func aTeamsOwnExpectationCanMakeTheSameRunFail() throws {
        let (dir, env, certs, session) = try Self.setUp()
        defer { try? FileManager.default.removeItem(at: dir) }
        let expect = dir.appendingPathComponent("e.json").path
        // Our SDK must give up within 1 s and exit 0 (a UI test that asserts the app showed the timeout).
        try #"{"challenge-timeout": [{"clause": "gives-up", "within": "1s"}, {"clause": "exit-status", "value": 0}]}"#
            .write(toFile: expect, atomically: true, encoding: .utf8)
        let r = try CLIRunner.run(["check", session, "--scenario", "challenge-timeout", "--expect", expect, "--json",
                                   "--report", dir.appendingPathComponent("r").path, "--"]
                                  + Self.client(certs: certs, cresTimeout: "2"), environment: env)
        #expect(r.status == 1, "\(r.stdout) \(r.stderr)")
        let clauses = try JSON.parse(r.stdout)["scenarios"]?.arrayValue?.first?["clauses"]?.arrayValue ?? []
        #expect(!clauses.isEmpty, "\(r.stdout)")
        #expect(clauses.map { $0["observed"]?.stringValue ?? "" }.contains { $0.hasPrefix("gave up after ") && $0.hasSuffix("later than 1s") })
        #expect(clauses.contains { $0["observed"]?.stringValue == "exit status 1" && $0["passed"] == .bool(false) })
    }

    @Test func sigtermStopsTheRunEndsTheCommandAndWritesTheReportSoFar() throws {
        let (dir, env, certs, session) = try Self.setUp()
        defer { try? FileManager.default.removeItem(at: dir) }
        let report = dir.appendingPathComponent("r").path
        let check = try Spawned(CLIRunner.binary.path, ["check", session, "--scenario", "cres-counter-mismatch", "--scenario", "challenge-timeout",
                                                        "--report", report, "--"] + Self.client(certs: certs, cresTimeout: "60"), environment: env)
        defer { check.stop() }
        try check.waitFor("the hung scenario to start") { _, e in e.contains("check: challenge-timeout …") }
        usleep(500_000)
        kill(check.process.processIdentifier, SIGTERM)
        #expect(try check.wait(timeout: 15) == 143, "\(check.stderr)")
        let json = try JSON.parse(try String(contentsOfFile: (report as NSString).appendingPathComponent("report.json"), encoding: .utf8))
        #expect(json["interrupted"]?.stringValue == "SIGTERM")
        #expect(json["scenarios"]?.arrayValue?.map { $0["name"]?.stringValue ?? "" } == ["cres-counter-mismatch"], "the finished scenario is kept")
        let left = try sh(["pgrep", "-f", "cres-timeout 60"]).out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(left.isEmpty, "the client was ended with its group: \(left)")
    }

    /// What a hostile tester found: a client killed at the command timeout is not one that gave up; a background child
    /// left behind does not cost the command its exit status or hold the run; files in the way are refused, not replaced;
    /// standard output that cannot be written does not crash the run.
    @Test func killedLeftoverAndBlockedRunsGetTheRightVerdict() throws {
        let (dir, env, certs, session) = try Self.setUp()
        defer { try? FileManager.default.removeItem(at: dir) }
        let client = Self.client(certs: certs).joined(separator: " ").replacingOccurrences(of: "{url}", with: "$THREEDSTAPE_REPLAY_URL")
        // 1. ARes hangs, the client would wait 100 s, check ends it at 3 s: that is no giving up.
        let expect = dir.appendingPathComponent("e.json").path
        try #"{"ds-timeout": [{"clause": "reports-failure", "drop": true}]}"#.write(toFile: expect, atomically: true, encoding: .utf8)
        let killed = try CLIRunner.run(["check", session, "--scenario", "ds-timeout", "--command-timeout", "3s", "--expect", expect, "--json",
                                        "--report", dir.appendingPathComponent("r1").path, "--"]
                                       + Self.client(certs: certs).filter { $0 != "2" && $0 != "--ares-timeout" } + ["--ares-timeout", "100"],
                                       environment: env)
        #expect(killed.status == 1 && killed.stdout.contains("still waiting when the command ended"), "\(killed.stdout) \(killed.stderr)")
        // 2. The client exits 1 at once and leaves a sleep behind: the run ends 2 s later, with the client's status.
        let started = Date()
        let leftover = try CLIRunner.run(["check", session, "--scenario", "ds-unavailable", "--report", dir.appendingPathComponent("r2").path,
                                          "--json", "--", "/bin/sh", "-c", "\(client); sleep 30 & exit 1"], environment: env)
        // (the client's 3dstape-result line follows: "exit status 1, 3dstape-result outcome failure")
        #expect(leftover.status == 0 && leftover.stdout.contains("\"exit status 1"), "\(leftover.stdout) \(leftover.stderr)")
        #expect(Date().timeIntervalSince(started) < 20, "held by the leftover sleep")
        // 3. A recorded session in the report directory, or as the JUnit file, is not replaced.
        let rec = dir.appendingPathComponent("rec")
        try FileManager.default.createDirectory(at: rec, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: session, toPath: rec.appendingPathComponent("ds-unavailable.3dstape").path)
        let inTheWay = try CLIRunner.run(["check", session, "--scenario", "ds-unavailable", "--report", rec.path, "--", "true"], environment: env)
        #expect(inTheWay.status == 2 && inTheWay.stderr.contains("is not empty"), "\(inTheWay.stderr)")
        let overSession = try CLIRunner.run(["check", session, "--scenario", "ds-unavailable", "--junit", session, "--", "true"], environment: env)
        #expect(overSession.status == 2 && overSession.stderr.contains("is a session file"), "\(overSession.stderr)")
        #expect(try CLIRunner.run(["validate", session], environment: env).status == 0, "the session is still a session")
        // 4. Standard output on a full disk: the verdict's exit status, not a trap.
        let full = try sh(["/bin/sh", "-c", "THREEDSTAPE_HOME='\(env["THREEDSTAPE_HOME"]!)' '\(CLIRunner.binary.path)' check '\(session)' "
                           + "--scenario ds-unavailable --report '\(dir.appendingPathComponent("r4").path)' -- /bin/sh -c 'exit 1' > /dev/full; echo $?"])
        #expect(full.out.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "the command never asked, so 1: \(full.out) \(full.err)")
    }
}
