import Foundation

/// What a session writer has waiting at one moment: events submitted and not yet committed, and their body bytes.
public struct WriterBacklog: Sendable, Equatable {
    public var events: Int
    public var bytes: Int

    /// Nothing waiting (no writer at all reads as this).
    public static let empty = WriterBacklog(events: 0, bytes: 0)
}

extension SessionWriter {
    /// The backlog now (two relaxed atomic loads).
    public var backlogNow: WriterBacklog { WriterBacklog(events: backlog, bytes: backlogBytes) }
}

/// When traffic waits for a session writer that has fallen behind, the one rule of the recorder (requests paced, then
/// held) and the replayer (answers held): memory stays bounded by a disk slower than the network instead of a queue
/// growing. Free of I/O and clocks: the server passes in the writer's backlog and its monotonic time, and schedules the
/// waits itself. What the waits cost is counted in a `Cost`, which says it in one sentence for the summary and the session.
public struct WriterBackpressure: Sendable {
    /// Backlog events above which traffic is held (and from a quarter of which requests are paced).
    public var eventLimit: Int
    /// Backlog body bytes above which traffic is held (a few large uploads weigh more than many small exchanges).
    public var byteLimit: Int

    public init(eventLimit: Int = 2048, byteLimit: Int = SessionWriter.backlogByteLimit) {
        self.eventLimit = eventLimit
        self.byteLimit = byteLimit
    }

    /// The pacing delay at the limit (seconds).
    public static let maxPacingDelay = 0.002

    /// Whether the writer is so far behind that new traffic is held until it catches up: more than `eventLimit` events or
    /// more than `byteLimit` body bytes waiting.
    public func isBehind(_ backlog: WriterBacklog) -> Bool { backlog.events > eventLimit || backlog.bytes > byteLimit }

    /// Whether held traffic may go on: the backlog is back under 7/8 of both limits (a small step, so that each hold is
    /// short: about 256 exchanges of writer time at the default limit).
    public func hasCaughtUp(_ backlog: WriterBacklog) -> Bool {
        backlog.events <= eventLimit - eventLimit / 8 && backlog.bytes <= byteLimit - byteLimit / 8
    }

    /// How long a new request waits before it is handled while the backlog is between a quarter of a limit and the limit:
    /// 0 below, rising linearly to `maxPacingDelay` at the limit. Traffic faster than the writer slows down by fractions
    /// of a millisecond per request, so that the backlog settles where the two rates meet, instead of filling up and
    /// holding every request until a large batch is written.
    public func pacingDelay(_ backlog: WriterBacklog) -> Double {
        let events = Double(backlog.events - eventLimit / 4) / Double(eventLimit - eventLimit / 4)
        let bytes = Double(backlog.bytes - byteLimit / 4) / Double(byteLimit - byteLimit / 4)
        let f = max(events, bytes)
        return f <= 0 ? 0 : min(f, 1) * WriterBackpressure.maxPacingDelay
    }

    /// What the writer's backpressure cost the traffic: requests paced (and their waits in all), requests or answers held
    /// (and the longest hold).
    public struct Cost: Sendable, Equatable {
        public var pacedCount = 0
        public var pacedSeconds = 0.0
        public var heldCount = 0
        public var longestHoldSeconds = 0.0

        public init() {}

        /// One request paced by `seconds`.
        public mutating func paced(_ seconds: Double) {
            pacedCount += 1
            pacedSeconds += seconds
        }

        /// One request or answer held from `since` to `until` (monotonic nanoseconds).
        public mutating func held(since: UInt64, until: UInt64) {
            heldCount += 1
            longestHoldSeconds = max(longestHoldSeconds, Double(until &- since) / 1e9)
        }

        /// The recorder's sentence: what pacing and holding cost `exchanges` requests, or nil when no request waited.
        public func requestSummary(exchanges: Int) -> String? {
            guard pacedCount > 0 || heldCount > 0 else { return nil }
            var parts: [String] = []
            if pacedCount > 0 {
                parts.append("\(pacedCount) of \(exchanges) requests waited \(Self.format(pacedSeconds * 1000 / Double(pacedCount), digits: 3)) ms on average "
                             + "(\(Self.format(pacedSeconds * 1000, digits: 1)) ms in all)")
            }
            if heldCount > 0 {
                parts.append("\(heldCount)\(pacedCount == 0 ? " of \(exchanges) requests" : "") \(heldCount == 1 ? "was" : "were") held until it caught up "
                             + "(the longest \(Self.format(longestHoldSeconds * 1000, digits: 1)) ms)")
            }
            return "the session writer fell behind the traffic: " + parts.joined(separator: " and ")
                + "; each wait came before the request was forwarded, so the recorded upstream timings are not affected"
        }

        /// The replayer's sentence: the answers held past their scheduled delay, or nil when none was.
        public var answerSummary: String? {
            guard heldCount > 0 else { return nil }
            return "the session writer fell behind: \(heldCount) answers waited for it past their scheduled delay (the longest "
                + "\(Self.format(longestHoldSeconds * 1000, digits: 1)) ms); each exchange's actual delay in the replay session includes its wait"
        }

        /// `value` with `digits` decimals, as `%.Nf` prints it.
        static func format(_ value: Double, digits: Int) -> String { String(format: "%.\(digits)f", value) }
    }
}
