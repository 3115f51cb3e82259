import Foundation
import TapArguments
import TapCheck
import TapCore
import TapNet
import TapReplay
import TapStore

/// `3dstape check`: runs failure scenarios against a client (an SDK's UI test, a 3DS Server, `3dstape client`) and says
/// pass or fail for each, judged from the replay session against the scenario's expectation: for CI.
struct CheckCommand: RunsAgainstReplay {
    let spec = CommandSpec.againstReplay(name: "check",
                                         abstract: "Run failure scenarios against a client and judge what it did: pass/fail per scenario, JUnit for CI",
                                         usage: "SESSION [--scenario NAME]... [--all] [--expect FILE] [--runs N] [--listen HOST:PORT] [--command-timeout D] "
                                             + "[--junit FILE] [--json] [--report DIR]",
                                         options: [scenario.spec, all.spec, expect.spec, runs.spec, listen.spec, allowRemote.spec,
                                                   commandTimeout.spec, junit.spec, report.spec, json.spec])
    static let scenario = Option("scenario", "NAME", CustomValue { (n, o) throws(InvalidArguments) -> ReplayScenario in
        guard let s = ReplayScenario.named(n) else { throw InvalidArguments("--\(o) \(n): no such scenario; '3dstape scenarios' lists them") }
        return s
    }, repeatable: true, help: "a scenario to run ('3dstape scenarios' lists them); repeatable")
    static let all = Flag("all", help: "every scenario whose rules apply to the session (the default); the others are reported as skipped")
    static let expect = Option("expect", "FILE", PathValue(), help: "JSON: per scenario (or *), clauses that replace or add to the default expectation")
    static let runs = Option("runs", "N", WholeNumberValue(1...100), default: 1, help: "runs per scenario (default 1); a scenario passes when every run passes")
    static let listen = Option("listen", "HOST:PORT", HostPortValue(),
                               help: "the replayer's address, the same for every run (default 127.0.0.1:0, a free port each run)")
    static let commandTimeout = Option("command-timeout", "DURATION", DurationValue.timeout, default: 120,
                                       help: "end a run's command, with its process group, after this long (default 120s)")
    static let junit = Option("junit", "FILE", PathValue(), help: "write the verdicts as JUnit XML")
    static let report = Option("report", "DIR", PathValue(),
                               help: "where the replay sessions, command logs, report.json and index.html go (default sessions/check-<time>)")
    static let json = Flag("json", help: "print the verdicts as JSON")

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        let (path, command) = try sessionAndCommand(args)
        do { try CommandGroup.checkStartable(command) } catch { throw InvalidArguments(error.description) }
        let named = try args.all(Self.scenario)
        if args.has(Self.all), !named.isEmpty { throw InvalidArguments("--all and --scenario: give one or the other") }
        var scenarios: [ReplayScenario] = []
        for s in named where !scenarios.contains(where: { $0.name == s.name }) { scenarios.append(s) }
        let explicit = !scenarios.isEmpty
        if scenarios.isEmpty { scenarios = ReplayScenario.all }
        var expectations = ExpectationFile()
        if let file = try args.value(Self.expect) {
            let bytes: [UInt8]
            do { bytes = try readInput(file) } catch { throw InvalidArguments("--expect \(file): \(error)") }
            switch ExpectationFile.parse(bytes, name: file, scenarios: ReplayScenario.all.map(\.name)) {
            case let .success(f): expectations = f
            case let .failure(e): throw InvalidArguments(e.lines.joined(separator: "\n"))
            }
        }
        let runs = try args.value(Self.runs, default: 1)
        let commandTimeout = try args.value(Self.commandTimeout, default: 120)
        if let junit = try args.value(Self.junit) { try ReportDirectory.checkJUnitPath(junit) }
        let listen = try replayerAddress(args, Self.listen)
        let catalog: ReplayCatalog
        do { catalog = try ReplayCatalog.load(path: path) } catch let e as SessionFileError { throw CommandFailure(e.message) }
        let undecrypted = catalog.undecryptedProblems()
        if !undecrypted.isEmpty {
            for p in undecrypted { io.err("3dstape: check: \(TerminalText.escaped(p))") }
            throw CommandFailure("\(undecrypted.count) transaction(s) cannot be replayed with fresh keys until their app channel is decrypted")
        }
        let coverage = RuleCoverage(catalog)
        if explicit { // a scenario asked for by name that cannot apply is a mistake, not a skip that leaves CI green
            var lines: [String] = []
            for s in scenarios {
                if let why = try CheckCommand.whyNotWhole(s, coverage) { lines.append("--scenario \(s.name) does not apply to this session: \(why)") }
            }
            if !lines.isEmpty { throw InvalidArguments(lines.joined(separator: "\n")) }
        }
        let report = try ReportDirectory.create(try args.value(Self.report), defaultStem: "sessions/check-\(ReplayCommand.stamp())")
        let replay = InProcessReplay(catalog: catalog, identity: try ReplayCommand.acsIdentity(nil), listen: listen)
        let stop = StopRequest()
        defer { stop.cancel() }
        CommandGroup.adoptOrphans()
        let started = Date().timeIntervalSince1970

