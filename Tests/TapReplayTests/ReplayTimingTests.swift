import Testing
@testable import TapReplay

@Suite struct ReplayTimingTests {
    @Test func durations() {
        #expect(ReplayDuration.parse("250ms") == 0.25)
        #expect(ReplayDuration.parse("2.5s") == 2.5)
        #expect(ReplayDuration.parse("5m") == 300)
        #expect(ReplayDuration.parse("1") == 1)
        #expect(ReplayDuration.parse("-1s") == nil)
        #expect(ReplayDuration.parse("abc") == nil)
        #expect(ReplayDuration.parse("") == nil)
    }

    @Test func timingModes() {
        #expect(TimingMode.parse("original") == .original)
        #expect(TimingMode.parse("none") == TimingMode.none)
        #expect(TimingMode.parse("scale:0.5") == .scale(0.5))
        #expect(TimingMode.parse("scale=3") == .scale(3))
        #expect(TimingMode.parse("fixed:250ms") == .fixed(0.25))
        #expect(TimingMode.parse("scale:x") == nil)
        #expect(TimingMode.parse("slow") == nil)
        #expect(TimingMode.scale(3).delay(recorded: 0.1) == 0.30000000000000004 || abs(TimingMode.scale(3).delay(recorded: 0.1) - 0.3) < 1e-12)
        #expect(TimingMode.fixed(2).delay(recorded: 0.1) == 2)
        #expect(TimingMode.none.delay(recorded: 0.1) == 0)
    }

    @Test func delayRules() {
        #expect(DelayRule.parse("ARes=2s") == DelayRule(match: .messageType("ARes"), seconds: 2))
        #expect(DelayRule.parse("CRes#2=500ms") == DelayRule(match: .occurrence("CRes", 2), seconds: 0.5))
        #expect(DelayRule.parse("exchange:7=1s") == DelayRule(match: .exchange(7), seconds: 1))
        #expect(DelayRule.parse("path:/acs/challenge=250ms") == DelayRule(match: .path("/acs/challenge"), seconds: 0.25))
        #expect(DelayRule.parse("ARes") == nil)
        #expect(DelayRule.parse("CRes#0=1s") == nil)
        #expect(DelayRule.parse("=1s") == nil)
    }

    @Test func jitterParsingAndCap() {
        #expect(Jitter.parse("uniform:10ms-20ms") == .uniform(min: 0.01, max: 0.02))
        #expect(Jitter.parse("lognormal:100ms,0.5,1s") == .lognormal(median: 0.1, sigma: 0.5, max: 1))
        #expect(Jitter.parse("lognormal:100ms,0.5") == .lognormal(median: 0.1, sigma: 0.5, max: nil))
        #expect(Jitter.parse("uniform:20ms-10ms") == nil)
        #expect(Jitter.parse("normal:1") == nil)
        let capped = Jitter.lognormal(median: 0.1, sigma: 3, max: 0.2)
        for i in 0..<1000 {
            var r = SeededRandom(seed: 1, stream: 2, index: UInt64(i))
            let v = capped.draw(r.nextUnit(), r.nextUnit())
            #expect(v >= 0 && v <= 0.2)
        }
    }

    func answer(_ id: Int64, type: String? = "ARes", occurrence: Int = 1, path: String = "/ds/areq", served: Int = 0) -> ScheduledAnswer {
        ScheduledAnswer(recordedExchangeID: id, recordedWait: 0.1, messageType: type, occurrence: occurrence, path: path, servedBefore: served)
    }

    @Test func scheduleRulesAndSeededJitter() {
        var s = ReplaySchedule(timing: .scale(2), rules: [DelayRule.parse("CRes#2=500ms")!, DelayRule.parse("path:/x=1s")!])
        #expect(abs(s.delay(for: answer(1)) - 0.2) < 1e-9)
        #expect(s.delay(for: answer(2, type: "CRes", occurrence: 2)) == 0.5)
        #expect(abs(s.delay(for: answer(2, type: "CRes", occurrence: 1)) - 0.2) < 1e-9)
        #expect(s.delay(for: answer(3, type: nil, path: "/x")) == 1)
        s.jitter = .uniform(min: 0.01, max: 0.05)
        s.seed = 42
        let first = (1...200).map { s.delay(for: answer(Int64($0))) }
        let again = (1...200).reversed().map { s.delay(for: answer(Int64($0))) }.reversed()
        #expect(first == Array(again), "the same seed gives the same schedule, whatever the order of arrival")
        #expect(first.allSatisfy { $0 >= 0.21 - 1e-9 && $0 <= 0.25 + 1e-9 })
        #expect(Set(first).count > 150, "jitter varies between exchanges")
        s.seed = 43
        #expect((1...200).map { s.delay(for: answer(Int64($0))) } != first, "another seed, another schedule")
    }

    @Test func seededUUIDsAreWellFormedAndRepeatable() {
        var a = SeededRandom(seed: 9, stream: 3), b = SeededRandom(seed: 9, stream: 3)
        let u = a.uuid()
        #expect(u == b.uuid())
        #expect(u.count == 36 && Array(u)[14] == "4")
        #expect(a.uuid() != u)
        // The same text as formatting the stream's next 16 bytes by hand (what replays recorded before gave).
        for stream in UInt64(0)..<50 {
            var fast = SeededRandom(seed: 7, stream: stream), slow = SeededRandom(seed: 7, stream: stream)
            var b = slow.bytes(16)
            b[6] = (b[6] & 0x0F) | 0x40
            b[8] = (b[8] & 0x3F) | 0x80
            let hex = b.map { String($0, radix: 16) }.map { $0.count == 1 ? "0" + $0 : $0 }.joined()
            let expected = [hex.prefix(8), hex.dropFirst(8).prefix(4), hex.dropFirst(12).prefix(4), hex.dropFirst(16).prefix(4), hex.dropFirst(20)]
                .joined(separator: "-")
            #expect(fast.uuid() == expected)
            #expect(fast.next() == slow.next(), "the stream moves on alike")
        }
    }
}

@Suite struct ReplayURLTests {
    @Test func originsPathsAndQueries() {
        #expect(ReplayURL.origin("HTTP://Acs.Test:8443/acs/challenge?x=1") == "http://acs.test:8443")
        #expect(ReplayURL.origin("/acs/challenge") == nil)
        #expect(ReplayURL.origin("https://a.test") == "https://a.test")
        #expect(ReplayURL.pathAndQuery("http://a.test:1/p/q?x=1&y=2") == ("/p/q", "x=1&y=2"))
        #expect(ReplayURL.pathAndQuery("http://a.test?x=1") == ("/", "x=1"))
        #expect(ReplayURL.pathAndQuery("/slow?ms=50") == ("/slow", "ms=50"))
        #expect(ReplayURL.pathAndQuery("/") == ("/", ""))
        #expect(ReplayURL.pathAndQuery("/a/http://b") == ("/a/http://b", ""), "a scheme only at the start")
    }
}
