import Foundation
import Testing
import TapCore

/// Every named failure scenario, replayed from the checked-in demo session to `3dstape client` processes: what the
/// client does is what the protocol asks of an SDK and its 3DS Server (issue: faults and scenarios).
@Suite(.serialized) struct ScenarioEndToEndTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized

    /// What the client must do under each scenario: its exit status and a phrase of its output.
    static let expected: [(scenario: String, status: Int32, says: String)] = [
        ("ds-timeout", 1, "no ARes"),
        ("ds-unavailable", 1, "the DS answered HTTP 503"),
        ("acs-signature-invalid", 1, "acsSignedContent rejected: JWS PS256 signature does not verify"),
        ("acs-untrusted-signer", 1, "acsSignedContent rejected: certificate chain"),
        ("acs-ephemeral-key-mismatch", 1, "sdkEphemPubKey is not this SDK's key"),
        ("challenge-timeout", 1, "sent Erro 402 and challengeCancel 08"),
        ("cres-counter-mismatch", 1, "Counters are not equal: acsCounterAtoS is 001, expected 000; sent Erro 302 to the ACS"),
        ("cres-undecryptable", 1, "CRes rejected (302)"),
        ("challenge-rejected", 0, "\"transStatus\": \"N\""),
        ("acs-timeout", 0, "\"transStatusReason\": \"14\""),
        ("rreq-missing", 1, "no RReq came from the ACS within 5s"),
        ("rreq-late", 1, "no RReq came from the ACS within 5s"),
        ("slow-acs", 0, "\"transStatus\": \"Y\""),
        ("challenge-completed-u", 0, "3dstape-result: {\"outcome\":\"failure\",\"sdk\":{\"name\":\"Cake3DS2\",\"outcome\":\"completed\",\"transStatus\":\"U\"}}"),
        ("challenge-completed-a", 0, "3dstape-result: {\"outcome\":\"success\",\"sdk\":{\"name\":\"Cake3DS2\",\"outcome\":\"completed\",\"transStatus\":\"A\"}}"),
        ("challenge-completed-r", 0, "3dstape-result: {\"outcome\":\"failure\",\"sdk\":{\"name\":\"Cake3DS2\",\"outcome\":\"completed\",\"transStatus\":\"R\"}}"),
        ("acs-erro-203", 1, "3dstape-result: {\"outcome\":\"failure\",\"sdk\":{\"name\":\"Cake3DS2\",\"outcome\":\"protocolError\",\"code\":\"203\"}}"),
    ] + ["101", "102", "201", "203", "303", "305", "402", "403", "404", "405"].map { ("ds-erro-\($0)", 1, "Erro \($0) from D") }

    @Test func everyScenarioIsTestedAndTheClientReactsAsTheProtocolSays() throws {
        let listed = try JSON.parse(try CLIRunner.run(["scenarios", "--json"]).stdout)
        guard case let .array(items) = listed else { Issue.record("scenarios --json is not an array"); return }
        // The gateway scenarios have theirs in GatewayScenarioEndToEndTests.
        #expect(Set(items.filter { $0["gateway"] == .null }.compactMap { $0["name"]?.stringValue }) == Set(Self.expected.map(\.scenario)), "a test per scenario")

        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let env = ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path]
        let certs = dir.appendingPathComponent("certs").path
        #expect(try CLIRunner.run(["ca", "export", "--ds", certs], environment: env).status == 0)
        let session = dir.appendingPathComponent("demo-app.3dstape").path
        try FileManager.default.copyItem(atPath: Self.root.appendingPathComponent("sessions/demo-app.3dstape").path, toPath: session)
        for (scenario, status, says) in Self.expected {
            let out = dir.appendingPathComponent("\(scenario).3dstape").path
            let replay = try Spawned(CLIRunner.binary.path, ["replay", session, "--listen", "127.0.0.1:0", "--scenario", scenario, "--quiet",
                                                             "--session", out], environment: env)
            let port = try replay.port(after: "on http://127.0.0.1:")
            let timeout = scenario == "slow-acs" ? "20" : "2"
            let r = try CLIRunner.run(["client", "--ds", "http://127.0.0.1:\(port)", "--card", "4000000000001067", "--answer", "1234",
                                       "--certs", certs, "--timeout", timeout, "--ares-timeout", "2", "--rreq-timeout", "5", "--json"],
                                      environment: env)
            if scenario == "challenge-timeout" { // the ACS's RReq follows the SDK's Erro at its recorded offset
                #expect(SessionPolling.rreqRecorded(in: out), "\(scenario): the ACS's RReq")
            }
            replay.interrupt()
            #expect(try replay.wait() == 0, "\(scenario): replayer exit; \(replay.stderr.suffix(300))")
            #expect(r.status == status && (r.stdout + r.stderr).contains(says), "\(scenario): exit \(r.status), \(r.stdout) \(r.stderr)")
            let faults = try sh(["sqlite3", out, "SELECT group_concat(faults, ' | ') FROM replay_matches WHERE faults IS NOT NULL"]).out
            #expect(!faults.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(scenario): the applied fault is in the replay session")
            if scenario == "cres-counter-mismatch" || scenario == "challenge-timeout" {
                let erro = try sh(["sqlite3", out, "SELECT count(*) FROM messages WHERE message_type = 'Erro' AND direction = 'request'"]).out
                #expect(erro.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "\(scenario): the SDK's Erro reached the ACS")
            }
            if scenario == "challenge-timeout" {
                let cancel = try sh(["sqlite3", out, "SELECT json FROM v_messages WHERE message_type = 'RReq'"]).out
                #expect(cancel.contains("\"challengeCancel\":\"08\""), "the RReq after an SDK timeout carries challengeCancel 08: \(cancel)")
            }
        }
    }

    @Test func unusableFaultRulesAreOneLineAndExitStatus2() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let session = dir.appendingPathComponent("b.3dstape").path
        try FileManager.default.copyItem(atPath: Self.root.appendingPathComponent("sessions/demo-browser.3dstape").path, toPath: session)
        let env = ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path]
        for (args, says) in [(["--fault", "CRes=explode"], "unknown action 'explode'"),
                             (["--fault", "ARes=hang@1.5"], "probability after @ must be a number above 0, up to 1"),
                             (["--fault", "ARes=hang@0"], "at 0 the rule never applies"),
                             (["--fault", "CRes#1=bad-counter"], "can never apply: the session has no CRes"),
                             (["--fault", "ARes=hang", "--fault", "ARes=reset"], "overlap"),
                             (["--scenario", "nope"], "no such scenario")] {
            let r = try CLIRunner.run(["replay", session, "--listen", "127.0.0.1:0"] + args, environment: env)
            #expect(r.status == 2 && r.stderr.contains(says) && r.stderr.split(separator: "\n").count == 1, "\(args): \(r.status) \(r.stderr)")
        }
        try #"""
        // faults for a browser session
        [{"match": "ARes", "action": "delay:10ms", "description": "a slightly slow DS"},
         {"match": "RReq", "action": "rreq-delay:1s", "probability": 0.5}]
        """#.write(toFile: dir.appendingPathComponent("f.json").path, atomically: true, encoding: .utf8)
        let ok = try Spawned(CLIRunner.binary.path, ["replay", session, "--listen", "127.0.0.1:0", "--faults", dir.appendingPathComponent("f.json").path,
                                                     "--session", dir.appendingPathComponent("r.3dstape").path], environment: env)
        _ = try ok.port(after: "on http://127.0.0.1:")
        ok.interrupt()
        #expect(try ok.wait() == 0, "a rules file with comments and descriptions is accepted: \(ok.stderr)")
        try #"[{"match": "ARes", "action": "delay:10ms", "descripton": "a typo"}]"#.write(toFile: dir.appendingPathComponent("typo.json").path,
                                                                                          atomically: true, encoding: .utf8)
        let typo = try CLIRunner.run(["replay", session, "--listen", "127.0.0.1:0", "--faults", dir.appendingPathComponent("typo.json").path],
                                     environment: env)
        #expect(typo.status == 2 && typo.stderr.contains("rule 1: unknown member \"descripton\""), "\(typo.status) \(typo.stderr)")
    }
}

/// The fault workflow made quiet and exact (issue 24 items 1-4), as a new user meets it: `replay` and `3dstape client`.
@Suite(.serialized) struct ReplayFaultWorkflowEndToEndTests {
    static let root = ScenarioEndToEndTests.root

    struct Run {
        let stderr: String
        let session: String
        func sql(_ q: String) throws -> String { try sh(["sqlite3", session, q]).out.trimmingCharacters(in: .whitespacesAndNewlines) }
    }

    /// Replays the demo app session with `faults` to one `3dstape client --timeout 2` and stops once its RReq has had time.
    func replayToClient(_ dir: URL, _ name: String, _ faults: [String]) throws -> Run {
        let env = ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path]
        let certs = dir.appendingPathComponent("certs").path
        if !FileManager.default.fileExists(atPath: certs) {
            #expect(try CLIRunner.run(["ca", "export", "--ds", certs], environment: env).status == 0)
        }
        let out = dir.appendingPathComponent("\(name).3dstape").path
        let replay = try Spawned(CLIRunner.binary.path, ["replay", Self.root.appendingPathComponent("sessions/demo-app.3dstape").path,
                                                         "--listen", "127.0.0.1:0", "--quiet", "--session", out] + faults, environment: env)
        let port = try replay.port(after: "on http://127.0.0.1:")
        let r = try CLIRunner.run(["client", "--ds", "http://127.0.0.1:\(port)", "--card", "4000000000001067", "--answer", "1234",
                                   "--certs", certs, "--timeout", "2"], environment: env)
        #expect(r.status == 1, "\(name): the client reports the fault: \(r.stderr)")
        #expect(SessionPolling.rreqRecorded(in: out), "\(name): the ACS's RReq follows at its recorded offset (86 ms)")
        replay.interrupt()
        #expect(try replay.wait() == 0, "\(name): \(replay.stderr.suffix(300))")
        for _ in 0..<250 where !replay.stderr.contains("stopped:") { usleep(20_000) } // the pipe's reader may lag the exit
        return Run(stderr: replay.stderr, session: out)
    }

    /// challenge-timeout with `client --timeout 2`: its Erro 402 and its challengeCancel 08 CReq are expected traffic,
    /// and the RReq to the client that has gone is 'not delivered (client gone)'. Before: '1 missed' (404 MISS 'no live
    /// transaction') and 'RReq failed: connect to …: Connection refused'.
    @Test func theClientsClosingMessagesAfterATimeoutAreNoMissAndTheRReqIsNotDelivered() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let run = try replayToClient(dir, "timeout", ["--scenario", "challenge-timeout"])
        #expect(run.stderr.contains(" 0 missed, ") && !run.stderr.contains("RReq failed"), "\(run.stderr)")
        #expect(run.stderr.contains("2 closing messages after a fault or the end answered as an ACS"), "\(run.stderr)")
        #expect(run.stderr.contains("1 RReq not delivered (client gone)"), "\(run.stderr)")
        #expect(try run.sql("SELECT count(*) FROM replay_matches WHERE miss IS NOT NULL") == "0")
        #expect(try run.sql("SELECT outcome FROM replay_matches WHERE matched_by LIKE 'challengeCancel 08 after the SDK''s Erro 402: answered as an ACS%'")
                == "closing message answered as an ACS")
        #expect(try run.sql("SELECT outcome FROM replay_matches WHERE matched_by LIKE 'RReq sent%'") == "RReq not delivered (client gone)")
        #expect(try run.sql("SELECT detail FROM events WHERE kind = 'rreq'").hasPrefix("not delivered: client gone"))
    }

    /// CRes#2=bad-counter: the RReq of the transaction goes out once (was twice: '2 RReqs sent'); the Erro 302 is expected.
    @Test func aRejectedFinalCResSendsOneRReq() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        for (name, faults) in [("final", ["--fault", "CRes#2=bad-counter"]), ("first", ["--scenario", "cres-counter-mismatch"]),
                               ("key", ["--scenario", "cres-undecryptable"])] {
            let run = try replayToClient(dir, name, faults)
            #expect(try run.sql("SELECT count(*) FROM messages WHERE message_type = 'RReq'") == "1", "\(name): \(run.stderr)")
            #expect(try run.sql("SELECT count(*) FROM replay_matches WHERE miss IS NOT NULL") == "0", "\(name)")
            #expect(run.stderr.contains("1 closing message after a fault or the end answered as an ACS") && !run.stderr.contains("RReq failed"),
                    "\(name): \(run.stderr)")
        }
    }

    /// A replay that must be refused at start: its exit status and stderr (-1 when it started and ran instead, stopped after 10 s).
    func refusal(_ args: [String], _ env: [String: String]) throws -> (status: Int32, stderr: String) {
        let p = try Spawned(CLIRunner.binary.path, args, environment: env)
        let status: Int32
        do { status = try p.wait(timeout: 10) } catch { return (-1, p.stderr) }
        for _ in 0..<250 where !p.stderr.hasSuffix("\n") { usleep(20_000) } // the pipe's reader may lag the exit
        return (status, p.stderr)
    }

    /// Item 3 and 4 as a user types them: each refused before anything starts (exit 2, a line each), --partial offered and honoured.
    @Test func rulesAreCheckedByTheAnswersTheyCoverAndScenariosApplyPartially() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let env = ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path]
        let app = Self.root.appendingPathComponent("sessions/demo-app.3dstape").path
        let browser = Self.root.appendingPathComponent("sessions/demo-browser.3dstape").path
        for (session, args, says) in [
            (app, ["--fault", "CRes=hang", "--fault", "CRes#1=delay:1s"], "--fault CRes=hang and CRes#1=delay:1s overlap (rules 1 and 2)"),
            (app, ["--fault", "CRes#9=hang"], "--fault CRes#9=hang can never apply: the session has at most 2 CRes per transaction"),
            (app, ["--delay", "foo=1s"], "--delay foo=1s can never apply: the session has no foo"),
            (app, ["--delay", "CRes#9=1s"], "--delay CRes#9=1s can never apply: the session has at most 2 CRes per transaction"),
            (app, ["--delay", "CRes=1s", "--delay", "CRes#1=2s"], "--delay CRes=1s and CRes#1=2s overlap (--delay options 1 and 2)"),
            (app, ["--fault", "RReq=hang"], "--fault RReq=hang can never apply: hang changes only answers the replayer sends"),
            (browser, ["--fault", "path:/3ds/notify=hang"], "forwards live and never answers"),
        ] {
            let out = dir.appendingPathComponent("x.3dstape").path
            let r = try refusal(["replay", session, "--listen", "127.0.0.1:0", "--session", out] + args, env)
            #expect(r.status == 2 && r.stderr.contains(says) && r.stderr.split(separator: "\n").count == 1, "\(args): \(r.status) \(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: out), "nothing started")
            try? FileManager.default.removeItem(atPath: out)
        }
        let out0 = dir.appendingPathComponent("refused.3dstape").path
        let refused = try refusal(["replay", browser, "--listen", "127.0.0.1:0", "--scenario", "challenge-rejected", "--session", out0], env)
        #expect(refused.status == 2 && refused.stderr.contains("rule CRes=trans-status:N cannot apply: the session has no CRes")
                && refused.stderr.contains("'--scenario challenge-rejected --partial' applies the rest (RReq=trans-status:N)"), "\(refused.stderr)")
        let out = dir.appendingPathComponent("partial.3dstape").path
        let partial = try Spawned(CLIRunner.binary.path, ["replay", browser, "--listen", "127.0.0.1:0", "--scenario", "challenge-rejected",
                                                          "--partial", "--session", out], environment: env)
        _ = try partial.port(after: "on http://127.0.0.1:")
        partial.interrupt()
        #expect(try partial.wait() == 0)
        for _ in 0..<250 where !partial.stderr.contains("stopped:") { usleep(20_000) }
        #expect(partial.stderr.contains("--scenario challenge-rejected --partial leaves out CRes=trans-status:N: the session has no CRes"), "\(partial.stderr)")
        let meta = try sh(["sqlite3", out, "SELECT value FROM meta WHERE key = 'scenario_not_applied'"]).out
        #expect(meta.hasPrefix("CRes=trans-status:N: the session has no CRes"), "\(meta)")
        let none = try refusal(["replay", browser, "--listen", "127.0.0.1:0", "--scenario", "cres-undecryptable", "--partial", "--session", out0], env)
        #expect(none.status == 2 && none.stderr.contains("no rule of scenario cres-undecryptable applies to this session"), "\(none.stderr)")
    }
}

/// `3dstape timeouts`: a bisection of the first CRes's delay finds `3dstape client --timeout 4`'s challenge timeout.
@Suite(.serialized) struct TimeoutSweepEndToEndTests {
    @Test func bisectionFindsTheClientsChallengeTimeout() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let env = ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path]
        let certs = dir.appendingPathComponent("certs").path
        #expect(try CLIRunner.run(["ca", "export", "--ds", certs], environment: env).status == 0)
        let session = dir.appendingPathComponent("demo-app.3dstape").path
        try FileManager.default.copyItem(atPath: ScenarioEndToEndTests.root.appendingPathComponent("sessions/demo-app.3dstape").path, toPath: session)
        let report = dir.appendingPathComponent("report").path
        // A 4 s challenge timeout, so that the client's own setup time (slow when other suites load the two cores) stays
        // small beside it.
        let r = try CLIRunner.run(["timeouts", session, "--message", "CRes#1", "--from", "2s", "--to", "6s", "--bisect", "--report", report, "--json",
                                   "--", CLIRunner.binary.path, "client", "--ds", "{url}", "--card", "4000000000001067", "--answer", "1234",
                                   "--certs", certs, "--timeout", "4"], environment: env)
        #expect(r.status == 0, "\(r.stderr)")
        let j = try JSON.parse(r.stdout)
        let waited = Int(j["waitedOutMs"]?.compact ?? "") ?? 0, gaveUp = Int(j["gaveUpAtMs"]?.compact ?? "") ?? 0
        // The client's 2 s run from the start of its challenge (after the ARes is checked and the channel set up), so the
        // threshold sits a little under 2 s, lower still when other suites load the two cores; bisection narrows it to 100 ms.
        // Where exactly the threshold lands depends on the client's own setup time, which a loaded CI machine stretches;
        // what must hold is the sweep's logic: a bracket, the late delay given up on, the early one waited out.
        #expect(gaveUp > 0 && gaveUp <= 6000 && (waited == 0 || (gaveUp > waited && gaveUp - waited <= 2000)), "threshold \(waited)–\(gaveUp) ms")
        guard case let .array(runs)? = j["runs"] else { Issue.record("no runs"); return }
        let gaveUpRuns = runs.filter { $0["outcome"]?.stringValue == "gave up" }
        #expect(!gaveUpRuns.isEmpty && gaveUpRuns.allSatisfy { $0["erroSent"] == .array([.string("402")]) && $0["exitCode"]?.compact == "1" },
                "the client sent Erro 402 when it gave up: \(gaveUpRuns)")
        let afterMs = gaveUpRuns.compactMap { Double($0["timeToOutcomeMs"]?.compact ?? "") }
        #expect(afterMs.allSatisfy { $0 > 0 && $0 < 6000 }, "it gave up within its timeout: \(afterMs)")
        let html = try String(contentsOfFile: (report as NSString).appendingPathComponent("index.html"), encoding: .utf8)
        #expect(html.contains("<svg") && html.contains("<circle") && html.contains("gave up"))
        #expect(r.stderr.contains("timeouts: CRes#1 delayed 2s, run 1 of 1"), "a progress line per run")
        let bad = try CLIRunner.run(["timeouts", session, "--message", "PRes", "--", "true"], environment: env)
        #expect(bad.status == 2 && bad.stderr.contains("the session has no PRes"), "\(bad.stderr)")
    }
}
