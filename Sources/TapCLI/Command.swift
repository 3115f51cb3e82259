import Foundation
import TapCore
import TapSandbox
import TapArguments
import TapCore
import TapHTTP
import TapNet

/// A `3dstape` subcommand: its name, help, options, and what it does.
protocol Command: Sendable {
    var name: String { get }
    var abstract: String { get }
    var usage: String { get }
    var options: [OptionSpec] { get }
    var maxPositionals: Int { get }
    /// Runs with parsed arguments; returns the exit status.
    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32
}

/// A failure to report as `3dstape: <message>` with exit status 1.
struct CommandFailure: Error, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

/// Arguments that parse but cannot be used (an unknown fault action, a rule that can never apply): one line,
/// exit status 2, before anything starts.
struct InvalidArguments: Error, CustomStringConvertible {
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
    /// A timeout given as `--name` (`30`, `500ms`, `2m`), from 1 ms to 24 hours, or nil when absent. Anything else (NaN,
    /// `inf`, `1e300`) is refused before anything starts, with the allowed range (exit status 2).
    func seconds(_ name: String) throws -> Double? {
        try duration(name, within: CheckedDuration.timeout)
    }

    /// A duration given as `--name`, within `range` (by default 0 to 24 hours), or nil when absent; refused with the
    /// allowed range otherwise.
    func duration(_ name: String, within range: ClosedRange<Double> = CheckedDuration.anyWait) throws -> Double? {
        guard let v = value(name) else { return nil }
        do { return try CheckedDuration.parse(v, within: range) } catch { throw InvalidArguments("--\(name) \(v): \(error)") }
    }

    /// A byte size given as `--name` (`4096`, `64KiB`, `512MiB`, `2GiB`) within `range`, or nil when absent; refused
    /// with the allowed range otherwise.
    func byteSize(_ name: String, within range: ClosedRange<Int>) throws -> Int? {
        guard let v = value(name) else { return nil }
        do { return try Checked.byteSize(v, within: range) } catch { throw InvalidArguments("--\(name) \(v): \(error)") }
    }

    /// The address of a plain-HTTP forward proxy given as `--name http://host:port`, or nil.
    func forwardProxy(_ name: String = "proxy") throws -> HostPort? {
        guard let v = value(name) else { return nil }
        guard let u = HTTPURL(v), !u.tls else { throw InvalidArguments("--\(name) \(v): expected http://host:port") }
        return u.address
    }
}

extension ParsedArguments {
    /// The host patterns of `--name PATTERN...` (variadic, repeatable; commas separate patterns too), each through
    /// `HostPattern.parse`: a bad one is refused naming it (exit status 2).
    func hostPatterns(_ name: String) throws -> [HostPattern] {
        try all(name).flatMap { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }.map { text in
            switch HostPattern.parse(text) {
            case let .success(p): return p
            case let .failure(e): throw InvalidArguments("--\(name): \(e.message)")
            }
        }
    }

    /// `--pass-through` and `--intercept` together: which CONNECT targets are tunnelled untouched.
    func hostRouting() throws -> HostRouting {
        HostRouting(passThrough: try hostPatterns("pass-through"), intercept: try hostPatterns("intercept"))
    }
}

extension ParsedArguments {
    /// The `--listen HOST:PORT` addresses (repeatable; `option` names another such option), or `fallback`, each resolved
    /// to the numeric address that is bound (a name that does not resolve is refused here, before anything starts).
    func listenAddresses(default fallback: String, option: String = "listen") throws -> [ListenAddress] {
        try (all(option).isEmpty ? [fallback] : all(option)).map { text -> ListenAddress in
            guard let hp = HostPort(text) else { throw InvalidArguments("--\(option) \(text): expected HOST:PORT") }
            do { return try ListenAddress(hp) } catch { throw InvalidArguments("--\(option) \(text): \(error)") }
        }
    }

