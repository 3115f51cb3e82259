import Foundation
import Testing
import TapCore
import TapCrypto
import TapHTTPService
import TapNet
import TapProxy
import TapTestSupport

/// The recorder in forward mode, intercepting a CONNECT: what the client sends with its CONNECT belongs to the tunnel's
/// TLS. Hostile tester: a ClientHello in the CONNECT's write failed the handshake ('400 bare LF'), and a plain request
/// in that write was forwarded to the TLS upstream and stored as an HTTPS exchange.
@Suite struct InterceptedConnectEarlyBytesTests {
    static func proxy(_ stack: ServiceStack) throws -> (ProxyServer, HostPort, HostPort, HTTPServer) {
        let ca = try CertificateAuthority.selfSigned(commonName: "Early bytes test CA", key: try PrivateKey.generateP256())
        let leaves = try TLSContext(interceptingWith: try LeafCertificateCache(authority: ca))
        let upstream = HTTPServer(loop: stack.loop, tls: leaves) { request, _, respond in
            respond(HTTPReply(status: 200, body: Array("\(request.head.method) \(request.head.target)".utf8)))
        }
        let up = try upstream.start(on: HostPort(host: "127.0.0.1", port: 0))
        let config = ProxyConfiguration(mode: .forward, upstreamTLS: try TLSContext(clientRoots: [ca.certificate]), interceptTLS: leaves)
        let proxy = ProxyServer(loop: stack.loop, config: config, writer: nil)
        let address = try proxy.listen(on: HostPort(host: "127.0.0.1", port: 0))
        return (proxy, address, up, upstream)
    }

    @Test(arguments: [false, true]) func aClientHelloSentWithTheConnectStartsTheTunnelsTLS(helloWithConnect: Bool) throws {
        let stack = try ServiceStack.background("3dstape-test-early-hello")
        let (proxy, address, up, upstream) = try Self.proxy(stack)
        stack.onStop { proxy.shutdown(); upstream.stop() }
        stack.start()
        defer { stack.stop() }
        let client = try PipelineClient(port: address.port, tls: true, serverName: "localhost", timeout: 5,
                                        tunnel: PipelineClient.Tunnel(target: "localhost:\(up.port)", helloWithConnect: helloWithConnect))
        try client.send("GET /areq HTTP/1.1\r\nHost: localhost:\(up.port)\r\n\r\n")
        let answers = try client.responses(1)
        #expect(answers.map(\.head.status) == [200])
        #expect(answers.map { String(decoding: $0.body, as: UTF8.self) } == ["GET /areq"], "origin-form upstream")
    }

    @Test func aPlainRequestSentWithTheConnectIsNeverForwarded() throws {
        let stack = try ServiceStack.background("3dstape-test-early-plain")
        let seen = Locked(0)
        let ca = try CertificateAuthority.selfSigned(commonName: "Early bytes test CA", key: try PrivateKey.generateP256())
        let leaves = try TLSContext(interceptingWith: try LeafCertificateCache(authority: ca))
        let upstream = HTTPServer(loop: stack.loop, tls: leaves) { _, _, respond in
            seen.withLock { $0 += 1 }
            respond(HTTPReply(status: 200))
        }
        let up = try upstream.start(on: HostPort(host: "127.0.0.1", port: 0))
        let config = ProxyConfiguration(mode: .forward, upstreamTLS: try TLSContext(clientRoots: [ca.certificate]), interceptTLS: leaves)
        let proxy = ProxyServer(loop: stack.loop, config: config, writer: nil)
        let address = try proxy.listen(on: HostPort(host: "127.0.0.1", port: 0))
        stack.onStop { proxy.shutdown(); upstream.stop() }
        stack.start()
        defer { stack.stop() }
        let client = try PipelineClient(port: address.port, timeout: 3)
        try client.send("CONNECT localhost:\(up.port) HTTP/1.1\r\nHost: localhost:\(up.port)\r\n\r\n"
                        + "POST /smuggled HTTP/1.1\r\nHost: localhost:\(up.port)\r\nContent-Length: 4\r\n\r\nsecr")
        _ = try client.serverClosed() // not TLS: the handshake fails and the connection ends
        usleep(200_000)
        #expect(seen.withLock { $0 } == 0, "the plain request reached the upstream")
    }
}
