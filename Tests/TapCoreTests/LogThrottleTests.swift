import Testing
import TapCore

@Suite struct LogThrottleTests {
    @Test func oneLineASecondAtMost() {
        var t = LogThrottle()
        var allowed: [Bool] = []
        for now: UInt64 in [5, 500_000_000, 1_000_000_004, 1_000_000_005, 1_900_000_000] { allowed.append(t.allow(nowNanos: now)) }
        // The first line goes out; then only a second after the last one logged.
        #expect(allowed == [true, false, false, true, false])
    }
}
