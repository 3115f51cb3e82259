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

/// `LoopHTTPClient` on loopback against a real `HTTPServer` and raw sockets: an answer, a refusal, a server that never
/// answers, an answer framed by the connection's close.
@Suite struct LoopHTTPClientTests {
    /// Sends one request from the stack's loop thread and waits (5 s at most) for the one callback.
    static func send(_ stack: ServiceStack, _ url: String, body: [UInt8] = [], timeout: Double = 5,
                     roots: [Certificate]? = nil) throws -> Result<HTTPResponse, HTTPClientError> {
        let target = try #require(HTTPURL(url))
        let tls = try TLSContext(clientRoots: roots)
        let results = Mutex<[Result<HTTPResponse, HTTPClientError>]>([])
        let done = DispatchSemaphore(value: 0)
        let loop = stack.loop
        loop.execute {
            LoopHTTPClient.send("POST", target, headers: [("Content-Type", "application/json")], body: body, tls: tls,
                                timeout: timeout, on: loop) { result in
                results.withLock { $0.append(result) }
                done.signal()
            }
        }
        #expect(done.wait(timeout: .now() + 5) == .success, "the callback came")
        usleep(50_000) // a second callback would come now
        let all = results.withLock { $0 }
        #expect(all.count == 1, "one callback, got \(all.count)")
        return try #require(all.first)
    }

    @Test func aRequestGetsTheServersAnswer() throws {
        let server = try LoopbackServer("loop-client-test") { request, _, respond in
            let seen = "\(request.head.method) \(request.head.target) \(request.head.headers["Connection"] ?? "-") \(request.body.count)"
            respond(.json(Array("{\"seen\":\"\(seen)\"}".utf8)))
        }
        defer { server.stop() }

        let r = try Self.send(server.stack, "http://127.0.0.1:\(server.address.port)/3ds/rreq?x=1", body: Array(repeating: 0x41, count: 70_000)).get()
        #expect(r.head.status == 200)
        #expect(String(decoding: r.body, as: UTF8.self) == "{\"seen\":\"POST /3ds/rreq?x=1 close 70000\"}")
    }

    /// A host name is resolved away from the loop (a slow resolver must not hold up its timers), then connected to.
    @Test func aHostNameIsResolvedAwayFromTheLoopAndReached() throws {
        #expect(ResolvedAddress.isLiteral("127.0.0.1") && ResolvedAddress.isLiteral("::1") && ResolvedAddress.isLiteral("[::1]"))
        #expect(!ResolvedAddress.isLiteral("localhost") && !ResolvedAddress.isLiteral("acs.example") && !ResolvedAddress.isLiteral("1.2.3"))
        // Wherever localhost leads here (127.0.0.1 or ::1), the server listens there.
        let local = try #require(try ResolvedAddress(HostPort(host: "localhost", port: 1)).numericHost)
        let server = try LoopbackServer("loop-client-test", host: local) { request, _, respond in respond(.json(Array("{\"host\":\"\(request.head.headers["Host"] ?? "")\"}".utf8))) }
        defer { server.stop() }
        let r = try Self.send(server.stack, "http://localhost:\(server.address.port)/x").get()
        #expect(String(decoding: r.body, as: UTF8.self) == "{\"host\":\"localhost:\(server.address.port)\"}", "the Host header keeps the name")
    }

    /// HTTPS: a server whose certificate chains to a trusted root answers; one that does not is refused in the handshake.
    @Test func httpsReachesATrustedServerAndRefusesAnUntrustedOne() throws {
        let ca = try CertificateAuthority.selfSigned(commonName: "Test 3DS Server CA", key: try PrivateKey.generateP256())
        // By name, as 3DS Servers are reached (the server mints its certificate for the name the client sends).
        let local = try #require(try ResolvedAddress(HostPort(host: "localhost", port: 1)).numericHost)
        let server = try LoopbackServer("loop-client-test", host: local, tls: try TLSContext(interceptingWith: try LeafCertificateCache(authority: ca))) { request, _, respond in
            respond(.json(Array("{\"rres\":\(request.body.count)}".utf8)))
        }
        defer { server.stop() }
        let r = try Self.send(server.stack, "https://localhost:\(server.address.port)/3ds/rreq", body: Array("{}".utf8), roots: [ca.certificate]).get()
        #expect(r.head.status == 200 && String(decoding: r.body, as: UTF8.self) == "{\"rres\":2}")
        let stranger = try CertificateAuthority.selfSigned(commonName: "Stranger", key: try PrivateKey.generateP256())
        guard case let .failure(e) = try Self.send(server.stack, "https://localhost:\(server.address.port)/3ds/rreq", roots: [stranger.certificate]) else {
            Issue.record("an untrusted server was accepted")
            return
        }
        #expect(e.kind == .tls && e.message.hasPrefix("TLS to localhost:\(server.address.port)") && e.message.contains("certificate"), "\(e.message)")
    }

