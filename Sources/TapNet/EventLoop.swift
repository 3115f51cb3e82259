import TapCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Something the event loop wakes when its file descriptor is ready.
public protocol EventHandler: AnyObject {
    func handleEvent(readable: Bool, writable: Bool, hangup: Bool)
}

/// An opaque registration token; events for a closed and reused fd are dropped because the token changes.
public struct Registration: Hashable, Sendable {
    let id: UInt64
}

/// A cancellable timer token.
public struct TimerHandle: Hashable, Sendable {
    let id: UInt64
}

/// A single-threaded event loop (epoll on Linux, poll(2) in the POSIX-only build: `Platform`) with timers from its own heap
/// and a thread-safe task queue woken through `LoopWaker` (an eventfd on Linux, a pipe elsewhere).
///
/// Design: 3dstape runs one network loop and one session-writer thread. On the 2-core machines it
/// targets that uses both cores, and it keeps each client connection and its upstream connection on
/// the same thread, so proxy state needs no locks. Level-triggered epoll; every registration carries a
/// fresh 64-bit id (like SwiftNIO's registration IDs) so a stale event for a reused fd is ignored.
///
/// `@unchecked Sendable` is safe because every mutable field except `tasks` and `stopping` is touched
/// only on the loop's own thread (enforced by `assertInLoop` in debug builds); `tasks` is `Locked` and
/// `stopping` an `Atomic`.
public final class EventLoop: @unchecked Sendable {
    private let backend: EventBackend
    private let waker: LoopWaker
    private var handlers: [UInt64: (fd: Int32, handler: any EventHandler)] = [:]
    private var nextID: UInt64 = 1
    private var timerHeap: [(deadline: UInt64, id: UInt64)] = []
    private var timerActions: [UInt64: () -> Void] = [:]
    private let tasks = Locked<[@Sendable () -> Void]>([])
    private let stopping = Atomic<Bool>(false)
    private var loopThread: pthread_t?
    /// Looks up the host names of this loop's outgoing connections off its thread (set before connecting; a test sets
    /// a slow one). Touched only on the loop's thread.
    public var resolver = HostResolver()
    /// One receive buffer shared by every connection on this loop (they read one at a time).
    var readBuffer = [UInt8](repeating: 0, count: 65536)

    public init() throws(NetError) {
        backend = try EventBackend()
        waker = try LoopWaker()
        guard backend.add(fd: waker.readFD, readable: true, writable: false, id: 0) else {
            let e = NetError.errno("watching the loop's waker")
            waker.close()
            throw e
        }
    }

    deinit {
        waker.close()
    }

    /// Monotonic nanoseconds.
    public static func nowNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// When the bytes a connection is handing to its delegate right now reached the socket (monotonic nanoseconds, the
    /// kernel's receive time), for connections that take it (`Connection.stampArrivals`); nil at any other moment. What
    /// runs inside that hand-over (a request parsed and delivered from those bytes) may count from it.
    public internal(set) var inputArrivedNanos: UInt64?

