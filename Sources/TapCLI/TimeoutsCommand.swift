import Foundation
import TapArguments
import TapCheck
import TapCore
import TapEMV
import TapNet
import TapRecording
import TapReplay
import TapStore

/// `3dstape timeouts`: sweeps the delay of one message across replays and finds when the client gives up.
struct TimeoutsCommand: RunsAgainstReplay {
    let spec = CommandSpec.againstReplay(name: "timeouts",
                                         abstract: "Sweep the delay of one message over replays of a session and find when a client gives up",
                                         usage: "SESSION --message MATCH [--from DURATION] [--to DURATION] [--step DURATION | --bisect] [--runs N] "
                                             + "[--report DIR] [--json] [--listen HOST:PORT]",
                                         options: [message.spec, from.spec, to.spec, step.spec, bisect.spec, runs.spec, report.spec, seed.spec,
                                                   commandTimeout.spec, json.spec, listen.spec, allowRemote.spec])
    static let message = Option("message", "MATCH", TextValue(),
                                help: "the answer to delay, as for replay --delay: CRes, CRes#2, ARes, exchange:7, path:/acs/challenge")
    // Delays from 0 to 24 hours; steps from 1 ms (the sweep rounds each delay to the millisecond), at most 1,000 delays.
    static let from = Option("from", "DURATION", DurationValue.anyWait, default: 0, help: "the first delay (default 0s)")
    static let to = Option("to", "DURATION", DurationValue.anyWait, default: 10, help: "the last delay (default 10s)")
    static let step = Option("step", "DURATION", DurationValue(0.001...CheckedDuration.maximum), help: "the step between delays (default (to - from) / 10)")
    static let bisect = Flag("bisect", help: "bisect between --from and --to to the threshold, to 100 ms")
    static let runs = Option("runs", "N", WholeNumberValue(1...100), default: 1, help: "runs per delay (default 1); the outcome is the most frequent one")
    static let report = Option("report", "DIR", PathValue(), help: "write the replay sessions, report.json and index.html (an SVG chart) there")
    static let seed = Option("seed", "N", SeedValue(), default: 0, help: "the replay seed (default 0)")
    static let commandTimeout = Option("command-timeout", "SECONDS", DurationValue.timeout,
                                       help: "end a run's command, with its process group, after this long (default: the delay + 60 s)")
    static let json = Flag("json", help: "print the result as JSON")
    static let listen = Option("listen", "HOST:PORT", HostPortValue(),
                               help: "the in-process replayer's address, the same for every run (default 127.0.0.1:0, a free port each run)")

    /// The most delays one sweep tries (each is a replay and a run of the command).
    static let mostDelays = 1000

    /// One run of the command against one replay.
    struct Run {
        var delay: Double
        var exitCode: Int32?
        /// `waited` (the client got the answer), `gave up`, `not reached` (it never asked for the delayed message),
        /// `interrupted` (SIGINT or SIGTERM to 3dstape stopped the sweep during this run).
        var outcome: String
        /// Milliseconds from the request to the answer or to the client giving up.
        var timeToOutcomeMs: Double?
        var erroSent: [String]
        var challengeCancel: String?
        var retried: Bool
        var session: String
        /// Why the command could not be started (spawn failed), when it could not.
        var startFailure: String? = nil
        /// Exchanges the replay saw during this run.
        var exchanges = 0
    }

    /// Why the sweep stops after `run`: the command could not be spawned, or it exited 126 or 127 (a shell's "not
    /// executable", "not found") without sending the replayer anything: it did not start, and no delay would change that.
    static func didNotStart(_ run: Run, command: [String]) -> String? {
        if let failure = run.startFailure { return failure }
        guard run.outcome == "not reached", run.exchanges == 0, let code = run.exitCode, CommandGroup.notStartedStatuses.contains(code) else { return nil }
        return notStartedLine(command, code)
    }

    /// Why the sweep's result means nothing: every run exited 126 or 127 without asking for the delayed message.
    static func neverStarted(_ runs: [Run], command: [String]) -> String? {
        guard let first = runs.first?.exitCode, CommandGroup.notStartedStatuses.contains(first),
              runs.allSatisfy({ $0.outcome == "not reached" && $0.exitCode.map(CommandGroup.notStartedStatuses.contains) == true }) else { return nil }
        return notStartedLine(command, first)
    }

