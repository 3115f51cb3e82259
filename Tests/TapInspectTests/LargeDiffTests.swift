import Foundation
import Testing
import TapCore
import TapRecording
import TapStore
@testable import TapInspect

/// `diff` of sessions far larger than the demo ones: pairing 20 000 transactions against 20 000 once took a table of
/// 3.2 GB and ten seconds; now it takes memory linear in the sessions, and sessions too different are refused quickly.
@Suite struct LargeDiffTests {
    /// A session of `count` frictionless browser-less transactions (one AReq/ARes exchange each) written by the session
    /// writer; `variant` B has a transaction of another channel first and leaves out every 500th.
    static func writeSession(_ path: String, count: Int, variantB: Bool) throws {
        let writer = try SessionWriter(path: path, meta: [("label", variantB ? "large B" : "large A")])
        writer.submit(.connectionOpened(ConnectionRecord(id: 1, clientAddress: "127.0.0.1:1", acceptedAt: 1_700_000_000, mode: "reverse", upstream: nil)))
        var seq = 0
        for i in 0..<count where !(variantB && i % 500 == 250) {
            let id = String(format: "8a880dc0-d2d2-4067-bcb1-%012x", i + (variantB ? 1 << 40 : 0))
            let channel = variantB && i == 0 ? "02" : (i % 3 == 0 ? "03" : "01")
            let version = i % 7 == 0 ? "2.1.0" : "2.2.0"
            let areq = #"{"messageType":"AReq","messageVersion":"\#(version)","threeDSServerTransID":"\#(id)","deviceChannel":"\#(channel)","messageCategory":"01"}"#
            let ares = #"{"messageType":"ARes","messageVersion":"\#(version)","threeDSServerTransID":"\#(id)","transStatus":"Y"}"#
            var x = ExchangeRecord(connectionID: 1, seq: seq, method: "POST", url: "https://ds.example/areq", host: "ds.example", path: "/areq",
                                   upstream: nil, request: CapturedMessage(headers: [("Content-Type", "application/json")], body: Array(areq.utf8), wireSize: areq.utf8.count),
                                   requestStart: 1_700_000_000 + Double(i) / 100)
            x.status = 200
            x.response = CapturedMessage(headers: [("Content-Type", "application/json")], body: Array(ares.utf8), wireSize: ares.utf8.count)
            x.done = x.requestStart + 0.005
            writer.submit(.exchange(x))
            seq += 1
        }
        writer.close()
        if let e = writer.writeError { Issue.record("writing \(path): \(e)") }
    }

    static func tempDir() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-large-diff-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    @Test func twentyThousandTransactionsAgainstTwentyThousand() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let a = dir.appendingPathComponent("a.3dstape").path, b = dir.appendingPathComponent("b.3dstape").path
        try Self.writeSession(a, count: 20_000, variantB: false)
        try Self.writeSession(b, count: 20_000, variantB: true)
        let xa = try SessionReader(path: a).exchanges(), xb = try SessionReader(path: b).exchanges()
        let started = Date()
        let d = try SessionDiff.compare(xa, xb)
        let seconds = Date().timeIntervalSince(started)
        #expect(seconds < 20, "took \(seconds) s")
        // The process's peak: the old table alone was 3.2 GB (the sessions in memory are some 200 MB).
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        #expect(usage.ru_maxrss < 2 << 20, "peak resident \(usage.ru_maxrss / 1024) MiB")
        #expect(d.transactionsA == 20_000 && d.transactionsB == 19_960)
        #expect(d.pairedTransactions == 19_959)
        // The first transaction of each side has no counterpart; then the 40 left out of B, each reported (as the
        // full table did) as the last of its run of transactions of the same channel and version.
        #expect(d.changes.first?.kind == .missingTransaction && d.changes.first?.transactionA == 1)
        func key(_ i: Int) -> String { "\(i % 3 == 0)\(i % 7 == 0)" }
        let missing = (0..<40).map { n in
            var i = 500 * n + 250
            while key(i + 1) == key(i) { i += 1 }
            return i + 1
        }
        #expect(d.changes.filter { $0.kind == .missingTransaction }.map(\.transactionA) == [1] + missing)
        #expect(d.changes.filter { $0.kind == .extraTransaction }.map(\.transactionB) == [1])
    }

    @Test func sessionsTooDifferentAreRefusedWithTheReason() throws {
        var options = SessionDiff.Options()
        options.maxPairingSteps = 100
        do {
            _ = try SessionDiff.compare(Fixtures.app, Fixtures.browser, options: options)
            Issue.record("not refused")
        } catch {
            #expect(error.what == "transactions" && error.countA == 16 && error.countB == 4 && error.limit == 100)
            #expect(error.description.hasPrefix("the sessions are too different to pair: 16 transactions in A and 4 in B, of which at least "))
            #expect(error.description.hasSuffix("have no counterpart; pairing them would take more than the limit of 100 steps"))
        }
        #expect(try SessionDiff.compare(Fixtures.app, Fixtures.browser).pairedTransactions == 0, "the default limit leaves room")
    }
}
