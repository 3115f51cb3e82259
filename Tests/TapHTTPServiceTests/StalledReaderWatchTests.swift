import Testing
import TapHTTPService

/// The stalled-reader rule on its own: the rest of the idle timeout, then the kernel's queue looked at twice.
@Suite struct StalledReaderWatchTests {
    static let policy = ConnectionPolicy(idleTimeout: 5)
    static let second: UInt64 = 1_000_000_000

    @Test func waitsTheRestOfTheIdleTimeoutFromTheLastDrain() {
        var w = StalledReaderWatch()
        w.drained(at: 10 * Self.second)
        var asked = 0
        let v = w.deadlinePassed(at: 12 * Self.second, policy: Self.policy) { asked += 1; return 100 }
        #expect(v == .wait(seconds: 3) && asked == 0, "the kernel is not asked before the idle timeout: \(v)")
    }

    @Test func aQueueThatShrinksBetweenTwoLooksIsAReader() {
        var w = StalledReaderWatch()
        w.drained(at: 0)
        #expect(w.deadlinePassed(at: 5 * Self.second, policy: Self.policy) { 2_500_000 } == .wait(seconds: 1))
        #expect(w.deadlinePassed(at: 6 * Self.second, policy: Self.policy) { 2_480_000 } == .wait(seconds: 5))
        #expect(w.lastDrainNanos == 6 * Self.second, "reading starts the idle timeout again")
        // and then nothing moves: one more look, then stalled
        #expect(w.deadlinePassed(at: 11 * Self.second, policy: Self.policy) { 2_480_000 } == .wait(seconds: 1))
        #expect(w.deadlinePassed(at: 12 * Self.second, policy: Self.policy) { 2_480_000 } == .stalled)
    }

    @Test func nothingQueuedOrAnUnknownQueueIsStalled() {
        var empty = StalledReaderWatch(), unknown = StalledReaderWatch()
        #expect(empty.deadlinePassed(at: 5 * Self.second, policy: Self.policy) { 0 } == .stalled)
        #expect(unknown.deadlinePassed(at: 5 * Self.second, policy: Self.policy) { nil } == .stalled)
    }

    @Test func aDrainForgetsTheLastLook() {
        var w = StalledReaderWatch()
        #expect(w.deadlinePassed(at: 5 * Self.second, policy: Self.policy) { 1000 } == .wait(seconds: 1))
        w.drained(at: 5 * Self.second + 1)
        // a new wait: the first look after it only looks, whatever the count was before the drain
        #expect(w.deadlinePassed(at: 11 * Self.second, policy: Self.policy) { 2000 } == .wait(seconds: 1))
    }
}
