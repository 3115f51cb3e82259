import Foundation
import Testing
import TapCore

/// Hardening, round two, defects 2 and 6, through the built binary with the issue's own inputs. Before: each option
/// passed the start-up check and the process died with exit 132 on the first request or connection (`UInt64(seconds *
/// 1e9)`, `Int(seconds)`); `import` died on `"status": 1e20`; `export --format har` and `web` died on a stored
/// `t_request_start` of 1e300; 3,000 identical fault rules took 7.6 s and 1.15 GB to be refused.
@Suite struct NumericInputEndToEndTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized

    func withSession(_ body: (URL, String, [String: String]) throws -> Void) throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let session = dir.appendingPathComponent("s.3dstape").path
        try FileManager.default.copyItem(atPath: Self.root.appendingPathComponent("sessions/sample-reverse.3dstape").path, toPath: session)
        try body(dir, session, ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path])
    }

    @Test func outOfRangeDurationsAndFactorsAreRefusedAtStartWithTheirRange() throws {
        try withSession { dir, session, env in
            let out = dir.appendingPathComponent("r.3dstape").path
            let replay = ["replay", session, "--listen", "127.0.0.1:0", "--session", out]
            let cases: [([String], String)] = [
                (replay + ["--fault", "ARes=delay:99999999999999999999s"], "--fault ARes=delay:99999999999999999999s: delay:D: a duration must be from 0s to 24h"),
                (replay + ["--delay", "ARes=1e11s"], "--delay ARes=1e11s: a duration must be from 0s to 24h"),
                (replay + ["--timing", "fixed:1e11s"], "--timing fixed:1e11s: the fixed delay: a duration must be from 0s to 24h"),
                (replay + ["--timing", "scale:1e300"], "--timing scale:1e300: the scale factor: expected a number from 0 to 1000"),
                (replay + ["--jitter", "uniform:1e11s-2e11s"], "--jitter uniform:1e11s-2e11s: MIN: a duration must be from 0s to 24h"),
                (replay + ["--jitter", "lognormal:1s,nan"], "--jitter lognormal:1s,nan: SIGMA: expected a number from 0 to 10"),
                (replay + ["--idle-timeout", "inf"], "--idle-timeout inf: a duration must be from 1ms to 24h"),
                (replay + ["--header-timeout", "1e300"], "--header-timeout 1e300: a duration must be from 1ms to 24h"),
                (replay + ["--max-buffered", "99999999999999999999"], "--max-buffered 99999999999999999999: expected a size from 1MiB to 64GiB"),
                (["sandbox", "--listen", "127.0.0.1:0", "--idle-timeout", "inf"], "--idle-timeout inf: a duration must be from 1ms to 24h"),
                (["sandbox", "--listen", "127.0.0.1:0", "--header-timeout", "1e300"], "--header-timeout 1e300: a duration must be from 1ms to 24h"),
                (["sandbox", "--listen", "127.0.0.1:0", "--ares-delay", "1e11"], "--ares-delay 1e11: a duration must be from 0s to 24h"),
                (["record", "--listen", "127.0.0.1:0", "--reverse", "http://127.0.0.1:9", "--session", out, "--upstream-timeout", "1e300"],
                 "--upstream-timeout 1e300: a duration must be from 1ms to 24h"),
                (["record", "--listen", "127.0.0.1:0", "--reverse", "http://127.0.0.1:9", "--session", out, "--max-body", "1TiB"],
                 "--max-body 1TiB: expected a size from 1 to 512MiB"),
                (["record", "--listen", "127.0.0.1:0", "--reverse", "http://127.0.0.1:9", "--session", out, "--max-session-size", "1e9"],
                 "--max-session-size 1e9: expected a size from 256KiB to 16TiB"),
                (["client", "--ds", "http://127.0.0.1:9", "--card", "4000000000001000", "--certs", dir.path, "--timeout", "inf"],
                 "--timeout inf: a duration must be from 1ms to 24h"),
                (["timeouts", session, "--message", "ARes", "--to", "1e11s", "--", "true"], "--to 1e11s: a duration must be from 0s to 24h"),
                (["timeouts", session, "--message", "ARes", "--to", "1s", "--step", "100us", "--", "true"], "--step 100us: a duration must be from 1ms to 24h"),
                (["timeouts", session, "--message", "ARes", "--to", "24h", "--step", "1ms", "--", "true"], "makes more than 1000 delays"),
                (["diff", session, session, "--timing-tolerance", "inf"], "--timing-tolerance inf: a duration must be from 0s to 24h"),
            ]
            for (args, says) in cases {
                // Bounded: before the fix these servers started (and died on their first request), so a plain run never ended.
                let p = try Spawned(CLIRunner.binary.path, args, environment: env)
                defer { p.stop() }
                let status = try p.wait(timeout: 30)
                for _ in 0..<100 where !p.stderr.hasSuffix("\n") { usleep(10_000) } // the pipe's last bytes, read in the background
                #expect(status == 2 && p.stderr.contains(says) && p.stderr.split(separator: "\n").count == 1,
                        "\(args.dropFirst(2).joined(separator: " ")): exit \(status) \(p.stderr)")
            }
            #expect(!FileManager.default.fileExists(atPath: out), "nothing was started, no session file made")
        }
    }

    @Test func aHARStatusOf1e20IsRefusedNamingTheEntryAndField() throws {
        try withSession { dir, _, env in
            let har = dir.appendingPathComponent("bad.har").path
            let entry = #"{"startedDateTime":"2026-01-01T00:00:0%dZ","request":{"method":"GET","url":"http://a/"},"response":{"status":%@}}"#
            let text = #"{"log":{"version":"1.2","entries":["# + String(format: entry, 0, "200") + "," + String(format: entry, 1, "1e20") + "]}}"
            try Data(text.utf8).write(to: URL(fileURLWithPath: har))
            let out = dir.appendingPathComponent("imported.3dstape").path
            let r = try CLIRunner.run(["import", har, "--session", out], environment: env)
            #expect(r.status == 1 && r.stderr.contains("bad.har: entry 2: response.status 1e20 is out of range"), "\(r.status) \(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: out), "a bad entry fails the whole file before anything is written")
        }
    }

    @Test func aStoredStartOf1e300IsExportedAndServed() throws {
        try withSession { dir, session, env in
            #expect(try sh(["sqlite3", session, "UPDATE exchanges SET t_request_start = 1e300 WHERE id = 2; UPDATE exchanges SET t_done = 1e999 WHERE id = 3"]).status == 0)
            let har = try CLIRunner.run(["export", session, "--format", "har"], environment: env)
            #expect(har.status == 0, "\(har.stderr)")
            let entries = (try JSON.parse(har.stdout))["log"]?["entries"]?.arrayValue ?? []
            #expect(entries.count == 6 && entries.contains { $0["startedDateTime"]?.stringValue == "9999-12-31T23:59:59.000000Z" })
            let imported = dir.appendingPathComponent("back.3dstape").path
            let harFile = dir.appendingPathComponent("s.har").path
            try Data(har.stdout.utf8).write(to: URL(fileURLWithPath: harFile))
            #expect(try CLIRunner.run(["import", harFile, "--session", imported], environment: env).status == 0, "what export writes, import takes")
            let jsonl = try CLIRunner.run(["export", session, "--format", "jsonl"], environment: env)
            #expect(jsonl.status == 0 && jsonl.stdout.split(separator: "\n").allSatisfy { (try? JSON.parse(String($0))) != nil },
                    "every line is JSON (a stored Inf is not written as inf): \(jsonl.stderr)")
            for format in ["svg", "mermaid"] {
                let r = try CLIRunner.run(["export", session, "--format", format], environment: env)
                #expect(r.status == 0, "\(format): \(r.stderr)")
            }
            #expect(try CLIRunner.run(["show", session, "--exchange", "2"], environment: env).status == 0)

            let web = try Spawned(CLIRunner.binary.path, ["web", session, "--listen", "127.0.0.1:0"], environment: env)
            defer { web.stop() }
            let port = try web.port(after: "3dstape web: http://127.0.0.1:")
            let fetch = """
            import json, sys, urllib.request
            for route in ["/api/sessions/s.3dstape/session.har", "/api/sessions/s.3dstape/exchanges?limit=10", "/api/sessions"]:
                with urllib.request.urlopen("http://127.0.0.1:%s%s" % (sys.argv[1], route), timeout=20) as r:
                    json.load(r); print(r.status, route)
            """
            let r = try sh(["python3", "-c", fetch, String(port)])
            #expect(r.status == 0 && r.out.split(separator: "\n").count == 3, "\(r.out) \(r.err)")
            #expect(web.process.isRunning, "the server is still up: \(web.stderr.suffix(300))")
        }
    }

    @Test func threeThousandIdenticalFaultRulesAreRefusedQuicklyWithABoundedMessage() throws {
        try withSession { dir, session, env in
            let file = dir.appendingPathComponent("faults.json").path
            try Data(("[" + Array(repeating: #"{"match": "ARes", "action": "hang"}"#, count: 3000).joined(separator: ",") + "]").utf8)
                .write(to: URL(fileURLWithPath: file))
            let started = Date()
            let r = try CLIRunner.run(["replay", session, "--listen", "127.0.0.1:0", "--faults", file,
                                       "--session", dir.appendingPathComponent("r.3dstape").path], environment: env)
            let took = Date().timeIntervalSince(started)
            let lines = r.stderr.split(separator: "\n")
            #expect(r.status == 2 && lines.count == 6 && lines.last?.hasSuffix("… and 4498495 more problems with these 3000 rules") == true,
                    "\(r.status) \(r.stderr)")
            #expect(lines.first?.hasPrefix("3dstape: replay: --fault ARes=hang and ARes=hang overlap (rules 1 and 2)") == true)
            #expect(took < 5, "was 7.6 s (and 1.15 GB): \(took) s")
        }
    }
}
