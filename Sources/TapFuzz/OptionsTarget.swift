import TapCore
import TapInspect
import TapReplay

/// The `options` fuzz target: option values as the command line and rule files give them (durations, sizes, numbers,
/// probabilities, timing and jitter specs, delay and fault rules, a faults file), through the parsers the CLI uses, and
/// the input's first eight bytes as any Double through the checked conversions. Nothing may trap (Hardening, round two,
/// defect 2: `Int(Double)` on an option's value killed the replayer), and what a parser accepts must be within its range.
enum OptionsFuzz {
    static func run(_ bytes: [UInt8]) {
        conversions(bytes)
        let text = String(decoding: bytes, as: UTF8.self)
        parse(text)
        // Several values, one a line (the first eight), as a command line gives several options.
        let lines = text.split(separator: "\n", maxSplits: 8).map(String.init)
        if lines.count > 1 { for value in lines { parse(value) } }
        // As a rules file (a JSON array; `//` comments), checked against an empty session's catalog.
        if bytes.contains(UInt8(ascii: "[")), let rules = try? FaultRule.parseFile(bytes, name: "faults.json") {
            let problems = ReplayFaults.problems(rules, catalog: catalog)
            check(problems.count <= 6, "more than five problems and a count: \(problems.count)")
        }
    }

    /// An empty session, for the applicability checks (every rule "can never apply" there, one more line each).
    static let catalog = ReplayCatalog(path: "fuzz.3dstape", exchanges: [])

    static func parse(_ value: String) {
        if let d = try? CheckedDuration.parse(value) { check(CheckedDuration.anyWait.contains(d), "duration \(d) out of range"); _ = CheckedDuration.describe(d) }
        if let d = try? CheckedDuration.parse(value, within: CheckedDuration.timeout) { check(d >= 0.001 && d <= 86_400, "timeout \(d)") }
        if let n = try? Checked.number(value, within: 0...1) { check(n >= 0 && n <= 1, "probability \(n)") }
        if let n = try? Checked.byteSize(value, within: 1...(64 << 30)) { check(n >= 1 && n <= 64 << 30, "size \(n)"); _ = Checked.describe(bytes: n) }
        var schedule = ReplaySchedule(seed: 7)
        if let t = try? TimingMode.read(value) {
            if case let .scale(f) = t { check(TimingMode.scaleFactors.contains(f), "scale \(f)") }
            if case let .fixed(d) = t { check(CheckedDuration.anyWait.contains(d), "fixed \(d)") }
            schedule.timing = t
        }
        if let j = try? Jitter.read(value) { schedule.jitter = j }
        if let r = try? DelayRule.read(value) {
            check(CheckedDuration.anyWait.contains(r.seconds), "delay rule \(r.seconds)")
            schedule.rules = [r]
        }
        if let f = try? FaultRule.parse(value) {
            check(f.probability >= 0 && f.probability <= 1, "probability \(f.probability)")
            switch f.action {
            case let .delay(d), let .dribble(d), let .rreqDelay(d): check(CheckedDuration.anyWait.contains(d), "fault duration \(d)")
            default: break
            }
            _ = f.description
            _ = ReplayFaults.problems([f, f], catalog: catalog)
        }
        for wait in [0.1, 1e300, .infinity, .nan, -1] {
            let d = schedule.delay(for: ScheduledAnswer(recordedExchangeID: Int64(value.utf8.count), recordedWait: wait, messageType: "ARes",
                                                        occurrence: 1, path: "/", servedBefore: value.utf8.count))
            check(d >= 0 && d <= CheckedDuration.maximum, "scheduled delay \(d)")
        }
    }

    /// Any Double (the input's first eight bytes as its bit pattern) through every checked conversion.
    static func conversions(_ bytes: [UInt8]) {
        var bits: UInt64 = 0
        for b in bytes.prefix(8) { bits = bits << 8 | UInt64(b) }
        let v = Double(bitPattern: bits)
        if let i = Checked.int(v) { check(Double(i) == v.rounded(.towardZero) || abs(v) >= 9.2e18, "int(\(v)) = \(i)") }
        _ = Checked.int(rounding: v)
        _ = Checked.clampedInt(v)
        _ = Checked.milliseconds(v)
        let ns = Checked.nanoseconds(v)
        _ = Checked.deadline(ns, plus: Checked.nanoseconds(-v))
        check(!(v > 0 && v < 1e9) || ns < .max, "nanoseconds(\(v)) saturated early")
        let t = Checked.storedTime(v)
        check(Checked.calendarTimes.contains(t), "stored time \(t)")
        _ = HAR.isoDate(v)
        _ = CheckedDuration.describe(v)
        check(CheckedDuration.anyWait.contains(CheckedDuration.clamp(v)), "clamp(\(v))")
    }

    static func check(_ condition: Bool, _ what: @autoclosure () -> String) {
        if !condition { fatalError("options: \(what())") }
    }
}