    /// Realtime nanoseconds (CLOCK_REALTIME, as the kernel stamps what a socket receives) as a moment on `nowNanos`'s
    /// monotonic clock: now less how long ago it was. A stamp in the future (the wall clock stepped back) is now; one
    /// more than a minute old (the wall clock stepped forward) is taken as now too, since it cannot say when it was.
    public static func monotonicNanos(ofRealtime realtime: Int64) -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let nowMono = nowNanos()
        let nowReal = Int64(ts.tv_sec) &* 1_000_000_000 &+ Int64(ts.tv_nsec)
        let ago = nowReal &- realtime
        guard ago > 0, ago < 60_000_000_000, UInt64(ago) < nowMono else { return nowMono }
        return nowMono - UInt64(ago)
    }

    /// True on the loop's thread.
    public var inLoop: Bool { loopThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false }

    /// True where what the loop owns may be touched: on its thread, or anywhere before it runs (while it is set up).
    public var mayBeUsedHere: Bool { loopThread == nil || inLoop }

    @inline(__always) func assertInLoop() { assert(mayBeUsedHere, "EventLoop used off its thread") }

    // MARK: registration (loop thread)

    /// Starts watching `fd` for `handler`.
    public func register(fd: Int32, handler: any EventHandler, readable: Bool, writable: Bool) throws(NetError) -> Registration {
        assertInLoop()
        let id = nextID
        nextID += 1
        guard backend.add(fd: fd, readable: readable, writable: writable, id: id) else { throw NetError.errno("watching fd \(fd)") }
        handlers[id] = (fd, handler)
        return Registration(id: id)
    }

    /// Changes the interest set.
    public func update(_ r: Registration, readable: Bool, writable: Bool) {
        assertInLoop()
        guard let h = handlers[r.id] else { return }
        backend.modify(fd: h.fd, readable: readable, writable: writable, id: r.id)
    }

    /// Stops watching (call before closing the fd).
    public func deregister(_ r: Registration) {
        assertInLoop()
        guard let h = handlers.removeValue(forKey: r.id) else { return }
        backend.remove(fd: h.fd, id: r.id)
    }

    // MARK: timers (loop thread)

    /// Runs `action` on the loop after `seconds`. The deadline saturates: NaN or a negative wait fires at once, a wait
    /// past the clock's range (an infinite one included) never fires; no value traps.
    @discardableResult
    public func schedule(after seconds: Double, _ action: @escaping () -> Void) -> TimerHandle {
        assertInLoop()
        let id = nextID
        nextID += 1
        let deadline = Checked.deadline(EventLoop.nowNanos(), plus: Checked.nanoseconds(seconds))
        timerActions[id] = action
        timerHeap.append((deadline, id))
        var i = timerHeap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            if timerHeap[parent].deadline <= timerHeap[i].deadline { break }
            timerHeap.swapAt(parent, i)
            i = parent
        }
        return TimerHandle(id: id)
    }

    /// Cancels a timer that has not fired.
    public func cancel(_ t: TimerHandle) {
        timerActions[t.id] = nil
    }

    private func popTimer() -> (deadline: UInt64, id: UInt64)? {
        guard let top = timerHeap.first else { return nil }
        let last = timerHeap.removeLast()
        if !timerHeap.isEmpty {
            timerHeap[0] = last
            var i = 0
            while true {
                let l = 2 * i + 1, r = l + 1
                var m = i
                if l < timerHeap.count, timerHeap[l].deadline < timerHeap[m].deadline { m = l }
                if r < timerHeap.count, timerHeap[r].deadline < timerHeap[m].deadline { m = r }
                if m == i { break }
                timerHeap.swapAt(i, m)
                i = m
            }
        }
        return top
    }

    /// Runs the timers that are due; returns nanoseconds until the next one (-1: none). Waits are in
    /// nanoseconds: with epoll (epoll_pwait2) a replayed delay fires within tens of microseconds of its deadline,
    /// with poll(2) likewise (its last fraction of a millisecond slept: `PollBackend`).
    private func runDueTimers() -> Int64 {
        while true {
            while let top = timerHeap.first {
                if timerActions[top.id] == nil { _ = popTimer(); continue }
                let now = EventLoop.nowNanos()
                if top.deadline > now { break }
                _ = popTimer()
                if let action = timerActions.removeValue(forKey: top.id) {
                    firedTimers &+= 1
                    action()
                }
            }
            // The due timers have run: now the work they put off. It takes time, so timers may be due again after it.
            guard runDeferred() else { break }
        }
        guard let top = timerHeap.first else { return -1 }
        let now = EventLoop.nowNanos()
        return top.deadline > now ? Int64(min(top.deadline - now, UInt64(Int64.max))) : 0
    }

    /// Whether the earliest timer's deadline has passed (a cancelled one counts: `runDueTimers` drops it).
    @inline(__always) private func timerIsDue() -> Bool {
        guard let top = timerHeap.first else { return false }
        return top.deadline <= EventLoop.nowNanos()
    }

    /// Work put off until the timers due now have run (`afterDueTimers`), in the order it was put off.
    private var deferred: [() -> Void] = []

    /// Runs `action` on the loop once the timers due now have all run, before anything else the loop does (when called
    /// outside a timer: at the end of the current step of the loop). For a timer's bookkeeping that need not come before
    /// the next due timer's own work: the replayer writes every answer due in one turn before it records any of them.
    public func afterDueTimers(_ action: @escaping () -> Void) {
        assertInLoop()
        deferred.append(action)
    }

    /// Runs what `afterDueTimers` put off (and what that puts off in turn); false when there was nothing.
    @discardableResult
    private func runDeferred() -> Bool {
        guard !deferred.isEmpty else { return false }
        while !deferred.isEmpty {
            let batch = deferred
            deferred.removeAll(keepingCapacity: true)
            for action in batch { action() }
        }
        return true
    }

    /// How long to wait for a timer `remaining` nanoseconds away (-1: none, wait for ever). Linux lets a timed wait end
    /// late by its slack, which for epoll_pwait2 is the larger of the thread's timer slack (1 ns on a loop's thread:
    /// `run`) and a fraction of the wait (0.1 %, 0.5 % for a niced process): a 1 s wait may end 1-5 ms late. So a wait
    /// longer than a millisecond stops 1/128 of it (0.8 %) short, and the rest, waited again, is late by at most a
    /// fraction of that rest: a timer fires within microseconds of its deadline however far off it was set.
    static func waitNanos(untilTimerIn remaining: Int64) -> Int64 {
        guard remaining > 1_000_000 else { return remaining }
        return remaining - remaining / 128
    }

    /// Timers run so far (what `runOnce` counts as work done).
    private var firedTimers = 0

    // MARK: cross-thread

    /// Runs `task` on the loop thread soon. Safe from any thread.
    public func execute(_ task: @escaping @Sendable () -> Void) {
        tasks.withLock { $0.append(task) }
        waker.wake()
    }

    /// Makes `run` return after the current iteration. Safe from any thread.
    public func stop() {
        stopping.store(true, ordering: .sequentiallyConsistent)
        execute {}
    }

    // MARK: the loop

    /// Runs on the calling thread until `stop`.
    public func run() {
        loopThread = pthread_self()
        // Timed waits end at their deadline, not up to 50 us after it (the default timer slack): replayed delays are
        // this loop's timers.
        Platform.tightenTimerSlack()
        while !stopping.load(ordering: .sequentiallyConsistent) {
            guard turn(maxWaitNanos: nil) != nil else { break }
        }
    }

    /// One turn of the loop on the calling thread, which becomes the loop's thread: the due timers, the sockets that
    /// are ready (waiting at most `maxWaitNanos` for one, or until the next timer if that is sooner; 0 does not wait; a
    /// timer that falls due meanwhile runs between two of them), then the queued tasks. For code that steps a loop itself instead of giving it a thread (the fuzz targets).
    /// Returns how much it did: timers run, descriptors handled and tasks run (0: nothing was ready).
    @discardableResult
    public func runOnce(maxWaitNanos: Int64 = 0) -> Int {
        loopThread = pthread_self()
        let timersBefore = firedTimers
        let handled = turn(maxWaitNanos: max(0, maxWaitNanos)) ?? 0
        return handled + (firedTimers &- timersBefore)
    }

    /// One turn; `maxWaitNanos` nil waits until the next timer (or for ever). Returns the descriptors and tasks
    /// handled, or nil when the wait failed (other than being interrupted).
    private func turn(maxWaitNanos: Int64?) -> Int? {
        var timeout = EventLoop.waitNanos(untilTimerIn: runDueTimers())
        if let cap = maxWaitNanos { timeout = timeout < 0 ? cap : min(timeout, cap) }
        let n = backend.wait(timeoutNanos: timeout)
        if n < 0 { return SystemCall.errorNumber == EINTR ? 0 : nil }
        for i in 0..<n {
            let id = backend.readyID(i)
            if id == 0 {
                waker.drain()
                continue
            }
            guard let h = handlers[id] else { continue } // stale event: already deregistered
            let r = backend.readiness(i)
            h.handler.handleEvent(readable: r.readable, writable: r.writable, hangup: r.hangup)
            // A timer that fell due while this descriptor was handled runs now, not after the rest of the turn's (up to 256
            // of them: a burst of requests, each parsed and matched, kept a due answer waiting for all of them).
            if i + 1 < n, timerIsDue() { _ = runDueTimers() }
        }
        runDeferred() // what the handlers put off, before the tasks (which may have seen their answers)
        let pending = tasks.withLock { t -> [@Sendable () -> Void] in
            let p = t
            t.removeAll()
            return p
        }
        for t in pending { t() }
        runDeferred()
        return n + pending.count
    }
}
