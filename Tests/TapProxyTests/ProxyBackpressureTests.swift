import Foundation
import Testing
import TapCore
import TapCrypto
import TapHTTPService
import TapNet
import TapProxy
import TapRecording
import TapSQLite
import TapStore
import TapTestSupport

/// The recorder's backpressure end to end on loopback: with the session file locked by another connection the
/// writer falls behind, requests are first paced and then held until it catches up, and the proxy counts both,
/// says so in its summary and notes it in the session.
@Suite struct ProxyBackpressureTests {
    @Test func pacedAndHeldRequestsAreCountedAndNoted() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-backpressure-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("s.3dstape").path

        let stack = try ServiceStack.background("3dstape-test-backpressure")
        let upstream = HTTPServer(loop: stack.loop) { _, _, respond in respond(.json(Array(#"{"messageType":"ARes"}"#.utf8))) }
        let up = try upstream.start(on: HostPort(host: "127.0.0.1", port: 0))
        let writer = try SessionWriter(path: path, meta: [("label", "backpressure")])
        let config = ProxyConfiguration(mode: .reverse(UpstreamURL("http://\(up)")!), upstreamTLS: try TLSContext(clientRoots: []), interceptTLS: nil)
        let proxy = ProxyServer(loop: stack.loop, config: config, writer: writer)
        proxy.writerBacklogLimit = 8 // pacing from 2 waiting events, holding above 8 (each request here is 3: open, exchange, close)
        let address = try proxy.listen(on: HostPort(host: "127.0.0.1", port: 0))
        stack.onStop { proxy.shutdown(); upstream.stop() }
        stack.finally { writer.close() }
        stack.start()

        // Another process's exclusive transaction keeps the writer from committing until the requests stall.
        let count = 10
        let load = try LockedSessionLoad.run(sessionPath: path, url: HTTPURL("http://\(address)/ds/areq")!, count: count,
                                             minimumBeforeStall: 3) { Array(#"{"messageType":"AReq","n":\#($0)}"#.utf8) }
        #expect(load.answeredWhileLocked < count, "some requests wait for the writer while the file is locked")
        #expect(load.completed)
        stack.stop()
        // Read once the loop has stopped: a client may have its answer a moment before the proxy counts the exchange.
        let stats = proxy.stats

        #expect(load.statuses == Array(repeating: 200, count: count))
        #expect(stats.backpressure.pacedCount >= 1 && stats.backpressure.pacedSeconds > 0, "\(stats)")
        #expect(stats.backpressure.heldCount >= 1 && stats.backpressure.longestHoldSeconds >= 0.4, "\(stats)")
        let summary = try #require(stats.backpressureSummary)
        #expect(summary.contains("requests waited") && summary.contains("held until it caught up"), "\(summary)")
        let reader = try Database(path: path, mode: .readOnly)
        #expect(try reader.query("SELECT count(*) FROM exchanges")[0][0].integer == Int64(count))
        let notes = try reader.query("SELECT detail FROM events WHERE kind = 'backpressure'")
        #expect(notes.count == 1 && notes.first?.first?.text == summary)
    }

    @Test func theSummarySaysOnlyWhatHappened() {
        var stats = ProxyStats()
        #expect(stats.backpressureSummary == nil, "nothing waited")
        stats.exchanges = 40
        stats.backpressure.heldCount = 2
        stats.backpressure.longestHoldSeconds = 0.0125
        #expect(stats.backpressureSummary?.hasPrefix("the session writer fell behind the traffic: 2 of 40 requests were held until it caught up (the longest 12.5 ms);") == true,
                "\(stats.backpressureSummary ?? "")")
        stats.backpressure.pacedCount = 4
        stats.backpressure.pacedSeconds = 0.002
        #expect(stats.backpressureSummary?.contains("4 of 40 requests waited 0.500 ms on average (2.0 ms in all) and 2 were held") == true,
                "\(stats.backpressureSummary ?? "")")
    }
}

/// A client that pipelines requests for large answers and reads none, through the recorder on loopback: the recorder
/// stops forwarding once the answers waiting for it pass the high-water mark (before: it forwarded every request and
/// held every answer), and goes on when the client reads.
@Suite struct ProxyOutputBackpressureEndToEndTests {
    @Test func aClientThatDoesNotReadLargeAnswersIsNotAnsweredAhead() throws {
        let stack = try ServiceStack.background("3dstape-test-output-backpressure")
        let answer = [UInt8](repeating: 0x61, count: 32 << 10)
        let forwarded = Locked(0)
        let upstream = HTTPServer(loop: stack.loop) { _, _, respond in
            forwarded.withLock { $0 += 1 }
            respond(HTTPReply(status: 200, body: answer))
        }
        let up = try upstream.start(on: HostPort(host: "127.0.0.1", port: 0))
        let config = ProxyConfiguration(mode: .reverse(UpstreamURL("http://\(up)")!), upstreamTLS: try TLSContext(clientRoots: []), interceptTLS: nil)
        let proxy = ProxyServer(loop: stack.loop, config: config, writer: nil)
        let address = try proxy.listen(on: HostPort(host: "127.0.0.1", port: 0))
        stack.onStop { proxy.shutdown(); upstream.stop() }
        stack.start()
        defer { stack.stop() }

        let count = 1000 // 32 MiB of answers
        let client = try PipelineClient(port: address.port, receiveBuffer: 16 << 10)
        try client.send(String(repeating: "GET /big HTTP/1.1\r\nHost: p\r\n\r\n", count: count))
        var last = -1
        for _ in 0..<50 where forwarded.withLock({ $0 }) != last {
            last = forwarded.withLock { $0 }
            usleep(100_000)
        }
        #expect(last < count / 2, "the recorder stopped forwarding for a client that does not read: \(last) of \(count)")

        let answers = try client.responses(count)
        #expect(answers.count == count && answers.allSatisfy { $0.head.status == 200 && $0.body.count == answer.count })
        #expect(forwarded.withLock { $0 } == count)
    }
}

/// A client that asks for a large answer on a connection that closes after it (`Connection: close`, HTTP/1.0) and reads
/// none of it: reset once it has taken nothing for the idle timeout (hostile tester: held with its answer in memory for
/// as long as it stayed connected; keep-alive clients were already closed).
@Suite struct ProxyClosingStalledReaderEndToEndTests {
    @Test func aClientThatDoesNotReadItsLastAnswerIsResetAfterTheIdleTimeout() throws {
        let stack = try ServiceStack.background("3dstape-test-closing-stalled")
        let answer = [UInt8](repeating: 0x61, count: 8 << 20)
        let upstream = HTTPServer(loop: stack.loop) { _, _, respond in respond(HTTPReply(status: 200, body: answer)) }
        let up = try upstream.start(on: HostPort(host: "127.0.0.1", port: 0))
        var config = ProxyConfiguration(mode: .reverse(UpstreamURL("http://\(up)")!), upstreamTLS: try TLSContext(clientRoots: []), interceptTLS: nil)
        config.idleTimeout = 0.3
        let proxy = ProxyServer(loop: stack.loop, config: config, writer: nil)
        let address = try proxy.listen(on: HostPort(host: "127.0.0.1", port: 0))
        stack.onStop { proxy.shutdown(); upstream.stop() }
        stack.start()
        defer { stack.stop() }

        for request in ["GET /big HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n", "GET /big HTTP/1.0\r\nHost: p\r\n\r\n"] {
            let client = try PipelineClient(port: address.port, receiveBuffer: 16 << 10, timeout: 5)
            try client.send(request)
            usleep(1_500_000) // five idle timeouts with nothing read
            let answers = try client.responses(1)
            #expect(answers.first?.body.count != answer.count,
                    "\(request.prefix(30).debugDescription): the stalled client was reset, not kept with its \(answer.count)-byte answer")
        }
    }
}

/// The recorder's client deadlines come from each connection's own timer, on time: a request begun and not complete is
/// answered 408 when the header timeout passes (before: a 250 ms sweep of every connection sent it up to 250 ms late).
@Suite struct ProxyDeadlineTimerTests {
    @Test func aRequestTimeoutIsAnsweredWhenItPassesNotAtTheNextSweep() throws {
        let stack = try ServiceStack.background("3dstape-test-deadline-timer")
        var config = ProxyConfiguration(mode: .reverse(UpstreamURL("http://127.0.0.1:9")!), upstreamTLS: try TLSContext(clientRoots: []),
                                        interceptTLS: nil)
        config.headerTimeout = 0.05
        let proxy = ProxyServer(loop: stack.loop, config: config, writer: nil)
        let address = try proxy.listen(on: HostPort(host: "127.0.0.1", port: 0))
        stack.onStop { proxy.shutdown() }
        stack.start()
        defer { stack.stop() }
        for _ in 0..<4 {
            let client = try PipelineClient(port: address.port)
            let sent = Date()
            try client.send("GET / HTTP/1.1\r\nHost: p\r\n")
            let answer = try client.responses(1)
            let waited = Date().timeIntervalSince(sent)
            #expect(answer.first?.head.status == 408, "\(answer)")
            #expect(waited >= 0.045 && waited < 0.2, "answered \(waited) s after the request began (timeout 0.05 s)")
        }
    }
}
