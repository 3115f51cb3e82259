import Dispatch
import Foundation

/// An event loop on a thread of its own, for the commands and tests that run servers in the background (the demo's
/// sandbox, recorder and replayer, the client's RReq listener): started once, and stopped in one call that closes
/// the loop's servers on the loop's own thread, ends the loop and waits for the thread.
public final class LoopThread {
    public let loop: EventLoop
    private let thread: Thread
    private let ended = DispatchSemaphore(value: 0)
    private var started = false

    public init(name: String) throws(NetError) {
        let loop = try EventLoop()
        let ended = self.ended
        self.loop = loop
        thread = Thread {
            // Set from the thread itself (Foundation on Linux does not pass a name given before start; Foundation names it
            // by each platform's call), and cut to what the platform keeps (Linux: 15 bytes, a longer name is refused whole).
            Thread.current.name = String(name.utf8.prefix(Platform.threadNameLimit)) ?? name
            loop.run()
            ended.signal()
        }
    }

    /// Starts the loop's thread (set up servers on the loop before, or with `loop.execute` after).
    public func start() {
        guard !started else { return }
        started = true
        thread.start()
    }

    /// Runs `cleanup` on the loop's thread (close servers there, the only thread that may touch them), stops the
    /// loop and returns once its thread has ended.
    public func stop(_ cleanup: @escaping @Sendable () -> Void = {}) {
        guard started else { return } // never started: nothing runs on the loop, and no thread to wait for
        started = false
        loop.execute(cleanup)
        loop.stop()
        ended.wait()
    }
}
