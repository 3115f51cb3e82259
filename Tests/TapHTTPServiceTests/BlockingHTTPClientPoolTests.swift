import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization
import Testing
import TapCore
import TapCrypto
import TapHTTP
import TapHTTPService
import TapNet

/// `BlockingHTTPClient` with a `BlockingConnectionPool` (client-replay's keep-alive) on loopback: one connection for
/// many requests, none kept after `Connection: close`, a connection the server closed while idle or right after the
/// request replaced by a new one, and without a pool a connection per request as before.
@Suite struct BlockingHTTPClientPoolTests {
    /// A server that answers each request with the client's address (`peer`, which differs per connection).
    static func peerEcho(_ name: String, closeEach: Bool = false) throws -> LoopbackServer {
        try LoopbackServer(name) { request, peer, respond in
            let headers = closeEach ? [("Connection", "close")] : []
            respond(HTTPReply(status: 200, headers: headers, body: Array("\(peer) \(request.head.headers["Connection"] ?? "-")".utf8)))
        }
    }

    static func peers(_ client: BlockingHTTPClient, _ url: HTTPURL, count: Int) throws -> [String] {
        try (0..<count).map { i in
            let r = try client.send("POST", url, headers: [("Content-Type", "application/json")], body: Array("{\"n\":\(i)}".utf8))
            #expect(r.head.status == 200)
            return String(decoding: r.body, as: UTF8.self)
        }
    }

    /// `ServerPeer.connection`: the number an `HTTPServer` gives each connection it accepts, the identity the replayer keeps
    /// its per-connection state by (not the address text): one number for every request of a connection, the next
    /// number for the next connection.
    @Test func eachConnectionHasItsOwnNumberAndKeepsItForItsRequests() throws {
        let server = try LoopbackServer("peer-number-test") { _, peer, respond in
            respond(HTTPReply(status: 200, body: Array("\(peer.connection) \(peer.address)".utf8)))
        }
        defer { server.stop() }
        let url = try #require(HTTPURL("http://127.0.0.1:\(server.address.port)/n"))
        let pooled = try Self.peers(BlockingHTTPClient(tls: try TLSContext(clientRoots: nil), timeout: 5, pool: BlockingConnectionPool()), url, count: 3)
        #expect(pooled.map { $0.split(separator: " ")[0] } == ["1", "1", "1"], "\(pooled)")
        #expect(pooled[0].split(separator: " ")[1].hasPrefix("127.0.0.1:"), "the address stays the client's")
        let single = try Self.peers(BlockingHTTPClient(tls: try TLSContext(clientRoots: nil), timeout: 5), url, count: 3)
        #expect(single.map { $0.split(separator: " ")[0] } == ["2", "3", "4"], "\(single)")
    }

    @Test func aPoolCarriesManyRequestsOnOneConnectionWithoutOneEach() throws {
        let server = try Self.peerEcho("pool-reuse-test")
        defer { server.stop() }
        let url = try #require(HTTPURL("http://127.0.0.1:\(server.address.port)/3ds/areq"))
        let pool = BlockingConnectionPool()
        let pooled = try Self.peers(BlockingHTTPClient(tls: try TLSContext(clientRoots: nil), timeout: 5, pool: pool), url, count: 20)
        #expect(Set(pooled).count == 1, "one connection for 20 requests: \(Set(pooled))")
        #expect(pooled.allSatisfy { $0.hasSuffix(" -") }, "no Connection: close sent")
        #expect(pool.idleCount == 1)
        pool.closeAll()
        #expect(pool.idleCount == 0)
        let single = try Self.peers(BlockingHTTPClient(tls: try TLSContext(clientRoots: nil), timeout: 5), url, count: 5)
        #expect(Set(single).count == 5 && single.allSatisfy { $0.hasSuffix(" close") }, "without a pool, a connection per request")
    }

    /// HTTPS: the TLS session goes back to the pool with its socket and carries the next requests.
    @Test func aTLSConnectionIsKeptWithItsSession() throws {
        let ca = try CertificateAuthority.selfSigned(commonName: "Test ACS CA", key: try PrivateKey.generateP256())
        let local = try #require(try ResolvedAddress(HostPort(host: "localhost", port: 1)).numericHost)
        let server = try LoopbackServer("pool-tls-test", host: local, tls: try TLSContext(interceptingWith: try LeafCertificateCache(authority: ca))) {
            _, peer, respond in respond(HTTPReply(status: 200, body: Array(peer.address.utf8)))
        }
        defer { server.stop() }
        let url = try #require(HTTPURL("https://localhost:\(server.address.port)/challenge"))
        let pool = BlockingConnectionPool()
        let peers = try Self.peers(BlockingHTTPClient(tls: try TLSContext(clientRoots: [ca.certificate]), timeout: 5, pool: pool), url, count: 6)
        #expect(Set(peers).count == 1, "one TLS connection for 6 requests: \(Set(peers))")
        #expect(pool.idleCount == 1)
    }

