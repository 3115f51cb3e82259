import Foundation
import Testing
import TapCore
import TapRecording
import TapSQLite
import TapEMV
@testable import TapStore

/// Tunnel records (schema v4): written and read back, and a v3 file (no `tunnels`, no `connections.alpn_offered`) still
/// read, and migrated by `decrypt`.
struct TunnelRecordTests {
    func tunnelEvent() -> SessionEvent {
        let start = Date().timeIntervalSince1970
        var x = ExchangeRecord(connectionID: 1, seq: 1, method: "CONNECT", url: "pinned.example:443", host: "pinned.example", path: nil,
                               upstream: "pinned.example:443", request: CapturedMessage(headers: [], body: [], wireSize: 517), requestStart: start)
        x.status = 200
        x.response = CapturedMessage(headers: [], body: [], wireSize: 4096)
        x.done = start + 0.25
        x.tunnel = TunnelAnnotation(host: "pinned.example", port: 443, sni: "pinned.example\u{1B}[2J", alpnOffered: ["h2", "http/1.1"],
                                    bytesUp: 517, bytesDown: 4096, ended: "client closed", decidedBy: "--pass-through *.example")
        return .exchange(x)
    }

    func written() throws -> String {
        let path = try SessionWriterTests.tempPath()
        let writer = try SessionWriter(path: path, meta: [("label", "tunnels")])
        writer.submit(SessionWriterTests.opened())
        writer.submit(.connectionTLS(id: 1, version: "TLSv1.3", cipher: nil, sni: "x", alpn: "http/1.1", alpnOffered: ["h2", "http/1.1"]))
        writer.submit(tunnelEvent())
        writer.submit(SessionWriterTests.exchange(2, body: 10))
        writer.close()
        return path
    }

    @Test func tunnelsAreStoredAndReadBack() throws {
        let path = try written()
        defer { SessionWriterTests.removeTemp(path) }
        let reader = try SessionReader(path: path)
        let all = try reader.exchanges()
        #expect(all.count == 2)
        let t = try #require(all.first { $0.method == "CONNECT" }?.tunnel)
        #expect(t.host == "pinned.example" && t.port == 443 && t.bytesUp == 517 && t.bytesDown == 4096 && t.alpnOffered == ["h2", "http/1.1"])
        #expect(t.sni == "pinned.example\\x1B[2J", "the client's SNI is stored printable: \(t.sni ?? "nil")")
        #expect(all.first { $0.method == "POST" }?.tunnel == nil)
        #expect(try reader.rows(ids: all.map(\.id)).compactMap(\.tunnel).count == 1)
        let db = try Database(path: path, mode: .readOnly)
        #expect(try db.query("SELECT alpn_offered FROM connections")[0][0].text == #"["h2","http/1.1"]"#)
    }

    /// Tester's find: ALPN names holding a comma (`["a,b","c"]`) were stored as "a,b,c" and read back as three names.
    /// Stored as a JSON array they come back as offered, control characters escaped as before; the comma form the first
    /// v4 builds wrote is still read.
    @Test func alpnNamesWithACommaStayWhole() throws {
        let path = try SessionWriterTests.tempPath()
        defer { SessionWriterTests.removeTemp(path) }
        let writer = try SessionWriter(path: path, meta: [])
        writer.submit(SessionWriterTests.opened())
        writer.submit(.connectionTLS(id: 1, version: "TLSv1.3", cipher: nil, sni: "x", alpn: nil, alpnOffered: ["a,b", "c", "[\"x\"]"]))
        guard case var .exchange(x) = tunnelEvent() else { return }
        x.tunnel?.alpnOffered = ["a,b", "c", "\u{1B}[2J"]
        writer.submit(.exchange(x))
        writer.close()
        let t = try #require(try SessionReader(path: path).exchanges().first?.tunnel)
        #expect(t.alpnOffered == ["a,b", "c", "\\x1B[2J"])
        let db = try Database(path: path, mode: .readOnly)
        #expect(try db.query("SELECT alpn_offered FROM connections")[0][0].text == #"["a,b","c","[\"x\"]"]"#)
        #expect(ALPNOffer.read("h2,http/1.1") == ["h2", "http/1.1"], "the first v4 form")
        #expect(ALPNOffer.read(ALPNOffer.stored(["[a", "b]"])) == ["[a", "b]"])
        #expect(ALPNOffer.read("[not json") == ["[not json"])
    }

    @Test func aVersion3FileIsReadAndMigrated() throws {
        let path = try written()
        defer { SessionWriterTests.removeTemp(path) }
        do {
            let db = try Database(path: path, mode: .readWrite)
            try db.execute("DROP TABLE tunnels; ALTER TABLE connections DROP COLUMN alpn_offered; UPDATE meta SET value = '3' WHERE key = 'schema_version'")
        }
        let before = try SessionReader(path: path).exchanges()
        #expect(before.count == 2 && before.allSatisfy { $0.tunnel == nil })
        _ = try SessionDecryptor.decrypt(path: path, keys: SessionWriterTests.NoKeys())
        let db = try Database(path: path, mode: .readOnly)
        #expect(try db.query("SELECT value FROM meta WHERE key = 'schema_version'")[0][0].text == "4")
        #expect(try db.query("SELECT count(*) FROM tunnels")[0][0].integer == 0)
        #expect(try db.query("SELECT count(*) FROM connections WHERE alpn_offered IS NULL")[0][0].integer == 1)
    }
}
