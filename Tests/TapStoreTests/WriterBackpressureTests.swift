import Testing
@testable import TapStore

/// The one backpressure rule of the recorder and the replayer: when traffic is paced and held, when it goes on, and what
/// the waits cost as the summaries say it.
@Suite struct WriterBackpressureTests {
    static let mib = 1 << 20

    @Test func heldAboveEitherLimitAndNotAtIt() {
        let b = WriterBackpressure(eventLimit: 2048, byteLimit: 32 * Self.mib)
        #expect(!b.isBehind(.empty))
        #expect(!b.isBehind(WriterBacklog(events: 2048, bytes: 32 * Self.mib)), "at the limits: not behind yet")
        #expect(b.isBehind(WriterBacklog(events: 2049, bytes: 0)))
        #expect(b.isBehind(WriterBacklog(events: 1, bytes: 32 * Self.mib + 1)), "a few large bodies weigh as many events")
        #expect(WriterBackpressure().eventLimit == 2048 && WriterBackpressure().byteLimit == SessionWriter.backlogByteLimit)
    }

    @Test func heldTrafficGoesOnOnlyUnderSevenEighthsOfBothLimits() {
        let b = WriterBackpressure(eventLimit: 2048, byteLimit: 32 * Self.mib)
        #expect(!b.hasCaughtUp(WriterBacklog(events: 2049, bytes: 0)))
        #expect(!b.hasCaughtUp(WriterBacklog(events: 1793, bytes: 0)), "between 7/8 and the limit: still held")
        #expect(b.hasCaughtUp(WriterBacklog(events: 1792, bytes: 0)))
        #expect(!b.hasCaughtUp(WriterBacklog(events: 0, bytes: 28 * Self.mib + 1)))
        #expect(b.hasCaughtUp(WriterBacklog(events: 1792, bytes: 28 * Self.mib)))
        #expect(b.hasCaughtUp(.empty))
    }

    @Test func pacingRisesFromAQuarterOfALimitToTwoMillisecondsAtIt() {
        let b = WriterBackpressure(eventLimit: 2048, byteLimit: 32 * Self.mib)
        #expect(b.pacingDelay(.empty) == 0)
        #expect(b.pacingDelay(WriterBacklog(events: 512, bytes: 8 * Self.mib)) == 0, "at a quarter: not yet")
        #expect(abs(b.pacingDelay(WriterBacklog(events: 1280, bytes: 0)) - 0.001) < 1e-12, "half way: 1 ms")
        #expect(abs(b.pacingDelay(WriterBacklog(events: 0, bytes: 20 * Self.mib)) - 0.001) < 1e-12, "bytes count the same way")
        #expect(b.pacingDelay(WriterBacklog(events: 2048, bytes: 0)) == WriterBackpressure.maxPacingDelay)
        #expect(b.pacingDelay(WriterBacklog(events: 100_000, bytes: 1 << 40)) == 0.002, "capped past the limit")
        // The larger of the two shares decides.
        #expect(abs(b.pacingDelay(WriterBacklog(events: 1280, bytes: 26 * Self.mib)) - 0.0015) < 1e-12)
    }

    @Test func aSmallLimitAsTheTestsSetIt() {
        var b = WriterBackpressure()
        b.eventLimit = 8
        #expect(b.pacingDelay(WriterBacklog(events: 2, bytes: 0)) == 0)
        #expect(b.pacingDelay(WriterBacklog(events: 3, bytes: 0)) > 0, "pacing from just above a quarter")
        #expect(b.isBehind(WriterBacklog(events: 9, bytes: 0)) && !b.hasCaughtUp(WriterBacklog(events: 8, bytes: 0)))
        #expect(b.hasCaughtUp(WriterBacklog(events: 7, bytes: 0)))
    }

    @Test func theCostCountsPacedAndHeldWaits() {
        var c = WriterBackpressure.Cost()
        #expect(c.requestSummary(exchanges: 10) == nil && c.answerSummary == nil, "nothing waited: nothing to say")
        c.paced(0.001)
        c.paced(0.0005)
        #expect(c.pacedCount == 2 && abs(c.pacedSeconds - 0.0015) < 1e-12)
        c.held(since: 1_000_000_000, until: 1_012_500_000)
        c.held(since: 2_000_000_000, until: 2_003_000_000)
        #expect(c.heldCount == 2 && abs(c.longestHoldSeconds - 0.0125) < 1e-12, "the longest hold, not the last")
    }

    @Test func theRecordersSentence() {
        var c = WriterBackpressure.Cost()
        c.held(since: 0, until: 12_500_000)
        #expect(c.requestSummary(exchanges: 40) == "the session writer fell behind the traffic: 1 of 40 requests was held until it caught up (the longest 12.5 ms); "
                + "each wait came before the request was forwarded, so the recorded upstream timings are not affected")
        c.held(since: 0, until: 1_000_000)
        c.paced(0.0015)
        c.paced(0.0005)
        #expect(c.requestSummary(exchanges: 40) == "the session writer fell behind the traffic: 2 of 40 requests waited 1.000 ms on average (2.0 ms in all) "
                + "and 2 were held until it caught up (the longest 12.5 ms); "
                + "each wait came before the request was forwarded, so the recorded upstream timings are not affected")
        var paced = WriterBackpressure.Cost()
        paced.paced(0.0004)
        #expect(paced.requestSummary(exchanges: 3) == "the session writer fell behind the traffic: 1 of 3 requests waited 0.400 ms on average (0.4 ms in all); "
                + "each wait came before the request was forwarded, so the recorded upstream timings are not affected")
        #expect(paced.answerSummary == nil, "pacing is the recorder's: the replayer only holds")
    }

    @Test func theReplayersSentence() {
        var c = WriterBackpressure.Cost()
        c.held(since: 5, until: 5 + 431_260_000)
        c.held(since: 0, until: 2_000_000)
        #expect(c.answerSummary == "the session writer fell behind: 2 answers waited for it past their scheduled delay (the longest 431.3 ms); "
                + "each exchange's actual delay in the replay session includes its wait")
    }
}
