import Testing
import TapCrypto
import TapNet

/// The pieces of `--pass-through` free of I/O: host patterns, the routing rule and the ClientHello reader.
struct HostPatternTests {
    func pattern(_ text: String) throws -> HostPattern { try HostPattern.parse(text).get() }

    @Test func globsHostsAndPorts() throws {
        let sub = try pattern("*.Example.com")
        #expect(sub.matches(HostPort(host: "acs.example.com", port: 443)))
        #expect(sub.matches(HostPort(host: "a.b.EXAMPLE.com.", port: 8443)))
        #expect(!sub.matches(HostPort(host: "example.com", port: 443)), "*.domain is the subdomains, not the domain")
        #expect(!sub.matches(HostPort(host: "badexample.com", port: 443)))
        let exact = try pattern("ds.test:8443")
        #expect(exact.matches(HostPort(host: "DS.test", port: 8443)))
        #expect(!exact.matches(HostPort(host: "ds.test", port: 443)))
        #expect(try pattern("[::1]:443").matches(HostPort(host: "::1", port: 443)))
        #expect(try pattern("*:443").matches(HostPort(host: "anything", port: 443)))
        #expect(try pattern("127.0.0.1:*").matches(HostPort(host: "127.0.0.1", port: 1)))
    }

    @Test func badPatternsAreRefusedNamingThem() {
        for bad in ["", "exa*mple.com", "*.*.example.com", "https://acs.test", "acs.test/path", "host:0", "host:99999", "host:",
                    "a..b", ".example.com", "[::1", "[zz]:443", "::1", "bad host", "h\u{1B}[31m"] {
            guard case let .failure(e) = HostPattern.parse(bad) else {
                Issue.record("'\(bad)' was accepted")
                continue
            }
            #expect(e.message.hasPrefix("host pattern '"), "\(e.message)")
            #expect(!e.message.contains("\u{1B}"), "control characters are escaped: \(e.message)")
        }
        #expect((try? HostPattern.parse("*").get()) != nil)
    }

    @Test func passThroughWinsOverIntercept() throws {
        let routing = HostRouting(passThrough: [try pattern("pinned.acs.test")], intercept: [try pattern("*.acs.test")])
        #expect(routing.passesThrough(HostPort(host: "pinned.acs.test", port: 443)).0)
        #expect(!routing.passesThrough(HostPort(host: "other.acs.test", port: 443)).0)
        #expect(routing.passesThrough(HostPort(host: "cdn.test", port: 443)) == (true, "matches no --intercept pattern"))
        let all = HostRouting()
        #expect(all.interceptsEverything && !all.passesThrough(HostPort(host: "x", port: 443)).0)
    }
}

struct TLSClientHelloTests {
    /// A real ClientHello: OpenSSL's, through 3dstape's TLS client, offering http/1.1.
    func openSSLHello(serverName: String) throws -> [UInt8] {
        let session = try TLSSession(context: try TLSContext(clientRoots: [], verify: false), serverName: serverName)
        _ = try session.handshake()
        return session.takeCiphertext()
    }

    @Test func readsSNIAndALPNFromOpenSSLsHello() throws {
        let hello = try openSSLHello(serverName: "acs.example.com")
        #expect(TLSClientHello.read(hello) == .hello(TLSClientHello(serverName: "acs.example.com", alpn: ["http/1.1"])))
        // Split across two records (as some clients send a large hello): the same.
        let body = Array(hello[5...])
        let cut = body.count / 2
        let split = [22, 3, 1, UInt8(cut >> 8), UInt8(cut & 0xFF)] + body[..<cut] + [22, 3, 1, UInt8((body.count - cut) >> 8), UInt8((body.count - cut) & 0xFF)] + body[cut...]
        #expect(TLSClientHello.read(split) == TLSClientHello.read(hello))
    }

    @Test func truncatedAndGarbageInputNeverCrashes() throws {
        let hello = try openSSLHello(serverName: "x.test")
        for n in 0..<hello.count {
            let outcome = TLSClientHello.read(Array(hello[..<n]))
            #expect(outcome == .needMore, "prefix of \(n) bytes: \(outcome)")
        }
        #expect(TLSClientHello.read(Array("GET / HTTP/1.1\r\n\r\n".utf8)) == .notClientHello)
        // Every byte of the hello flipped in turn: an answer each time, never a trap.
        var hellos = 0
        for i in 0..<hello.count {
            var bad = hello
            bad[i] ^= 0xFF
            if case .hello = TLSClientHello.read(bad) { hellos += 1 }
        }
        #expect(hellos < hello.count)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            var bytes = (0..<Int.random(in: 0..<300, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if bytes.count > 5 { bytes[0] = 22; bytes[1] = 3 }
            _ = TLSClientHello.read(bytes)
        }
        // A record that claims more than a ClientHello may hold is refused, not waited for.
        #expect(TLSClientHello.read([22, 3, 1, 0xFF, 0xFF]) == .notClientHello)
    }
}
