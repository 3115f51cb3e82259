import Foundation
import TapCore

/// A duration given on the command line: `250ms`, `2.5s`, `5m`, or a bare number of seconds, from 0 to 24 hours
/// (`CheckedDuration`, which the throwing parsers below use to say what is wrong).
public enum ReplayDuration {
    /// Seconds, or nil when `text` is not a duration from 0 to 24 hours.
    public static func parse(_ text: String) -> Double? { try? CheckedDuration.parse(text) }
}

/// How long each answer waits before its first byte: `original` (the recorded wait), `none`, `scale:F`, `fixed:DURATION`.
public enum TimingMode: Sendable, Equatable {
    case original
    case none
    case scale(Double)
    case fixed(Double)

    /// The factors `scale:F` takes: a recorded wait of a minute stretched a thousandfold is still under a day.
    public static let scaleFactors: ClosedRange<Double> = 0...1000

    /// The mode, or nil when `text` is not one.
    public static func parse(_ text: String) -> TimingMode? { try? read(text) }

    /// The mode, or an error saying what is wrong (the unit or the allowed range), for `--timing`'s refusal.
    public static func read(_ text: String) throws(ReplayError) -> TimingMode {
        switch text {
        case "original": return .original
        case "none": return TimingMode.none
        default:
            if text.hasPrefix("scale:") || text.hasPrefix("scale=") {
                do { return .scale(try Checked.number(text.dropFirst(6), within: scaleFactors)) } catch {
                    throw ReplayError("the scale factor: \(error)")
                }
            }
            if text.hasPrefix("fixed:") || text.hasPrefix("fixed=") {
                do { return .fixed(try CheckedDuration.parse(text.dropFirst(6))) } catch { throw ReplayError("the fixed delay: \(error)") }
            }
            throw ReplayError("expected original, none, scale:F or fixed:DURATION")
        }
    }

    /// The base delay for an answer whose recorded wait was `recorded` seconds.
    public func delay(recorded: Double) -> Double {
        switch self {
        case .original: return recorded
        case .none: return 0
        case let .scale(f): return recorded * f
        case let .fixed(d): return d
        }
    }
}

/// Random delay added on top of the timing: `uniform:MIN-MAX` or `lognormal:MEDIAN,SIGMA[,MAX]` (WireMock's shapes,
/// with its `maxValue` cap), drawn from the seed so that the same seed gives the same schedule.
public enum Jitter: Sendable, Equatable {
    case uniform(min: Double, max: Double)
    case lognormal(median: Double, sigma: Double, max: Double?)

    /// The spreads `lognormal:…,SIGMA` takes (WireMock's examples use 0.1 to 1).
    public static let sigmas: ClosedRange<Double> = 0...10

    /// The distribution, or nil when `text` is not one.
    public static func parse(_ text: String) -> Jitter? { try? read(text) }

    /// The distribution, or an error saying which part is wrong and its allowed range, for `--jitter`'s refusal.
    public static func read(_ text: String) throws(ReplayError) -> Jitter {
        func duration(_ t: String, _ what: String) throws(ReplayError) -> Double {
            do { return try CheckedDuration.parse(t) } catch { throw ReplayError("\(what): \(error)") }
        }
        if text.hasPrefix("uniform:") {
            let parts = text.dropFirst(8).split(separator: "-", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw ReplayError("expected uniform:MIN-MAX, such as uniform:10ms-50ms") }
            let a = try duration(parts[0], "MIN"), b = try duration(parts[1], "MAX")
            guard a <= b else { throw ReplayError("MIN is above MAX") }
            return .uniform(min: a, max: b)
        }
        if text.hasPrefix("lognormal:") {
            let parts = text.dropFirst(10).split(separator: ",").map(String.init)
            guard parts.count == 2 || parts.count == 3 else { throw ReplayError("expected lognormal:MEDIAN,SIGMA[,MAX], such as lognormal:100ms,0.5,2s") }
            let m = try duration(parts[0], "MEDIAN")
            guard m > 0 else { throw ReplayError("MEDIAN must be above 0") }
            let s: Double
            do { s = try Checked.number(parts[1], within: sigmas) } catch { throw ReplayError("SIGMA: \(error)") }
            return .lognormal(median: m, sigma: s, max: parts.count == 3 ? try duration(parts[2], "MAX") : nil)
        }
        throw ReplayError("expected uniform:MIN-MAX or lognormal:MEDIAN,SIGMA[,MAX]")
    }

    /// One draw, from two uniform numbers in [0, 1).
    func draw(_ u1: Double, _ u2: Double) -> Double {
        switch self {
        case let .uniform(a, b): return a + (b - a) * u1
        case let .lognormal(median, sigma, cap):
            // Box–Muller: a standard normal from two uniforms.
            let z = (-2 * log(max(u1, 1e-300))).squareRoot() * cos(2 * .pi * u2)
            let v = median * exp(sigma * z)
            return cap.map { min(v, $0) } ?? v
        }
    }
}

