import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
import TapCore
@testable import TapNet

/// TapNet's platform layer in both builds: the poll(2) backend and the pipe waker (what the POSIX-only build and macOS
/// run; driven directly here so that the default build tests them too), the sockets `Platform` makes (non-blocking,
/// close-on-exec, no SIGPIPE), and which backend the event loop was built with.
@Suite struct PlatformTests {
    /// A connected socket pair from the platform layer, closed by the caller.
    static func pair() throws -> (Int32, Int32) { try #require(Platform.streamSocketPair(), "socketpair: \(errno)") }

    static func isNonBlockingAndCloseOnExec(_ fd: Int32) -> Bool {
        fcntl(fd, F_GETFL) & O_NONBLOCK != 0 && fcntl(fd, F_GETFD) & FD_CLOEXEC != 0
    }

    @Test func theLoopUsesTheBackendTheBuildAskedFor() {
        #if THREEDSTAPE_POSIX_ONLY || !os(Linux)
        #expect(Platform.eventBackendName == "poll")
        #expect(Platform.sendFlags == 0)
        #else
        #expect(Platform.eventBackendName == "epoll")
        #endif
    }

    @Test func pollReportsReadableWritableAndHangupByRegistration() throws {
        let (a, b) = try Self.pair()
        let poll = try PollBackend()
        #expect(poll.add(fd: a, readable: true, writable: false, id: 7))
        #expect(poll.add(fd: b, readable: true, writable: false, id: 9))
        #expect(poll.wait(timeoutNanos: 0) == 0, "nothing sent yet")

        var byte: UInt8 = 0x41
        #expect(SystemCall.send(b, &byte, 1, Platform.sendFlags) == 1)
        #expect(poll.wait(timeoutNanos: 1_000_000_000) == 1)
        #expect(poll.readyID(0) == 7)
        #expect(poll.readiness(0) == (readable: true, writable: false, hangup: false))

        // Asking for writability reports it; a removed registration reports nothing more, and the other keeps its slot.
        poll.modify(fd: b, readable: true, writable: true, id: 9)
        poll.remove(fd: a, id: 7)
        #expect(poll.count == 1)
        #expect(poll.wait(timeoutNanos: 0) == 1)
        #expect(poll.readyID(0) == 9)
        #expect(poll.readiness(0).writable)

        // The peer closes: the survivor is readable (EOF) and its id is still right after the swap.
        _ = SystemCall.close(a)
        poll.modify(fd: b, readable: true, writable: false, id: 9)
        #expect(poll.wait(timeoutNanos: 1_000_000_000) == 1)
        #expect(poll.readyID(0) == 9)
        let r = poll.readiness(0)
        #expect(r.readable || r.hangup)
        _ = SystemCall.close(b)
        // A descriptor closed while still watched (POLLNVAL) is a hang-up for its owner, not a readiness the loop spins on.
        #expect(poll.wait(timeoutNanos: 0) == 1)
        #expect(poll.readiness(0).hangup)
        #expect(!poll.add(fd: -1, readable: true, writable: false, id: 10), "a bad descriptor is refused")
        #expect(!poll.add(fd: 0, readable: true, writable: false, id: 9), "an id in use is refused")
    }

    @Test func pollTimeoutsAreWholeMillisecondsBelowTheWaitWithoutTrapping() {
        #expect(PollBackend.milliseconds(-1) == -1)
        #expect(PollBackend.milliseconds(0) == 0)
        #expect(PollBackend.milliseconds(999_999) == 0)
        #expect(PollBackend.milliseconds(2_000_000) == 2)
        #expect(PollBackend.milliseconds(2_999_999) == 2)
        #expect(PollBackend.milliseconds(Int64.max) == Int32.max)
        // A fraction of a millisecond below poll's unit is waited, neither skipped nor made a whole millisecond (a timer
        // would fire up to 1 ms late: the replayer's median error was 1.0 ms with poll rounding up). Best of three, as a
        // loaded machine only makes a sleep longer.
        let poll = try? PollBackend()
        var took: [UInt64] = []
        for _ in 0..<3 {
            let started = EventLoop.nowNanos()
            #expect(poll?.wait(timeoutNanos: 400_000) == 0)
            took.append(EventLoop.nowNanos() - started)
        }
        #expect(took.allSatisfy { $0 >= 400_000 }, "\(took) ns")
        #expect(took.min()! < 1_000_000, "\(took) ns")
    }

    /// The replayer's delays ride on the loop's timers: whichever backend, a timer never fires before its deadline, and the
    /// median one fires within a millisecond after it (poll's unit; a replayed answer's median error is held to 1 ms).
    @Test func timersFireAtTheirDeadlineNotAMillisecondLate() throws {
        let loop = try EventLoop()
        var lateness: [Double] = []
        for i in 0..<9 {
            let wait = 0.002 + Double(i) * 0.0007 // 2.0 ms to 7.6 ms: fractions of a millisecond
            let start = EventLoop.nowNanos()
            var firedAt: UInt64?
            loop.schedule(after: wait) { firedAt = EventLoop.nowNanos() }
            while firedAt == nil { loop.runOnce(maxWaitNanos: 1_000_000_000) }
            let late = Double(firedAt! - start) / 1e6 - wait * 1000
            #expect(late >= -0.001, "timer \(i) fired \(-late) ms early")
            lateness.append(late)
        }
        lateness.sort()
        #expect(lateness[lateness.count / 2] < 1, "median lateness \(lateness) ms")
    }

    @Test func aPipeWakesAPollWaitFromAnotherThreadAndDrains() throws {
        let waker = try PipeWaker()
        defer { waker.close() }
        #expect(Self.isNonBlockingAndCloseOnExec(waker.readFD) && Self.isNonBlockingAndCloseOnExec(waker.writeFD))
        let poll = try PollBackend()
        #expect(poll.add(fd: waker.readFD, readable: true, writable: false, id: 0))
        let started = EventLoop.nowNanos()
        Thread.detachNewThread { usleep(20_000); waker.wake() }
        #expect(poll.wait(timeoutNanos: 5_000_000_000) == 1)
        #expect(EventLoop.nowNanos() - started < 2_000_000_000, "woken, not timed out")
        // Far more wake-ups than the pipe holds never block the waker, and one drain empties the pipe.
        for _ in 0..<100_000 { waker.wake() }
        waker.drain()
        #expect(poll.wait(timeoutNanos: 0) == 0)
    }

    @Test func socketsAreNonBlockingCloseOnExecAndGiveEPIPENotSIGPIPE() throws {
        let fd = Platform.streamSocket(family: AF_INET)
        #expect(fd >= 0)
        #expect(Self.isNonBlockingAndCloseOnExec(fd))
        _ = SystemCall.close(fd)

        let (a, b) = try Self.pair()
        #expect(Self.isNonBlockingAndCloseOnExec(a) && Self.isNonBlockingAndCloseOnExec(b))
        _ = SystemCall.close(b)
        var byte: UInt8 = 0
        var result = 0
        for _ in 0..<2 { result = SystemCall.send(a, &byte, 1, Platform.sendFlags) } // the process is still here
        #expect(result == -1 && errno == EPIPE)
        _ = SystemCall.close(a)
    }

    /// An accepted connection is non-blocking and close-on-exec whichever way the platform gets there (accept4, or accept
    /// and fcntl), and the loop serves it (the HTTP suites run every server on the same loop).
    @Test func anAcceptedConnectionIsNonBlockingAndCloseOnExec() throws {
        let loop = try EventLoop()
        let accepted = Locked<[Int32]>([])
        let listener = try Listener(loop: loop, address: HostPort(host: "127.0.0.1", port: 0)) { fd, _ in accepted.withLock { $0.append(fd) } }
        try listener.start()
        defer { listener.close() }
        let client = Platform.streamSocket(family: AF_INET)
        defer { _ = SystemCall.close(client) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = listener.address.port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { SystemCall.connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        let deadline = EventLoop.nowNanos() + 5_000_000_000
        while accepted.withLock({ $0.isEmpty }), EventLoop.nowNanos() < deadline { loop.runOnce(maxWaitNanos: 50_000_000) }
        let fds = accepted.withLock { $0 }
        #expect(fds.count == 1)
        for fd in fds {
            #expect(Self.isNonBlockingAndCloseOnExec(fd))
            _ = SystemCall.close(fd)
        }
    }
}
