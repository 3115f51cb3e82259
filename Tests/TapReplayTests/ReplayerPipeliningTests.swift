import Foundation
import Testing
import TapCore
import TapCrypto
import TapHTTPService
import TapNet
@testable import TapReplay
import TapTestSupport

/// The replayer on loopback against clients that pipeline, half-close or leave: issue 23's reproductions.
@Suite struct ReplayerPipeliningTests {
    /// A replayer of the reverse-mode sample on its own loop (no session file), plain or HTTPS.
    struct Running {
        let stack: ServiceStack
        let replayer: Replayer
        let port: UInt16

        init(_ options: ReplayOptions, tls: Bool, stoppedByUser: Bool = false, report: @escaping @Sendable (ReplayLine) -> Void = { _ in }) throws {
            let engine = ReplayEngine(catalog: try ReplayEngineTests.catalog("sample-reverse.3dstape"), options: options,
                                      identity: try ReplayEngineTests.Trust().identity)
            stack = try ServiceStack.background("3dstape-test-replay-pipeline")
            let replayer = Replayer(loop: stack.loop, engine: engine, writer: nil, outgoingTLS: try TLSContext(clientRoots: nil), report: report)
            var serverTLS: TLSContext?
            if tls {
                let ca = try CertificateAuthority.selfSigned(commonName: "Replay pipelining test CA", key: try PrivateKey.generateP256())
                serverTLS = try TLSContext(interceptingWith: try LeafCertificateCache(authority: ca))
            }
            port = try replayer.start(on: HostPort(host: "127.0.0.1", port: 0), tls: serverTLS, intercepting: nil, scheme: tls ? "https" : "http").port
            self.replayer = replayer
            stack.onStop { replayer.stop(byUser: stoppedByUser) }
            stack.start()
        }
    }

    /// 2,000 `GET /x` sent at once on one connection (50 KB) used to overflow the stack after about 1,100 answers: the
    /// server and the replayer's handler called each other once per answer given at once (misses, `--timing none`).
    @Test(arguments: [false, true])
    func twoThousandPipelinedMissesAreAllAnswered(tls: Bool) throws {
        var options = ReplayOptions()
        options.schedule.timing = .none
        let running = try Running(options, tls: tls)
        let client = try PipelineClient(port: running.port, tls: tls)
        let count = 2000
        try client.send(String(repeating: "GET /x HTTP/1.1\r\nHost: a\r\n\r\n", count: count))
        let answers = try client.responses(count)
        running.stack.stop()
        #expect(answers.count == count)
        #expect(answers.allSatisfy { $0.head.status == 404 })
        #expect(running.replayer.counts.missed == count)
    }

