import TapCore

/// A host pattern of `--pass-through` / `--intercept`: an exact host (`acs.example.com`, `127.0.0.1`, `[::1]`), every
/// subdomain of a domain (`*.example.com`, any depth, not the domain itself), or every host (`*`); each with an optional
/// port (`:443`; no port: every port). Hosts compare case-insensitively, and a trailing dot is ignored.
public struct HostPattern: Sendable, Equatable, CustomStringConvertible {
    public enum Host: Sendable, Equatable {
        case any
        case exact(String)
        /// The domain after `*.` (lower case): hosts that end in `.domain`.
        case subdomains(of: String)
    }

    public let host: Host
    /// nil: every port.
    public let port: UInt16?
    /// The pattern as the user wrote it (for messages and the help line).
    public let description: String

    /// Parses one pattern; the error names the pattern and what is wrong with it.
    public static func parse(_ text: String) -> Result<HostPattern, HostPatternError> {
        func bad(_ why: String) -> Result<HostPattern, HostPatternError> {
            .failure(HostPatternError(message: "host pattern '\(HostPattern.shown(text))' \(why)"))
        }
        guard !text.isEmpty else { return bad("is empty") }
        guard text.utf8.count <= 300 else { return bad("is longer than 300 bytes") }
        guard !text.contains("://"), !text.contains("/") else { return bad("is a URL: give a host (host, *.domain, host:port)") }
        var hostPart = Substring(text)
        var portPart: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return bad("opens '[' without ']'") }
            hostPart = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if rest.hasPrefix(":") { portPart = rest.dropFirst() } else if !rest.isEmpty { return bad("has text after ']'") }
            guard !hostPart.isEmpty, hostPart.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                return bad("has a bracketed host that is not an IPv6 address")
            }
        } else if let colon = text.firstIndex(of: ":") {
            guard text.lastIndex(of: ":") == colon else { return bad("has more than one ':' (write an IPv6 host as [addr]:port)") }
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
        }
        var port: UInt16?
        if let portPart, portPart != "*" {
            guard !portPart.isEmpty, portPart.allSatisfy({ $0.isASCII && $0.isNumber }), let p = UInt16(portPart), p > 0 else {
                return bad("has port '\(HostPattern.shown(String(portPart)))': give 1-65535 or *")
            }
            port = p
        }
        var host = hostPart.lowercased()
        // The wildcard comes off before the trailing dot: `*.` is an empty domain, not `*`.
        var wildcard = false
        if host.hasPrefix("*.") {
            wildcard = true
            host.removeFirst(2)
            guard !host.isEmpty, host != "." else { return bad("has no domain after '*.' (use * for every host)") }
        }
        if host.hasSuffix("."), host.count > 1 { host.removeLast() }
        guard !host.isEmpty else { return bad("has no host (use * for every host)") }
        if host == "*", !wildcard { return .success(HostPattern(host: .any, port: port, description: text)) }
        guard !host.contains("*") else { return bad("has '*' other than as the whole first label (*.example.com)") }
        if !text.hasPrefix("[") {
            guard host.unicodeScalars.allSatisfy({ ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) || $0 == "-" || $0 == "." || $0 == "_" }) else {
                return bad("has a character a host name cannot have (letters, digits, '-', '.', '_')")
            }
            guard !host.split(separator: ".", omittingEmptySubsequences: false).contains(where: \.isEmpty) else {
                return bad("has an empty label")
            }
        }
        return .success(HostPattern(host: wildcard ? .subdomains(of: host) : .exact(host), port: port, description: text))
    }

    /// A pattern as shown in a message: control characters escaped, at most 80 characters.
    static func shown(_ text: String) -> String {
        let s = TerminalText.escaped(String(text.prefix(80)))
        return text.count > 80 ? s + "…" : s
    }

    private init(host: Host, port: UInt16?, description: String) {
        self.host = host
        self.port = port
        self.description = description
    }

    /// Whether this pattern covers the host and port (a CONNECT target, a request's authority).
    public func matches(_ target: HostPort) -> Bool {
        if let port, port != target.port { return false }
        var name = target.host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix("."), name.count > 1 { name.removeLast() }
        switch host {
        case .any: return true
        case let .exact(h): return name == h
        case let .subdomains(of: domain): return name.hasSuffix("." + domain)
        }
    }
}

/// A host pattern that cannot be used, with the reason.
public struct HostPatternError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

/// Which CONNECT targets the recorder intercepts and which it tunnels untouched (`--intercept`, `--pass-through`).
/// A target matching a `--pass-through` pattern is tunnelled, whatever `--intercept` says (a pinned host must never be
/// intercepted). Otherwise, when `--intercept` patterns are given, only targets matching one are intercepted and every
/// other is tunnelled; with none, every target is intercepted.
public struct HostRouting: Sendable, Equatable {
    public var passThrough: [HostPattern]
    public var intercept: [HostPattern]

    public init(passThrough: [HostPattern] = [], intercept: [HostPattern] = []) {
        self.passThrough = passThrough
        self.intercept = intercept
    }

    /// Every target is intercepted (no pattern given).
    public var interceptsEverything: Bool { passThrough.isEmpty && intercept.isEmpty }

    /// The routing in words, for the start line: "CONNECT intercepted", "CONNECT tunnelled (pass-through *)",
    /// "CONNECT intercepted except 2 pass-through patterns (a.example, *.b.example)", "CONNECT intercepted only for …".
    public var summary: String {
        if let every = passThrough.first(where: { $0.host == .any && $0.port == nil }) {
            return "CONNECT tunnelled (pass-through \(HostPattern.shown(every.description)))"
        }
        var text = intercept.isEmpty ? "CONNECT intercepted" : "CONNECT intercepted only for " + Self.listed(intercept) + ", others tunnelled"
        if !passThrough.isEmpty {
            let n = passThrough.count
            text += (intercept.isEmpty ? " except " : "; except ") + "\(counted(n, "pass-through pattern")) (\(Self.listed(passThrough)))"
        }
        return text
    }

    /// At most three patterns, each as shown in messages, then how many more.
    static func listed(_ patterns: [HostPattern]) -> String {
        let shown = patterns.prefix(3).map { HostPattern.shown($0.description) }.joined(separator: ", ")
        return patterns.count > 3 ? shown + " and \(patterns.count - 3) more" : shown
    }

    /// Whether the target is tunnelled without interception, and the pattern (or rule) that decided it.
    public func passesThrough(_ target: HostPort) -> (Bool, reason: String) {
        if let p = passThrough.first(where: { $0.matches(target) }) { return (true, "--pass-through \(p)") }
        guard !intercept.isEmpty else { return (false, "intercepted (no --intercept given)") }
        if let p = intercept.first(where: { $0.matches(target) }) { return (false, "--intercept \(p)") }
        return (true, "matches no --intercept pattern")
    }
}
