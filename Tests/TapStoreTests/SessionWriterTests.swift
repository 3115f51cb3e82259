import Foundation
import Testing
import TapCore
import TapRecording
import TapSQLite
import TapEMV
@testable import TapStore

/// The writer when the disk fills, the file is deleted, or another process locks it: recording stops (or waits) with
/// one message, the file stays valid, and the backlog the proxy's backpressure reads never stays up.
@Suite struct SessionWriterTests {
    struct NoKeys: ChannelKeySource {
        func cek(for acsTransID: String) -> [UInt8]? { nil }
    }

    final class Problems: Sendable {
        let lines = Locked<[String]>([])
        var all: [String] { lines.withLock { $0 } }
        func add(_ s: String) { lines.withLock { $0.append(s) } }
    }

    /// A session path in a directory of its own; `removeTemp` deletes that directory (each test's `defer`).
    static func tempPath() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-writer-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir.appendingPathComponent("s.3dstape").path
    }

    static func removeTemp(_ path: String) {
        try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent)
    }

    #if os(Linux)
    /// The writer's thread runs `SessionWriter.lowerPriority` nice values below the thread that made it (read from
    /// /proc for the thread named 3dstape-writer), so that the network loop runs first where the cores are all busy.
    @Test func theWriterThreadYieldsToTheNetworkLoop() throws {
        let path = try Self.tempPath()
        defer { Self.removeTemp(path) }
        let own = try #require(ThreadPriority.current)
        let writer = try SessionWriter(path: path, meta: [], stages: [])
        defer { writer.close() }
        var nices: [Int32] = []
        for _ in 0..<200 where nices.isEmpty { // the thread names itself as it starts
            for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? [] {
                let dir = "/proc/self/task/\(task)"
                guard (try? String(contentsOfFile: dir + "/comm", encoding: .utf8))?.hasPrefix("3dstape-writer") == true,
                      let stat = try? String(contentsOfFile: dir + "/stat", encoding: .utf8),
                      let close = stat.lastIndex(of: ")") else { continue }
                // Fields after the command's closing parenthesis: state is the 3rd field, nice the 19th.
                let fields = stat[stat.index(after: close)...].split(separator: " ")
                if fields.count > 16, let nice = Int32(fields[16]) { nices.append(nice) }
            }
            if nices.isEmpty { usleep(5_000) }
        }
        #expect(!nices.isEmpty, "no thread named 3dstape-writer")
        #expect(nices.contains(min(own + SessionWriter.lowerPriority, 19)), "\(nices), own \(own)")
    }
    #endif

    static func exchange(_ n: Int, body: Int) -> SessionEvent {
        var x = ExchangeRecord(connectionID: 1, seq: n, method: "POST", url: "http://127.0.0.1/x", host: "127.0.0.1", path: "/x", upstream: nil,
                               request: CapturedMessage(headers: [("Content-Type", "application/octet-stream")],
                                                        body: (0..<body).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ n) }, wireSize: body),
                               requestStart: Date().timeIntervalSince1970)
        x.status = 200
        x.response = CapturedMessage(headers: [], body: [], wireSize: 0)
        x.done = x.requestStart + 0.001
        return .exchange(x)
    }

    static func opened() -> SessionEvent {
        .connectionOpened(ConnectionRecord(id: 1, clientAddress: "127.0.0.1:1", acceptedAt: Date().timeIntervalSince1970, mode: "reverse", upstream: nil))
    }

    static func waitUntil(_ seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline { if condition() { return true }; usleep(20_000) }
        return condition()
    }

    @Test func aFullFileStopsRecordingOnceAndStaysValid() throws {
        let path = try Self.tempPath()
        defer { Self.removeTemp(path) }
        let problems = Problems()
        let writer = try SessionWriter(path: path, meta: [("label", "full")], maxBytes: 256 << 10, onProblem: problems.add)
        writer.submit(Self.opened())
        for i in 0..<400 { writer.submit(Self.exchange(i, body: 4000)) } // ~1.6 MB of bodies for a 256 KiB file
        #expect(Self.waitUntil(5) { writer.backlog == 0 }, "the backlog drains even though nothing more can be written")
        writer.close()
        #expect(writer.writeError?.contains("full") == true)
        #expect(problems.all.count == 1 && problems.all[0].hasPrefix("recording stopped: the session file is full"))
        #expect(writer.exchangesWritten > 0 && writer.exchangesWritten + writer.exchangesDropped == 400)
        let reader = try SessionReader(path: path)
        #expect(try reader.integrityCheck() == ["ok"])
        #expect(try reader.exchangeCount == writer.exchangesWritten)
    }

    /// Tester's find: with `--max-session-size 64KiB` the first batch that did not fit wrote 0 exchanges (the one too
    /// large failed the whole transaction) and left its frames in a 1.3 MB WAL. The exchanges before it are kept, and
    /// the WAL is truncated when recording stops.
    @Test func theExchangesBeforeOneThatDoesNotFitAreKept() throws {
        let path = try Self.tempPath()
        defer { Self.removeTemp(path) }
        let writer = try SessionWriter(path: path, meta: [("label", "full")], maxBytes: 64 << 10)
        writer.submit(Self.opened())
        for i in 0..<5 { writer.submit(Self.exchange(i, body: 100)) }
        guard case var .exchange(big) = Self.exchange(5, body: 0) else { return }
        // Incompressible: a xorshift stream (1.3M calls into the system generator took most of a minute in a debug
        // build under CI's load).
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(UInt32.random(in: 0...UInt32.max))
        var body = [UInt8](repeating: 0, count: 1_300_000)
        for i in body.indices {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            body[i] = UInt8(truncatingIfNeeded: state >> 24)
        }
        big.request.body = body
        writer.submit(.exchange(big)) // in one batch with the five, most likely: it does not fit
        #expect(Self.waitUntil(5) { writer.writeError != nil })
        var st = stat()
        #expect(stat(path + "-wal", &st) != 0 || st.st_size < 64 << 10, "the WAL is truncated at once: \(st.st_size) bytes")
        writer.close()
        #expect(writer.exchangesWritten == 5 && writer.exchangesDropped == 1, "\(writer.exchangesWritten) written")
        #expect(try SessionReader(path: path).exchangeCount == 5)
    }

    @Test func aDeletedFileIsNoticed() throws {
        let path = try Self.tempPath()
        defer { Self.removeTemp(path) }
        let problems = Problems()
        let writer = try SessionWriter(path: path, meta: [("label", "deleted")], onProblem: problems.add)
        writer.submit(Self.opened())
        writer.submit(Self.exchange(0, body: 10))
        #expect(Self.waitUntil(3) { writer.exchangesWritten == 1 })
        try FileManager.default.removeItem(atPath: path)
        #expect(Self.waitUntil(3) { !problems.all.isEmpty })
        for i in 1...5 { writer.submit(Self.exchange(i, body: 10)) }
        #expect(Self.waitUntil(3) { writer.backlog == 0 })
        writer.close()
        #expect(problems.all.first?.contains("was deleted while recording") == true, "\(problems.all)")
        #expect(writer.exchangesDropped == 5)
    }

    @Test func aLockedFileMakesEventsWaitAndThenWritesThem() throws {
        let path = try Self.tempPath()
        defer { Self.removeTemp(path) }
        let problems = Problems()
        let writer = try SessionWriter(path: path, meta: [("label", "locked")], onProblem: problems.add)
        writer.submit(Self.opened())
        #expect(Self.waitUntil(3) { writer.backlog == 0 })
        // Another process's exclusive transaction, held past SQLite's 5 s busy timeout.
        let other = try Database(path: path)
        try other.execute("BEGIN EXCLUSIVE")
        for i in 0..<10 { writer.submit(Self.exchange(i, body: 100)) }
        #expect(Self.waitUntil(8) { problems.all.contains { $0.contains("locked by another process") } }, "\(problems.all)")
        #expect(writer.backlog == 10 && writer.exchangesWritten == 0)
        try other.execute("COMMIT")
        #expect(Self.waitUntil(8) { writer.exchangesWritten == 10 })
        writer.close()
        #expect(writer.writeError == nil)
        #expect(problems.all.last?.contains("writable again") == true)
        #expect(try SessionReader(path: path).exchangeCount == 10)
    }

    /// The transaction index is left out while recording and built at close; a file left without it (a recording
    /// killed) answers the same queries, and `decrypt` adds it.
    @Test func theTransactionIndexIsBuiltWhenRecordingEnds() throws {
        let path = try Self.tempPath()
        defer { Self.removeTemp(path) }
        let writer = try SessionWriter(path: path, meta: [("label", "index")])
        writer.submit(Self.opened())
        for i in 0..<3 {
            var x = ExchangeRecord(connectionID: 1, seq: i, method: "POST", url: "http://127.0.0.1/ds", host: "127.0.0.1", path: "/ds", upstream: nil,
                                   request: CapturedMessage(headers: [], body: Array(#"{"messageType":"AReq","threeDSServerTransID":"t\#(i)"}"#.utf8), wireSize: 0),
                                   requestStart: Date().timeIntervalSince1970)
            x.status = 200
            x.response = CapturedMessage(headers: [], body: Array(#"{"messageType":"ARes","threeDSServerTransID":"t\#(i)","transStatus":"Y"}"#.utf8), wireSize: 0)
            writer.submit(.exchange(x))
        }
        #expect(Self.waitUntil(3) { writer.exchangesWritten == 3 })
        let indexes = "SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'messages_by_transaction'"
        let live = try Database(path: path, mode: .readOnly)
        #expect(try live.query(indexes).isEmpty, "not kept up while recording")
        #expect(try live.query("SELECT count(*) FROM messages WHERE three_ds_server_trans_id = 't1'")[0][0].integer == 2)
        writer.close()
        #expect(try live.query(indexes).count == 1, "built at close")
        try Database(path: path).execute("DROP INDEX messages_by_transaction") // as a killed recording leaves it
        _ = try SessionDecryptor.decrypt(path: path, keys: NoKeys())
        #expect(try live.query(indexes).count == 1, "decrypt adds it")
    }

    /// A plaintext the source holds with a note (the replayer, which opened the CReq itself) is stored as it is, masked,
    /// even where the writer has keys (which here would not open it); one without a note (a HAR import) yields to keys.
    @Test func aPlaintextHandedOverIsStoredInsteadOfDecryptingAgain() throws {
        var sdk = AppChannelCipher(role: .sdk, cek: [UInt8](repeating: 7, count: 32), acsTransID: "acs-1", enc: .a128cbcHS256)
        let creq = JSON.object([("messageType", .string("CReq")), ("acsTransID", .string("acs-1")),
                                ("challengeDataEntry", .string("4000000000001091"))])
        let sealed = try sdk.sealed(creq)
        let body = Array(sealed.compact.utf8)
        let handed = StoredMessage(CapturedMessage(headers: [], body: body, wireSize: body.count, plaintext: sealed.plaintext,
                                                   plaintextNote: "decrypted: replay (fresh keys)"), mask: true, isRequest: true, keys: NoKeys())
        #expect(handed.messages.count == 1)
        #expect(handed.messages.first?.decryption == "decrypted: replay (fresh keys)")
        #expect(handed.messages.first?.summary?.messageType == "CReq")
        #expect(handed.messages.first?.json["sdkCounterStoA"]?.stringValue == "000", "the message as sealed, counter included")
        #expect(handed.messages.first?.json["challengeDataEntry"]?.stringValue != "4000000000001091", "masked")
        let imported = StoredMessage(CapturedMessage(headers: [], body: body, wireSize: body.count, plaintext: sealed.plaintext),
                                     mask: true, isRequest: true, keys: NoKeys())
        #expect(imported.messages.first?.decryption?.hasPrefix("encrypted: no") == true, "\(imported.messages.first?.decryption ?? "nil")")
    }
}
