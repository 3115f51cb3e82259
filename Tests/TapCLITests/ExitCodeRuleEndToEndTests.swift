import Foundation
import Testing

/// Issue 26, the typed CLI: one exit-code rule for every command, through the built binary. 2 is usage: an unknown option,
/// a bad value, a missing value, an output file that exists without --force, each refused before anything starts with
/// one line naming the option. Before: record, replay, import, export, ca export and sandbox certs refused an existing
/// output file with 1 (client-replay and demo with 2).
@Suite struct ExitCodeRuleEndToEndTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized

    /// Per command: arguments with a bad value, and what the refusal must name.
    static func badValues(session: String, dir: String) -> [String: ([String], String)] {
        [
            "demo": (["demo", "--channel", "both"], "--channel both"),
            "record": (["record", "--listen", "127.0.0.1:0", "--max-body", "1x"], "--max-body 1x"),
            "replay": (["replay", session, "--seed", "-1"], "--seed -1"),
            "scenarios": (["scenarios", "--json=yes"], "--json takes no value"),
            "check": (["check", session, "--runs", "0", "--", "true"], "--runs 0"),
            "timeouts": (["timeouts", session, "--message", "ARes", "--runs", "101", "--", "true"], "--runs 101"),
            "ls": (["ls", dir, "--json=1"], "--json takes no value"),
            "show": (["show", session, "--profile", "visa"], "--profile visa"),
            "decrypt": (["decrypt", session, "--keylog"], "--keylog needs a value"),
            "validate": (["validate", session, "--rules=all"], "--rules takes no value"),
            "diff": (["diff", session, session, "--max-pairing-steps", "0"], "--max-pairing-steps 0"),
            "export": (["export", session, "--format", "pdf"], "--format pdf"),
            "import": (["import", "x.har", "--session"], "--session needs a value"),
            "web": (["web", dir, "--listen", "localhost"], "--listen localhost"),
            "decode": (["decode", "-", "--cek", "zz"], "--cek zz"),
            "sandbox": (["sandbox", "--ds-key", "dsa"], "--ds-key"),
            "client": (["client", "--ds", "http://127.0.0.1:9", "--card", "4000000000001000", "--certs", dir, "--channel", "sms"], "--channel sms"),
            "client-replay": (["client-replay", session, "--certs", dir, "--concurrency", "0"], "--concurrency 0"),
            "ca": (["ca", "export", "--format", "p12"], "--format p12"),
        ]
    }

    /// Per command with an output file: arguments naming one that exists, and what the refusal must name.
    static func existingOutputs(session: String, existing: String, filledDir: String, dir: String) -> [String: ([String], String)] {
        [
            "demo": (["demo", "--out", existing], "--out \(existing) already exists"),
            "record": (["record", "--listen", "127.0.0.1:0", "--session", existing], "\(existing) already exists; choose another --session"),
            "replay": (["replay", session, "--listen", "127.0.0.1:0", "--session", existing], "\(existing) already exists; choose another --session"),
            "export": (["export", session, "--format", "har", "--out", existing], "\(existing) already exists; remove it or use --force"),
            "import": (["import", "x.har", "--session", existing], "\(existing) already exists; choose another --session"),
            "client-replay": (["client-replay", session, "--certs", dir, "--session", existing], "--session \(existing) already exists"),
            "ca": (["ca", "export", "--out", existing], "\(existing) already exists; remove it or use --force"),
            "sandbox": (["sandbox", "certs", "--out", filledDir], "already exists; use --force"),
            "check": (["check", session, "--report", filledDir, "--", "true"], "--report \(filledDir) is not empty"),
            "timeouts": (["timeouts", session, "--message", "ARes", "--report", filledDir, "--", "true"], "--report \(filledDir) is not empty"),
        ]
    }

    /// The commands `3dstape --help` lists: a new command without a case here fails the test.
    static func listedCommands() throws -> [String] {
        let help = try CLIRunner.run(["--help"]).stdout
        guard let start = help.range(of: "COMMANDS:\n") else { return [] }
        return help[start.upperBound...].split(separator: "\n").prefix { $0.hasPrefix("  ") }.compactMap { $0.split(separator: " ").first.map(String.init) }
    }

    func run(_ args: [String], _ env: [String: String]) throws -> (Int32, String) {
        // Bounded: a command that wrongly started a server would never end on its own.
        let p = try Spawned(CLIRunner.binary.path, args, environment: env)
        defer { p.stop() }
        let status = try p.wait(timeout: 30)
        for _ in 0..<100 where !p.stderr.hasSuffix("\n") { usleep(10_000) } // the pipe's last bytes, read in the background
        return (status, p.stderr)
    }

    @Test func everyCommandRefusesAnUnknownOptionABadValueAndAnExistingOutputWithExit2NamingIt() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let session = dir.appendingPathComponent("s.3dstape").path
        try FileManager.default.copyItem(atPath: Self.root.appendingPathComponent("sessions/sample-reverse.3dstape").path, toPath: session)
        let existing = dir.appendingPathComponent("taken.out").path
        try Data("kept\n".utf8).write(to: URL(fileURLWithPath: existing))
        let filled = dir.appendingPathComponent("filled")
        try FileManager.default.createDirectory(at: filled, withIntermediateDirectories: true)
        try Data("kept\n".utf8).write(to: filled.appendingPathComponent("ds-root.pem"))
        let env = ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path]

        let commands = try Self.listedCommands()
        #expect(commands.count >= 19, "3dstape --help lists the commands: \(commands)")
        let bad = Self.badValues(session: session, dir: dir.path)
        let outputs = Self.existingOutputs(session: session, existing: existing, filledDir: filled.path, dir: dir.path)
        for command in commands {
            let (unknownStatus, unknownErr) = try run([command, "--no-such-option"], env)
            #expect(unknownStatus == 2 && unknownErr.contains("unknown option --no-such-option"), "\(command): exit \(unknownStatus) \(unknownErr)")

            guard let (args, says) = bad[command] else {
                Issue.record("\(command): no bad-value case (add one to ExitCodeRuleEndToEndTests)")
                continue
            }
            let (badStatus, badErr) = try run(args, env)
            #expect(badStatus == 2 && badErr.contains(says) && badErr.split(separator: "\n").count == 1,
                    "\(args.joined(separator: " ")): exit \(badStatus) \(badErr)")

            if let (args, says) = outputs[command] {
                let (status, err) = try run(args, env)
                #expect(status == 2 && err.contains(says), "\(args.joined(separator: " ")): exit \(status) \(err)")
            }
        }
        // Nothing was replaced or started: the existing files are as they were.
        #expect(try String(contentsOfFile: existing, encoding: .utf8) == "kept\n")
        #expect(try String(contentsOfFile: filled.appendingPathComponent("ds-root.pem").path, encoding: .utf8) == "kept\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: filled.path) == ["ds-root.pem"])
    }

    /// The option's declared help text is what `--help` prints, once per option, with the `--help` line last.
    @Test func aCommandsHelpListsEachDeclaredOptionOnce() throws {
        for command in ["record", "replay", "client-replay", "check", "demo", "sandbox", "ca"] {
            let r = try CLIRunner.run([command, "--help"])
            #expect(r.status == 0)
            let names = r.stdout.split(separator: "\n").filter { $0.hasPrefix("  --") }.compactMap { $0.dropFirst(2).split(separator: " ").first }
            #expect(Set(names).count == names.count, "\(command): \(names)")
            #expect(names.last == "--help")
        }
        #expect(try CLIRunner.run(["record", "--help"]).stdout.contains("--max-body BYTES"))
    }
}
