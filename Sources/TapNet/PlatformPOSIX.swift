// The POSIX paths: what macOS compiles, and what Linux compiles with `-Xswiftc -DTHREEDSTAPE_POSIX_ONLY` (the event loop on
// poll(2), wake-ups through a pipe, accept + fcntl, SO_NOSIGPIPE where the platform has it). No Linux-only symbol here
// (tools/platform/linux-symbols.sh checks).
#if !os(Linux) || THREEDSTAPE_POSIX_ONLY
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TapCore

/// The calls that differ between platforms: how sockets are made non-blocking and kept from raising SIGPIPE, how an event
/// loop waits and is woken, and process-level settings. This is the POSIX one (poll, a pipe, accept + fcntl).
public enum Platform {
    /// The event loop's readiness backend, as `3dstape` reports it.
    public static let eventBackendName = "poll"

    /// Flags for every `send` on a socket: none. MSG_NOSIGNAL is Linux's (and not what macOS documents); a socket from here
    /// carries SO_NOSIGPIPE instead where the platform has it (macOS, the BSDs), and where it has not (Linux built POSIX-only)
    /// SIGPIPE is ignored process-wide, once, when the first socket is made (see `keepFromRaisingSIGPIPE`).
    public static let sendFlags: Int32 = 0

    /// SOCK_STREAM as `socket` and `getaddrinfo` take it (an enum in Glibc, an Int32 in Darwin).
    public static var streamType: Int32 {
        #if canImport(Glibc)
        Int32(SOCK_STREAM.rawValue)
        #else
        SOCK_STREAM
        #endif
    }

    /// A TCP socket of `family`, non-blocking, close-on-exec and kept from raising SIGPIPE; -1 with errno set on failure.
    public static func streamSocket(family: Int32) -> Int32 {
        let fd = socket(family, streamType, 0)
        guard fd >= 0 else { return -1 }
        return prepared(fd)
    }

    /// A connected pair of non-blocking, close-on-exec Unix stream sockets, or nil with errno set.
    public static func streamSocketPair() -> (Int32, Int32)? {
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, streamType, 0, &fds) == 0 else { return nil }
        guard prepared(fds[0]) >= 0 else {
            let code = errno
            _ = SystemCall.close(fds[1])
            errno = code
            return nil
        }
        guard prepared(fds[1]) >= 0 else {
            let code = errno
            _ = SystemCall.close(fds[0])
            errno = code
            return nil
        }
        return (fds[0], fds[1])
    }

    /// Accepts one pending connection (accept, then fcntl: the window between them does not matter, as 3dstape starts no
    /// process while a loop accepts); -1 with errno set.
    static func acceptNonBlocking(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>, _ length: inout socklen_t) -> Int32 {
        let client = accept(fd, address, &length)
        guard client >= 0 else { return -1 }
        return prepared(client)
    }

    /// `fd` made non-blocking, close-on-exec and kept from raising SIGPIPE, or -1 (closed, errno kept) when fcntl fails.
    private static func prepared(_ fd: Int32) -> Int32 {
        guard PipeWaker.setNonBlockingCloseOnExec(fd) else {
            let code = errno
            _ = SystemCall.close(fd)
            errno = code
            return -1
        }
        keepFromRaisingSIGPIPE(fd)
        return fd
    }

    /// SO_NOSIGPIPE on the socket where the platform has it; otherwise SIGPIPE ignored for the process, once.
    private static func keepFromRaisingSIGPIPE(_ fd: Int32) {
        #if canImport(Darwin)
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #else
        _ = sigpipeIgnored
        #endif
    }

    #if !canImport(Darwin)
    /// Set once, on first use (a static let is initialised exactly once, thread-safely): no SO_NOSIGPIPE here, and no send
    /// flag in POSIX, so a write to a peer that has gone must give EPIPE rather than end the process. Commands that start
    /// other programs give them SIGPIPE back at its default action (CommandGroup.resetSignals).
    private static let sigpipeIgnored: Void = { _ = signal(SIGPIPE, SIG_IGN) }()
    #endif

    /// Makes this process the reaper of its orphaned descendants where the platform can (Linux's PR_SET_CHILD_SUBREAPER;
    /// POSIX has no such call, so orphans go to init/launchd, which reaps them). True when it took effect.
    @discardableResult
    public static func adoptOrphans() -> Bool { false }

    /// Whether the kernel can say when a socket's bytes arrived (Linux's SO_TIMESTAMPNS): not here, so a replayed delay
    /// counts from when the loop read the request.
    public static let stampsReceiveTimes = false

    /// Asks the kernel to stamp what `fd` receives (Linux's SO_TIMESTAMPNS): none here, so false, and `receive` gives no stamp.
    static func enableReceiveTimestamps(_ fd: Int32) -> Bool { false }

    /// recv(2); `stampNanos` is set to 0 (no kernel receive time on this platform).
    static func receive(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int, stampNanos: inout Int64) -> Int {
        stampNanos = 0
        return recv(fd, buffer, count, 0)
    }

    /// Makes the calling thread's timed waits end as close to their deadline as the system allows (Linux's timer slack):
    /// nothing to set here. False: not set.
    @discardableResult
    static func tightenTimerSlack() -> Bool { false }

    /// Bytes of `fd`'s send queue the peer has not acknowledged (Linux's SIOCOUTQ): not known here, so nil.
    static func kernelUnsentBytes(_ fd: Int32) -> Int? { nil }

    /// The calling thread's timer slack in nanoseconds, where the system has one (nil here).
    public static var timerSlackNanos: Int? { nil }

    /// The longest thread name the system keeps (macOS: 63 bytes; Linux: 15).
    public static var threadNameLimit: Int {
        #if canImport(Darwin)
        63
        #else
        15
        #endif
    }
}

/// The loop's readiness backend on this platform.
typealias EventBackend = PollBackend
/// How another thread wakes the loop on this platform.
typealias LoopWaker = PipeWaker
#endif
