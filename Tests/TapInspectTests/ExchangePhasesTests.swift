import Testing
import TapInspect

@Suite struct ExchangePhasesTests {
    func near(_ a: Double?, _ b: Double) -> Bool { a.map { abs($0 - b) < 1e-6 } ?? false }

    @Test func aNewTLSConnection() {
        let p = ExchangePhases(start: 10, upstreamConnect: 10.002, tlsDone: 10.005, requestSent: 10.0051, firstByte: 10.015, done: 10.016)
        #expect(near(p.connect, 2) && near(p.tls, 3) && near(p.send, 0.1) && near(p.wait, 9.9) && near(p.receive, 1))
        #expect(p.named.map(\.0) == ["connect", "tls", "send", "wait", "receive"])
    }

    @Test func aReusedConnectionHasNoConnectOrTLS() {
        let p = ExchangePhases(start: 10, upstreamConnect: nil, tlsDone: nil, requestSent: 10.001, firstByte: 10.004, done: 10.005)
        #expect(p.connect == nil && p.tls == nil && near(p.send, 1) && near(p.wait, 3) && near(p.receive, 1))
        #expect(p.named[0].1 == 0 && p.named[1].1 == 0)
    }

    @Test func missingOrOutOfOrderTimestampsLeaveTheirPhaseAtZero() {
        // No response (an upstream that never answered), and a first byte stamped before the request was sent.
        let p = ExchangePhases(start: 10, upstreamConnect: 10.001, tlsDone: nil, requestSent: 10.003, firstByte: 10.002, done: nil)
        #expect(near(p.connect, 1) && p.tls == nil && near(p.send, 2) && p.wait == 0 && p.receive == 0)
    }
}
