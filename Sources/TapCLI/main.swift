import Foundation
import TapArguments
import TapCore
import TapIdentity

/// The subcommands, in the order `3dstape --help` lists them: the one table `runMain` dispatches from.
let commands: [any Command] = [DemoCommand(), RecordCommand(), ReplayCommand(), ScenariosCommand(), CheckCommand(), TimeoutsCommand(), LsCommand(), ShowCommand(), DecryptCommand(), ValidateCommand(), DiffCommand(), ExportCommand(), ImportCommand(), WebCommand(), DecodeCommand(), SandboxCommand(), ClientCommand(), ClientReplayCommand(), CACommand()]

let version = "0.1.0"

func topLevelHelp() -> String {
    var lines = ["3dstape \(version): record, replay and inspect EMV 3-D Secure 2.x traffic", "",
                 "USAGE: 3dstape <command> [options]", "", "COMMANDS:"]
    let specs = commands.map(\.spec)
    let width = (specs.map(\.name.count).max() ?? 0) + 2
    for c in specs { lines.append("  " + c.name + String(repeating: " ", count: width - c.name.count) + c.abstract) }
    lines += ["", "Run '3dstape <command> --help' for a command's options."]
    return lines.joined(separator: "\n")
}

func runMain() -> Int32 {
    let io = Terminal()
    var argv = Array(CommandLine.arguments.dropFirst())
    guard let first = argv.first else {
        io.err(topLevelHelp())
        return ExitStatus.usage
    }
    if first == "--help" || first == "-h" || first == "help" { io.out(topLevelHelp()); return ExitStatus.ok }
    if first == "--version" { io.out("3dstape \(version)"); return ExitStatus.ok }
    guard let command = commands.first(where: { $0.spec.name == first }) else {
        io.err("3dstape: unknown command '\(first)'; run '3dstape --help' for the list")
        return ExitStatus.usage
    }
    argv.removeFirst()
    let spec = command.spec
    let ownArguments = argv.prefix { $0 != "--" } // what follows `--` belongs to a command 3dstape runs (timeouts)
    if ownArguments.contains("--help") || ownArguments.contains("-h") { io.out(spec.help); return ExitStatus.ok }
    // Commands that use the keys in ~/.3dstape check, once at start, that no other user can read them.
    if spec.usesUserKeys {
        for warning in UserHome.resolve().permissionWarnings() { io.err("3dstape: warning: \(warning)") }
    }
    do {
        return try command.run(try spec.parse(argv), io)
    } catch let e as UsageError {
        // One line: what is wrong, and where the options are (a command that runs another wants that one after --).
        let runsACommand = spec.runsACommand && !argv.contains("--")
            && e.message.hasPrefix("unknown option")
        io.err("3dstape \(spec.name): \(TerminalText.escaped(e.message))"
               + (runsACommand ? "; the command to run goes after --, e.g. -- 3dstape client --ds {url} …" : "; '3dstape \(spec.name) --help' lists the options"))
        return ExitStatus.usage
    } catch let e as InvalidArguments {
        io.err("3dstape: \(spec.name): \(TerminalText.escaped(e.message, keepingLineBreaks: true))")
        return ExitStatus.usage
    } catch let e as CommandFailure {
        io.err("3dstape: \(spec.name): \(TerminalText.escaped(e.message, keepingLineBreaks: true))")
        return ExitStatus.problemFound
    } catch {
        // Messages can quote a session, a HAR file or an argument.
        io.err("3dstape: \(spec.name): \(TerminalText.escaped("\(error)", keepingLineBreaks: true))")
        return ExitStatus.problemFound
    }
}

exit(runMain())
