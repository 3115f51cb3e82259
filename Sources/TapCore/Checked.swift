/// Numbers from outside (command-line options, rule files, HAR and session files, the wire) made into integers, byte
/// sizes and time spans without Swift's trapping conversions: `Int(someDouble)` and `UInt64(someDouble)` stop the
/// process on NaN, an infinity or a value out of range. Every conversion of an outside `Double` goes through here:
/// values are refused (nil, or a `CheckedValueError` naming the allowed range) where they are parsed, and clamped or
/// saturated where a value that was stored or already checked is only shown or timed.
public enum Checked {
    /// 2^63 as a Double: the first value above `Int.max` (which a Double cannot hold exactly).
    private static let twoTo63 = 9_223_372_036_854_775_808.0
    /// 2^64 as a Double: the first value above `UInt64.max`.
    private static let twoTo64 = 18_446_744_073_709_551_616.0

    /// `value` rounded toward zero, or nil when it is NaN, infinite or outside `Int`'s range.
    public static func int(_ value: Double) -> Int? {
        let t = value.rounded(.towardZero)
        guard t.isFinite, t >= -twoTo63, t < twoTo63 else { return nil }
        return Int(t)
    }

    /// `value` rounded to the nearest integer (halves away from zero), or nil when that is not an `Int`.
    public static func int(rounding value: Double) -> Int? { int(value.rounded()) }

    /// `value` rounded toward zero and clamped to `Int`'s range; NaN gives 0. For a number that is shown, not trusted.
    public static func clampedInt(_ value: Double) -> Int {
        if value.isNaN { return 0 }
        return int(value) ?? (value < 0 ? Int.min : Int.max)
    }

    /// `value` rounded to the nearest integer and clamped to `Int`'s range; NaN gives 0.
    public static func clampedInt(rounding value: Double) -> Int { clampedInt(value.rounded()) }

    /// `value` forced into `range`; NaN gives the range's lower bound, or 0 when 0 is in the range.
    public static func clamp(_ value: Double, to range: ClosedRange<Double>) -> Double {
        if value.isNaN { return range.contains(0) ? 0 : range.lowerBound }
        return min(max(value, range.lowerBound), range.upperBound)
    }

    /// The times a session file or an ISO 8601 date can hold: seconds since 1970 from the year 1 to the end of 9999.
    public static let calendarTimes: ClosedRange<Double> = -62_135_596_800...253_402_300_799

    /// A time read from a stored file, clamped to `calendarTimes` (NaN reads as the epoch): a corrupted or hand-edited
    /// session (`t_request_start` of 1e300, or Inf) reads as a time every consumer can format and subtract.
    public static func storedTime(_ seconds: Double) -> Double { clamp(seconds, to: calendarTimes) }

    /// `seconds` as whole milliseconds (rounded, clamped): for file names, JSON reports and messages.
    public static func milliseconds(_ seconds: Double) -> Int { clampedInt(rounding: seconds * 1000) }

    /// `seconds` as nanoseconds for a timer, saturating: NaN and negatives give 0, anything past `UInt64` gives
    /// `UInt64.max` (a deadline that never comes).
    public static func nanoseconds(_ seconds: Double) -> UInt64 {
        guard seconds > 0 else { return 0 } // also NaN
        let n = (seconds * 1e9).rounded(.towardZero)
        return n < twoTo64 ? UInt64(n) : .max
    }

    /// `instant + nanos`, saturating at `UInt64.max`: a monotonic deadline that overflows is one that never comes.
    public static func deadline(_ instant: UInt64, plus nanos: UInt64) -> UInt64 {
        let (sum, overflow) = instant.addingReportingOverflow(nanos)
        return overflow ? .max : sum
    }

    /// A plain number (`0.5`, `3`, `1e2`) within `range`; NaN and infinities are never within it.
    public static func number(_ text: some StringProtocol, within range: ClosedRange<Double>) throws(CheckedValueError) -> Double {
        let expected = "expected a number from \(plain(range.lowerBound)) to \(plain(range.upperBound))"
        let t = String(text).trimmedSpaces
        // Decimal only: Double() also reads hexadecimal (`0x10` was a rate of 16), `inf` and `nan`.
        guard t.allSatisfy({ "0123456789.eE+-".contains($0) }), let v = Double(t) else { throw CheckedValueError(expected) }
        guard range.contains(v) else { throw CheckedValueError(expected) }
        return v
    }

