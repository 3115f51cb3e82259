import Testing
@testable import TapStore

/// The writer's load as the gather policy reads it: the busy share of the last complete window.
@Suite struct BusyMeterTests {
    static let ms: UInt64 = 1_000_000

    @Test func busyUntilAWindowHasBeenMeasured() {
        var m = BusyMeter()
        #expect(!m.isLight)
        m.add(busy: 0, at: 1_000 * Self.ms)
        m.add(busy: 1 * Self.ms, at: 1_100 * Self.ms)
        #expect(!m.isLight && m.lastShare == nil, "a quarter of a second has not passed")
    }

    @Test func aWriterBusyATenthOfTheTimeIsLightAndOneBusyHalfIsNot() {
        var m = BusyMeter()
        var now: UInt64 = 5_000 * Self.ms
        m.add(busy: 0, at: now)
        for _ in 0..<30 { now += 10 * Self.ms; m.add(busy: 1 * Self.ms, at: now) } // 10 % of each 10 ms
        #expect(m.isLight && abs((m.lastShare ?? 1) - 0.1) < 0.01)
        for _ in 0..<50 { now += 10 * Self.ms; m.add(busy: 5 * Self.ms, at: now) } // 50 % (the last window all of it)
        #expect(!m.isLight && abs((m.lastShare ?? 0) - 0.5) < 0.01)
        for _ in 0..<30 { now += 20 * Self.ms; m.add(busy: 0, at: now) } // idle wake-ups close windows too
        #expect(m.isLight && m.lastShare == 0)
    }
}
