import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
import TapCore
import TapHTTP
import TapHTTPService
import TapNet

/// The requests every 3dstape server takes: fed byte arrays, the steps asserted (no sockets), and one server on
/// loopback for what only a socket shows.
@Suite struct HTTPRequestIntakeTests {
    static func intake(connect: Bool = false, auth: String? = nil, limits: HTTPLimits = HTTPLimits()) -> HTTPRequestIntake {
        HTTPRequestIntake(rules: .init(limits: limits, authorization: auth.flatMap(ClientAuthorization.init), acceptsConnect: connect))
    }

    /// The steps for `text` fed in pieces of `piece` bytes at wall-clock times 1, 2, 3 …, asking after each piece
    /// until the intake needs more.
    static func steps(_ intake: inout HTTPRequestIntake, _ text: String, piece: Int = 1 << 20) -> [String] {
        let bytes = Array(text.utf8)
        var out: [String] = []
        var t = 0.0
        for start in stride(from: 0, to: bytes.count, by: piece) {
            t += 1
            intake.received(Array(bytes[start..<min(bytes.count, start + piece)]), wallClock: t)
            loop: while true {
                switch intake.next(wallClock: t + 0.5) {
                case .needMore: break loop
                case .sendContinue: out.append("continue")
                case let .request(r, startedAt): out.append("\(r.head.method) \(r.head.target) \(r.body.count) at \(startedAt)")
                case let .intercept(hp): out.append("intercept \(hp)")
                case let .refuse(status, message, headers): out.append("\(status) \(message)\(headers.map { " \($0.0)" }.joined())"); break loop
                }
            }
        }
        return out
    }

