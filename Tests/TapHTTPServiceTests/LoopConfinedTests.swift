import Dispatch
import Testing
import TapCore
import TapNet

/// `LoopConfined` checks the thread it is touched on: on the loop (or before the loop runs) it may be, elsewhere not,
/// which in debug builds traps in `value`; the check itself is tested here without trapping.
@Suite struct LoopConfinedTests {
    @Test func theCheckFollowsTheLoopsThread() throws {
        let thread = try LoopThread(name: "3dstape-test-confined")
        let confined = LoopConfined([Int](), on: thread.loop)
        // Before the loop runs, its owner is being set up: allowed.
        #expect(confined.isOnLoop)
        confined.value.append(1)
        thread.start()
        let onLoop = Locked<Bool?>(nil)
        let done = DispatchSemaphore(value: 0)
        thread.loop.execute {
            onLoop.withLock { $0 = confined.isOnLoop }
            confined.value.append(2)
            done.signal()
        }
        done.wait()
        #expect(onLoop.withLock { $0 } == true)
        // The test's own thread, while the loop runs on another: not allowed (`value` here would trap in a debug build).
        #expect(!confined.isOnLoop)
        thread.stop()
    }
}
