/// Lets a repeated log line through once a second at most: refusals under load (connection caps, the memory budget)
/// would otherwise write one line per refused request.
public struct LogThrottle: Sendable {
    private var last: UInt64 = 0
    private var started = false

    public init() {}

    /// Whether to log now (`nowNanos`: a monotonic clock); true at the first call and then once per second.
    public mutating func allow(nowNanos: UInt64) -> Bool {
        guard !started || nowNanos &- last >= 1_000_000_000 else { return false }
        started = true
        last = nowNanos
        return true
    }
}
