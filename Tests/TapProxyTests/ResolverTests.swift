import Foundation
import Testing
import TapCore
import TapCrypto
import TapHTTPService
import TapNet
import TapProxy
import TapTestSupport

/// Tester's find: `CONNECT random.junk:443` through a recorder with pass-through made `Connection.connect` call
/// getaddrinfo on the event loop, freezing every other client for the ~5 s the resolver took (a probe's median latency
/// went from 5 ms to 4.93 s). Names are now looked up off the loop (`HostResolver`), with a time limit answered 502;
/// the test injects a resolver that takes 4 s for one name and shows another client served meanwhile.
@Suite struct ResolverTests {
    /// A forward proxy that tunnels every CONNECT (`--pass-through '*'`).
    static func forwardConfiguration() throws -> ProxyConfiguration {
        let ca = try CertificateAuthority.selfSigned(commonName: "Resolver test CA", key: try PrivateKey.generateP256())
        return ProxyConfiguration(mode: .forward, upstreamTLS: try TLSContext(clientRoots: []),
                                  interceptTLS: try TLSContext(interceptingWith: try LeafCertificateCache(authority: ca)))
    }

    @Test func aSlowLookupDoesNotFreezeOtherClients() throws {
        let stack = try ServiceStack.background("3dstape-test-resolver")
        let upstream = HTTPServer(loop: stack.loop) { _, _, respond in respond(.json(Array(#"{"ok":true}"#.utf8))) }
        let up = try upstream.start(on: HostPort(host: "127.0.0.1", port: 0))
        let slowLookups = Locked(0)
        stack.loop.resolver = HostResolver(timeout: 2, maxInFlight: 4) { target in
            if target.host == "random.junk" {
                slowLookups.withLock { $0 += 1 }
                Thread.sleep(forTimeInterval: 4) // as a resolver that gets no answer does
                throw NetError("cannot resolve random.junk", code: 0, reason: "Name or service not known")
            }
            return "127.0.0.1" // every other name: the upstream on loopback
        }
        var config = try Self.forwardConfiguration()
        config.routing = HostRouting(passThrough: [try HostPattern.parse("*").get()])
        let proxy = ProxyServer(loop: stack.loop, config: config, writer: nil)
        let address = try proxy.listen(on: HostPort(host: "127.0.0.1", port: 0))
        stack.onStop { proxy.shutdown(); upstream.stop() }
        stack.start()
        defer { stack.stop() }

        let junk = try PipelineClient(port: address.port)
        let started = Date()
        try junk.send("CONNECT random.junk:443 HTTP/1.1\r\nHost: random.junk:443\r\n\r\n")
        // While that name is being looked up, another client's request through a named host is answered at once.
        for _ in 0..<3 {
            let probe = try PipelineClient(port: address.port)
            let sent = Date()
            try probe.send("GET http://upstream.test:\(up.port)/probe HTTP/1.1\r\nHost: upstream.test:\(up.port)\r\n\r\n")
            let answer = try probe.responses(1)
            #expect(answer.first?.head.status == 200)
            #expect(Date().timeIntervalSince(sent) < 1, "served while a lookup hangs: \(Date().timeIntervalSince(sent)) s")
        }
        let refused = try junk.responses(1)
        let waited = Date().timeIntervalSince(started)
        #expect(refused.first?.head.status == 502, "\(refused)")
        let body = String(decoding: refused.first?.body ?? [], as: UTF8.self)
        #expect(body.contains("random.junk: no answer within 2s"), "\(body)")
        #expect(waited >= 1.9 && waited < 3.8, "answered at the time limit, not when the lookup ended: \(waited) s")
        #expect(slowLookups.withLock { $0 } == 1)
    }

    @Test func lookupsInFlightAreBounded() throws {
        let stack = try ServiceStack.background("3dstape-test-resolver-bound")
        stack.loop.resolver = HostResolver(timeout: 5, maxInFlight: 2) { _ in
            Thread.sleep(forTimeInterval: 1.5)
            throw NetError("cannot resolve", code: 0, reason: "Name or service not known")
        }
        var config = try Self.forwardConfiguration()
        config.routing = HostRouting(passThrough: [try HostPattern.parse("*").get()])
        let proxy = ProxyServer(loop: stack.loop, config: config, writer: nil)
        let address = try proxy.listen(on: HostPort(host: "127.0.0.1", port: 0))
        stack.onStop { proxy.shutdown() }
        stack.start()
        defer { stack.stop() }
        let clients = try (0..<3).map { i in
            let c = try PipelineClient(port: address.port)
            try c.send("CONNECT junk\(i).test:443 HTTP/1.1\r\nHost: junk\(i).test:443\r\n\r\n")
            usleep(50_000)
            return c
        }
        let third = try clients[2].responses(1)
        let body = String(decoding: third.first?.body ?? [], as: UTF8.self)
        #expect(third.first?.head.status == 502 && body.contains("2 host name lookups already in flight"), "\(body)")
        let first = String(decoding: try clients[0].responses(1).first?.body ?? [], as: UTF8.self)
        #expect(first.contains("Name or service not known"), "\(first)")
    }
}
