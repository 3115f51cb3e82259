import Testing
import TapNet

/// Issue 23 item 8: the loopback check reads the address a `--listen` name resolves to (the one that is bound), not
/// the text. A name that looks like loopback and resolves to every interface is not loopback.
@Suite struct ListenAddressTests {
    /// A resolver for names this test controls, with no network and no /etc/hosts.
    static func resolver(_ table: [String: String]) -> (HostPort) throws(NetError) -> String {
        { (address: HostPort) throws(NetError) -> String in
            if let numeric = table[address.host] { return numeric }
            if ResolvedAddress.isLiteral(address.host) { return address.host.hasPrefix("[") ? String(address.host.dropFirst().dropLast()) : address.host }
            throw NetError("cannot resolve \(address.host)", code: 0, reason: "Name or service not known")
        }
    }

    @Test func aNameIsJudgedByTheAddressItResolvesTo() throws {
        let resolve = Self.resolver(["127.attacker.example": "0.0.0.0", "localhost": "127.0.0.1", "v6.example": "::1",
                                     "lan.example": "192.168.1.20", "mapped.example": "::ffff:127.0.0.1"])
        let attacker = try ListenAddress(HostPort(host: "127.attacker.example", port: 18_399), resolver: resolve)
        #expect(!attacker.isLoopback && attacker.bound == HostPort(host: "0.0.0.0", port: 18_399))
        #expect(attacker.description == "127.attacker.example:18399 (0.0.0.0:18399)", "the refusal names both")
        for (host, loopback) in [("localhost", true), ("v6.example", true), ("mapped.example", true), ("lan.example", false),
                                 ("127.0.0.1", true), ("127.9.8.7", true), ("0.0.0.0", false), ("::", false), ("[::1]", true)] {
            #expect(try ListenAddress(HostPort(host: host, port: 1), resolver: resolve).isLoopback == loopback, "\(host)")
        }
        #expect(throws: NetError.self) { try ListenAddress(HostPort(host: "nowhere.example", port: 1), resolver: resolve) }
        #expect(throws: NetError.self, "a resolver answer that is no address is refused") {
            try ListenAddress(HostPort(host: "x", port: 1), resolver: Self.resolver(["x": "127.0.0.1.evil"]))
        }
    }

    @Test func onlyNumericLoopbackAddressesAreLoopback() {
        for yes in ["127.0.0.1", "127.255.255.254", "::1", "[::1]", "::ffff:127.0.0.2", "0:0:0:0:0:0:0:1"] {
            #expect(ListenAddress.isLoopback(numeric: yes), "\(yes)")
        }
        for no in ["localhost", "127.attacker.example", "0.0.0.0", "::", "10.0.0.1", "::ffff:10.0.0.1", "::2", "128.0.0.1", "", "127"] {
            #expect(!ListenAddress.isLoopback(numeric: no), "\(no)")
        }
    }

    /// The system resolver, offline: literals and `localhost` as this machine's hosts file says.
    @Test func theSystemResolverBindsWhatItChecks() throws {
        #expect(try ListenAddress(HostPort(host: "0.0.0.0", port: 0)).isLoopback == false)
        let local = try ListenAddress(HostPort(host: "localhost", port: 0))
        #expect(local.isLoopback && ResolvedAddress.isLiteral(local.bound.host))
        #expect(try ListenAddress(HostPort(host: "127.1", port: 0)).bound.host == "127.0.0.1", "inet_aton's short form, read as the address")
    }
}
