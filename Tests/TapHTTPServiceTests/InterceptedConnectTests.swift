import Foundation
import Testing
import TapCrypto
import TapHTTP
import TapHTTPService
import TapNet
import TapTestSupport

/// `HTTPServer` intercepting a CONNECT (the replayer's proxy clients): the tunnel's TLS is terminated with a leaf for the
/// host, whether the client waits for the 200 before its ClientHello or sends both in one write.
@Suite struct InterceptedConnectTests {
    @Test(arguments: [false, true]) func aClientHelloSentWithTheConnectStartsTheTunnelsTLS(helloWithConnect: Bool) throws {
        let ca = try CertificateAuthority.selfSigned(commonName: "Intercepted CONNECT test CA", key: try PrivateKey.generateP256())
        let stack = try ServiceStack.background("intercepted-connect-test")
        let server = HTTPServer(loop: stack.loop, intercepting: try TLSContext(interceptingWith: try LeafCertificateCache(authority: ca))) { request, _, respond in
            respond(HTTPReply(status: 200, body: Array("\(request.head.method) \(request.head.target)".utf8)))
        }
        let address = try server.start(on: HostPort(host: "127.0.0.1", port: 0))
        stack.onStop { server.stop() }
        stack.start()
        defer { stack.stop() }
        let client = try PipelineClient(port: address.port, tls: true, serverName: "acs.example", timeout: 5,
                                        tunnel: PipelineClient.Tunnel(target: "acs.example:443", helloWithConnect: helloWithConnect))
        try client.send("GET /areq HTTP/1.1\r\nHost: acs.example\r\n\r\n")
        let answers = try client.responses(1)
        #expect(answers.map(\.head.status) == [200])
        #expect(answers.map { String(decoding: $0.body, as: UTF8.self) } == ["GET https://acs.example:443/areq"])
    }
}
