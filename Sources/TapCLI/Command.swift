import Foundation
import TapCore
import TapSandbox
import TapArguments
import TapCore
import TapHTTP
import TapNet

/// A `3dstape` subcommand: what it is called and takes (`spec`), and what it does.
protocol Command: Sendable {
    /// Its name, help, options and positionals, which dispatch, parsing and `--help` read.
    var spec: CommandSpec { get }
    /// Runs with parsed and validated arguments; returns the exit status (`ExitStatus`).
    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32
}

/// What 3dstape knows of a subcommand before it runs it: the name it is called by, its help (abstract, usage, options),
/// the most positionals it takes, and whether it uses the user's keys or runs another command. One value a command:
/// `runMain` dispatches on `name`, parses with `parse` and answers `--help` with `help`.
struct CommandSpec: Sendable {
    let name: String
    /// One line: `3dstape --help` lists it, the command's own help starts with it.
    let abstract: String
    /// The usage lines, each `3dstape NAME …`, the second and later indented to stand under the first in `help`.
    let usage: String
    let maxPositionals: Int
    /// Whether the command uses the keys in ~/.3dstape (it then warns, once at start, when other users can read them).
    let usesUserKeys: Bool
    /// Whether the command runs another command given after `--` (an unknown option then hints at `--`).
    let runsACommand: Bool
    let options: [OptionSpec]

    /// `usage`: what follows `3dstape NAME` on each usage line (a command used two ways has two).
    init(name: String, abstract: String, usage: String..., maxPositionals: Int, usesUserKeys: Bool = false, runsACommand: Bool = false,
         options: [OptionSpec]) {
        self.name = name
        self.abstract = abstract
        self.usage = usage.map { "3dstape \(name) \($0)" }.joined(separator: "\n" + String(repeating: " ", count: CommandSpec.usageHeading.count))
        self.maxPositionals = maxPositionals
        self.usesUserKeys = usesUserKeys
        self.runsACommand = runsACommand
        self.options = options
    }

    /// What `help` puts before the first usage line.
    static let usageHeading = "USAGE: "

    /// `3dstape NAME --help`: the abstract, the usage and the options (`--help` last).
    var help: String {
        "\(abstract)\n\n\(CommandSpec.usageHeading)\(usage)\n\nOPTIONS:\n" + ArgumentParser.helpTable(options + [.flag("help", help: "show this help")])
    }

    /// The command's arguments parsed, and every value checked before anything starts: a `UsageError` (unknown option,
    /// too many positionals …) or an `InvalidArguments` (a value its option refuses).
    func parse(_ arguments: [String]) throws -> ParsedArguments {
        let parsed = try ArgumentParser.parse(arguments, options: options, maxPositionals: maxPositionals)
        try ArgumentParser.validate(parsed, options: options)
        return parsed
    }
}

/// A failure to report as `3dstape: <message>` with exit status 1 (`ExitStatus.problemFound`).
struct CommandFailure: Error, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}


/// Standard output and error, with colour only on a terminal and never under NO_COLOR. `out` and `err` print text as
/// given: whatever in it comes from a session or the wire goes through `TerminalText.escaped` first (`Table` does that
/// for its cells), and JSON goes out through `json`.
struct Terminal: Sendable {
    let colour: Bool

    init() {
        colour = isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil
    }

    func out(_ text: String) {
        StandardStreams.out(Data((text + "\n").utf8))
    }

    func err(_ text: String) {
        StandardStreams.err(Data((text + "\n").utf8))
    }

    /// `value` as pretty JSON on standard output, with the characters a terminal would act on as `\u` escapes.
    func json(_ value: JSON) {
        out(TerminalText.escapedJSON(value.pretty))
    }

    /// `text` in bold (or plain when colour is off).
    func bold(_ text: String) -> String { colour ? "\u{1B}[1m\(text)\u{1B}[0m" : text }
    /// `text` in green.
    func green(_ text: String) -> String { colour ? "\u{1B}[32m\(text)\u{1B}[0m" : text }
    /// `text` in red.
    func red(_ text: String) -> String { colour ? "\u{1B}[31m\(text)\u{1B}[0m" : text }
}