/// A per-message delay: `MATCH=DURATION`, where MATCH is a message type (`ARes`), an occurrence in each transaction
/// (`CRes#2`), a recorded exchange number (`exchange:7`) or a path (`path:/acs/challenge`).
public struct DelayRule: Sendable, Equatable {
    public enum Match: Sendable, Hashable {
        case messageType(String)
        case occurrence(String, Int)
        case exchange(Int64)
        case path(String)
    }
    public var match: Match
    public var seconds: Double

    public init(match: Match, seconds: Double) {
        self.match = match
        self.seconds = seconds
    }

    /// The rule, or nil when `text` is not one.
    public static func parse(_ text: String) -> DelayRule? { try? read(text) }

    /// The rule, or an error saying what is wrong (the form, the match, or the duration's range), for `--delay`'s refusal.
    public static func read(_ text: String) throws(ReplayError) -> DelayRule {
        guard let eq = text.lastIndex(of: "="), let match = Match.parse(String(text[..<eq])) else {
            throw ReplayError("expected MATCH=DURATION, MATCH one of ARes, CRes#2, exchange:7, path:/p; DURATION like 250ms, 2.5s, 5m")
        }
        do { return DelayRule(match: match, seconds: try CheckedDuration.parse(text[text.index(after: eq)...])) } catch {
            throw ReplayError("\(error)")
        }
    }

    func applies(to answer: ScheduledAnswer) -> Bool { match.applies(to: answer) }
}

/// What the scheduler needs to know about one answer.
public struct ScheduledAnswer: Sendable {
    public var recordedExchangeID: Int64
    /// The recorded wait: first response byte minus request sent, in seconds.
    public var recordedWait: Double
    /// The 3DS message type of the answer (ARes, CRes, RReq …), if any.
    public var messageType: String?
    /// Its position among answers of the same type in its transaction (1-based).
    public var occurrence: Int
    public var path: String
    /// How many times this recorded exchange has been served before (0 the first time).
    public var servedBefore: Int

    public init(recordedExchangeID: Int64, recordedWait: Double, messageType: String?, occurrence: Int, path: String, servedBefore: Int) {
        self.recordedExchangeID = recordedExchangeID
        self.recordedWait = recordedWait
        self.messageType = messageType
        self.occurrence = occurrence
        self.path = path
        self.servedBefore = servedBefore
    }
}

/// Decides each answer's delay from the timing mode, the per-message rules and the seeded jitter. A plain value:
/// the same inputs give the same delay, whatever the order in which concurrent requests arrive.
public struct ReplaySchedule: Sendable {
    public var timing: TimingMode = .original
    public var jitter: Jitter?
    public var rules: [DelayRule] = []
    public var seed: UInt64 = 0

    public init(timing: TimingMode = .original, jitter: Jitter? = nil, rules: [DelayRule] = [], seed: UInt64 = 0) {
        self.timing = timing
        self.jitter = jitter
        self.rules = rules
        self.seed = seed
    }

    /// Seconds to wait before the answer's first byte.
    public func delay(for a: ScheduledAnswer) -> Double {
        var d = timing.delay(recorded: max(0, a.recordedWait))
        if let rule = rules.last(where: { $0.applies(to: a) }) { d = rule.seconds }
        if let jitter {
            var rng = SeededRandom(seed: seed, stream: UInt64(bitPattern: a.recordedExchangeID), index: UInt64(a.servedBefore))
            d += jitter.draw(rng.nextUnit(), rng.nextUnit())
        }
        // A recorded wait from a corrupted session, a large scale or a lognormal tail: never below 0 or past a day.
        return CheckedDuration.clamp(d)
    }
}

/// SplitMix64: a small, fast generator whose whole output is fixed by (seed, stream, index).
public struct SeededRandom: Sendable {
    var state: UInt64

    public init(seed: UInt64, stream: UInt64 = 0, index: UInt64 = 0) {
        state = seed ^ (stream &* 0x9E37_79B9_7F4A_7C15) ^ (index &* 0xC2B2_AE3D_27D4_EB4F)
        _ = next()
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in [0, 1).
    public mutating func nextUnit() -> Double { Double(next() >> 11) / Double(1 << 53) }

    /// `count` bytes.
    public mutating func bytes(_ count: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(count + 8)
        while out.count < count { withUnsafeBytes(of: next().littleEndian) { out += $0 } }
        return Array(out.prefix(count))
    }

    /// A version-4-shaped UUID, lowercase: the bytes `bytes(16)` would give, written straight into the string.
    public mutating func uuid() -> String {
        let words = (next().littleEndian, next().littleEndian)
        return withUnsafeBytes(of: words) { Hex.version4UUID($0) }
    }
}
