import Foundation
import TapArguments
import TapCore
import TapCrypto
import TapIdentity
import TapNet
import TapProxy
import TapRecording
import TapReplay
import TapStore

/// One replay served in process for a command that 3dstape runs against it (`check`, `timeouts`): the replayer on its own
/// loop thread, writing its session; the command started in a process group of its own with the replayer's address in
/// `{url}`, `{proxy}` and the environment, waited for (and ended as a group at the timeout or on a stop request); then the
/// replayer stopped and its session closed, so that the caller can read it.
struct InProcessReplay {
    let catalog: ReplayCatalog
    let identity: ReplayACSIdentity
    /// Where the replayer listens (port 0: an ephemeral port).
    var listen = HostPort(host: "127.0.0.1", port: 0)

    /// How one run went.
    struct Outcome {
        var ending = CommandGroup.Ending()
        /// Why the command did not start, when it did not.
        var startFailure: String?
    }

    /// Runs `command` once against a replay with `options`, writing the replay's session to `session` and the command's
    /// output to `output` (nil: /dev/null).
    func run(options: ReplayOptions, session: String, label: String, command: [String], environment extra: [String: String] = [:],
             output: String?, timeout: Double, leaderGrace: Double? = nil, stop: StopRequest) throws -> Outcome {
        let engine = ReplayEngine(catalog: catalog, options: options, identity: identity)
        let writer = try SessionWriter(path: session, meta: SessionWriter.replayMeta(of: catalog.path, label: label), keys: engine)
        let stack = try ServiceStack.background("3dstape-replay-run")
        let replayer = Replayer(loop: stack.loop, engine: engine, writer: writer, outgoingTLS: try TLSContext(clientRoots: nil), report: { _ in })
        stack.onStop { replayer.stop() }
        stack.finally { writer.close() }
        let (ca, _) = try UserHome.resolve().interceptionCA()
        let intercept = try TLSContext(interceptingWith: try LeafCertificateCache(authority: ca))
        let address: HostPort
        do {
            address = try replayer.start(on: listen, tls: nil, intercepting: intercept, scheme: "http")
        } catch {
            writer.discard()
            throw error
        }
        stack.start()
        let url = "http://\(address)"
        let args = command.dropFirst().map { $0.replacingOccurrences(of: "{url}", with: url).replacingOccurrences(of: "{proxy}", with: url) }
        var env = ProcessInfo.processInfo.environment
        env["THREEDSTAPE_REPLAY_URL"] = url
        env["THREEDSTAPE_PROXY"] = url
        for (k, v) in extra { env[k] = v }
        var outcome = Outcome()
        do {
            let group = try CommandGroup.start([command[0]] + args, environment: env, output: output)
            outcome.ending = group.wait(atMost: timeout, leaderGrace: leaderGrace, shouldStop: { stop.signal != nil })
        } catch {
            outcome.startFailure = error.description
        }
        if !outcome.ending.stopped { usleep(200_000) } // an RReq or a last request in flight
        stack.stop()
        return outcome
    }
}

/// A command that runs a client (the command after `--`) against an `InProcessReplay` (`check`, `timeouts`): what the two
/// share is declared here once: the session and the command from the positionals, the replayer's `--listen` address
/// (loopback unless `--allow-remote`), and in its spec (`CommandSpec.againstReplay`) the end of the usage line and that it
/// uses the user's keys and runs a command.
protocol RunsAgainstReplay: Command {}

extension CommandSpec {
    /// The spec of a `RunsAgainstReplay` command: after `usage` comes the command to run, and what its arguments'
    /// placeholders become; the positionals are the session, then the command and its arguments.
    static func againstReplay(name: String, abstract: String, usage: String, options: [OptionSpec]) -> CommandSpec {
        CommandSpec(name: name, abstract: abstract, usage: usage + " -- CMD [ARGS…]   ({url} and {proxy} in ARGS become the replayer's address)",
                    maxPositionals: 256, usesUserKeys: true, runsACommand: true, options: options)
    }
}

extension RunsAgainstReplay {
    static var allowRemote: Flag { Flag("allow-remote", help: "let --listen be an address other machines can reach") }

    /// The session (the first positional) and the command to run (the rest, after `--`), both required.
    func sessionAndCommand(_ args: ParsedArguments) throws -> (session: String, command: [String]) {
        guard let path = args.positionals.first else { throw InvalidArguments("which session? usage: \(spec.usage)") }
        let command = Array(args.positionals.dropFirst())
        guard !command.isEmpty else { throw InvalidArguments("no command to run: put it after --, e.g. -- 3dstape client --ds {url} …") }
        return (path, command)
    }

    /// The replayer's one `--listen` address (default a free loopback port each run); beyond loopback only with --allow-remote.
    func replayerAddress(_ args: ParsedArguments, _ listen: Option<HostPortValue>) throws -> HostPort {
        try args.singleListenAddress(listen, default: "127.0.0.1:0",
                                     remedy: "the replayer would answer other machines with the session's data; add --allow-remote to listen there").bound
    }
}
