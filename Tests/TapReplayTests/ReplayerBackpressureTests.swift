import Foundation
import Testing
import TapCore
import TapCrypto
import TapHTTPService
import TapNet
import TapSQLite
@testable import TapReplay
import TapStore

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

        // Another process's exclusive transaction: the writer cannot commit while it lasts.
        let other = try Database(path: path)
        try other.execute("BEGIN EXCLUSIVE")
        let count = 8
        let done = DispatchSemaphore(value: 0)
        let statuses = Locked<[Int]>([])
        let client = BlockingHTTPClient(tls: try TLSContext(clientRoots: []), timeout: 30)
        let url = HTTPURL("http://\(address)/not/recorded")!
        DispatchQueue.global().async {
            for i in 0..<count {
                let status = (try? client.send("POST", url, headers: [("Content-Type", "application/json")],
                                               body: Array(#"{"n":\#(i)}"#.utf8)).head.status) ?? 0
                statuses.withLock { $0.append(status) }
            }
            done.signal()
        }
        // Until the answers stop coming, the writer's backlog past the limit and the next one waiting (after at least 2
        // answers: a slow start under ThreadSanitizer is no stall); the file stays locked while one waits, so a whole
        // second without progress costs nothing.
        var seen = 0
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            Thread.sleep(forTimeInterval: 1)
            let now = statuses.withLock { $0.count }
            if now >= 2, now == seen { break }
            seen = now
        }
        #expect(seen < count, "some answers wait for the writer while the file is locked")
        try other.execute("COMMIT")
        #expect(done.wait(timeout: .now() + 30) == .success)
        stack.stop()

        // Misses (the session has no such exchange) are answered, and recorded, like any answer.
        #expect(statuses.withLock { $0 } == Array(repeating: 404, count: count))
        #expect(replayer.writerWaits.answers >= 1 && replayer.writerWaits.longestSeconds >= 0.4, "\(replayer.writerWaits)")
        let summary = try #require(replayer.writerWaitSummary)
        let reader = try Database(path: path, mode: .readOnly)
        #expect(try reader.query("SELECT count(*) FROM exchanges WHERE path = '/not/recorded'")[0][0].integer == Int64(count))
        let notes = try reader.query("SELECT detail FROM events WHERE kind = 'backpressure'")
        #expect(notes.count == 1 && notes.first?.first?.text == summary)
    }
}