    /// A client that shuts down its sending side after its request (`shutdown(SHUT_WR)`) has not given up: its answer,
    /// due 300 ms later, is sent, then the connection is closed.
    @Test func aHalfClosedClientGetsItsDelayedAnswer() throws {
        var options = ReplayOptions()
        options.schedule.rules = [try #require(DelayRule.parse("path:/chunked=300ms"))]
        let running = try Running(options, tls: false)
        let client = try PipelineClient(port: running.port)
        let started = Date()
        try client.send("GET /chunked HTTP/1.1\r\nHost: a\r\n\r\n")
        client.shutdownWrite()
        let answers = try client.responses(1)
        let waited = Date().timeIntervalSince(started)
        #expect(try client.serverClosed())
        running.stack.stop()
        #expect(answers.first?.head.status == 200)
        #expect(waited >= 0.25, "the answer kept its delay (\(waited) s)")
        #expect(running.replayer.counts.answered == 1 && running.replayer.counts.aborted == 0, "\(running.replayer.counts)")
    }
    /// A `/chunked` request whose answer waits 5 s, on a replayer the user stops (Ctrl-C) once it holds the request
    /// (read on its loop, after `beforeStop` ran on the client, not after a fixed time): the replay line it leaves, and
    /// the replayer's counts.
    func stoppedWhileAnAnswerWaits(_ beforeStop: (PipelineClient) -> Void = { _ in }) throws
        -> (line: ReplayLine, counts: (answered: Int, closing: Int, missed: Int, aborted: Int, rreqs: Int, rreqsUndelivered: Int,
                                      rreqsDropped: Int, cutShort: Int)) {
        var options = ReplayOptions()
        options.schedule.rules = [try #require(DelayRule.parse("path:/chunked=5s"))]
        let lines = Locked<[ReplayLine]>([])
        let running = try Running(options, tls: false, stoppedByUser: true) { line in lines.withLock { $0.append(line) } }
        let client = try PipelineClient(port: running.port)
        try client.send("GET /chunked HTTP/1.1\r\nHost: a\r\n\r\n")
        beforeStop(client)
        let unanswered = Locked(0)
        let replayer = running.replayer
        let deadline = Date().addingTimeInterval(5)
        repeat { // at least one round, so that what `beforeStop` sent (a FIN) has reached the loop
            running.stack.loop.execute { let n = replayer.held.unanswered; unanswered.withLock { $0 = n } }
            usleep(50_000)
        } while unanswered.withLock({ $0 }) == 0 && Date() < deadline
        #expect(unanswered.withLock { $0 } == 1)
        running.stack.stop()
        _ = client
        return (try #require(lines.withLock { $0.first }), running.replayer.counts)
    }

    /// A replayer stopped (Ctrl-C) while an answer waits for its delay records that exchange as cut short by the replayer,
    /// not as a client that gave up (which the closing of its connection made it look like before).
    @Test func anAnswerStillDelayedWhenTheReplayerStopsIsRecordedAsCutShortNotAsGivenUp() throws {
        let (line, counts) = try stoppedWhileAnAnswerWaits()
        #expect(line.outcome.hasPrefix("replayer stopped after ") && line.status == nil, "\(line.outcome)")
        #expect(counts.aborted == 0 && counts.cutShort == 1, "\(counts)")
    }

    /// A client that sent its FIN while its answer waited, then the replayer stopped: it gave up at its FIN, as when the
    /// answer would have come after it.
    @Test func aClientThatSentItsFINBeforeTheStopIsRecordedAsGivingUpThen() throws {
        let (line, counts) = try stoppedWhileAnAnswerWaits { $0.shutdownWrite() }
        #expect(line.outcome.hasPrefix("client gave up after ") && line.outcome.contains("(its FIN); replayer stopped after"), "\(line.outcome)")
        #expect(counts.aborted == 1 && counts.cutShort == 0, "\(counts)")
    }

    /// A client that closes its connection (a FIN, as `close()` sends) while its answer is delayed gave up then: the
    /// answer still goes out (the FIN could be a half-close), and the line and record carry the moment of the FIN, not of
    /// the answer (merged, the half-close handling had made a timed-out client look as if it waited the whole delay).
    @Test func aClientThatClosesWhileWaitingIsRecordedAsGivingUpThen() throws {
        var options = ReplayOptions()
        options.schedule.rules = [try #require(DelayRule.parse("path:/chunked=800ms"))]
        let lines = Locked<[ReplayLine]>([])
        let running = try Running(options, tls: false) { line in lines.withLock { $0.append(line) } }
        do {
            let client = try PipelineClient(port: running.port)
            try client.send("GET /chunked HTTP/1.1\r\nHost: a\r\n\r\n")
            usleep(200_000)
            _ = client // closed here: the client gives up after 200 ms
        }
        let deadline = Date().addingTimeInterval(5)
        while lines.withLock({ $0.isEmpty }), Date() < deadline { usleep(20_000) }
        running.stack.stop()
        let outcome = try #require(lines.withLock { $0.first?.outcome })
        let fin = try #require(outcome.range(of: "after the client's FIN at ").map { Double(outcome[$0.upperBound...].prefix { $0.isNumber || $0 == "." }) } ?? nil,
                               "\(outcome)")
        #expect(fin >= 150 && fin < 600, "the FIN came after 200 ms, the answer at 800 ms: \(outcome)")
    }
}
