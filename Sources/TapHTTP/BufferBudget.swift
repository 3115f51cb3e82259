import TapCore

/// The request bytes that all connections of one server hold in memory at once (heads and bodies being received,
/// bodies of requests in flight), against one cap. Past the cap, the connection that asks for more is refused (503)
/// instead of memory growing with the number of connections. Used from one event-loop thread only.
public final class BufferBudget {
    /// The cap, in bytes.
    public var limit: Int
    /// What all connections hold now.
    public private(set) var total = 0
    private var held: [ObjectIdentifier: Int] = [:]
    private var logThrottle = LogThrottle()
    /// A connection holding no more than this is never refused, so that small requests always pass.
    public static let exempt = 64 * 1024

    public init(limit: Int) { self.limit = limit }

    /// Records that `owner` now holds `bytes`. False when it holds more than `exempt` and the total is past the cap.
    public func hold(_ owner: ObjectIdentifier, _ bytes: Int) -> Bool {
        total += bytes - (held.updateValue(bytes, forKey: owner) ?? 0) // one lookup for the old count and the new
        return bytes <= BufferBudget.exempt || total <= limit
    }

    /// Forgets what `owner` held (its connection closed).
    public func release(_ owner: ObjectIdentifier) { total -= held.removeValue(forKey: owner) ?? 0 }

    /// Whether a refusal should be logged now: one line a second at most.
    public func shouldLog(nowNanos: UInt64) -> Bool { logThrottle.allow(nowNanos: nowNanos) }
}
