#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TapCore

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
    static func errno(_ what: String) -> NetError { NetError(what, code: SystemCall.errorNumber) }

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
            guard let p = Self.port(portPart) else { return nil }
            port = p
        } else {
            guard let defaultPort else { return nil }
            port = defaultPort
        }
        guard text.hasPrefix("[") ? Self.isIPv6Literal(hostPart) : Self.isHostName(hostPart) else { return nil }
        host = String(hostPart)
    }

    /// A port as decimal digits only (1 to 5 of them, at most 65535): `UInt16("+443")` would take the sign.
    static func port(_ text: Substring) -> UInt16? {
        guard (1...5).contains(text.utf8.count), text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return UInt16(text)
    }

    /// A host name as DNS spells one (letters, digits, `-`, `_`, dots; labels not empty, a trailing dot allowed), which
    /// includes IPv4 addresses. `user@host`, `h/ost`, `%00`, `*` and the like are refused rather than handed to the resolver.
    static func isHostName(_ host: Substring) -> Bool {
        let name = host.hasSuffix(".") && host.count > 1 ? host.dropLast() : host
        guard !name.isEmpty, name.utf8.count <= 253 else { return false }
        return name.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63
                && label.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F }
        }
    }

    /// True for a host the resolver reads as an IPv4 address although it is not written as one in dotted-quad form
    /// (`127.1`, `0x7f.1`, `2130706433`, `0`: a name whose last label begins with a digit). From the wire such a host
    /// would reach an address past the host patterns a user wrote (`--pass-through`, `--intercept`); an option may
    /// use it (`--listen 0:8080` is judged by the address it binds).
    public var isShorthandIPv4: Bool {
        guard !host.contains(":") else { return false }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        guard let first = labels.last?.utf8.first, first >= 0x30 && first <= 0x39 else { return false }
        return !(labels.count == 4 && labels.allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 3 && label.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
                && (label == "0" || label.first != "0") && (Int(label) ?? 256) <= 255
        })
    }

    /// The inside of `[...]`: hex digits, colons and dots (an IPv4 tail), with an optional `%zone` of letters, digits,
    /// `-`, `_` and dots.
    static func isIPv6Literal(_ host: Substring) -> Bool {
        let parts = host.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = parts.first, address.contains(":"),
              address.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x3A) || ($0 >= 0x41 && $0 <= 0x46) || ($0 >= 0x61 && $0 <= 0x66) || $0 == 0x2E })
        else { return false }
        guard parts.count == 2 else { return true }
        let zone = parts[1]
        return !zone.isEmpty && zone.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F || $0 == 0x2E }
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// A URL the client can reach: scheme, host, port, path with query.
public struct HTTPURL: Sendable, Equatable, CustomStringConvertible {
    public var tls: Bool
    public var address: HostPort
    public var path: String

    /// Parses `http(s)://host[:port][/path]`. Nil for another scheme, an empty host, or any space, control character
    /// or character outside ASCII anywhere in it: the path goes onto the request line as it is, so a CR LF in a URL from
    /// the wire (an acsURL, a threeDSServerURL) or an option would inject headers.
    public init?(_ text: String) {
        guard text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else { return nil }
        let lower = text.lowercased()
        let rest: Substring
        if lower.hasPrefix("https://") { tls = true; rest = text.dropFirst(8) } else if lower.hasPrefix("http://") { tls = false; rest = text.dropFirst(7) } else { return nil }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        guard slash != rest.startIndex, !rest.hasPrefix(":"), let hp = HostPort(String(rest[..<slash]), defaultPort: tls ? 443 : 80), !hp.host.isEmpty else { return nil }
        address = hp
        path = slash == rest.endIndex ? "/" : String(rest[slash...])
    }

    public init(tls: Bool, address: HostPort, path: String = "/") {
        self.tls = tls
        self.address = address
        self.path = path
    }

    /// The Host header value (port omitted when it is the scheme's default).
    public var hostHeader: String { (tls && address.port == 443) || (!tls && address.port == 80) ? address.host : address.description }
    public var description: String { "\(tls ? "https" : "http")://\(hostHeader)\(path)" }
}


/// The result of getaddrinfo for a host and port, freed when released.
public final class ResolvedAddress {
    private let list: UnsafeMutablePointer<addrinfo>
    /// The first address (what connect uses).
    public var first: addrinfo { list.pointee }

    /// Resolves `target` for a TCP connection (or, with `passive`, for bind).
    public init(_ target: HostPort, passive: Bool = false) throws(NetError) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Platform.streamType
        if passive { hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV }
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(target.host, String(target.port), &hints, &result)
        guard rc == 0, let result else {
            throw NetError("cannot resolve \(target.host)", code: 0, reason: String(cString: gai_strerror(rc)))
        }
        list = result
    }

    deinit { freeaddrinfo(list) }

    /// The first address as numeric text (`127.0.0.1`, `::1`): what a caller that resolved off the loop hands to
    /// `Connection.connect`, whose own lookup of a literal then needs no resolver.
    public var numericHost: String? {
        var buf = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let a = list.pointee
        guard getnameinfo(a.ai_addr, a.ai_addrlen, &buf, socklen_t(buf.count), nil, 0, NI_NUMERICHOST) == 0 else { return nil }
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether `host` is an IPv4 or IPv6 literal (resolved without asking any resolver).
    public static func isLiteral(_ host: String) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return inet_pton(AF_INET, bare, &v4) == 1 || inet_pton(AF_INET6, bare, &v6) == 1
    }
}
