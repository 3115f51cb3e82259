import TapCore

/// The request bytes that all connections of one server hold in memory at once (heads and bodies being received,
/// bodies of requests in flight), against one cap. Past the cap, the connection that asks for more is refused (503)
/// instead of memory growing with the number of connections. Used from one event-loop thread only.
public final class BufferBudget {
    /// The cap, in bytes.
    public var limit: Int
    /// What all connections hold now.
    public private(set) var total = 0
    private var logThrottle = LogThrottle()
    /// A connection holding no more than this is never refused, so that small requests always pass.
    public static let exempt = 64 * 1024

    /// What one connection holds of the budget now: kept by the connection (its one owner), handed to `hold` and
    /// `release`, so that the budget keeps no table of connections (a dictionary lookup on every read cost the recorder's
    /// loop about 1,500 instructions an exchange).
    public struct Share: Sendable, Equatable {
        public fileprivate(set) var bytes = 0
        public init() {}
    }

    public init(limit: Int) { self.limit = limit }

    /// Records that the connection of `share` now holds `bytes`. False when it holds more than `exempt` and the total is
    /// past the cap.
    public func hold(_ share: inout Share, _ bytes: Int) -> Bool {
        total += bytes - share.bytes
        share.bytes = bytes
        return bytes <= BufferBudget.exempt || total <= limit
    }

    /// Gives back what the connection of `share` held (it closed, or left HTTP for a tunnel); its share holds nothing after.
    public func release(_ share: inout Share) {
        total -= share.bytes
        share.bytes = 0
    }

    /// Whether a refusal should be logged now: one line a second at most.
    public func shouldLog(nowNanos: UInt64) -> Bool { logThrottle.allow(nowNanos: nowNanos) }
}
