/// The stalled-reader rule, said once for every server connection (the connection machine's kept-alive answers and the
/// recorder's closing wait): answers wait for a client that takes none of them for the idle timeout, unless the kernel
/// shows the client reading slowly behind a send buffer too large for this end's queue to move. Sans-IO: the owner
/// says when the client took bytes and when its deadline passed, and arms the wait it is told.
public struct StalledReaderWatch: Sendable, Equatable {
    /// When the client last took queued bytes, or the wait began (monotonic ns).
    public private(set) var lastDrainNanos: UInt64 = 0
    /// The kernel's unacknowledged answer bytes at the last look; nil before one.
    private var kernelUnsentAtLook: Int?

    public init() {}

    /// What a passed deadline means.
    public enum Verdict: Equatable, Sendable {
        /// Wait this many seconds more, then report the deadline again.
        case wait(seconds: Double)
        /// The client took nothing for the idle timeout: close the connection.
        case stalled
    }

    /// The client took queued bytes at `now`, or the wait starts then: the idle timeout counts from here.
    public mutating func drained(at now: UInt64) {
        lastDrainNanos = now
        kernelUnsentAtLook = nil
    }

    /// The deadline passed at `now`. Before the idle timeout, the rest of it; after, the kernel's queue decides
    /// (`kernelUnsent`, asked only then): looked at again `kernelProbeSeconds` later, a queue that shrank is a client
    /// that reads (the idle timeout starts again), one that did not is a stalled client.
    public mutating func deadlinePassed(at now: UInt64, policy: ConnectionPolicy, kernelUnsent: () -> Int?) -> Verdict {
        let idle = Double(now &- lastDrainNanos) / 1e9
        guard idle >= policy.idleTimeout else { return .wait(seconds: policy.idleTimeout - idle) }
        // Where the kernel does not say, or holds nothing for the client, it is stalled; the first look only looks.
        guard let queued = kernelUnsent(), queued > 0 else { return .stalled }
        guard let before = kernelUnsentAtLook else {
            kernelUnsentAtLook = queued
            return .wait(seconds: policy.kernelProbeSeconds)
        }
        guard queued < before else { return .stalled }
        drained(at: now)
        return .wait(seconds: policy.idleTimeout)
    }
}