    static func notStartedLine(_ command: [String], _ code: Int32) -> String {
        "the command did not start: \(TerminalText.escaped(command.joined(separator: " ").prefix(200).description)) exited \(code) "
            + "(\(code == 127 ? "a command not found" : "a command not executable")) without asking the replayer for the delayed message; "
            + "run it by hand to see why"
    }

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        let (path, command) = try sessionAndCommand(args)
        guard let matchText = try args.value(Self.message), let match = DelayRule.Match.parse(matchText) else {
            throw InvalidArguments("--message MATCH is required: CRes, CRes#2, ARes, exchange:7 or path:/p")
        }
        let from = try args.value(Self.from, default: 0), to = try args.value(Self.to, default: 10)
        guard to > from else { throw InvalidArguments("--to must be after --from") }
        if args.has(Self.bisect), args.given(Self.step) { throw InvalidArguments("--step and --bisect: give one or the other") }
        let step = try args.value(Self.step) ?? max(0.001, (to - from) / 10)
        guard args.has(Self.bisect) || (to - from) / step < Double(TimeoutsCommand.mostDelays) else {
            throw InvalidArguments("--step \(ReplayFaults.describe(step)) from \(ReplayFaults.describe(from)) to \(ReplayFaults.describe(to)) "
                                   + "makes more than \(TimeoutsCommand.mostDelays) delays; take a larger step or --bisect")
        }
        let commandTimeout = try args.value(Self.commandTimeout)
        let runs = try args.value(Self.runs, default: 1)
        let seed = try args.value(Self.seed, default: 0)
        let listen = try replayerAddress(args, Self.listen)
        // A command that cannot start is refused before any replay (exit 2), not swept as "no delay tried".
        do { try CommandGroup.checkStartable(command) } catch { throw InvalidArguments(error.description) }
        let catalog: ReplayCatalog
        do { catalog = try ReplayCatalog.load(path: path) } catch let e as SessionFileError { throw CommandFailure(e.message) }
        // Checked as the sweep applies it, as a --delay rule (which an RReq takes too).
        if let problem = ReplayFaults.problems([], delays: [DelayRule(match: match, seconds: 1)], catalog: catalog).first {
            throw InvalidArguments(problem.replacingOccurrences(of: "--delay \(match)=1s", with: "--message \(matchText)"))
        }
        let report = try ReportDirectory.create(try args.value(Self.report), defaultStem: "sessions/timeouts-\(ReplayCommand.stamp())")
        let identity = try ReplayCommand.acsIdentity(nil)
        // Ctrl-C or SIGTERM stops the sweep: the command's group is ended, the report of the runs so far written, and
        // the exit status is 130 or 143.
        let stop = StopRequest()
        defer { stop.cancel() }
        CommandGroup.adoptOrphans() // the command's backgrounded members are reaped here, not left zombies

