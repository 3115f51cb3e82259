#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a server will listen: its `HOST:PORT` resolved once to the numeric address that is then bound, so that the
/// loopback check reads that address and not the text (`127.attacker.example` may resolve to 0.0.0.0, `localhost`
/// to 127.0.0.1), and nothing resolves the name a second time to another answer.
public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    /// The address as given (`--listen`).
    public let requested: HostPort
    /// The numeric address to bind (`127.0.0.1:8080`, `[::1]:0`, `0.0.0.0:443`).
    public let bound: HostPort

    /// Resolves `requested` for binding. `resolver` answers the numeric host a name binds to (by default getaddrinfo's
    /// first answer, which is what a bind of the name would use); tests give their own.
    public init(_ requested: HostPort, resolver: (HostPort) throws(NetError) -> String = ListenAddress.systemResolver) throws(NetError) {
        self.requested = requested
        let numeric = try resolver(requested)
        // A link-local IPv6 address may carry its interface (`fe80::1%eth0`).
        guard ResolvedAddress.isLiteral(String(numeric.prefix { $0 != "%" })) else {
            throw NetError("cannot resolve \(requested.host)", code: 0, reason: "'\(numeric)' is not a numeric address")
        }
        bound = HostPort(host: numeric, port: requested.port)
    }

    /// Whether only this machine can reach the bound address (127.0.0.0/8, ::1, or ::ffff:127.0.0.0/104).
    public var isLoopback: Bool { ListenAddress.isLoopback(numeric: bound.host) }

    /// `127.0.0.1:8080`, or `name:8080 (0.0.0.0:8080)` when a name resolved to an address it does not spell.
    public var description: String { requested.host == bound.host ? bound.description : "\(requested) (\(bound))" }

    /// getaddrinfo for binding (AI_PASSIVE), the first address, as numeric text.
    public static func systemResolver(_ address: HostPort) throws(NetError) -> String {
        let resolved = try ResolvedAddress(address, passive: true)
        guard let numeric = resolved.numericHost else { throw NetError("cannot resolve \(address.host)", code: 0, reason: "no numeric address") }
        return numeric
    }

    /// Whether a numeric IPv4 or IPv6 address (brackets allowed) is a loopback address; false for anything else,
    /// names included (they must be resolved first).
    public static func isLoopback(numeric host: String) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var v4 = in_addr()
        if inet_pton(AF_INET, bare, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, bare, &v6) == 1 else { return false }
        let b = withUnsafeBytes(of: &v6) { Array($0) }
        if b[0..<15].allSatisfy({ $0 == 0 }) && b[15] == 1 { return true } // ::1
        return b[0..<10].allSatisfy { $0 == 0 } && b[10] == 0xFF && b[11] == 0xFF && b[12] == 127 // ::ffff:127.x.x.x
    }
}
