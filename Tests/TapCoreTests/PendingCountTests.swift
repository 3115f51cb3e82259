import Foundation
import Testing
import TapCore

@Suite struct PendingCountTests {
    @Test func countsWhatIsUnderWayAndNeverGoesBelowZero() {
        let c = PendingCount()
        #expect(c.value == 0 && c.waitForNone(within: 0))
        c.begin(); c.begin()
        #expect(c.value == 2)
        c.end()
        #expect(c.value == 1 && !c.waitForNone(within: 0.01))
        c.end(); c.end()
        #expect(c.value == 0, "an extra end leaves it at 0")
    }

    @Test func waitForNoneReturnsOnceAnotherThreadEndsTheLast() {
        let c = PendingCount()
        c.begin()
        let ended = Date().addingTimeInterval(0.1)
        Thread.detachNewThread { usleep(100_000); c.end() }
        #expect(c.waitForNone(within: 5))
        #expect(Date() >= ended.addingTimeInterval(-0.01), "it waited for the end")
    }
}
