import Foundation
import Testing

/// `check` and `timeouts` run a client against an in-process replay and declare that part once (`RunsAgainstReplay`):
/// the same refusals, word for word, from both, and the same `--allow-remote` and usage ending in their help.
@Suite struct RunsAgainstReplayEndToEndTests {
    static let session = CheckEndToEndTests.root.appendingPathComponent("sessions/demo-app.3dstape").path

    /// What each command needs besides the shared part (timeouts: the message to delay).
    static let commands: [(name: String, own: [String])] = [("check", []), ("timeouts", ["--message", "CRes"])]

    @Test(arguments: commands.map(\.name))
    func bothRefuseTheSameMistakesWithExitTwo(_ name: String) throws {
        let own = Self.commands.first { $0.name == name }!.own
        let home = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: home) }
        let env = ["THREEDSTAPE_HOME": home.path]
        for (args, message) in [([name], "which session? usage: 3dstape \(name) SESSION"),
                                ([name, Self.session] + own, "no command to run: put it after --"),
                                ([name, Self.session] + own + ["--listen", "0.0.0.0:0", "--", "true"],
                                 "--listen 0.0.0.0:0 is reachable from other machines: the replayer would answer other machines with the "
                                 + "session's data; add --allow-remote to listen there"),
                                ([name, Self.session] + own + ["--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0", "--", "true"],
                                 "--listen given more than once"),
                                // the session and the command take 256 positionals at the most: the 257th is refused
                                ([name, Self.session] + own + ["--"] + (1...256).map { "arg\($0)" }, "unexpected argument arg256"),
                                // with --allow-remote the address passes, and the command is the next thing refused
                                ([name, Self.session] + own + ["--listen", "0.0.0.0:0", "--allow-remote", "--", "/nonexistent/client"],
                                 "cannot start /nonexistent/client")] {
            let r = try CLIRunner.run(args, environment: env)
            #expect(r.status == 2, "\(args): \(r.stderr)")
            #expect(r.stderr.contains(message), "\(args): \(r.stderr)")
        }
    }

    @Test(arguments: commands.map(\.name))
    func bothDeclareAllowRemoteAndTheCommandAfterTheDashes(_ name: String) throws {
        let r = try CLIRunner.run([name, "--help"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("-- CMD [ARGS…]   ({url} and {proxy} in ARGS become the replayer's address)"), "\(r.stdout)")
        #expect(r.stdout.contains("--allow-remote"), "\(r.stdout)")
        #expect(r.stdout.contains("let --listen be an address other machines can reach"), "\(r.stdout)")
        // An option it does not know hints at `--`: the command is one that runs a command.
        let unknown = try CLIRunner.run([name, Self.session, "--no-such-option"])
        #expect(unknown.status == 2 && unknown.stderr.contains("the command to run goes after --"), "\(unknown.stderr)")
    }
}