        var verdicts: [ScenarioVerdict] = []
        for scenario in scenarios where stop.signal == nil {
            let rules = try scenario.faultRules()
            if !explicit, let why = try CheckCommand.whyNotWhole(scenario, coverage) { // named ones were checked above
                verdicts.append(.skipped(scenario.name, reason: "does not apply to this session: \(why)"))
                continue
            }
            let expectation = expectations.expectation(for: scenario.name, defaults: scenario.expectation)
            var combined: ScenarioVerdict?
            var passedRuns = 0, seconds = 0.0
            var sessions: [String] = [], logs: [String] = []
            for n in 1...runs where stop.signal == nil {
                io.err("check: \(scenario.name)" + (runs > 1 ? ", run \(n) of \(runs)" : "") + " …")
                let stem = (report as NSString).appendingPathComponent(scenario.name + (runs > 1 ? "-run\(n)" : ""))
                var options = ReplayOptions()
                options.faults = rules
                let t0 = Date()
                let outcome: InProcessReplay.Outcome
                do {
                    outcome = try replay.run(options: options, session: stem + ".3dstape", label: "check: \(scenario.name)", command: command,
                                             environment: ["THREEDSTAPE_SCENARIO": scenario.name], output: stem + ".log",
                                             timeout: commandTimeout, leaderGrace: CheckCommand.leftoverGrace, stop: stop)
                } catch {
                    // The replay itself could not run (its session file, its listener, the CA): this scenario fails with the
                    // reason, and the others still run, so the report and the JUnit file say what happened.
                    io.err("check: \(scenario.name): the replay could not run: \(TerminalText.escaped("\(error)"))")
                    var v = ScenarioVerdict.failed(scenario.name, expected: expectation, reason: "the replay could not run: \(error)")
                    v.runs = 1
                    if combined == nil || combined!.outcome == .pass { combined = v }
                    continue
                }
                if outcome.ending.stopped { break }
                seconds += Date().timeIntervalSince(t0)
                sessions.append(stem + ".3dstape")
                logs.append(stem + ".log")
                var observation: CheckObservation
                do {
                    observation = CheckObservation.read(try SessionReader(path: stem + ".3dstape").exchanges(), commandEndedAt: outcome.ending.endedAt)
                } catch {
                    // The run's own session is gone or unreadable (the command removed it): this scenario fails, the others run.
                    var v = ScenarioVerdict.failed(scenario.name, expected: expectation, reason: "the replay session of this run cannot be read: \(error)")
                    v.runs = 1
                    if combined == nil || combined!.outcome == .pass { combined = v }
                    continue
                }
                observation.exitStatus = outcome.ending.exitStatus // the leader's own, also when members it left were ended
                if let failure = outcome.startFailure {
                    observation.commandProblem = "did not start: \(failure)"
                } else if outcome.ending.timedOut {
                    observation.commandProblem = "did not end within \(CheckedDuration.describe(commandTimeout)) (--command-timeout) and was ended"
                }
                (observation.result, observation.lastOutputLine) = CheckObservation.scanLog(stem + ".log")
                let verdict = ScenarioJudge.judge(scenario.name, expectation: expectation, observation)
                if verdict.outcome == .pass { passedRuns += 1 }
                if combined == nil || (combined!.outcome == .pass && verdict.outcome == .fail) { combined = verdict }
            }
            guard var v = combined else { break } // stopped before the first run ended
            v.runs = sessions.count
            v.runsPassed = passedRuns
            v.seconds = seconds
            v.sessions = sessions
            v.logs = logs
            io.err("check: \(scenario.name): \(v.outcome.rawValue)" + (v.outcome == .fail ? " (\(TerminalText.escaped(v.failureLines.joined(separator: "; "))))" : ""))
            verdicts.append(v)
        }
        let interrupted = stop.signal.map(Interrupted.init)
        let result = CheckReport(session: path, command: command, verdicts: verdicts, started: started, interruptedBy: interrupted?.signalName)
        try ReportDirectory.write(result.json.pretty, to: (report as NSString).appendingPathComponent("report.json"))
        try ReportDirectory.write(result.html(linkingFrom: report), to: (report as NSString).appendingPathComponent("index.html"))
        if let junit = try args.value(Self.junit) { try ReportDirectory.writeJUnit(result.junit, to: junit) }
        if let interrupted {
            io.err("check: \(interrupted) after \(verdicts.count) scenario(s); the command's process group was ended; report so far: "
                   + TerminalText.escaped((report as NSString).appendingPathComponent("report.json")))
        }
        if args.has(Self.json) {
            io.json(result.json)
        } else {
            io.out(Table.render(result.rows.map { $0.map { TerminalText.escaped($0) } }))
            io.out("\(result.passed) passed, \(result.failed) failed, \(result.skipped) skipped; report: "
                   + TerminalText.escaped((report as NSString).appendingPathComponent("index.html"))
                   + ((try args.value(Self.junit)).map { "; JUnit: \(TerminalText.escaped($0))" } ?? ""))
        }
        if let interrupted { return interrupted.exitStatus }
        if result.passed + result.failed == 0 {
            io.err("check: no scenario applies to this session whole, so nothing was checked (a session without 3DS, or one already faulted?)")
            return 1
        }
        return result.failed > 0 ? 1 : 0
    }

    /// How long members of the command's group may outlive it before they are ended with the group (its exit status stands).
    static let leftoverGrace = 2.0

    /// Why a scenario cannot run whole on this session (its rules that can never apply, and why), or nil when all apply:
    /// a scenario that applies only in part is not the scenario its expectation is about.
    static func whyNotWhole(_ scenario: ReplayScenario, _ coverage: RuleCoverage) throws -> String? {
        let (_, notApplicable) = try scenario.applicability(to: coverage)
        guard !notApplicable.isEmpty else { return nil }
        return notApplicable.map { "--fault \($0.rule) can never apply: \($0.reason)" }.joined(separator: "; ")
    }
}