/// Reads a whole file (or standard input for `-`), refusing anything larger than `limit` before reading it (`InputFile`).
func readInput(_ path: String?, limit: Int = 16 << 20) throws -> [UInt8] {
    try InputFile(path, limit: limit).readAll()
}

extension ParsedArguments {
    /// The `--listen HOST:PORT` addresses of `option` (repeatable), or `fallback`, each resolved to the numeric address
    /// that is bound (a name that does not resolve is refused here, before anything starts).
    func listenAddresses(_ option: Option<HostPortValue>, default fallback: String) throws -> [ListenAddress] {
        let given = try all(option)
        let addresses = given.isEmpty ? [try option.parser.parse(fallback, option: option.name)] : given
        return try addresses.map { hp -> ListenAddress in
            do { return try ListenAddress(hp) } catch { throw InvalidArguments("--\(option.name) \(hp): \(error)") }
        }
    }

    /// The one address of `option` (default `fallback`), refused unless it is loopback or `--allow-remote` is given:
    /// for the servers a command starts for itself (demo, timeouts).
    func singleListenAddress(_ option: Option<HostPortValue>, default fallback: String, remedy: String) throws -> ListenAddress {
        let listens = try listenAddresses(option, default: fallback)
        guard listens.count == 1 else { throw InvalidArguments("--\(option.name): give one address") }
        guard !has(RemoteListening.allowRemote), !listens[0].isLoopback else { return listens[0] }
        throw InvalidArguments("--\(option.name) \(listens[0]) is reachable from other machines: \(remedy)")
    }

    /// `--auth USER:PASSWORD` when given; and a refusal, before anything starts, to listen beyond loopback without
    /// `--auth` or `--allow-remote` (a recorder or replayer on 0.0.0.0 would otherwise serve card data to the network).
    func listenAuthorization(_ listens: [ListenAddress]) throws -> ClientAuthorization? {
        let auth = try value(RemoteListening.auth)
        if auth == nil {
            try refuseRemote(listens, "add --auth USER:PASSWORD (clients then authenticate) or --allow-remote to listen there without it")
        }
        return auth
    }

    /// The one loopback check of every listening command (record, replay, sandbox, web): unless `--allow-remote` is
    /// given, each address as resolved, the one that is bound, must be a loopback address. `remedy` says what to add.
    func refuseRemote(_ listens: [ListenAddress], _ remedy: String) throws {
        guard !has(RemoteListening.allowRemote), let remote = listens.first(where: { !$0.isLoopback }) else { return }
        throw InvalidArguments("--listen \(remote) is reachable from other machines: \(remedy)")
    }

    /// `--pass-through` and `--intercept` together: which CONNECT targets are tunnelled untouched.
    func hostRouting(passThrough: Option<HostPatternsValue>, intercept: Option<HostPatternsValue>) throws -> HostRouting {
        HostRouting(passThrough: try all(passThrough).flatMap { $0 }, intercept: try all(intercept).flatMap { $0 })
    }

    /// `--max-connections N` (default 1024).
    func maxConnections() throws -> Int { try value(RemoteListening.maxConnections, default: 1024) }

    /// `--max-buffered SIZE` (default 512MiB, from 1MiB to 64GiB): request bytes held in memory across all connections.
    func maxBuffered() throws -> Int { try value(RemoteListening.maxBuffered, default: 512 << 20) }
}

/// `pxp` or `trustpayments`, as `--gateway` takes it (demo, client).
let gatewayChoice = CustomValue { (g, o) throws(InvalidArguments) -> Gateway in
    guard let gateway = Gateway(rawValue: g) else { throw InvalidArguments("--\(o) \(g): expected pxp or trustpayments") }
    return gateway
}

/// The options every listening command takes for listening beyond loopback, and its connection cap.
let remoteListeningOptions: [OptionSpec] = RemoteListening.specs

/// The one check of an output file before anything starts: one that exists (a symlink or a directory included) is a
/// usage error (exit status 2, `ExitStatus.usage`) with `message`, which names the option or `--force`. The writer
/// still creates the file exclusively, so a file that appears in between is refused there too.
func refuseExisting(_ path: String, _ message: @autoclosure () -> String) throws {
    var st = stat()
    guard lstat(path, &st) != 0 else { throw InvalidArguments(message()) }
}
