import Foundation

/// How many things are under way (an ACS's RReqs: scheduled, or sent and not yet answered), counted on the thread that
/// starts and ends them and read from any: `demo` waits for none to be due before it stops its recorder and replayer,
/// where it slept a fixed time.
public final class PendingCount: Sendable {
    private let count = Locked(0)

    public init() {}

    /// The count now.
    public var value: Int { count.withLock { $0 } }

    /// One more under way.
    public func begin() { count.withLock { $0 += 1 } }

    /// One fewer under way (never below 0).
    public func end() { count.withLock { $0 = max($0 - 1, 0) } }

    /// Waits until none is under way: true, or false once `seconds` have passed with some still under way.
    @discardableResult
    public func waitForNone(within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while value > 0 {
            if Date() >= deadline { return false }
            usleep(1_000)
        }
        return true
    }
}