    @Test func aRefusedConnectionIsReportedWithItsAddress() throws {
        let port = try Self.closedPort()
        let stack = try ServiceStack.background("loop-client-test")
        stack.start()
        defer { stack.stop() }
        guard case let .failure(e) = try Self.send(stack, "http://127.0.0.1:\(port)/3ds/rreq") else {
            Issue.record("a closed port answered")
            return
        }
        #expect(e.kind == .connect && e.message == "connect to 127.0.0.1:\(port): Connection refused", "\(e.message)")
    }

    @Test func aServerThatNeverAnswersTimesOut() throws {
        let silent = try RawServer { _ in usleep(1_000_000) } // accepts, reads, answers nothing for a second
        let stack = try ServiceStack.background("loop-client-test")
        stack.start()
        defer { stack.stop() }
        let started = Date()
        guard case let .failure(e) = try Self.send(stack, "http://127.0.0.1:\(silent.port)/x", timeout: 0.3) else {
            Issue.record("a silent server answered")
            return
        }
        let waited = Date().timeIntervalSince(started)
        #expect(e.kind == .timeout && e.message.contains("within 0.3 s"), "\(e.message)")
        #expect(waited >= 0.3 && waited < 2, "the timeout fired after \(waited) s")
    }

    @Test func anAnswerEndedByCloseIsWholeAndOneEndedEarlyIsAnError() throws {
        let untilClose = try RawServer { fd in _ = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it".withCString { SystemCall.send(fd, $0, strlen($0), 0) } }
        let cut = try RawServer { fd in _ = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart".withCString { SystemCall.send(fd, $0, strlen($0), 0) } }
        let stack = try ServiceStack.background("loop-client-test")
        stack.start()
        defer { stack.stop() }
        let whole = try Self.send(stack, "http://127.0.0.1:\(untilClose.port)/x").get()
        #expect(String(decoding: whole.body, as: UTF8.self) == "all of it")
        guard case let .failure(e) = try Self.send(stack, "http://127.0.0.1:\(cut.port)/x") else {
            Issue.record("a cut answer was taken as complete")
            return
        }
        #expect(e.kind == .protocolError && e.message.contains("before a complete response"), "\(e.message)")
    }

    /// Sends requests one after another from the loop thread, all through `pool`; waits for each answer.
    static func sendInTurn(_ stack: ServiceStack, _ urls: [String], pool: LoopHTTPConnectionPool, tls: TLSContext) throws -> [Result<HTTPResponse, HTTPClientError>] {
        var out: [Result<HTTPResponse, HTTPClientError>] = []
        for url in urls {
            let target = try #require(HTTPURL(url))
            let result = Mutex<Result<HTTPResponse, HTTPClientError>?>(nil)
            let done = DispatchSemaphore(value: 0)
            let loop = stack.loop
            loop.execute {
                LoopHTTPClient.send("POST", target, body: Array("{}".utf8), tls: tls, timeout: 5, on: loop, pool: pool) { r in
                    result.withLock { $0 = r }
                    done.signal()
                }
            }
            #expect(done.wait(timeout: .now() + 5) == .success, "the callback came")
            out.append(try #require(result.withLock { $0 }))
        }
        return out
    }

    /// With a pool, requests to one origin go on one kept-alive connection (no `Connection: close` sent), as the
    /// replayer's RReqs do.
    @Test func aPoolCarriesRequestsOnOneKeptAliveConnection() throws {
        let server = try LoopbackServer("loop-client-pool") { request, peer, respond in
            respond(.json(Array("{\"peer\":\"\(peer)\",\"connection\":\"\(request.head.headers["Connection"] ?? "-")\"}".utf8)))
        }
        defer { server.stop() }
        let pool = LoopHTTPConnectionPool(loop: server.stack.loop)
        let url = "http://127.0.0.1:\(server.address.port)/3ds/rreq"
        let bodies = try Self.sendInTurn(server.stack, [url, url, url], pool: pool, tls: try TLSContext(clientRoots: nil))
            .map { String(decoding: try $0.get().body, as: UTF8.self) }
        #expect(Set(bodies).count == 1, "one peer, one connection: \(bodies)")
        #expect(bodies.first?.contains("\"connection\":\"-\"") == true, "\(bodies)")
        let counts = Mutex((0, 0))
        let done = DispatchSemaphore(value: 0)
        server.stack.loop.execute { counts.withLock { $0 = (pool.reuses, pool.idleCount) }; done.signal() }
        _ = done.wait(timeout: .now() + 5)
        #expect(counts.withLock { $0 } == (2, 1))
    }

    /// The pool holds no more than its bounds: per origin, and in all (origins come from the traffic).
    @Test func thePoolKeepsNoMoreThanItsBounds() throws {
        let a = try LoopbackServer("loop-client-pool-a") { _, _, respond in respond(.json(Array("{}".utf8))) }
        let b = try LoopbackServer("loop-client-pool-b") { _, _, respond in respond(.json(Array("{}".utf8))) }
        defer { a.stop(); b.stop() }
        let stack = try ServiceStack.background("loop-client-pool")
        stack.start()
        defer { stack.stop() }
        let pool = LoopHTTPConnectionPool(loop: stack.loop, maxIdlePerOrigin: 1, maxIdle: 1)
        let tls = try TLSContext(clientRoots: nil)
        for url in ["http://127.0.0.1:\(a.address.port)/x", "http://127.0.0.1:\(b.address.port)/x"] {
            for r in try Self.sendInTurn(stack, [url, url], pool: pool, tls: tls) { #expect(try r.get().head.status == 200) }
        }
        let counts = Mutex((0, 0))
        let done = DispatchSemaphore(value: 0)
        stack.loop.execute { counts.withLock { $0 = (pool.reuses, pool.idleCount) }; done.signal() }
        _ = done.wait(timeout: .now() + 5)
        // a: the second request reuses the first's connection, which then waits; b: none free (the one place is a's), so
        // b's connections are closed after their answers and nothing is reused.
        #expect(counts.withLock { $0 } == (1, 1))
    }

    /// A kept-alive connection the server closes as the next request arrives (before a byte of the answer): the request
    /// goes again on a new connection and is answered; no error reaches the caller.
    @Test func aRequestOnAConnectionClosedWhileIdleGoesAgainOnANewOne() throws {
        let server = try RawServer(accepts: 2) { n, fd in
            if n == 0 {
                _ = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst".withCString { SystemCall.send(fd, $0, strlen($0), 0) }
                var buf = [UInt8](repeating: 0, count: 4096)
                _ = recv(fd, &buf, buf.count, 0) // the second request arrives; this server closes without an answer
            } else {
                _ = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond".withCString { SystemCall.send(fd, $0, strlen($0), 0) }
            }
        }
        let stack = try ServiceStack.background("loop-client-pool")
        stack.start()
        defer { stack.stop() }
        let pool = LoopHTTPConnectionPool(loop: stack.loop)
        let url = "http://127.0.0.1:\(server.port)/3ds/rreq"
        let results = try Self.sendInTurn(stack, [url, url], pool: pool, tls: try TLSContext(clientRoots: nil))
        #expect(results.map { String(decoding: (try? $0.get().body) ?? Array("error".utf8), as: UTF8.self) } == ["first", "second"], "\(results)")
    }

    /// A loopback port with nothing listening (bound, then closed).
    static func closedPort() throws -> UInt16 {
        let s = try RawServer { _ in }
        let port = s.port
        s.close()
        return port
    }
}

/// A one-connection loopback server on a raw socket: accepts once, reads the request, calls `answer` with the
/// socket, closes it. Closed when dropped.
final class RawServer: @unchecked Sendable {
    // Safe: `fd` is written only in init and `close`; the accepting thread reads it once it is set and stops when the
    // socket is shut down.
    private(set) var fd: Int32
    let port: UInt16

    convenience init(answer: @escaping @Sendable (Int32) -> Void) throws {
        try self.init(accepts: 1) { _, fd in answer(fd) }
    }

    /// Accepts `accepts` connections one after another; `answer` gets each one's number (from 0) and socket.
    init(accepts: Int, answer: @escaping @Sendable (Int, Int32) -> Void) throws {
        fd = socket(AF_INET, Platform.streamType, 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = fd
        let ok = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listening, $0, len) == 0 && listen(listening, 4) == 0 && getsockname(listening, $0, &len) == 0
            }
        }
        guard ok else { throw NetError("binding a loopback test server", code: errno) }
        port = UInt16(bigEndian: addr.sin_port)
        Thread.detachNewThread {
            for n in 0..<accepts {
                let c = accept(listening, nil, nil)
                guard c >= 0 else { return }
                var buf = [UInt8](repeating: 0, count: 4096)
                _ = recv(c, &buf, buf.count, 0)
                answer(n, c)
                usleep(100_000)
                _ = SystemCall.close(c)
            }
        }
    }

    func close() {
        guard fd >= 0 else { return }
        shutdown(fd, Int32(SHUT_RDWR))
        _ = SystemCall.close(fd)
        fd = -1
    }

    deinit { close() }
}

/// Issue 26: `LoopHTTPClient` through a forward proxy, as the sandbox's RReq goes when `--proxy` names the recorder: an
/// https URL through a CONNECT tunnel (TLS inside it, the tunnel kept for the next request to the same origin), and a
/// proxy that refuses CONNECT named in the failure.
@Suite struct LoopHTTPClientProxyTests {
    static func send(_ loop: EventLoop, _ url: String, proxy: HostPort, tls: TLSContext, pool: LoopHTTPConnectionPool) throws
        -> Result<HTTPResponse, HTTPClientError> {
        let target = try #require(HTTPURL(url))
        let results = Mutex<[Result<HTTPResponse, HTTPClientError>]>([])
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            LoopHTTPClient.send("POST", target, headers: [("Content-Type", "application/json")], body: Array("{}".utf8), tls: tls,
                                timeout: 5, on: loop, pool: pool, proxy: proxy) { result in
                results.withLock { $0.append(result) }
                done.signal()
            }
        }
        #expect(done.wait(timeout: .now() + 6) == .success, "the callback came")
        return try #require(results.withLock { $0.first })
    }

    @Test func anHTTPSRequestGoesThroughACONNECTTunnelThatIsKept() throws {
        let ca = try CertificateAuthority.selfSigned(commonName: "Loop client proxy test CA", key: try PrivateKey.generateP256())
        // A server that takes CONNECT and terminates TLS inside the tunnel (as the replayer does for its proxy clients).
        let stack = try ServiceStack.background("loop-client-proxy-test")
        let server = HTTPServer(loop: stack.loop, intercepting: try TLSContext(interceptingWith: try LeafCertificateCache(authority: ca))) { request, _, respond in
            respond(.json(Array("{\"seen\":\"\(request.head.method) \(request.head.target) \(request.head.headers["Host"] ?? "-")\"}".utf8)))
        }
        let proxy = try server.start(on: HostPort(host: "127.0.0.1", port: 0))
        stack.onStop { server.stop() }
        stack.start()
        defer { stack.stop() }
        let pool = LoopHTTPConnectionPool(loop: stack.loop)
        let tls = try TLSContext(clientRoots: [ca.certificate])

        for _ in 0..<2 {
            let r = try Self.send(stack.loop, "https://acs.example:8443/3ds/rreq", proxy: proxy, tls: tls, pool: pool).get()
            #expect(r.head.status == 200)
            // The server names an intercepted request by its absolute URL: the origin the tunnel was opened for.
            #expect(String(decoding: r.body, as: UTF8.self) == "{\"seen\":\"POST https://acs.example:8443/3ds/rreq acs.example:8443\"}")
        }
        let reuses = Mutex(-1)
        let read = DispatchSemaphore(value: 0)
        stack.loop.execute { reuses.withLock { $0 = pool.reuses }; read.signal() }
        read.wait()
        #expect(reuses.withLock { $0 } == 1, "the second request went through the first one's tunnel")
    }

    @Test func aProxyThatRefusesCONNECTIsNamed() throws {
        let plain = try LoopbackServer("loop-client-proxy-refusal") { _, _, respond in respond(HTTPReply(status: 200)) }
        defer { plain.stop() }
        let pool = LoopHTTPConnectionPool(loop: plain.stack.loop)
        let result = try Self.send(plain.stack.loop, "https://acs.example/3ds/rreq", proxy: plain.address, tls: try TLSContext(clientRoots: []), pool: pool)
        guard case let .failure(e) = result else { Issue.record("expected a failure, got \(result)"); return }
        #expect(e.kind == .connect)
        #expect(e.message.hasPrefix("proxy \(plain.address) refused CONNECT acs.example:443: "), "\(e.message)")
    }
}
