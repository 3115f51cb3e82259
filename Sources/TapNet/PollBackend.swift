#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TapCore

/// Level-triggered poll(2): what every POSIX system has (macOS, and Linux with `-Xswiftc -DTHREEDSTAPE_POSIX_ONLY`). The
/// interest list lives here, one `pollfd` per registration with a slot index by id, so adding, changing and removing are
/// O(1) (a removed slot takes the last one's place); each wait hands the whole list to the kernel, so a turn costs O(open
/// descriptors), which is what poll pays beside epoll at thousands of idle connections. poll's timeout is in whole
/// milliseconds: a wait is cut to the milliseconds below it, and its last fraction of a millisecond is a check of the
/// descriptors without waiting and then, if none is ready, a nanosleep, so that a replayed delay fires within tens of
/// microseconds of its deadline as with epoll_pwait2 (the price: a descriptor that becomes ready during that last fraction
/// waits for it, under a millisecond).
/// Compiled on every platform (the POSIX-only build selects it; the tests drive it directly in both builds).
final class PollBackend {
    private var fds: [pollfd] = []
    private var ids: [UInt64] = []
    private var slots: [UInt64: Int] = [:]
    private var readyIDs: [UInt64] = []
    private var readyEvents: [Int16] = []

    init() throws(NetError) {}

    /// Registrations watched (the waker included).
    var count: Int { fds.count }

    func add(fd: Int32, readable: Bool, writable: Bool, id: UInt64) -> Bool {
        guard fd >= 0, slots[id] == nil else {
            errno = EBADF
            return false
        }
        slots[id] = fds.count
        fds.append(pollfd(fd: fd, events: mask(readable, writable), revents: 0))
        ids.append(id)
        return true
    }

    func modify(fd: Int32, readable: Bool, writable: Bool, id: UInt64) {
        guard let i = slots[id] else { return }
        fds[i].events = mask(readable, writable)
    }

    func remove(fd: Int32, id: UInt64) {
        guard let i = slots.removeValue(forKey: id) else { return }
        let last = fds.count - 1
        if i != last {
            fds[i] = fds[last]
            ids[i] = ids[last]
            slots[ids[i]] = i
        }
        fds.removeLast()
        ids.removeLast()
    }

    @inline(__always) private func mask(_ r: Bool, _ w: Bool) -> Int16 {
        (r ? Int16(POLLIN) : 0) | (w ? Int16(POLLOUT) : 0)
    }

    /// Whole milliseconds for poll(2) from a nanosecond wait, rounded down (the rest is slept, see `wait`) and capped
    /// (-1: for ever); never traps.
    static func milliseconds(_ nanos: Int64) -> Int32 {
        guard nanos >= 0 else { return -1 }
        return Int32(clamping: nanos / 1_000_000)
    }

    /// Waits up to `timeoutNanos` (-1: for ever) and returns how many descriptors are ready, or -1 with errno set.
    func wait(timeoutNanos: Int64) -> Int {
        readyIDs.removeAll(keepingCapacity: true)
        readyEvents.removeAll(keepingCapacity: true)
        let n = poll(&fds, nfds_t(fds.count), PollBackend.milliseconds(timeoutNanos))
        if n == 0, timeoutNanos > 0, timeoutNanos < 1_000_000 {
            // Nothing ready and less than a millisecond to wait: sleep it, rather than wait a whole one in poll.
            var rest = timespec(tv_sec: 0, tv_nsec: Int(timeoutNanos))
            _ = nanosleep(&rest, nil)
            return 0
        }
        guard n > 0 else { return Int(n) }
        // The ready ones are copied out, so that handlers may add and remove registrations while they are dispatched.
        var left = Int(n)
        for i in fds.indices where fds[i].revents != 0 {
            readyIDs.append(ids[i])
            readyEvents.append(fds[i].revents)
            left -= 1
            if left == 0 { break }
        }
        return readyIDs.count
    }

    /// The registration id of the `i`th ready descriptor of the last wait.
    @inline(__always) func readyID(_ i: Int) -> UInt64 { readyIDs[i] }

    /// What the `i`th ready descriptor of the last wait is ready for (POLLNVAL, a descriptor closed while watched, is a
    /// hang-up, so that its owner closes it instead of the loop spinning on it).
    @inline(__always) func readiness(_ i: Int) -> (readable: Bool, writable: Bool, hangup: Bool) {
        let e = readyEvents[i]
        return (e & Int16(POLLIN) != 0, e & Int16(POLLOUT) != 0, e & (Int16(POLLHUP) | Int16(POLLERR) | Int16(POLLNVAL)) != 0)
    }
}

/// Wakes a waiting event loop from another thread through a pipe (what POSIX has instead of eventfd): `wake` writes a byte
/// to the write end (a full pipe already holds a wake-up, so EAGAIN is fine), the loop watches the read end and drains it.
struct PipeWaker: Sendable {
    let readFD: Int32
    let writeFD: Int32

    init() throws(NetError) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw NetError.errno("pipe") }
        for fd in fds {
            guard PipeWaker.setNonBlockingCloseOnExec(fd) else {
                let e = NetError.errno("fcntl(pipe)")
                _ = SystemCall.close(fds[0])
                _ = SystemCall.close(fds[1])
                throw e
            }
        }
        readFD = fds[0]
        writeFD = fds[1]
    }

    /// O_NONBLOCK and FD_CLOEXEC on `fd` (what accept4/SOCK_NONBLOCK/SOCK_CLOEXEC set in one call on Linux).
    static func setNonBlockingCloseOnExec(_ fd: Int32) -> Bool {
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else { return false }
        let fdFlags = fcntl(fd, F_GETFD)
        return fdFlags >= 0 && fcntl(fd, F_SETFD, fdFlags | FD_CLOEXEC) == 0
    }

    func wake() {
        var one: UInt8 = 1
        _ = SystemCall.write(writeFD, &one, 1)
    }

    func drain() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while buffer.withUnsafeMutableBytes({ SystemCall.read(readFD, $0.baseAddress, $0.count) }) == 64 {}
    }

    func close() {
        _ = SystemCall.close(readFD)
        _ = SystemCall.close(writeFD)
    }
}