    /// The one address of `--option HOST:PORT` (default `fallback`), refused unless it is loopback or `--allow-remote`
    /// is given: for the servers a command starts for itself (demo, timeouts).
    func singleListenAddress(_ option: String, default fallback: String, remedy: String) throws -> ListenAddress {
        let listens = try listenAddresses(default: fallback, option: option)
        guard listens.count == 1 else { throw InvalidArguments("--\(option): give one address") }
        guard !has("allow-remote"), !listens[0].isLoopback else { return listens[0] }
        throw InvalidArguments("--\(option) \(listens[0]) is reachable from other machines: \(remedy)")
    }

    /// `--auth USER:PASSWORD` when given; and a refusal, before anything starts, to listen beyond loopback without
    /// `--auth` or `--allow-remote` (a recorder or replayer on 0.0.0.0 would otherwise serve card data to the network).
    func listenAuthorization(_ listens: [ListenAddress]) throws -> ClientAuthorization? {
        var auth: ClientAuthorization?
        if let a = value("auth") {
            guard let parsed = ClientAuthorization(a) else { throw InvalidArguments("--auth \(a.prefix(1))…: expected USER:PASSWORD") }
            auth = parsed
        }
        if auth == nil {
            try refuseRemote(listens, "add --auth USER:PASSWORD (clients then authenticate) or --allow-remote to listen there without it")
        }
        return auth
    }

    /// The one loopback check of every listening command (record, replay, sandbox, web): unless `--allow-remote` is
    /// given, each address as resolved, the one that is bound, must be a loopback address. `remedy` says what to add.
    func refuseRemote(_ listens: [ListenAddress], _ remedy: String) throws {
        guard !has("allow-remote"), let remote = listens.first(where: { !$0.isLoopback }) else { return }
        throw InvalidArguments("--listen \(remote) is reachable from other machines: \(remedy)")
    }
}

extension ParsedArguments {
    /// `--gateway pxp|trustpayments`, or nil when not given.
    func gateway() throws -> Gateway? {
        guard let g = value("gateway") else { return nil }
        guard let gateway = Gateway(rawValue: g) else { throw InvalidArguments("--gateway \(g): expected pxp or trustpayments") }
        return gateway
    }

    /// `--seed N`, a whole number from 0 to 2^64 - 1, or nil when absent.
    /// A whole number option (`--runs N`) within `range`, `fallback` when absent.
    func count(_ name: String, default fallback: Int, within range: ClosedRange<Int>) throws -> Int {
        guard let v = value(name) else { return fallback }
        guard let n = Int(v), range.contains(n) else {
            throw InvalidArguments("--\(name) \(v): expected a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return n
    }

    func seed() throws -> UInt64? {
        guard let s = value("seed") else { return nil }
        guard let n = UInt64(s) else { throw InvalidArguments("--seed \(s): expected a whole number from 0 to \(UInt64.max)") }
        return n
    }

    /// `--max-connections N` (default 1024).
    func maxConnections() throws -> Int {
        guard let v = value("max-connections") else { return 1024 }
        guard let n = Int(v), n >= 1 else { throw InvalidArguments("--max-connections \(v): expected a positive number") }
        return n
    }

    /// `--max-buffered SIZE` (default 512MiB, from 1MiB to 64GiB): request bytes held in memory across all connections.
    func maxBuffered() throws -> Int {
        try byteSize("max-buffered", within: (1 << 20)...(64 << 30)) ?? 512 << 20
    }
}

/// The options every listening command takes for listening beyond loopback, and its connection cap.
let remoteListeningOptions: [OptionSpec] = [
    .option("max-connections", "N", help: "connections served at once (default 1024); more get 503 and are closed"),
    .option("max-buffered", "SIZE", help: "request bytes held in memory across all connections (default 512MiB); past it, 503"),
    .option("auth", "USER:PASSWORD", help: "require HTTP Basic credentials: Proxy-Authorization from proxy clients (407), Authorization from direct ones (401)"),
    .flag("allow-remote", help: "listen on a non-loopback address without --auth"),
]
