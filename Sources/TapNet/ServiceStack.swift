import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One place that runs servers on an event loop and takes them down in order: each server's stop on the loop's
/// thread (the last registered first), then the loop, then what must come after (closing the session writer, which
/// flushes what the servers recorded). The commands (`record`, `replay`, `sandbox`, `web`, `demo`, `timeouts`) and
/// the test harnesses assemble their servers on one, instead of wiring loop, threads, signals and writer by hand.
public final class ServiceStack {
    public let loop: EventLoop
    private let thread: LoopThread?
    private var stops: [@Sendable () -> Void] = []
    private var finals: [() -> Void] = []
    private var stopped = false

    private init(loop: EventLoop, thread: LoopThread?) {
        self.loop = loop
        self.thread = thread
    }

    /// A loop on a thread of its own: set servers up, `start()`, and `stop()` when done (the demo, the sweep, tests).
    public static func background(_ name: String) throws(NetError) -> ServiceStack {
        let t = try LoopThread(name: name)
        return ServiceStack(loop: t.loop, thread: t)
    }

    /// A loop that `runUntilSignal()` runs on the calling thread (the long-running commands).
    public static func foreground() throws(NetError) -> ServiceStack {
        ServiceStack(loop: try EventLoop(), thread: nil)
    }

    /// A server's stop, run on the loop's thread when the stack stops.
    public func onStop(_ stop: @escaping @Sendable () -> Void) { stops.append(stop) }

    /// Runs after the loop has ended (close the session writer here).
    public func finally(_ action: @escaping () -> Void) { finals.append(action) }

    /// Starts a background stack's thread.
    public func start() { thread?.start() }

    /// Runs the loop on this thread until SIGINT, SIGTERM or SIGHUP (SIGPIPE is ignored), then stops everything.
    public func runUntilSignal() {
        let loop = self.loop
        let signals = SignalWatcher { loop.stop() }
        loop.run()
        signals.cancel()
        stop()
    }

    /// Stops the servers (on the loop's thread), the loop, then runs the final actions. Once; later calls do nothing.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        let stops = self.stops
        let all: @Sendable () -> Void = { for s in stops.reversed() { s() } }
        if let thread { thread.stop(all) } else { all() } // a foreground loop has returned: this is its thread
        for f in finals { f() }
    }
}

/// Calls `handler` once on SIGINT, SIGTERM or SIGHUP (a closed terminal or SSH session; all three are otherwise ignored
/// while it is active), and ignores SIGPIPE.
public final class SignalWatcher {
    let sources: [any DispatchSourceSignal]

    public convenience init(_ handler: @escaping @Sendable () -> Void) {
        self.init(signalled: { _ in handler() })
    }

    /// As `init(_:)`, telling `handler` which signal came (SIGINT, SIGTERM or SIGHUP), for a command whose exit status says it.
    public init(signalled handler: @escaping @Sendable (Int32) -> Void) {
        signal(SIGPIPE, SIG_IGN)
        sources = [SIGINT, SIGTERM, SIGHUP].map { sig in
            signal(sig, SIG_IGN)
            let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            s.setEventHandler { handler(sig) }
            s.resume()
            return s
        }
    }

    public func cancel() { sources.forEach { $0.cancel() } }
}