    @Test func aConnectionTheServerClosesIsNotKept() throws {
        let server = try Self.peerEcho("pool-close-test", closeEach: true)
        defer { server.stop() }
        let url = try #require(HTTPURL("http://127.0.0.1:\(server.address.port)/x"))
        let pool = BlockingConnectionPool()
        let peers = try Self.peers(BlockingHTTPClient(tls: try TLSContext(clientRoots: nil), timeout: 5, pool: pool), url, count: 4)
        #expect(Set(peers).count == 4, "Connection: close from the server: a new connection each time")
        #expect(pool.idleCount == 0)
    }

    @Test func anIdleConnectionTheServerTimedOutIsReplaced() throws {
        let stack = try ServiceStack.background("pool-idle-test")
        let server = HTTPServer(loop: stack.loop) { _, peer, respond in respond(HTTPReply(status: 200, body: Array(peer.address.utf8))) }
        server.idleTimeout = 0.2
        let address = try server.start(on: HostPort(host: "127.0.0.1", port: 0))
        stack.onStop { server.stop() }
        stack.start()
        defer { stack.stop() }
        let url = try #require(HTTPURL("http://127.0.0.1:\(address.port)/x"))
        let client = BlockingHTTPClient(tls: try TLSContext(clientRoots: nil), timeout: 5, pool: BlockingConnectionPool())
        let first = try Self.peers(client, url, count: 2)
        usleep(600_000) // the server closes the idle connection
        let later = try Self.peers(client, url, count: 2)
        #expect(Set(first).count == 1 && Set(later).count == 1 && first[0] != later[0])
    }

    /// The server reads the second request on a kept connection and closes it without an answer (its idle close racing
    /// the request): the request is sent once more on a new connection and answered. A server that answers part of a
    /// response and closes is not retried: that is the request's failure.
    @Test func aRequestTheServerDroppedUnansweredIsSentOnceMore() throws {
        let raw = try ScriptedServer()
        defer { raw.close() }
        let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)
        let served = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        Thread {
            defer { done.signal() }
            guard let a = raw.accept() else { return }
            _ = ScriptedServer.readRequest(a); _ = ScriptedServer.write(a, answer); served.add(1, ordering: .relaxed)
            _ = ScriptedServer.readRequest(a); _ = SystemCall.close(a)                         // the second request: dropped unanswered
            guard let b = raw.accept() else { return }
            _ = ScriptedServer.readRequest(b); _ = ScriptedServer.write(b, answer); served.add(1, ordering: .relaxed)
            _ = ScriptedServer.readRequest(b); _ = ScriptedServer.write(b, Array("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nok".utf8)); _ = SystemCall.close(b)
        }.start()
        let url = try #require(HTTPURL("http://127.0.0.1:\(raw.port)/x"))
        let client = BlockingHTTPClient(tls: try TLSContext(clientRoots: nil), timeout: 5, pool: BlockingConnectionPool())
        #expect(String(decoding: try client.send("POST", url, body: [1]).body, as: UTF8.self) == "ok")
        #expect(String(decoding: try client.send("POST", url, body: [2]).body, as: UTF8.self) == "ok", "sent again on a new connection")
        #expect(throws: HTTPClientError.self, "a response cut short is not sent again") { _ = try client.send("POST", url, body: [3]) }
        #expect(done.wait(timeout: .now() + 5) == .success)
        #expect(served.load(ordering: .relaxed) == 2)
    }
}

/// A listening socket on 127.0.0.1 for scripted servers.
final class ScriptedServer: Sendable {
    let fd: Int32
    let port: UInt16

    init() throws {
        let listening = socket(AF_INET, Platform.streamType, 0)
        fd = listening
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listening, $0, len) == 0 && listen(listening, 8) == 0 && getsockname(listening, $0, &len) == 0 }
        }
        try #require(ok, "listening on 127.0.0.1")
        port = UInt16(bigEndian: addr.sin_port)
    }

    func accept() -> Int32? {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, 5000) == 1 else { return nil }
        let c = acceptOne(fd)
        return c >= 0 ? c : nil
    }

    /// Reads until the end of a request's head and its Content-Length body (the tests' requests are small).
    static func readRequest(_ fd: Int32) -> [UInt8] {
        var got: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            if let end = got.firstRange(of: Array("\r\n\r\n".utf8)) {
                let head = String(decoding: got[..<end.lowerBound], as: UTF8.self).lowercased()
                let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }.flatMap { Int($0.dropFirst(15).trimmingCharacters(in: .whitespaces)) } ?? 0
                if got.count - end.upperBound >= length { return got }
            }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 5000) == 1 else { return got }
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return got }
            got += buf[0..<n]
        }
    }

    static func write(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Platform.sendFlags) } == bytes.count
    }

    func close() { _ = SystemCall.close(fd) }
}

/// The C library's accept(2), outside the server type (whose own `accept()` would shadow it).
private func acceptOne(_ fd: Int32) -> Int32 { accept(fd, nil, nil) }
