#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The calling thread's CPU priority (its nice value), where a thread has its own (Linux); elsewhere a nice value is the
/// whole process's, and these leave it alone.
public enum ThreadPriority {
    /// The calling thread's nice value (-20 most favoured … 19 least), or nil where threads have none of their own.
    public static var current: Int32? {
        #if os(Linux)
        // On Linux, PRIO_PROCESS with who 0 is the calling thread. -1 is also a valid nice value: errno tells.
        errno = 0
        let nice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
        return errno == 0 ? nice : nil
        #else
        return nil
        #endif
    }

    /// Makes the calling thread `steps` nice values less favoured (at most 19). Returns whether it changed; a thread
    /// already at 19, or a failure, leaves it as it was.
    @discardableResult
    public static func lowerCurrent(by steps: Int32) -> Bool {
        #if os(Linux)
        guard let now = current, now < 19 else { return false }
        return setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, min(now + max(steps, 0), 19)) == 0
        #else
        return false
        #endif
    }
}