        var results: [Run] = []
        /// The most frequent outcome of the runs at `delay`; none is started once a signal has come (`interrupted`).
        func sweep(_ delay: Double) throws -> String {
            var outcomes: [String] = []
            for n in 1...runs where stop.signal == nil {
                io.err(String(format: "timeouts: %@ delayed %@, run %d of %d …", TerminalText.escaped(matchText), ReplayFaults.describe(delay), n, runs))
                let r = try runOnce(catalog: catalog, identity: identity, match: match, delay: delay, seed: seed, command: command,
                                    session: TimeoutsCommand.freshName(in: report, "delay-\(Checked.milliseconds(delay))ms-run\(n)"),
                                    timeout: commandTimeout ?? delay + 60, stop: stop, listen: listen)
                results.append(r)
                if let why = TimeoutsCommand.didNotStart(r, command: command) { throw InvalidArguments(why) }
                outcomes.append(r.outcome)
            }
            if stop.signal != nil { return "interrupted" }
            return Dictionary(grouping: outcomes, by: { $0 }).max { $0.value.count < $1.value.count }!.key
        }
        var bracket: (waited: Double, gaveUp: Double)?
        if args.has(Self.bisect) {
            var lo = from, hi = to
            let a = try sweep(lo), b = try sweep(hi)
            if a == "waited", b == "gave up" {
                while hi - lo > 0.1, stop.signal == nil {
                    let mid = ((lo + hi) / 2 * 1000).rounded() / 1000
                    if try sweep(mid) == "waited" { lo = mid } else { hi = mid }
                }
                if stop.signal == nil { bracket = (lo, hi) } // the threshold as bisected, even if a noisy run elsewhere disagrees
            }
        } else {
            var d = from
            while d <= to + 1e-9, stop.signal == nil {
                _ = try sweep(d)
                d = ((d + step) * 1000).rounded() / 1000
            }
        }
        let interrupted = stop.signal.map(Interrupted.init)
        if interrupted == nil, let why = TimeoutsCommand.neverStarted(results, command: command) { throw InvalidArguments(why) }
        let waited = bracket?.waited ?? results.filter { $0.outcome == "waited" }.map(\.delay).max()
        let gaveUp = bracket?.gaveUp ?? results.filter { $0.outcome == "gave up" }.map(\.delay).min()
        let json = TimeoutsCommand.json(results, match: matchText, command: command, waited: waited, gaveUp: gaveUp,
                                        interruptedBy: interrupted?.signalName)
        try ReportDirectory.write(json.pretty, to: (report as NSString).appendingPathComponent("report.json"))
        try ReportDirectory.write(TimeoutsCommand.html(results, match: matchText, command: command, waited: waited, gaveUp: gaveUp),
                                  to: (report as NSString).appendingPathComponent("index.html"))
        if let interrupted {
            io.err("timeouts: \(interrupted) after \(counted(results.count, "run")); the command's process group was ended; "
                   + "report of the runs so far: \((report as NSString).appendingPathComponent("report.json"))")
        }
        // No run reached the message: the sweep found nothing, most often because the command failed on its own (a usage
        // error, a wrong --certs): that is a failure of the sweep, with the command's own words.
        let neverReached = interrupted == nil && !results.isEmpty && results.allSatisfy { $0.outcome == "not reached" }
        if neverReached, let last = results.last {
            let log = (last.session as NSString).deletingPathExtension + ".log"
            let line = FileManager.default.contents(atPath: log).flatMap { CheckObservation.lastLine(in: [UInt8]($0)) }
            io.err("timeouts: the command never asked for \(TerminalText.escaped(matchText)) in \(counted(results.count, "run"))"
                   + (last.exitCode.map { " (exit status \($0))" } ?? "") + (line.map { "; its last line: \($0)" } ?? "")
                   + "; its output: \(TerminalText.escaped(log))")
        }
        let status = interrupted?.exitStatus ?? (neverReached ? 1 : 0)
        if args.has(Self.json) {
            io.json(json)
            return status
        }
        var rows = [["DELAY", "OUTCOME", "AFTER MS", "EXIT", "ERRO SENT", "CANCEL", "RETRIED", "SESSION"]]
        for r in results.sorted(by: { $0.delay < $1.delay }) {
            rows.append([ReplayFaults.describe(r.delay), r.outcome, r.timeToOutcomeMs.map { String(format: "%.0f", $0) } ?? "-",
                         r.exitCode.map(String.init) ?? "-", r.erroSent.isEmpty ? "-" : r.erroSent.joined(separator: ","),
                         r.challengeCancel ?? "-", r.retried ? "yes" : "no", (r.session as NSString).lastPathComponent])
        }
        io.out(Table.render(rows))
        if waited == nil, gaveUp == nil {
            io.out("threshold: none found: in no run did the client ask for \(TerminalText.escaped(matchText)) and then wait or give up")
        } else {
            io.out("threshold: the client waited out \(waited.map(ReplayFaults.describe) ?? "no delay tried") and gave up at "
                   + "\(gaveUp.map(ReplayFaults.describe) ?? "no delay tried")" + " (\(TerminalText.escaped(matchText)))")
        }
        io.out("report: \(TerminalText.escaped((report as NSString).appendingPathComponent("index.html"))) (chart), report.json, the replay sessions "
               + "and the command's output of each run")
        return status
    }

    /// One replay in process with `match` delayed by `delay`, the command run against it (in a process group of its own,
    /// ended as a group after `timeout` seconds or when `stop` has a signal), and what the session shows.
    func runOnce(catalog: ReplayCatalog, identity: ReplayACSIdentity, match: DelayRule.Match, delay: Double, seed: UInt64,
                 command: [String], session: String, timeout: Double, stop: StopRequest, listen: HostPort) throws -> Run {
        var options = ReplayOptions()
        options.schedule.seed = seed
        options.schedule.rules = [DelayRule(match: match, seconds: delay)]
        let replay = InProcessReplay(catalog: catalog, identity: identity, listen: listen)
        let ran = try replay.run(options: options, session: session, label: "timeouts: \(match) delayed \(ReplayFaults.describe(delay))",
                                 command: command, output: (session as NSString).deletingPathExtension + ".log", timeout: timeout, stop: stop)
        let ending = ran.ending, startFailure = ran.startFailure // the sweep stops on a start failure (didNotStart)
        var run = try TimeoutsCommand.outcome(session: session, delay: delay, exit: ending.exitStatus, started: startFailure == nil)
        run.startFailure = startFailure
        if ending.stopped {
            run.outcome = "interrupted"
            run.timeToOutcomeMs = nil
        }
        return run
    }

    /// `DIR/STEM.3dstape`, or `DIR/STEM-2.3dstape` … when a run of the same delay (a bisection's second visit) took it.
    static func freshName(in dir: String, _ stem: String) -> String {
        var n = 1
        while true {
            let path = (dir as NSString).appendingPathComponent(stem + (n == 1 ? "" : "-\(n)") + ".3dstape")
            if !FileManager.default.fileExists(atPath: path) { return path }
            n += 1
        }
    }

    /// What the client did, read from the replay's session.
    static func outcome(session: String, delay: Double, exit: Int32?, started: Bool) throws -> Run {
        let xs = try SessionReader(path: session).exchanges()
        let delayed = xs.filter { x in x.replay.map { abs(($0.scheduledDelayMs ?? -1) - delay * 1000) < 0.01 && $0.miss == nil } ?? false }
        var run = Run(delay: delay, exitCode: exit, outcome: "not reached", timeToOutcomeMs: nil, erroSent: [], challengeCancel: nil,
                      retried: false, session: session)
        run.exchanges = xs.count
        if let first = delayed.first {
            if let abort = first.clientAbortAt {
                run.outcome = "gave up"
                run.timeToOutcomeMs = (abort - first.requestStart) * 1000
            } else {
                run.outcome = "waited"
                run.timeToOutcomeMs = first.replay?.actualDelayMs
            }
        } else if exit == nil {
            run.outcome = started ? "command did not finish" : "command did not start"
        }
        run.retried = Dictionary(grouping: xs.compactMap { $0.replay?.recordedExchangeID }, by: { $0 }).values.contains { $0.count > 1 }
        for x in xs {
            for m in x.messages where m.messageDirection == .request {
                if m.kind == .erro, let code = m.json?["errorCode"]?.stringValue { run.erroSent.append(code) }
                if let c = m.json?["challengeCancel"]?.stringValue, m.kind == .cReq { run.challengeCancel = c }
            }
        }
        return run
    }

    /// The report: the runs, the threshold found, and (`interrupted`) the signal that stopped the sweep early.
    static func json(_ results: [Run], match: String, command: [String], waited: Double?, gaveUp: Double?, interruptedBy: String? = nil) -> JSON {
        .object([
            ("message", .string(match)), ("command", .array(command.map(JSON.string))),
            ("interrupted", interruptedBy.map(JSON.string) ?? .null),
            ("waitedOutMs", waited.map { .number(String(Checked.milliseconds($0))) } ?? .null),
            ("gaveUpAtMs", gaveUp.map { .number(String(Checked.milliseconds($0))) } ?? .null),
            ("runs", .array(results.sorted { $0.delay < $1.delay }.map { r in
                .object([("delayMs", .number(String(Checked.milliseconds(r.delay)))), ("outcome", .string(r.outcome)),
                         ("timeToOutcomeMs", r.timeToOutcomeMs.map { .number(String(format: "%.1f", $0)) } ?? .null),
                         ("exitCode", r.exitCode.map { .number(String($0)) } ?? .null), ("erroSent", .array(r.erroSent.map(JSON.string))),
                         ("challengeCancel", r.challengeCancel.map(JSON.string) ?? .null), ("retried", .bool(r.retried)),
                         ("session", .string(r.session))])
            })),
        ])
    }

    /// A self-contained page: the table and an SVG chart of delay against time to outcome, coloured by outcome.
    static func html(_ results: [Run], match: String, command: [String], waited: Double?, gaveUp: Double?) -> String {
        func esc(_ s: String) -> String { MarkupText.escaped(s) } // the message, the command, and what the replays recorded
        let w = 640.0, h = 360.0, pad = 50.0
        let maxX = max(0.001, results.map(\.delay).max() ?? 1) * 1000
        let maxY = max(1, results.compactMap(\.timeToOutcomeMs).max() ?? 1, maxX)
        func x(_ v: Double) -> Double { pad + v / maxX * (w - 2 * pad) }
        func y(_ v: Double) -> Double { h - pad - v / maxY * (h - 2 * pad) }
        let colour = ["waited": "#2a9d43", "gave up": "#d1342f", "not reached": "#888888"]
        var svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Checked.clampedInt(w))\" height=\"\(Checked.clampedInt(h))\" role=\"img\">"
        svg += "<line x1=\"\(pad)\" y1=\"\(h - pad)\" x2=\"\(w - pad)\" y2=\"\(h - pad)\" stroke=\"#333\"/>"
        svg += "<line x1=\"\(pad)\" y1=\"\(pad)\" x2=\"\(pad)\" y2=\"\(h - pad)\" stroke=\"#333\"/>"
        svg += "<line x1=\"\(x(0))\" y1=\"\(y(0))\" x2=\"\(x(maxX))\" y2=\"\(y(maxX))\" stroke=\"#bbb\" stroke-dasharray=\"4 4\"/>"
        svg += "<text x=\"\(w / 2)\" y=\"\(h - 12)\" text-anchor=\"middle\" font-size=\"12\">delay of \(esc(match)) (ms, up to \(Checked.clampedInt(maxX)))</text>"
        svg += "<text x=\"14\" y=\"\(h / 2)\" transform=\"rotate(-90 14 \(h / 2))\" text-anchor=\"middle\" font-size=\"12\">time to outcome (ms, up to \(Checked.clampedInt(maxY)))</text>"
        for r in results {
            let cy = y(r.timeToOutcomeMs ?? 0)
            svg += "<circle cx=\"\(x(r.delay * 1000))\" cy=\"\(cy)\" r=\"5\" fill=\"\(colour[r.outcome] ?? "#555")\"><title>\(Checked.clampedInt(r.delay * 1000)) ms: \(esc(r.outcome))</title></circle>"
        }
        svg += "</svg>"
        var rows = ""
        for r in results.sorted(by: { $0.delay < $1.delay }) {
            rows += "<tr><td>\(Checked.milliseconds(r.delay))</td><td style=\"color:\(colour[r.outcome] ?? "#555")\">\(esc(r.outcome))</td>"
                + "<td>\(r.timeToOutcomeMs.map { String(format: "%.0f", $0) } ?? "-")</td><td>\(r.exitCode.map(String.init) ?? "-")</td>"
                + "<td>\(esc(r.erroSent.joined(separator: ",")))</td><td>\(esc(r.challengeCancel ?? ""))</td><td>\(r.retried ? "yes" : "no")</td></tr>"
        }
        return """
        <!DOCTYPE html><html><head><meta charset="utf-8"><title>3dstape timeouts: \(esc(match))</title>
        <style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 10px;text-align:left}</style></head><body>
        <h1>Timeout sweep: \(esc(match))</h1><p>command: <code>\(esc(command.joined(separator: " ")))</code></p>
        <p>the client waited out <b>\(waited.map { "\(Checked.clampedInt($0 * 1000)) ms" } ?? "no delay tried")</b> and gave up at
        <b>\(gaveUp.map { "\(Checked.clampedInt($0 * 1000)) ms" } ?? "no delay tried")</b></p>
        \(svg)
        <table><tr><th>delay ms</th><th>outcome</th><th>after ms</th><th>exit</th><th>Erro sent</th><th>challengeCancel</th><th>retried</th></tr>\(rows)</table>
        </body></html>
        """
    }
}
