// The Linux backend: the one file of TapNet (with Sources/CLinux) that makes Linux-only calls (epoll, eventfd, accept4,
// SOCK_NONBLOCK/SOCK_CLOEXEC, MSG_NOSIGNAL, prctl). tools/platform/linux-symbols.sh keeps them here. Built on Linux unless
// `-Xswiftc -DTHREEDSTAPE_POSIX_ONLY` asks for the POSIX paths (PlatformPOSIX.swift), which is what macOS compiles.
#if os(Linux) && !THREEDSTAPE_POSIX_ONLY
import CLinux
import Glibc
import TapCore

/// The calls that differ between platforms: how sockets are made non-blocking and kept from raising SIGPIPE, how an event
/// loop waits and is woken, and process-level settings. This is the Linux one (epoll, eventfd, accept4, MSG_NOSIGNAL).
public enum Platform {
    /// The event loop's readiness backend, as `3dstape` reports it.
    public static let eventBackendName = "epoll"

    /// Flags for every `send` on a socket: MSG_NOSIGNAL, so a peer that has gone gives EPIPE, not SIGPIPE.
    public static let sendFlags = Int32(MSG_NOSIGNAL)

    /// SOCK_STREAM as `socket` and `getaddrinfo` take it.
    public static var streamType: Int32 { Int32(SOCK_STREAM.rawValue) }

    /// A TCP socket of `family`, non-blocking and close-on-exec in one call; -1 with errno set on failure.
    public static func streamSocket(family: Int32) -> Int32 {
        socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    }

    /// A connected pair of non-blocking, close-on-exec Unix stream sockets, or nil with errno set.
    public static func streamSocketPair() -> (Int32, Int32)? {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            return nil
        }
        return (fds[0], fds[1])
    }

    /// Accepts one pending connection as a non-blocking, close-on-exec socket (accept4); -1 with errno set.
    static func acceptNonBlocking(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>, _ length: inout socklen_t) -> Int32 {
        clinux_accept4_nonblocking(fd, address, &length)
    }

    /// Makes this process the reaper of its orphaned descendants (PR_SET_CHILD_SUBREAPER). True when it took effect.
    @discardableResult
    public static func adoptOrphans() -> Bool { clinux_set_child_subreaper(1) == 0 }

    /// Whether the kernel can say when a socket's bytes arrived (SO_TIMESTAMPNS): a replayed delay then counts from the
    /// arrival, not from when the loop read the request.
    public static let stampsReceiveTimes = true

    /// Asks the kernel to stamp what `fd` receives (SO_TIMESTAMPNS), for `receive`. True when it took effect.
    static func enableReceiveTimestamps(_ fd: Int32) -> Bool { clinux_enable_rx_timestamps(fd) == 0 }

    /// recv(2) through recvmsg: `stampNanos` gets the kernel's receive time of what was read (CLOCK_REALTIME nanoseconds,
    /// on a socket given `enableReceiveTimestamps`), or 0 when there is none. Returns what recv returns.
    static func receive(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int, stampNanos: inout Int64) -> Int {
        Int(clinux_recv_stamped(fd, buffer, UInt(count), &stampNanos))
    }

    /// Sets the calling thread's timer slack to 1 ns (PR_SET_TIMERSLACK; 0 would mean the default). The kernel lets a
    /// thread's timed wait end up to its slack after the deadline (50 us by default) so that wake-ups coalesce; an event
    /// loop that replays delays wants them at the deadline. True when it took effect.
    @discardableResult
    static func tightenTimerSlack() -> Bool { clinux_set_timer_slack(1) == 0 }

    /// Bytes of `fd`'s send queue the peer has not acknowledged (SIOCOUTQ), or nil when the kernel does not say: a
    /// queue that shrinks is a peer that reads, even while too little frees for the socket to be writable again.
    static func kernelUnsentBytes(_ fd: Int32) -> Int? {
        let n = clinux_unsent_bytes(fd)
        return n >= 0 ? n : nil
    }

    /// The calling thread's timer slack in nanoseconds (PR_GET_TIMERSLACK), or nil when it cannot be read.
    public static var timerSlackNanos: Int? {
        let v = clinux_timer_slack()
        return v < 0 ? nil : Int(v)
    }

    /// The longest thread name the system keeps (Linux: 15 bytes; a longer one is refused whole).
    public static let threadNameLimit = 15
}

/// The loop's readiness backend on this platform.
typealias EventBackend = EpollBackend

/// Wakes a waiting event loop from another thread: an eventfd, written with 8 bytes and read to drain.
struct LoopWaker: Sendable {
    /// The descriptor the backend watches (id 0), and the one `wake` writes to: the same eventfd.
    let readFD: Int32
    init() throws(NetError) {
        readFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard readFD >= 0 else { throw NetError.errno("eventfd") }
    }
    func wake() {
        var one: UInt64 = 1
        _ = write(readFD, &one, 8)
    }
    func drain() {
        var v: UInt64 = 0
        _ = read(readFD, &v, 8)
    }
    func close() { _ = SystemCall.close(readFD) }
}

/// Level-triggered epoll: one kernel interest list, and a wait that reports only the ready descriptors (at most 256 a turn),
/// with a nanosecond timeout (epoll_pwait2) so that timers fire within tens of microseconds of their deadline.
final class EpollBackend {
    private let epfd: Int32
    private var events = [UInt32](repeating: 0, count: 256)
    private var datas = [UInt64](repeating: 0, count: 256)

    init() throws(NetError) {
        epfd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epfd >= 0 else { throw NetError.errno("epoll_create1") }
    }

    deinit { _ = SystemCall.close(epfd) }

    func add(fd: Int32, readable: Bool, writable: Bool, id: UInt64) -> Bool {
        clinux_epoll_ctl(epfd, EPOLL_CTL_ADD, fd, mask(readable, writable), id) == 0
    }

    func modify(fd: Int32, readable: Bool, writable: Bool, id: UInt64) {
        _ = clinux_epoll_ctl(epfd, EPOLL_CTL_MOD, fd, mask(readable, writable), id)
    }

    func remove(fd: Int32, id: UInt64) {
        _ = clinux_epoll_ctl(epfd, EPOLL_CTL_DEL, fd, 0, 0)
    }

    @inline(__always) private func mask(_ r: Bool, _ w: Bool) -> UInt32 {
        (r ? EPOLLIN.rawValue | EPOLLRDHUP.rawValue : 0) | (w ? EPOLLOUT.rawValue : 0)
    }

    /// Waits up to `timeoutNanos` (-1: for ever) and returns how many descriptors are ready, or -1 with errno set.
    func wait(timeoutNanos: Int64) -> Int {
        Int(clinux_epoll_wait_ns(epfd, &events, &datas, Int32(events.count), timeoutNanos))
    }

    /// The registration id of the `i`th ready descriptor of the last wait.
    @inline(__always) func readyID(_ i: Int) -> UInt64 { datas[i] }

    /// What the `i`th ready descriptor of the last wait is ready for.
    @inline(__always) func readiness(_ i: Int) -> (readable: Bool, writable: Bool, hangup: Bool) {
        let e = events[i]
        return (e & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue) != 0, e & EPOLLOUT.rawValue != 0,
                e & (EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0)
    }
}
#endif
