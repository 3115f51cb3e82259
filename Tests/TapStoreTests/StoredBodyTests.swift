import Foundation
import Testing
import TapCompression
import TapRecording
import TapSQLite
@testable import TapStore

/// A compressed body decompresses to at most `SessionReader.maxInflation` times its stored size: what a session's bodies
/// take in memory is bounded by the file's size, whatever a hostile file stores (hostile-file helper: 64 KB of zlib that
/// inflate to 63 MiB, in every row, took `show` to 5 GB).
@Suite struct StoredBodyTests {
    @Test func aZlibBombReadsAsStoredAndARealBodyDecompresses() throws {
        let path = try SessionWriterTests.tempPath()
        defer { SessionWriterTests.removeTemp(path) }
        let writer = try SessionWriter(path: path, meta: [])
        writer.submit(SessionWriterTests.opened())
        writer.submit(SessionWriterTests.exchange(1, body: 10))
        writer.close()

        // A body as the writer compresses one: JSON over 8 KiB, a few times smaller stored.
        let json = Array(("{\"items\":[" + (0..<400).map { "{\"n\":\($0),\"id\":\"\(UUID().uuidString)\"}" }.joined(separator: ",") + "]}").utf8)
        let real = try Compression.compress(json, format: .zlib)
        let bomb = try Compression.compress([UInt8](repeating: 0, count: 32 << 20), format: .zlib)
        #expect(bomb.count * SessionReader.maxInflation < 32 << 20, "the bomb inflates past the limit: \(bomb.count) bytes stored")
        let db = try Database(path: path, mode: .readWrite)
        try db.run("UPDATE exchanges SET request_body = ?, request_body_compressed = 1, response_body = ?, response_body_compressed = 1",
                   [.blob(real), .blob(bomb)])

        let x = try #require(try SessionReader(path: path).exchanges().first)
        #expect(x.requestBody == json, "a real body decompresses")
        #expect(x.responseBody == bomb, "the bomb is read as it is stored, not inflated")
    }
}
