import Foundation
import Testing
import TapCore

/// `3dstape client-replay` (issue 25): the demo's recording re-sent to a sandbox with other keys, and to one whose
/// acsSignedContent does not verify; usage errors.
@Suite(.serialized) struct ClientReplayEndToEndTests {
    /// The demo's cards (first 6 / last 4 masked in the recording) and what its flows typed, by transaction.
    static let cards = ["4000000000001000", "4000000000001018", "4000000000001026", "4000000000001034", "4000000000001042",
                        "4000000000001059", "4000000000001067", "4000000000001075", "4000000000001083", "4000000000001091",
                        "4000000000001109", "4000000000001117", "4000000000001125", "4000000000001133", "4000000000001166"]
    static let secrets = ["7=1234", "8=9999", "9=2", "10=1,3", "12=1234", "17=1234", "18=2", "19=oob"]

    @Test func demoSessionReplaysToSandboxWithOtherKeysAndFailsOnBadSignature() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let env = ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path]
        let session = dir.appendingPathComponent("demo.3dstape").path
        // The demo's last step: the sandbox restarted with an EC DS key, the recording client-replayed to it.
        let demo = try CLIRunner.run(["demo", "--out", session], environment: env)
        #expect(demo.status == 0, "\(demo.stdout.suffix(3000)) \(demo.stderr.suffix(2000))")
        #expect(demo.stdout.contains("client replay: 20 of 20 transactions answered as recorded"), "\(demo.stdout.suffix(3000))")
        let live = dir.appendingPathComponent("demo-client-replay.3dstape").path
        let show = try CLIRunner.run(["show", live, "--json"], environment: env)
        #expect(show.status == 0, "show reads the client-replay session: \(show.stderr)")
        #expect(show.stdout.contains("\"CRes\"") && show.stdout.contains("\"RReq\""), "the live CRes (decrypted) and RReq are in the session")

        // The same recording against a sandbox that corrupts acsSignedContent: every app challenge differs, exit 1.
        let certs = dir.appendingPathComponent("certs-ec").path
        let w = try CLIRunner.run(["sandbox", "certs", "--out", certs, "--ds-key", "ec"], environment: env)
        #expect(w.status == 0, "\(w.stderr)")
        let sandbox = try Spawned(CLIRunner.binary.path, ["sandbox", "--listen", "127.0.0.1:0", "--ds-key", "ec", "--bad-signature", "--quiet"],
                                  environment: env)
        defer { sandbox.stop() }
        let port = try sandbox.port(after: "on http://127.0.0.1:")
        var args = ["client-replay", session, "--certs", certs, "--target", "http://127.0.0.1:\(port)", "--json", "--concurrency", "4",
                    "--session", dir.appendingPathComponent("bad.3dstape").path]
        for c in Self.cards { args += ["--card", c] }
        for s in Self.secrets { args += ["--secret", s] }
        let r = try CLIRunner.run(args, environment: env)
        #expect(r.status == 1, "\(r.stdout.suffix(2000)) \(r.stderr)")
        let objects = try r.stdout.split(separator: "\n").map { try JSON.parse(String($0)) }
        let transactions = objects.filter { $0["transaction"] != nil }
        #expect(transactions.count == 20)
        let differing = Set(transactions.filter { $0["match"] == .bool(false) }.compactMap { $0["transaction"]?.numberValue.flatMap { Int($0) } })
        #expect(differing == Set(7...14), "the eight app challenges differ, nothing else: \(differing)")
        for t in transactions where t["match"] == .bool(false) {
            #expect(t["failure"]?.stringValue?.contains("acsSignedContent rejected") == true, "\(t.compact)")
        }
        #expect(objects.last?["summary"]?["differed"]?.numberValue == "8")
    }

    /// Newcomer (issue 25): the README's example on the checked-in app demo session needed 17 --card and 4 --secret flags.
    /// Its cards are 3dstape's test cards: they and the sandbox cardholder's answers (passing where the recording ended Y,
    /// failing where it did not) are filled in. A --secret for a transaction the session does not hold is refused.
    @Test func theCheckedInDemoSessionReplaysWithoutCardsOrSecrets() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let env = ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path]
        let certs = dir.appendingPathComponent("certs-ec").path
        #expect(try CLIRunner.run(["sandbox", "certs", "--out", certs, "--ds-key", "ec"], environment: env).status == 0)
        let sandbox = try Spawned(CLIRunner.binary.path, ["sandbox", "--listen", "127.0.0.1:0", "--ds-key", "ec", "--quiet"], environment: env)
        defer { sandbox.stop() }
        let port = try sandbox.port(after: "on http://127.0.0.1:")
        let session = CheckEndToEndTests.root.appendingPathComponent("sessions/demo-app.3dstape").path
        let base = ["client-replay", session, "--certs", certs, "--target", "http://127.0.0.1:\(port)"]
        let r = try CLIRunner.run(base + ["--session", dir.appendingPathComponent("live.3dstape").path], environment: env)
        #expect(r.status == 0 && r.stdout.contains("16 of 16 transactions answered as recorded"), "\(r.stdout.suffix(2500)) \(r.stderr)")
        let bad = try CLIRunner.run(base + ["--secret", "99=1", "--session", dir.appendingPathComponent("x.3dstape").path], environment: env)
        #expect(bad.status == 2 && bad.stderr.contains("--secret 99=…: the session holds 16 transactions"), "\(bad.stderr)")
    }

    @Test func usageErrorsExitTwo() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let missing = dir.appendingPathComponent("none.3dstape").path
        for (args, message) in [(["client-replay"], "which session?"),
                                (["client-replay", missing], "--certs DIR is required"),
                                (["client-replay", missing, "--certs", dir.path, "--rate", "fast"], "--rate fast"),
                                (["client-replay", missing, "--certs", dir.path, "--concurrency", "0"], "--concurrency 0"),
                                (["client-replay", missing, "--certs", dir.path, "--target", "ftp://x"], "--target ftp://x"),
                                (["client-replay", missing, "--certs", dir.path, "--map", "nohost"], "--map nohost"),
                                (["client-replay", missing, "--certs", dir.path, "--card", "12ab"], "--card"),
                                (["client-replay", missing, "--certs", dir.path, "--rreq-listen", "0.0.0.0:0"], "--rreq-listen")] {
            let r = try CLIRunner.run(args)
            #expect(r.status == 2, "\(args): \(r.stderr)")
            #expect(r.stderr.contains(message), "\(args): \(r.stderr)")
        }
    }
}