    @Test func requestsComeOutWholeWithTheTimeTheirFirstByteArrived() {
        var i = Self.intake()
        let two = "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\nHost: x\r\n\r\n"
        #expect(Self.steps(&i, two, piece: 7) == ["POST /a 3 at 1.0", "GET /b 0 at 8.5"],
                "the second request began when the first was handed out (its bytes came with the first's last)")
        #expect(i.isIdle && i.bufferedCount == 0)
    }

    @Test func expectContinueIsAnsweredOnceBeforeTheBody() {
        var i = Self.intake()
        let head = "PUT /u HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"
        #expect(Self.steps(&i, head) == ["continue"])
        #expect(Self.steps(&i, "body") == ["PUT /u 4 at 1.0"])
    }

    @Test func connectIsInterceptedOnlyWhereItIsTakenAndOnce() {
        var proxy = Self.intake(connect: true)
        #expect(Self.steps(&proxy, "CONNECT acs.test:443 HTTP/1.1\r\nHost: acs.test:443\r\n\r\nGET /in HTTP/1.1\r\nHost: acs.test\r\n\r\n")
                == ["intercept acs.test:443", "GET /in 0 at 1.5"])
        #expect(proxy.tunnel == HostPort(host: "acs.test", port: 443))
        #expect(Self.steps(&proxy, "CONNECT b.test:443 HTTP/1.1\r\n\r\n") == ["405 CONNECT is only accepted by a forward proxy, once per connection"])
        var server = Self.intake()
        #expect(Self.steps(&server, "CONNECT acs.test:443 HTTP/1.1\r\n\r\n").first?.hasPrefix("405 ") == true)
        var bad = Self.intake(connect: true)
        #expect(Self.steps(&bad, "CONNECT :443 HTTP/1.1\r\n\r\n") == ["400 CONNECT target ':443' is not host:port"])
    }

    @Test func credentialsAreAskedOfProxyAndDirectClientsAlike() {
        let auth = "Basic " + Base64URL.encodeStandard(Array("u:p".utf8))
        var direct = Self.intake(auth: "u:p")
        #expect(Self.steps(&direct, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") == ["401 authentication required (3dstape was started with --auth) WWW-Authenticate"])
        var proxied = Self.intake(connect: true, auth: "u:p")
        #expect(Self.steps(&proxied, "CONNECT a.test:443 HTTP/1.1\r\n\r\n") == ["407 authentication required (3dstape was started with --auth) Proxy-Authenticate"])
        var ok = Self.intake(connect: true, auth: "u:p")
        #expect(Self.steps(&ok, "CONNECT a.test:443 HTTP/1.1\r\nProxy-Authorization: \(auth)\r\n\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n")
                == ["intercept a.test:443", "GET /x 0 at 1.5"], "inside an accepted tunnel, no second ask")
    }

    @Test func malformedAndOversizedRequestsAreRefusedWithTheirStatus() {
        var limits = HTTPLimits()
        limits.maxBodyBytes = 10
        for (text, status) in [("GET / HTTP/1.1\r\nHost x\r\n\r\n", "400"), ("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", "413"),
                               ("GET / HTTP/1.1\r\nX: \(String(repeating: "a", count: 70_000))\r\n\r\n", "431")] {
            var i = Self.intake(limits: limits)
            #expect(Self.steps(&i, text).first?.hasPrefix(status + " ") == true, "\(status)")
        }
    }

    /// `HTTPServer` on loopback: a client that waits for `100 Continue` gets it before sending its body, and a CONNECT
    /// to a server that is no proxy is refused.
    @Test func aServerAnswersContinueAndRefusesConnect() throws {
        let server = try LoopbackServer("intake-test") { request, _, respond in
            respond(.json(Array("{\"got\":\(request.body.count)}".utf8)))
        }
        defer { server.stop() }

        let c = try RawClient(port: Int(server.address.port))
        try c.send("POST /x HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
        #expect(try c.read(until: "\r\n\r\n") == "HTTP/1.1 100 Continue\r\n\r\n", "before any body byte is sent")
        try c.send("hello")
        #expect(try c.read(until: "{\"got\":5}").hasPrefix("HTTP/1.1 200"))

        let d = try RawClient(port: Int(server.address.port))
        try d.send("CONNECT acs.test:443 HTTP/1.1\r\nHost: acs.test:443\r\n\r\n")
        #expect(try d.read(until: "}").hasPrefix("HTTP/1.1 405"))
    }

    /// A reply's head and body go out in one gathered write; when the client reads late the socket takes only part of
    /// them, and the rest follows from the connection's queue, every byte in order, before the next reply.
    @Test func aLargeReplyReadLateArrivesWholeAndInOrder() throws {
        let big = (0..<(8 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 13) }
        let server = try LoopbackServer("gathered-write-test") { request, _, respond in
            respond(request.head.target == "/big" ? HTTPReply(status: 200, headers: [("Content-Type", "application/octet-stream")], body: big)
                                                  : .json(Array("{\"small\":true}".utf8)))
        }
        defer { server.stop() }

        let c = try RawClient(port: Int(server.address.port))
        try c.send("GET /big HTTP/1.1\r\nHost: t\r\n\r\nGET /small HTTP/1.1\r\nHost: t\r\n\r\n")
        usleep(300_000) // the server has written what the socket takes and queued the rest
        let got = try c.readBytes(count: 200 + big.count + 200, until: Array("{\"small\":true}".utf8))
        let headEnd = try #require(got.firstRange(of: Array("\r\n\r\n".utf8))).upperBound
        let head = String(decoding: got[..<headEnd], as: UTF8.self)
        #expect(head.hasPrefix("HTTP/1.1 200") && head.contains("Content-Length: \(big.count)\r\n"))
        #expect(got.count >= headEnd + big.count && Array(got[headEnd..<(headEnd + big.count)]) == big)
        #expect(String(decoding: got[(headEnd + big.count)...], as: UTF8.self).hasPrefix("HTTP/1.1 200"), "the second reply after the whole first")
    }
}

/// A blocking loopback TCP client for byte-level checks (2 s receive timeout).
final class RawClient {
    let fd: Int32
    init(port: Int) throws {
        fd = socket(AF_INET, Platform.streamType, 0)
        var tv = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else { close(fd); throw NetError("connect to 127.0.0.1:\(port)", code: errno) }
    }
    deinit { close(fd) }
    func send(_ text: String) throws {
        let b = Array(text.utf8)
        guard SystemCall.send(fd, b, b.count, 0) == b.count else { throw NetError("send", code: errno) }
    }
    /// Reads bytes until `tail` ends them (or `count` have come, the timeout, or the peer closes).
    func readBytes(count: Int, until tail: [UInt8]) throws -> [UInt8] {
        var got: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 1 << 16)
        while got.count < count, !(got.count >= tail.count && Array(got.suffix(tail.count)) == tail) {
            let n = recv(fd, &buf, buf.count, 0)
            if n <= 0 { break }
            got += buf[0..<n]
        }
        return got
    }
    /// Reads until `marker` has arrived (or the timeout, or the peer closes).
    func read(until marker: String) throws -> String {
        var got: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while !String(decoding: got, as: UTF8.self).contains(marker) {
            let n = recv(fd, &buf, buf.count, 0)
            if n <= 0 { break }
            got += buf[0..<n]
        }
        return String(decoding: got, as: UTF8.self)
    }
}
