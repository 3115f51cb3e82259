import Foundation
import Synchronization
import Testing
import TapHTTP
import TapHTTPService
import TapNet
import TapTestSupport

/// `HTTPServer` against clients that pipeline many requests, do not read their answers, half-close, or send what
/// RFC 9112 refuses: every server 3dstape runs on it (replayer, sandbox, web inspector, RReq listener) gets this.
@Suite struct HTTPServerPipeliningTests {
    /// An `HTTPServer` on a loop of its own; `configure` runs before it starts, `handler` gets the server's loop.
    final class Running: @unchecked Sendable {
        // Safe: `server` is touched only on the loop (through `onLoop`) once the stack has started.
        let stack: ServiceStack
        let server: HTTPServer
        let port: UInt16
        let aborts = Atomic<Int>(0)

        init(configure: (HTTPServer) -> Void = { _ in },
             handler: @escaping (_ loop: EventLoop, _ request: HTTPRequest, _ respond: @escaping (HTTPReply) -> Void) -> Void) throws {
            let stack = try ServiceStack.background("3dstape-test-http-pipeline")
            let loop = stack.loop
            server = HTTPServer(loop: loop) { request, _, respond in handler(loop, request, respond) }
            configure(server)
            port = try server.start(on: HostPort(host: "127.0.0.1", port: 0)).port
            self.stack = stack
            let server = self.server
            server.onClientAbort = { [weak self] _ in self?.aborts.add(1, ordering: .relaxed) }
            stack.onStop { server.stop() }
            stack.start()
        }

        /// `read(server)` on the server's loop, waited for.
        func onLoop<T: Sendable>(_ read: @escaping @Sendable (HTTPServer) -> T) -> T {
            let box = Mutex<T?>(nil)
            let done = DispatchSemaphore(value: 0)
            let server = UnsafeServer(server: server)
            stack.loop.execute {
                box.withLock { $0 = read(server.server) }
                done.signal()
            }
            done.wait()
            return box.withLock { $0! }
        }

