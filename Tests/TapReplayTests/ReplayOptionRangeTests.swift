import Foundation
import Testing
@testable import TapReplay

/// Hardening, round two, defects 2 and 6: every number in the replay's options is checked with its range where it is
/// parsed (a 1e11 s delay trapped the replayer on the first matching request), the schedule never leaves 0 to
/// 24 h whatever a session holds, and a rules file of thousands of identical rules is refused in linear time and memory.
@Suite struct ReplayOptionRangeTests {
    func refusal(_ parse: () throws -> Void) -> String? {
        do { try parse(); return nil } catch { return "\(error)" }
    }

    @Test func outOfRangeValuesAreRefusedWithTheirRange() {
        let cases: [(String?, String)] = [
            (refusal { _ = try TimingMode.read("fixed:1e11s") }, "the fixed delay: a duration must be from 0s to 24h"),
            (refusal { _ = try TimingMode.read("scale:1e300") }, "the scale factor: expected a number from 0 to 1000"),
            (refusal { _ = try TimingMode.read("scale:nan") }, "the scale factor: expected a number from 0 to 1000"),
            (refusal { _ = try TimingMode.read("fast") }, "expected original, none, scale:F or fixed:DURATION"),
            (refusal { _ = try Jitter.read("uniform:1e11s-2e11s") }, "MIN: a duration must be from 0s to 24h"),
            (refusal { _ = try Jitter.read("uniform:1s-inf") }, "MAX: a duration must be from 0s to 24h"),
            (refusal { _ = try Jitter.read("uniform:2s-1s") }, "MIN is above MAX"),
            (refusal { _ = try Jitter.read("lognormal:100ms,1e300") }, "SIGMA: expected a number from 0 to 10"),
            (refusal { _ = try Jitter.read("lognormal:0s,1") }, "MEDIAN must be above 0"),
            (refusal { _ = try Jitter.read("lognormal:1s,1,25h") }, "MAX: a duration must be from 0s to 24h"),
            (refusal { _ = try DelayRule.read("ARes=1e11s") }, "a duration must be from 0s to 24h"),
            (refusal { _ = try DelayRule.read("ARes=soon") }, "expected a duration such as 250ms, 2.5s, 5m or 1h"),
            (refusal { _ = try FaultRule.parse("ARes=delay:99999999999999999999s") },
             "--fault ARes=delay:99999999999999999999s: delay:D: a duration must be from 0s to 24h"),
            (refusal { _ = try FaultRule.parse("ARes=dribble:inf") }, "dribble:D: a duration must be from 0s to 24h"),
            (refusal { _ = try FaultRule.parse("RReq=rreq-delay:1e300") }, "rreq-delay:D: a duration must be from 0s to 24h"),
            (refusal { _ = try FaultRule.parse("ARes=status:99999999999999999999") }, "status:CODE: expected an HTTP status from 100 to 599"),
        ]
        for (got, expected) in cases { #expect(got?.hasSuffix(expected) == true, "\(got ?? "accepted"), expected …\(expected)") }
        #expect(refusal { _ = try FaultRule.parse("ARes=explode") }?.hasPrefix("--fault ARes=explode: unknown action 'explode'; expected hang") == true)
        // The edges are accepted.
        #expect(TimingMode.parse("fixed:24h") == .fixed(86_400) && TimingMode.parse("scale:1000") == .scale(1000))
        #expect(DelayRule.parse("ARes=86400") == DelayRule(match: .messageType("ARes"), seconds: 86_400))
        #expect(FaultAction.parse("delay:0s") == .delay(0) && Jitter.parse("lognormal:1s,10,24h") == .lognormal(median: 1, sigma: 10, max: 86_400))
    }

    @Test func theScheduleStaysWithinADayWhateverTheSessionHolds() {
        let recorded: [Double] = [1e300, .infinity, .nan, -.infinity, -1e300, 86_399, 0.1]
        let schedules = [ReplaySchedule(timing: .original), ReplaySchedule(timing: .scale(1000)),
                         ReplaySchedule(timing: .original, jitter: .lognormal(median: 86_400, sigma: 10, max: nil), seed: 7),
                         ReplaySchedule(timing: .fixed(86_400), jitter: .uniform(min: 86_400, max: 86_400))]
        for s in schedules {
            for (i, wait) in recorded.enumerated() {
                let d = s.delay(for: ScheduledAnswer(recordedExchangeID: Int64(i), recordedWait: wait, messageType: "ARes", occurrence: 1,
                                                     path: "/", servedBefore: 0))
                #expect(d >= 0 && d <= 86_400, "\(s.timing) with a recorded wait of \(wait): \(d)")
            }
        }
    }

    @Test func faultDescriptionsNeverTrap() {
        #expect(FaultAction.delay(1e20).description == "delay:1e+20s" && FaultAction.dribble(.infinity).description == "dribble:infs")
        #expect(FaultAction.rreqDelay(0.25).description == "rreq-delay:250ms" && FaultAction.delay(2).description == "delay:2s")
        #expect(ReplayFaults.describe(-1e300) == "\(Int.min)ms" && ReplayFaults.describe(.nan) == "nans")
    }

    @Test func threeThousandIdenticalRulesAreRefusedWithTheFirstFiveAndACount() throws {
        let catalog = try ReplayEngineTests.catalog("demo-app.3dstape")
        let file = "[" + Array(repeating: #"{"match": "ARes", "action": "hang"}"#, count: 3000).joined(separator: ",\n") + "]"
        let clock = ContinuousClock()
        var problems: [String] = []
        let took = try clock.measure {
            let rules = try FaultRule.parseFile(Array(file.utf8), name: "faults.json")
            problems = ReplayFaults.problems(rules, catalog: catalog)
        }
        #expect(took < .seconds(2), "was 7.6 s and 1.15 GB: a message for each of 4.5 million pairs (\(took))")
        #expect(problems.count == 6 && problems.prefix(5).allSatisfy { $0.hasPrefix("--fault ARes=hang and ARes=hang overlap (rules 1 and ") })
        #expect(problems.last == "… and 4498495 more problems with these 3000 rules", "\(problems.last ?? "")")
        // Both kinds of problem, counted together: overlaps and rules that can never apply.
        let mixed = try ["CRes#2=hang", "ARes=hang", "ARes=reset", "exchange:999=close", "path:/nowhere=hang", "RReq=bad-counter",
                         "ARes=close", "CRes#2=reset"].map { (t) throws(ReplayError) in try FaultRule.parse(t) }
        let found = ReplayFaults.problems(mixed, catalog: catalog, limit: 3)
        #expect(found.count == 4 && found[0].contains("CRes#2=hang and CRes#2=reset overlap (rules 1 and 8)"), "\(found)")
        #expect(found.last == "… and 4 more problems with these 8 rules", "\(found)")
        #expect(ReplayFaults.problems(Array(mixed.prefix(2)), catalog: catalog).isEmpty)
    }
}
