import Glibc

/// A socket or address failure: what we were doing and the system's reason (strerror).
public struct NetError: Error, Equatable, CustomStringConvertible {
    public let what: String
    /// The errno, or 0 when the failure is not a system call's.
    public let code: Int32
    public let reason: String

    public init(_ what: String, code: Int32, reason: String? = nil) {
        self.what = what
        self.code = code
        self.reason = reason ?? String(cString: strerror(code))
    }

    /// From the current errno.
    static func errno(_ what: String) -> NetError { NetError(what, code: Glibc.errno) }

    public var description: String { "\(what): \(reason)" }

    /// True for a refused connection (nothing listening).
    public var isRefused: Bool { code == ECONNREFUSED }
}

/// A `HOST:PORT` pair; `[::1]:443` for IPv6.
public struct HostPort: Sendable, Equatable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: UInt16

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port`, `[v6]:port`, or `:port` (loopback).
    public init?(_ text: String, defaultPort: UInt16? = nil) {
        var hostPart = Substring(text)
        var portPart: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            hostPart = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if rest.hasPrefix(":") { portPart = rest.dropFirst() } else if !rest.isEmpty { return nil }
        } else if let colon = text.lastIndex(of: ":"), text.firstIndex(of: ":") == colon {
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
        }
        if hostPart.isEmpty { hostPart = "127.0.0.1" }
        if let portPart {
            guard let p = UInt16(portPart) else { return nil }
            port = p
        } else {
            guard let defaultPort else { return nil }
            port = defaultPort
        }
        host = String(hostPart)
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
