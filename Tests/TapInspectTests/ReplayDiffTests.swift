import Foundation
import Testing
import TapCore
import TapStore
@testable import TapInspect

/// `diff --pair-by match` (issue 24 item 8): a replay's transactions are paired with the recorded ones they matched, not
/// by order and shape, so a replay of one transaction is not compared with the session's first.
@Suite struct ReplayDiffTests {
    /// The exchanges of demo-app's transaction `n` (0-based), as a replay stores them: each annotated with the recorded
    /// exchange it matched (`matched` maps the recorded ID; nil makes it a miss).
    static func replayed(_ n: Int, matched: (Int64) -> Int64? = { $0 }) -> [StoredExchange] {
        let ids = Set(ThreeDSTransaction.group(Fixtures.app)[n].messages.map(\.exchangeID))
        return Fixtures.app.filter { ids.contains($0.id) }.map { x in
            var x = x
            let recorded = matched(x.id)
            x.replay = ReplayAnnotation(recordedExchangeID: recorded, matchedBy: recorded == nil ? nil : "test", miss: recorded == nil ? "no match" : nil,
                                        scheduledDelayMs: 0, actualDelayMs: 0)
            return x
        }
    }

    static var firstChallenge: Int { ThreeDSTransaction.group(Fixtures.app).firstIndex { $0.shape.contains("CRes") }! }

    @Test func aOneTransactionReplayIsComparedWithTheTransactionItMatched() throws {
        let b = Self.replayed(Self.firstChallenge)
        var options = SessionDiff.Options()
        options.pairBy = .match
        let d = try SessionDiff.compare(Fixtures.app, b, options: options)
        #expect(d.pairedTransactions == 1 && d.changes.isEmpty && d.unreplayedTransactions == 15 && d.pairedBy == .match, "\(d.changes.map(\.json.compact))")
        // By shape, the challenge is paired with the first (frictionless) transaction and the rest are missing.
        let byShape = try SessionDiff.compare(Fixtures.app, b)
        #expect(byShape.changes.contains { $0.kind == .missingTransaction } && byShape.changes.contains { $0.kind == .extraMessage && $0.message == "CRes" })
    }

    @Test func aTransactionMatchedTwiceOrNotAtAllIsExtra() throws {
        let challenge = Self.firstChallenge
        let target = ThreeDSTransaction.group(Fixtures.app)[challenge].messages[0].exchangeID
        // Transaction 1 as if it had matched the challenge's AReq (a retry of it), the challenge itself, and transaction 2 a miss.
        let b = (Self.replayed(0) { _ in target } + Self.replayed(challenge) + Self.replayed(1) { _ in nil }).sorted { $0.id < $1.id }
        var options = SessionDiff.Options()
        options.pairBy = .match
        let d = try SessionDiff.compare(Fixtures.app, b, options: options)
        #expect(d.pairedTransactions == 1 && d.unreplayedTransactions == 15)
        #expect(d.changes.filter { $0.kind == .extraTransaction }.count == 2, "\(d.changes.map(\.json.compact))")
        #expect(!d.changes.contains { $0.kind == .missingTransaction }, "recorded transactions no client ran are not differences")
    }
}