    /// A byte size within `range`: `4096`, `64KiB`/`64K`, `512MiB`/`512M`, `2GiB`/`2G`, `1TiB`/`1T`.
    public static func byteSize(_ text: some StringProtocol, within range: ClosedRange<Int>) throws(CheckedValueError) -> Int {
        func refusal() -> CheckedValueError {
            CheckedValueError("expected a size from \(describe(bytes: range.lowerBound)) to \(describe(bytes: range.upperBound)), "
                              + "such as " + sizeExamples(within: range))
        }
        let t = String(text).trimmedSpaces
        var digits = Substring(t), factor = 1
        if let (suffix, f) = sizeUnits.first(where: { t.hasSuffix($0.0) }) {
            digits = t.dropLast(suffix.count)
            factor = f
        }
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 &- 0x30 <= 9 }), let n = Int(digits) else { throw refusal() }
        let (v, overflow) = n.multipliedReportingOverflow(by: factor)
        guard !overflow, range.contains(v) else { throw refusal() }
        return v
    }

    /// Sizes to show in a refusal, every one of them valid: those of `4096`, `64KiB`, `512MiB` within `range`, with the
    /// smallest valid size first when fewer than two are (`--max-session-size` starts at 256KiB, so neither "4096" nor "64KiB").
    static func sizeExamples(within range: ClosedRange<Int>) -> String {
        var examples = [(4096, "4096"), (64 << 10, "64KiB"), (512 << 20, "512MiB")].filter { range.contains($0.0) }.map(\.1)
        let lowest = describe(bytes: range.lowerBound)
        if examples.count < 2, !examples.contains(lowest) { examples.insert(lowest, at: 0) }
        return examples.count > 2 ? examples.dropLast().joined(separator: ", ") + " or " + examples.last! : examples.joined(separator: " or ")
    }

    /// The suffixes `byteSize` takes, the longer first.
    private static let sizeUnits: [(String, Int)] = [("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40),
                                                      ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40)]

    /// `4096`, `64KiB`, `512MiB`, `2GiB`, `1TiB`: the largest binary unit that divides the size.
    public static func describe(bytes: Int) -> String {
        for (suffix, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] where bytes > 0 && bytes % (1 << shift) == 0 {
            return "\(bytes >> shift)\(suffix)"
        }
        return String(bytes)
    }

    /// A finite number as it was meant: `3` rather than `3.0`, `0.5` as is.
    static func plain(_ v: Double) -> String {
        if let i = int(v), Double(i) == v { return String(i) }
        return String(v)
    }
}

/// A span of time from outside: `250ms`, `100us`, `2.5s`, `5m`, `1h`, or a bare number of seconds, checked against a
/// range before it becomes a timer or a schedule. NaN, infinities, negatives and anything past the range are refused.
public enum CheckedDuration {
    /// The longest wait any option or rule takes: 24 hours.
    public static let maximum: Double = 86_400
    /// Every duration an option may give: from 0 to 24 hours.
    public static let anyWait: ClosedRange<Double> = 0...maximum
    /// A timeout: at least a millisecond, at most 24 hours.
    public static let timeout: ClosedRange<Double> = 0.001...maximum

    /// Seconds, or an error saying what a duration looks like or what range it must be in.
    public static func parse(_ text: some StringProtocol, within range: ClosedRange<Double> = anyWait) throws(CheckedValueError) -> Double {
        let t = String(text).trimmedSpaces
        var number = Substring(t), factor = 1.0
        if let (suffix, f) = units.first(where: { t.hasSuffix($0.0) }) {
            number = t.dropLast(suffix.count)
            factor = f
        }
        guard let v = Double(number), !v.isNaN else {
            throw CheckedValueError("expected a duration such as 250ms, 2.5s, 5m or 1h")
        }
        let seconds = v * factor
        guard range.contains(seconds) else { throw CheckedValueError("a duration must be from \(describe(range: range))") }
        return seconds
    }

    /// The suffixes `parse` takes (`ms` and `us` before `s`).
    private static let units: [(String, Double)] = [("ms", 0.001), ("us", 0.000_001), ("s", 1), ("m", 60), ("h", 3600)]

    /// `seconds` forced into `range` (NaN gives 0, or the lower bound): for waits computed from values already stored.
    public static func clamp(_ seconds: Double, to range: ClosedRange<Double> = anyWait) -> Double {
        Checked.clamp(seconds, to: range)
    }

    /// `250ms`, `2s`, `2.5s`, as the options take it; any value (`1e+20s`, `infs`) is written without trapping.
    public static func describe(_ seconds: Double) -> String {
        if seconds < 1 { return "\(Checked.milliseconds(seconds))ms" }
        if let whole = Checked.int(seconds), Double(whole) == seconds { return "\(whole)s" }
        return "\(seconds)s"
    }

    /// `0s to 24h`, `1ms to 24h`: a range as the refusals name it.
    public static func describe(range: ClosedRange<Double>) -> String {
        func bound(_ s: Double) -> String {
            if s == 0 { return "0s" }
            return s >= 3600 && s.truncatingRemainder(dividingBy: 3600) == 0 ? "\(Checked.clampedInt(s / 3600))h" : describe(s)
        }
        return "\(bound(range.lowerBound)) to \(bound(range.upperBound))"
    }
}

/// A value from outside that is malformed or out of range; the description says what is allowed (the caller puts the
/// option or field name in front).
public struct CheckedValueError: Error, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension String {
    /// Without leading and trailing spaces and tabs.
    fileprivate var trimmedSpaces: String {
        let u = utf8
        guard let first = u.firstIndex(where: { $0 != 0x20 && $0 != 0x09 }) else { return "" }
        let last = u.lastIndex(where: { $0 != 0x20 && $0 != 0x09 })!
        return String(self[first...last])
    }
}
