import Dispatch
import Testing
import TapCore
import TapNet

/// Hardening, round two, defect 2: `EventLoop.schedule` computed `UInt64(seconds * 1e9)`, which trapped (exit 132) on
/// `--idle-timeout inf` or a 1e11 s replay delay. Whatever a caller passes, the timer now saturates: a huge or infinite
/// wait never fires, NaN or a negative one fires at once, and the loop goes on serving the others.
@Suite struct EventLoopTimerTests {
    @Test func hugeInfiniteAndNaNWaitsNeitherTrapNorStopTheLoop() throws {
        let thread = try LoopThread(name: "3dstape-timers")
        let fired = Locked<[String]>([])
        let done = DispatchSemaphore(value: 0)
        let loop = thread.loop
        loop.execute {
            let waits: [(String, Double)] = [("inf", .infinity), ("1e300", 1e300), ("1e11", 1e11), ("max", .greatestFiniteMagnitude),
                                             ("2^64 ns", 18_446_744_074), ("nan", .nan), ("-inf", -.infinity), ("-1", -1)]
            for (name, seconds) in waits { loop.schedule(after: seconds) { fired.withLock { $0.append(name) } } }
            loop.schedule(after: 0.05) { done.signal() }
        }
        thread.start()
        defer { thread.stop() }
        #expect(done.wait(timeout: .now() + 10) == .success, "a short timer after the huge ones still fires")
        #expect(Set(fired.withLock { $0 }) == ["nan", "-inf", "-1"], "only the waits that are due at once ran")
    }
}
