import TapArguments
import TapCore
import TapHTTP
import TapNet
import TapProxy

/// `HOST:PORT` through `HostPort`, the address syntax every listening option takes (names are resolved when the
/// command starts its server, by `ParsedArguments.listenAddresses`).
struct HostPortValue: OptionValueParser {
    func parse(_ text: String, option: String) throws(InvalidArguments) -> HostPort { try read(HostPort(text), expected: "HOST:PORT", text, option) }
}

/// The address of a plain-HTTP forward proxy, `http://host:port`.
struct ForwardProxyValue: OptionValueParser {
    func parse(_ text: String, option: String) throws(InvalidArguments) -> HostPort {
        try read(HTTPURL(text).flatMap { $0.tls ? nil : $0.address }, expected: "http://host:port", text, option)
    }
}

/// `USER:PASSWORD` for HTTP Basic; a refusal shows only the first character (the rest may be a password).
struct AuthorizationValue: OptionValueParser {
    func parse(_ text: String, option: String) throws(InvalidArguments) -> ClientAuthorization {
        guard let parsed = ClientAuthorization(text) else { throw InvalidArguments("--\(option) \(text.prefix(1))…: expected USER:PASSWORD") }
        return parsed
    }
}

/// An upstream for reverse mode: `http://host[:port]` or `https://host[:port]`.
struct UpstreamURLValue: OptionValueParser {
    func parse(_ text: String, option: String) throws(InvalidArguments) -> UpstreamURL {
        try read(UpstreamURL(text), expected: "http://host[:port] or https://host[:port]", text, option)
    }
}

/// `value` as read from `text`, or the refusal the address options give: the option, the text and what was expected.
private func read<Value>(_ value: Value?, expected: String, _ text: String, _ option: String) throws(InvalidArguments) -> Value {
    guard let value else { throw InvalidArguments("--\(option) \(text): expected \(expected)") }
    return value
}

/// A CONNECT target pattern list (`host`, `*.domain`, `*`, `[v6]`, each with an optional `:port`; commas separate
/// patterns too) through `HostPattern.parse`.
struct HostPatternsValue: OptionValueParser {
    func parse(_ text: String, option: String) throws(InvalidArguments) -> [HostPattern] {
        var out: [HostPattern] = []
        for piece in text.split(separator: ",", omittingEmptySubsequences: false) {
            switch HostPattern.parse(String(piece)) {
            case let .success(p): out.append(p)
            case let .failure(e): throw InvalidArguments("--\(option): \(e.message)")
            }
        }
        return out
    }
}

/// `--json` of the commands that list things (`ls`, `scenarios`), declared once: the list as one JSON array.
enum JSONList {
    static let flag = Flag("json", help: "print a JSON array")
}

/// The cap on a session file that a server writes as it runs (`record`'s, `replay`'s own), declared once. From 256KiB:
/// an empty session's tables, indexes and views take 16 of its 16KiB pages (the writer never caps it below them), so a
/// smaller cap would not mean what it says.
enum SessionFileSize {
    static let maxSessionSize = Option("max-session-size", "SIZE", ByteSizeValue((256 << 10)...(16 << 40)),
                                       help: "stop writing the session file when it reaches SIZE (e.g. 512MiB); traffic keeps flowing, as on a full disk")
}

/// The options every listening command takes for listening beyond loopback, and its connection cap, declared once.
enum RemoteListening {
    static let maxConnections = Option("max-connections", "N", WholeNumberValue(1...Int.max, refusal: { "--\($0) \($1): expected a positive number" }),
                                       default: 1024, help: "connections served at once (default 1024); more get 503 and are closed")
    /// Request bytes held in memory across all connections (from 1MiB to 64GiB).
    static let maxBuffered = Option("max-buffered", "SIZE", ByteSizeValue((1 << 20)...(64 << 30)), default: 512 << 20,
                                    help: "request bytes held in memory across all connections (default 512MiB); past it, 503")
    static let auth = Option("auth", "USER:PASSWORD", AuthorizationValue(),
                             help: "require HTTP Basic credentials: Proxy-Authorization from proxy clients (407), Authorization from direct ones (401)")
    static let allowRemote = Flag("allow-remote", help: "listen on a non-loopback address without --auth")

    static let specs: [OptionSpec] = [maxConnections.spec, maxBuffered.spec, auth.spec, allowRemote.spec]
}
