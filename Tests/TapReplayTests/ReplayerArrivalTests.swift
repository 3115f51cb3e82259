import Dispatch
import Foundation
import Testing
import TapCore
import TapHTTPService
import TapNet
@testable import TapReplay
import TapTestSupport

/// Issue 26, the replayer's timing error at the client: a delay counts from when the request reached the replayer's
/// socket (its last byte, as the client sent it), not from when the loop came to it.
@Suite struct ReplayerArrivalTests {
    /// The loop is held busy while a request with a 50 ms delay arrives, for longer than the delay: its answer is due as
    /// soon as the loop takes it, and its actual delay, as recorded, counts the time it waited in the socket (before, the
    /// delay started when the loop read it: the client waited the hold and 50 ms more, and the record said 50 ms).
    /// (Where the kernel gives no receive time, the POSIX-only build, a delay counts from the read, as before.)
    @Test(.enabled(if: Platform.stampsReceiveTimes)) func aDelayCountsFromTheRequestsArrivalNotFromWhenTheLoopTookIt() throws {
        var options = ReplayOptions()
        options.schedule.rules = [try #require(DelayRule.parse("path:/chunked=50ms"))]
        let lines = Locked<[ReplayLine]>([])
        let running = try ReplayerPipeliningTests.Running(options, tls: false) { line in lines.withLock { $0.append(line) } }
        defer { running.stack.stop() }
        let client = try PipelineClient(port: running.port)
        let holding = DispatchSemaphore(value: 0)
        let heldUntil = Locked<UInt64>(0)
        running.stack.loop.execute {
            holding.signal()
            usleep(150_000) // the loop does nothing else meanwhile
            heldUntil.withLock { $0 = EventLoop.nowNanos() }
        }
        #expect(holding.wait(timeout: .now() + 10) == .success)
        try client.send("GET /chunked HTTP/1.1\r\nHost: a\r\n\r\n")
        let sent = EventLoop.nowNanos()
        let answers = try client.responses(1)
        #expect(answers.first?.head.status == 200)
        let deadline = Date().addingTimeInterval(5)
        while lines.withLock({ $0.isEmpty }), Date() < deadline { usleep(10_000) }
        let line = try #require(lines.withLock { $0.first })
        let waitedInSocket = Double(heldUntil.withLock { $0 } - sent) / 1e6 // at least this long before the loop read it
        #expect(line.scheduledMs == 50)
        let actual = try #require(line.actualMs)
        #expect(actual >= waitedInSocket, "actual \(actual) ms; the request waited \(waitedInSocket) ms in the socket")
        #expect(waitedInSocket > 50, "the hold outlasted the delay (\(waitedInSocket) ms)")
    }
}
