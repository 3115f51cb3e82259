import Foundation
import Testing
import TapCore

/// `ThreadPriority` changes the calling thread's nice value only (on Linux each thread has its own).
@Suite struct ThreadPriorityTests {
    #if os(Linux)
    @Test func loweringOneThreadLeavesTheOthersAlone() throws {
        let before = try #require(ThreadPriority.current)
        let seen = Locked<(Int32?, Bool)>((nil, false))
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            let changed = ThreadPriority.lowerCurrent(by: 3)
            seen.withLock { $0 = (ThreadPriority.current, changed) }
            done.signal()
        }
        thread.start()
        done.wait()
        let (other, changed) = seen.withLock { $0 }
        #expect(changed == (before < 19))
        #expect(other == min(before + 3, 19))
        #expect(ThreadPriority.current == before, "the calling thread keeps its own")
    }
    #endif
}
