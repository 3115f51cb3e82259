#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TapCore
import TapNet

/// A long command (`timeouts`, `import`) stopped by SIGINT, SIGTERM or SIGHUP: it has cleaned up, and exits 128 + the
/// signal (130, 143, 129) as a shell expects of a program the signal ended.
struct Interrupted: Error, CustomStringConvertible {
    let signal: Int32
    var exitStatus: Int32 { 128 + signal }
    var signalName: String { signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : signal == SIGHUP ? "SIGHUP" : "signal \(signal)" }
    var description: String { "stopped by \(signalName)" }
}

/// The first SIGINT, SIGTERM or SIGHUP a long command receives, noted by `SignalWatcher` (a DispatchSourceSignal: no handler
/// interrupts the command's own code) for the command to see at its next check, stop cleanly and say so in its exit
/// status. While it watches, the three signals no longer end the process by themselves; `cancel` stops the watching.
final class StopRequest {
    private let received = Locked<Int32?>(nil)
    private var watcher: SignalWatcher?

    init() {
        let received = self.received
        watcher = SignalWatcher(signalled: { sig in received.withLock { if $0 == nil { $0 = sig } } })
    }

    /// The first signal received, if any.
    var signal: Int32? { received.withLock { $0 } }

    /// Throws `Interrupted` once a signal has come.
    func check() throws(Interrupted) {
        if let s = signal { throw Interrupted(signal: s) }
    }

    func cancel() {
        watcher?.cancel()
        watcher = nil
    }

    deinit { watcher?.cancel() }
}
