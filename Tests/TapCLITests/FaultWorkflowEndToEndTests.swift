import Foundation
import Testing
import TapCore

/// Issue 24, "the fault workflow, made quiet and exact", items 5 to 8, through the built binary with the issue's own
/// invocations: a sweep whose command cannot start, usage errors (exit status 2 everywhere, before anything starts),
/// the demo's quiet output and closing hints, pinned ports, and the diff of a replay against its recording.
@Suite(.serialized) struct FaultWorkflowEndToEndTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized

    struct Fixture {
        let dir: URL
        var env: [String: String] { ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path] }
        func path(_ name: String) -> String { dir.appendingPathComponent(name).path }
        /// A copy of a checked-in session.
        func session(_ name: String) throws -> String {
            let p = path(name)
            try FileManager.default.copyItem(atPath: FaultWorkflowEndToEndTests.root.appendingPathComponent("sessions/\(name)").path, toPath: p)
            return p
        }
    }

    func withFixture(_ body: (Fixture) throws -> Void) throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        try body(Fixture(dir: dir))
    }

    /// Ports free on 127.0.0.1 just now (bound all at once, then closed), for options that pin one.
    static func freePorts(_ n: Int) throws -> [UInt16] {
        var fds: [Int32] = []
        defer { fds.forEach { close($0) } }
        return try (0..<n).map { _ in
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            fds.append(fd)
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_addr.s_addr = inet_addr("127.0.0.1")
            var len = socklen_t(MemoryLayout<sockaddr_in>.size)
            let ok = withUnsafeMutablePointer(to: &a) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
            }
            guard ok else { throw SpawnError("no free port") }
            return UInt16(bigEndian: a.sin_port)
        }
    }

    /// The lines of `stderr` that are 3dstape's messages (not timeouts' progress lines).
    static func messages(_ stderr: String) -> [Substring] {
        stderr.split(separator: "\n").filter { !$0.hasPrefix("timeouts: ") }
    }

    // Item 5: `timeouts -- /nonexistent/cmd` printed "waited out no delay tried and gave up at no delay tried", exit 0.
    @Test func aSweepWhoseCommandCannotStartIsRefusedWithOneLine() throws {
        try withFixture { f in
            let session = try f.session("demo-app.3dstape")
            let notExecutable = f.path("script.sh")
            try "#!/bin/sh\nexit 0\n".write(toFile: notExecutable, atomically: true, encoding: .utf8)
            let cases: [([String], String)] = [
                (["/nonexistent/cmd"], "cannot start /nonexistent/cmd: no such file"),
                (["3dstape-no-such-command-anywhere"], "cannot start 3dstape-no-such-command-anywhere: not found on PATH"),
                ([f.dir.path], "cannot start \(f.dir.path): it is a directory"),
                ([notExecutable], "cannot start \(notExecutable): not executable"),
            ]
            for (command, says) in cases {
                let report = f.path("report-\(UUID().uuidString)")
                let r = try CLIRunner.run(["timeouts", session, "--message", "CRes#1", "--from", "0s", "--to", "1s", "--step", "0.5s",
                                           "--report", report, "--"] + command, environment: f.env)
                #expect(r.status == 2 && r.stderr.contains(says) && r.stderr.split(separator: "\n").count == 1, "\(command): exit \(r.status) \(r.stderr)")
                #expect(!r.stdout.contains("no delay tried"), "\(r.stdout)")
                #expect(!FileManager.default.fileExists(atPath: report), "\(command): refused before any replay")
            }
            // Found and started, but the shell says "not found" (127) on every run, before asking the replayer anything: the
            // sweep stops after the first run instead of trying every delay.
            let report = f.path("report-127")
            let r = try CLIRunner.run(["timeouts", session, "--message", "CRes#1", "--from", "0s", "--to", "2s", "--step", "0.5s",
                                       "--report", report, "--", "/bin/sh", "-c", "exec 3dstape-no-such-command-anywhere {url}"], environment: f.env)
            let lines = Self.messages(r.stderr)
            #expect(r.status == 2 && lines.count == 1 && lines[0].contains("the command did not start") && lines[0].contains("exited 127"),
                    "exit \(r.status) \(r.stderr)")
            #expect(r.stderr.components(separatedBy: "run 1 of 1").count == 2, "one run, not five: \(r.stderr)")
        }
    }

    /// A command that starts but fails on its own (a usage error of the client): no run reaches the message, the sweep
    /// fails (exit 1) and says the command's own last line and where its output is (it went to /dev/null).
    @Test func aSweepWhoseCommandNeverAsksShowsWhatTheCommandSaid() throws {
        try withFixture { f in
            let session = try f.session("demo-app.3dstape")
            let report = f.path("report-never")
            let r = try CLIRunner.run(["timeouts", session, "--message", "CRes#1", "--from", "0s", "--to", "1s", "--step", "1s",
                                       "--report", report, "--", "/bin/sh", "-c", "echo 'client: --card PAN is required' >&2; exit 2"],
                                      environment: f.env)
            #expect(r.status == 1, "exit \(r.status) \(r.stderr)")
            #expect(r.stderr.contains("the command never asked for CRes#1 in 2 runs (exit status 2); its last line: client: --card PAN is required"),
                    "\(r.stderr)")
            #expect(FileManager.default.fileExists(atPath: (report as NSString).appendingPathComponent("delay-0ms-run1.log")))
        }
    }

    // Item 6: usage errors exit 2 with one line, in every command, and nothing starts (demo --channel foo left a session).
    @Test func badInvocationsExit2WithOneLineAndStartNothing() throws {
        try withFixture { f in
            let session = try f.session("demo-app.3dstape")
            let browser = try f.session("demo-browser.3dstape")
            let out = f.path("made.3dstape")
            let cases: [([String], String)] = [
                (["demo", "--channel", "foo", "--out", out], "--channel foo: expected app, browser or all"),
                (["demo", "--gateway", "foo", "--out", out], "--gateway foo: expected pxp or trustpayments"),
                (["demo", "--sandbox-listen", "nowhere", "--out", out], "--sandbox-listen nowhere: expected HOST:PORT"),
                (["demo", "--record-listen", "0.0.0.0:0", "--out", out], "--record-listen 0.0.0.0:0 is reachable from other machines"),
                (["demo", "--gateway", "pxp", "--channel", "app", "--out", out], "give --channel or --gateway, not both"),
                (["demo", "--out", session], "already exists"),
                (["replay", session, "--seed", "-1", "--listen", "127.0.0.1:0", "--session", out], "--seed -1: expected a whole number"),
                (["replay", session, "--repeat", "often", "--listen", "127.0.0.1:0", "--session", out], "--repeat often: expected last, cycle or miss"),
                (["replay", session, "--on-miss", "shrug", "--listen", "127.0.0.1:0", "--session", out], "--on-miss shrug: expected 404, erro"),
                (["replay"], "which session?"),
                (["timeouts", session, "--message", "ARes", "--runs", "0", "--", "true"], "--runs 0: expected a whole number from 1 to 100"),
                (["timeouts", session, "--message", "ARes", "--seed", "x", "--", "true"], "--seed x: expected a whole number"),
                (["timeouts", session, "--message", "ARes", "--listen", "0.0.0.0:0", "--", "true"], "--listen 0.0.0.0:0 is reachable"),
                (["diff", session], "give two session files"),
                (["diff", session, browser, "--pair-by", "match"], "--pair-by match: \(browser) is not a replay"),
                (["diff", session, browser, "--pair-by", "order"], "--pair-by order: expected match or shape"),
                (["show", session, "--exchange", "x"], "--exchange x: expected a number"),
                (["show"], "give a session file"),
                (["export"], "give a session file"),
                (["validate"], "give a session file"),
                (["decrypt", session], "--keylog FILE is required"),
                (["import"], "give a HAR file"),
                (["ca", "frob"], "unknown action 'frob'"),
                (["ca", "export", "--format", "xml"], "--format xml: expected pem, der, base64 or mobileconfig"),
                (["sandbox", "frob"], "unknown action 'frob'"),
                (["sandbox", "certs"], "sandbox certs needs --out DIR"),
                (["client", "--card", "4000000000001000", "--certs", f.dir.path], "--ds URL is required"),
                (["client", "--ds", "http://127.0.0.1:9", "--card", "4000000000001000", "--certs", f.dir.path, "--channel", "tv"],
                 "--channel tv: expected app or browser"),
                (["record", "--session", out, "--listen", "127.0.0.1:0", "--reverse", "ftp://x"], "--reverse ftp://x: expected http"),
                (["record", "--session", out, "--listen", "127.0.0.1:0", "--client-cert", session], "--client-cert and --client-key go together"),
                (["decode", "--cek", "zz"], "--cek zz…: expected 32 or 64 hex digits"),
            ]
            for (args, says) in cases {
                // Bounded: a command that wrongly started a server would otherwise never end.
                let p = try Spawned(CLIRunner.binary.path, args, environment: f.env)
                defer { p.stop() }
                let status = try p.wait(timeout: 30)
                for _ in 0..<100 where !p.stderr.hasSuffix("\n") { usleep(10_000) }
                #expect(status == 2 && p.stderr.contains(says) && p.stderr.split(separator: "\n").count == 1,
                        "\(args.joined(separator: " ")): exit \(status) \(p.stderr)")
                for suffix in ["", "-wal", "-shm"] {
                    #expect(!FileManager.default.fileExists(atPath: out + suffix), "\(args.joined(separator: " ")): nothing was started, no \(out + suffix)")
                }
            }
        }
    }

    // Items 6 and 7: a browser-only demo on pinned ports; --quiet prints what its help says; the closing hints hold for
    // the session made (it pointed at exchange 1, an AReq, and at challenge-timeout, which cannot apply without a CRes).
    @Test func demoOnPinnedPortsQuietAndWithHintsTrueForItsSession() throws {
        try withFixture { f in
            let ports = try Self.freePorts(3)
            let out = f.path("b.3dstape")
            let r = try CLIRunner.run(["demo", "--channel", "browser", "--out", out, "--sandbox-listen", "127.0.0.1:\(ports[0])",
                                       "--record-listen", "127.0.0.1:\(ports[1])", "--replay-listen", "127.0.0.1:\(ports[2])"], environment: f.env)
            #expect(r.status == 0, "\(r.stdout.suffix(1500)) \(r.stderr)")
            #expect(r.stderr.contains("sandbox http://127.0.0.1:\(ports[0]), recorder http://127.0.0.1:\(ports[1])"), "\(r.stderr)")
            #expect(r.stdout.contains("here on 127.0.0.1:\(ports[2])"), "the replay listened on its pinned port")
            let urls = try sh(["sqlite3", out, "SELECT url FROM exchanges ORDER BY id LIMIT 1"]).out
            #expect(urls.contains("127.0.0.1:\(ports[0])/"), "the recorded traffic went to the pinned sandbox: \(urls)")

            let hint = try #require(r.stdout.split(separator: "\n").first { $0.hasPrefix("session written to") }.map(String.init))
            let exchange = try #require(hint.components(separatedBy: "--exchange ").dropFirst().first?.prefix { $0.isNumber })
            let types = try sh(["sqlite3", out, "SELECT group_concat(message_type) FROM messages WHERE exchange_id = \(exchange)"]).out
            #expect(types.contains("CReq") || types.contains("CRes"), "the hinted exchange \(exchange) holds a challenge message: \(types)")
            let scenario = try #require(hint.components(separatedBy: "--scenario ").dropFirst().first?.prefix { $0 != "'" })
            let replay = try Spawned(CLIRunner.binary.path, ["replay", out, "--listen", "127.0.0.1:0", "--scenario", String(scenario),
                                                             "--session", f.path("s.3dstape"), "--quiet"], environment: f.env)
            defer { replay.stop() }
            _ = try replay.port(after: "on http://127.0.0.1:")
            replay.interrupt()
            #expect(try replay.wait() == 0, "the hinted scenario \(scenario) applies to the session: \(replay.stderr)")

            let q = try CLIRunner.run(["demo", "--channel", "browser", "--out", f.path("q.3dstape"), "--quiet"], environment: f.env)
            let lines = q.stdout.split(separator: "\n")
            #expect(q.status == 0 && lines.count == 5 && lines.prefix(4).allSatisfy { $0.hasPrefix("ok") }
                    && lines[4].hasPrefix("session written to \(f.path("q.3dstape"))"), "only the flow results and the file name: \(q.stdout)")
        }
    }

    // Item 7: the sweep's replayer on a pinned port, the same for every run.
    @Test func timeoutsListensWhereItIsTold() throws {
        try withFixture { f in
            let certs = f.path("certs")
            #expect(try CLIRunner.run(["ca", "export", "--ds", certs], environment: f.env).status == 0)
            let session = try f.session("demo-app.3dstape")
            let port = try Self.freePorts(1)[0]
            let seen = f.path("urls.txt")
            let r = try CLIRunner.run(["timeouts", session, "--message", "ARes", "--from", "0s", "--to", "0.1s", "--step", "0.1s", "--json",
                                       "--listen", "127.0.0.1:\(port)", "--report", f.path("report"), "--",
                                       "/bin/sh", "-c", "echo \"$0\" >> \"$1\"; exec \"$2\" client --ds \"$0\" --card 4000000000001000 --certs \"$3\"",
                                       "{url}", seen, CLIRunner.binary.path, certs], environment: f.env)
            #expect(r.status == 0, "\(r.stderr)")
            let urls = try String(contentsOfFile: seen, encoding: .utf8).split(separator: "\n")
            #expect(urls == ["http://127.0.0.1:\(port)", "http://127.0.0.1:\(port)"], "both runs on the pinned port: \(urls)")
            guard case let .array(runs)? = try JSON.parse(r.stdout)["runs"] else { Issue.record("no runs: \(r.stdout)"); return }
            #expect(runs.count == 2 && runs.allSatisfy { $0["outcome"]?.stringValue == "waited" }, "\(runs)")
        }
    }

    // Item 8: a one-transaction replay (a challenge) diffed against its recording paired its challenge with the first,
    // frictionless transaction (27 differences); paired by what it matched, it has none.
    @Test func aReplayIsDiffedAgainstTheTransactionsItMatched() throws {
        try withFixture { f in
            let certs = f.path("certs")
            #expect(try CLIRunner.run(["ca", "export", "--ds", certs], environment: f.env).status == 0)
            let session = try f.session("demo-app.3dstape")
            let replayPath = f.path("one.3dstape")
            let replay = try Spawned(CLIRunner.binary.path, ["replay", session, "--listen", "127.0.0.1:0", "--session", replayPath, "--quiet"],
                                     environment: f.env)
            defer { replay.stop() }
            let port = try replay.port(after: "on http://127.0.0.1:")
            let client = try CLIRunner.run(["client", "--ds", "http://127.0.0.1:\(port)", "--card", "4000000000001067", "--answer", "1234",
                                            "--certs", certs], environment: f.env)
            #expect(client.status == 0, "\(client.stderr)")
            #expect(SessionPolling.rreqRecorded(in: replayPath), "the replayer's RReq follows the final CRes at its recorded offset")
            replay.interrupt()
            #expect(try replay.wait() == 0)

            let d = try CLIRunner.run(["diff", session, replayPath])
            #expect(d.status == 0 && d.stdout.contains("16 transactions in A, 1 in B, 1 paired by what the replay matched (15 of A not replayed")
                    && d.stdout.contains("no differences"), "\(d.stdout) \(d.stderr)")
            let j = try JSON.parse(try CLIRunner.run(["diff", session, replayPath, "--json"]).stdout)
            #expect(j["pair_by"]?.stringValue == "match" && j["differences"] == .array([]) && j["not_replayed_a"]?.compact == "15", "\(j.compact)")
            let shape = try CLIRunner.run(["diff", session, replayPath, "--pair-by", "shape"])
            #expect(shape.status == 1 && shape.stdout.contains("missing-transaction"), "by shape, as before: \(shape.stdout.suffix(300))")
            // Reversed, A is the replay: not a replay of B, so paired by shape; asked for match, refused.
            #expect(try CLIRunner.run(["diff", replayPath, session]).stdout.contains("1 paired;"))
            let reversed = try CLIRunner.run(["diff", replayPath, session, "--pair-by", "match"])
            #expect(reversed.status == 2 && reversed.stderr.contains("is not a replay"), "\(reversed.stderr)")
            // A replay of another recording (still there) is not paired by match with this one.
            let other = try f.session("demo-browser.3dstape")
            let wrong = try CLIRunner.run(["diff", other, replayPath, "--pair-by", "match"])
            #expect(wrong.status == 2 && wrong.stderr.contains("is a replay of"), "\(wrong.stderr)")
        }
    }
}
