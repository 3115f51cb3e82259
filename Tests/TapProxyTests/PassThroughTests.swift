import Testing
import TapCrypto
import TapNet
import TapStore
@testable import TapProxy

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

    /// Tester's find: `--pass-through '*.'` lost its trailing dot and became `*` (every host). An empty domain after `*.`
    /// is refused like `.` and `x..y`, with or without a port; `*.example.com.` keeps meaning the subdomains.
    @Test func aWildcardWithAnEmptyDomainIsRefusedNotWidenedToEveryHost() throws {
        for bad in ["*.", "*.:443", "*..", "*..:443", "[*.]"] {
            guard case let .failure(e) = HostPattern.parse(bad) else {
                Issue.record("'\(bad)' was accepted")
                continue
            }
            #expect(e.message.hasPrefix("host pattern '"), "\(e.message)")
        }
        let trailing = try pattern("*.example.com.")
        #expect(trailing.host == .subdomains(of: "example.com"))
        #expect(!trailing.matches(HostPort(host: "other.test", port: 443)))
    }

    /// Tester's find: the start line said "CONNECT intercepted" whatever the routing was.
    @Test func theRoutingIsDescribedAsItIs() throws {
        #expect(HostRouting().summary == "CONNECT intercepted")
        #expect(HostRouting(passThrough: [try pattern("*")]).summary == "CONNECT tunnelled (pass-through *)")
        #expect(HostRouting(passThrough: [try pattern("pinned.test"), try pattern("*.bank.test")]).summary
                == "CONNECT intercepted except 2 pass-through patterns (pinned.test, *.bank.test)")
        #expect(HostRouting(intercept: [try pattern("*.acs.test")]).summary == "CONNECT intercepted only for *.acs.test, others tunnelled")
        let both = HostRouting(passThrough: [try pattern("pinned.acs.test")], intercept: (1...5).map { try! pattern("h\($0).test") })
        #expect(both.summary == "CONNECT intercepted only for h1.test, h2.test, h3.test and 2 more, others tunnelled; "
                + "except 1 pass-through pattern (pinned.acs.test)")
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

/// The proxy machine's side of a tunnel passed through, sans-IO: early bytes, the 200 only once the upstream is up,
/// the counts, the SNI, and a target that cannot be reached.
struct PassThroughMachineTests {
    func harness() throws -> Harness {
        let pinned = try HostPattern.parse("*.pinned.test").get()
        return try Harness(.forward) { $0.routing = HostRouting(passThrough: [pinned]) }
    }

    func hello() throws -> [UInt8] {
        let session = try TLSSession(context: try TLSContext(clientRoots: [], verify: false), serverName: "api.pinned.test")
        _ = try session.handshake()
        return session.takeCiphertext()
    }

    @Test func tunnelsBytesUntouchedAndRecordsTheTunnel() throws {
        var h = try harness()
        let hello = try hello()
        // The CONNECT and the ClientHello in one read, as an eager client sends them.
        let first = h.feed(.clientBytes(Array("CONNECT api.pinned.test:443 HTTP/1.1\r\nHost: api.pinned.test:443\r\n\r\n".utf8) + hello))
        #expect(first.connects.map(\.address) == [HostPort(host: "api.pinned.test", port: 443)] && first.connects.first?.tls == false)
        #expect(first.clientWrites.isEmpty, "no 200 before the upstream is up")
        #expect(!first.names.contains("startClientTLS"))
        let up = h.feed(.upstreamConnected(connectedAt: h.env.wall, tlsDoneAt: nil))
        #expect(up.clientWrites == ["HTTP/1.1 200 Connection established\r\n\r\n"])
        #expect(up.compactMap { if case let .writeUpstream(b, _) = $0 { return b }; return nil } == [hello], "the hello goes on byte for byte")
        let more = h.feed(.clientBytes([1, 2, 3]))
        #expect(more.compactMap { if case let .writeUpstream(b, _) = $0 { return b }; return nil } == [[UInt8]([1, 2, 3])])
        // Bytes that look like HTTP are not parsed either way.
        let down = h.upstream("HTTP/1.1 999 nonsense\r\n\r\n")
        #expect(down.clientWrites == ["HTTP/1.1 999 nonsense\r\n\r\n"] && down.records.isEmpty)
        let closed = h.feed(.upstreamClosed(nil))
        #expect(closed.closesClient)
        let record = try #require(closed.records.first)
        #expect(record.method == "CONNECT" && record.url == "api.pinned.test:443" && record.status == 200)
        #expect(record.tunnel == TunnelAnnotation(host: "api.pinned.test", port: 443, sni: "api.pinned.test", alpnOffered: ["http/1.1"],
                                                   bytesUp: hello.count + 3, bytesDown: 25, ended: "upstream closed",
                                                   decidedBy: "--pass-through *.pinned.test"))
        // The client's close afterwards ends the connection without a second record.
        let end = h.feed(.clientClosed(error: nil, tlsFailure: false))
        #expect(end.records.isEmpty && end.names.contains("ended"))
    }

    @Test func aTunnelOpenWhenTheRecorderStopsIsRecordedAsEndedByTheRecorder() throws {
        var h = try harness()
        _ = h.client("CONNECT api.pinned.test:443 HTTP/1.1\r\n\r\n")
        _ = h.feed(.upstreamConnected(connectedAt: h.env.wall, tlsDoneAt: nil))
        let stopped = h.feed(.recorderStopping)
        let record = try #require(stopped.records.first)
        #expect(record.status == 200 && record.tunnel?.ended == "recorder stopped" && record.clientAbortAt == nil)
        #expect(stopped.names.contains("closeUpstream") && stopped.names.contains("ended"))
    }

    @Test func anUnreachableTargetIs502AndOthersAreStillIntercepted() throws {
        var h = try harness()
        _ = h.client("CONNECT down.pinned.test:443 HTTP/1.1\r\n\r\n")
        let failed = h.feed(.upstreamClosed(.connect("Connection refused")))
        #expect(failed.clientWrites.first?.hasPrefix("HTTP/1.1 502") == true)
        #expect(failed.records.first?.status == 502 && failed.records.first?.error?.contains("Connection refused") == true)
        var other = try harness()
        let intercepted = other.client("CONNECT acs.test:443 HTTP/1.1\r\n\r\n")
        #expect(intercepted.names.contains("startClientTLS") && intercepted.connects.isEmpty)
    }
}
