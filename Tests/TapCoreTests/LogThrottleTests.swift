import Testing
import TapCore

@Suite struct LogThrottleTests {
    @Test func oneLineASecondAtMost() {
        var t = LogThrottle()
        #expect(t.allow(nowNanos: 5))                   // the first line always goes out
        #expect(!t.allow(nowNanos: 500_000_000))        // half a second later: held back
        #expect(!t.allow(nowNanos: 1_000_000_004))
        #expect(t.allow(nowNanos: 1_000_000_005))       // a second after the last one logged
        #expect(!t.allow(nowNanos: 1_900_000_000))
    }
}
