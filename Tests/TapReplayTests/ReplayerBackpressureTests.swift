import Foundation
import Testing
import TapCore
import TapCrypto
import TapHTTPService
import TapNet
import TapRecording
import TapSQLite
@testable import TapReplay
import TapStore
import TapTestSupport

/// The replayer's backpressure on loopback: with its session file locked by another connection the writer falls
/// behind and due answers wait for it; the replayer counts them, says so and notes it in the replay session.
@Suite struct ReplayerBackpressureTests {
    @Test func answersThatWaitedForTheWriterAreCountedAndNoted() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-replay-backpressure-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("replay.3dstape").path
        let catalog = try ReplayEngineTests.catalog("sample-reverse.3dstape")
        let engine = ReplayEngine(catalog: catalog, options: ReplayOptions(), identity: try ReplayEngineTests.Trust().identity)
        let writer = try SessionWriter(path: path, meta: [("label", "replay backpressure")])
        let stack = try ServiceStack.background("3dstape-test-replay-backpressure")
        let replayer = Replayer(loop: stack.loop, engine: engine, writer: writer, outgoingTLS: try TLSContext(clientRoots: nil), report: { _ in })
        replayer.writerBacklogLimit = 4
        let address = try replayer.start(on: HostPort(host: "127.0.0.1", port: 0), tls: nil, intercepting: nil, scheme: "http")
        stack.onStop { replayer.stop() }
        stack.finally { writer.close() }
        stack.start()

        // Another process's exclusive transaction keeps the writer from committing until the answers stall.
        let count = 8
        let load = try LockedSessionLoad.run(sessionPath: path, url: HTTPURL("http://\(address)/not/recorded")!, count: count,
                                             minimumBeforeStall: 2) { Array(#"{"n":\#($0)}"#.utf8) }
        #expect(load.answeredWhileLocked < count, "some answers wait for the writer while the file is locked")
        #expect(load.completed)
        stack.stop()

        // Misses (the session has no such exchange) are answered, and recorded, like any answer.
        #expect(load.statuses == Array(repeating: 404, count: count))
        #expect(replayer.writerWaits.heldCount >= 1 && replayer.writerWaits.longestHoldSeconds >= 0.4, "\(replayer.writerWaits)")
        let summary = try #require(replayer.writerWaitSummary)
        let reader = try Database(path: path, mode: .readOnly)
        #expect(try reader.query("SELECT count(*) FROM exchanges WHERE path = '/not/recorded'")[0][0].integer == Int64(count))
        let notes = try reader.query("SELECT detail FROM events WHERE kind = 'backpressure'")
        #expect(notes.count == 1 && notes.first?.first?.text == summary)
    }
}