        /// Polls `condition` on the loop every 20 ms until it holds (true) or `seconds` pass (false).
        func eventually(within seconds: Double = 5, _ condition: @escaping @Sendable (HTTPServer) -> Bool) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if onLoop(condition) { return true }
                usleep(20_000)
            }
            return false
        }
    }

    /// The server, carried to its loop's thread.
    struct UnsafeServer: @unchecked Sendable {
        // Safe: only dereferenced inside `loop.execute`, on the loop thread.
        let server: HTTPServer
    }

    /// Each request's target comes back as its body: every 7th after a millisecond on the loop, the others at once,
    /// from inside the handler's call. 5,000 pipelined requests (the stack used to grow by one handler call per
    /// answer given at once) are all answered, in order.
    @Test func fiveThousandPipelinedRequestsAnsweredInOrder() throws {
        let running = try Running { loop, request, respond in
            let reply = HTTPReply(status: 200, body: Array(request.head.target.utf8))
            if request.head.target.hasSuffix("7") { loop.schedule(after: 0.001) { respond(reply) } } else { respond(reply) }
        }
        defer { running.stack.stop() }
        let client = try PipelineClient(port: running.port)
        let count = 5000
        try client.send((0..<count).map { "GET /\($0) HTTP/1.1\r\nHost: a\r\n\r\n" }.joined())
        let answers = try client.responses(count)
        #expect(answers.count == count)
        #expect(answers.enumerated().allSatisfy { String(decoding: $0.element.body, as: UTF8.self) == "/\($0.offset)" })
    }

    /// A client that pipelines 2,000 requests for 32 KiB answers and reads none: the server stops reading and answering
    /// while `maxUnsentBytes` wait for it (before: every answer was queued, 7 GB for `web`), goes on when the client
    /// reads, and holds nothing once it has left.
    @Test func aClientThatDoesNotReadHoldsNoMoreThanTheLimit() throws {
        let limit = 256 << 10
        let answer = [UInt8](repeating: 0x61, count: 32 << 10)
        let answered = Atomic<Int>(0)
        let running = try Running(configure: { $0.maxUnsentBytes = limit }) { _, _, respond in
            answered.add(1, ordering: .relaxed)
            respond(HTTPReply(status: 200, body: answer))
        }
        defer { running.stack.stop() }
        let count = 2000
        let client = try PipelineClient(port: running.port, receiveBuffer: 16 << 10)
        try client.send(String(repeating: "GET /app.js HTTP/1.1\r\nHost: a\r\n\r\n", count: count))

        // The answers stop coming once the kernel's buffers and the limit are full.
        var last = -1
        for _ in 0..<50 where answered.load(ordering: .relaxed) != last {
            last = answered.load(ordering: .relaxed)
            usleep(100_000)
        }
        let (peak, unsent) = running.onLoop { ($0.peakUnsentBytes, $0.unsentBytes) }
        #expect(answered.load(ordering: .relaxed) < count, "the server stopped answering a client that does not read")
        #expect(unsent > 0 && unsent <= limit + answer.count + 200, "queued now: \(unsent)")
        #expect(peak <= limit + answer.count + 200, "queued at most: \(peak) (limit \(limit))")

        // Reading resumes the server: every answer comes.
        let answers = try client.responses(count)
        #expect(answers.count == count && answers.allSatisfy { $0.head.status == 200 && $0.body.count == answer.count })
        #expect(running.onLoop { $0.peakUnsentBytes } <= limit + answer.count + 200)
    }

    /// A client that leaves while its answers wait: its connection and everything queued for it go.
    @Test func aClientThatLeavesUnreadFreesItsConnection() throws {
        let answer = [UInt8](repeating: 0x62, count: 64 << 10)
        let running = try Running(configure: { $0.maxUnsentBytes = 128 << 10 }) { _, _, respond in respond(HTTPReply(status: 200, body: answer)) }
        defer { running.stack.stop() }
        do {
            let client = try PipelineClient(port: running.port, receiveBuffer: 16 << 10)
            try client.send(String(repeating: "GET / HTTP/1.1\r\nHost: a\r\n\r\n", count: 500))
            #expect(running.eventually { $0.unsentBytes > 0 }, "answers wait for the client")
        } // the client closes here
        #expect(running.eventually { $0.connectionCount == 0 && $0.unsentBytes == 0 && $0.bufferedBytes == 0 })
    }

    /// Two pipelined requests, then `shutdown(SHUT_WR)`: both are answered (200 ms later, from a timer), then the server
    /// closes; nobody gave up. An incomplete third request is dropped with the connection.
    @Test func aHalfClosedClientIsAnsweredThenClosed() throws {
        let running = try Running { loop, request, respond in
            loop.schedule(after: 0.2) { respond(HTTPReply(status: 200, body: Array(request.head.target.utf8))) }
        }
        defer { running.stack.stop() }
        let client = try PipelineClient(port: running.port)
        try client.send("GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\nGET /3 HTTP/1.1\r\nHo")
        client.shutdownWrite()
        let answers = try client.responses(3)
        #expect(answers.map { String(decoding: $0.body, as: UTF8.self) } == ["/1", "/2"])
        #expect(try client.serverClosed())
        #expect(running.aborts.load(ordering: .relaxed) == 0)
        #expect(running.eventually { $0.connectionCount == 0 })
    }

    /// RFC 9112 §2.2 and §3.2 through a real server: lines ended by a bare LF are refused at once (they used to wait for
    /// the 30 s header timeout: no CRLFCRLF ever came), and so are two Host lines.
    @Test(arguments: ["GET / HTTP/1.1\nHost: a\n\n", "GET / HTTP/1.1\r\nHost: a\nX: b\r\n", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"])
    func malformedHeadsAre400AtOnce(head: String) throws {
        let running = try Running(configure: { $0.headerTimeout = 30 }) { _, _, respond in respond(HTTPReply(status: 200)) }
        defer { running.stack.stop() }
        let client = try PipelineClient(port: running.port, timeout: 5)
        let started = Date()
        try client.send(head)
        let answers = try client.responses(1)
        #expect(answers.first?.head.status == 400, "\(head.debugDescription)")
        #expect(Date().timeIntervalSince(started) < 2)
        #expect(try client.serverClosed())
    }
}
