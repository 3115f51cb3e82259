import Foundation
import Testing
import TapCore
import TapRecording
import TapSQLite
@testable import TapStore

/// Rows by name (issue 26): one column list per table makes the schema, the writer's inserts and the reader's selects,
/// and every reader decodes its rows by column name. A select and its decoder cannot disagree: each reader fails with a
/// `RowError` naming the column when any one of its columns is left out of the select, and reads its full select without
/// one. The file format stays as it was: a new file declares the same tables, and the sample sessions still open.
@Suite struct SessionTablesTests {
    /// A session holding a row of every table: a connection with TLS, a 3DS exchange with messages, a replay
    /// annotation, a tunnel and a note.
    static func everyKindOfRow() throws -> String {
        let path = try SessionWriterTests.tempPath()
        let writer = try SessionWriter(path: path, meta: [("label", "tables")])
        writer.submit(SessionWriterTests.opened())
        writer.submit(.connectionTLS(id: 1, version: "TLSv1.3", cipher: "TLS_AES_128_GCM_SHA256", sni: "acs.example", alpn: "http/1.1",
                                     alpnOffered: ["http/1.1"]))
        let start = Date().timeIntervalSince1970
        let areq = #"{"messageType":"AReq","messageVersion":"2.2.0","threeDSServerTransID":"8a880dc0-d2d2-4067-bcb1-b08d1690b26e"}"#
        var x = ExchangeRecord(connectionID: 1, seq: 1, method: "POST", url: "https://ds.example/areq", host: "ds.example", path: "/areq",
                               upstream: "ds.example:443",
                               request: CapturedMessage(headers: [("Content-Type", "application/json")], body: Array(areq.utf8), wireSize: 200),
                               requestStart: start)
        x.status = 200
        x.response = CapturedMessage(headers: [("Content-Type", "application/json")],
                                     body: Array(#"{"messageType":"ARes","messageVersion":"2.2.0","transStatus":"Y"}"#.utf8), wireSize: 180)
        (x.upstreamConnect, x.tlsDone, x.requestSent, x.firstByte, x.done) = (start + 0.001, start + 0.002, start + 0.003, start + 0.004, start + 0.005)
        x.replay = ReplayAnnotation(recordedExchangeID: 7, matchedBy: "AReq: version", miss: nil, scheduledDelayMs: 1, actualDelayMs: 1.5,
                                    faults: "hang", outcome: "answered")
        writer.submit(.exchange(x))
        var tunnel = ExchangeRecord(connectionID: 1, seq: 2, method: "CONNECT", url: "pinned.example:443", host: "pinned.example", path: nil,
                                    upstream: nil, request: CapturedMessage(headers: [], body: [], wireSize: 1), requestStart: start + 1)
        tunnel.tunnel = TunnelAnnotation(host: "pinned.example", port: 443, sni: "pinned.example", alpnOffered: ["h2"], bytesUp: 1, bytesDown: 2,
                                         ended: "client closed", decidedBy: "--pass-through")
        writer.submit(.exchange(tunnel))
        writer.submit(.note(at: start, kind: "refused", detail: "a note"))
        writer.close()
        return path
    }

    /// Decodes the rows of `from` with `reader`'s full select (there must be some), then with each of its columns left out
    /// in turn, which must fail with a `RowError` naming that column.
    func check<V>(_ reader: RowReader<V>, _ name: String, from: String, aliases: [String: String] = [:], in db: Database) throws {
        let rows = try db.rows("SELECT \(reader.selectList(aliases)) FROM \(from)")
        #expect(!rows.isEmpty, "\(name): no rows to read")
        for row in rows { _ = try reader.decode(row) }
        for left in reader.columns {
            let partial = RowReader(reader.columns.filter { $0 != left }, decode: reader.decode)
            let row = try #require(try db.rows("SELECT \(partial.selectList(aliases)) FROM \(from)").first)
            #expect(throws: RowError.self, "\(name) without \(left.name)") { _ = try reader.decode(row) }
            do { _ = try reader.decode(row) } catch let e as RowError {
                #expect(e.column == left.name, "\(name): left out \(left.name), the error names \(e.column)")
                guard case .missing = e.problem else { Issue.record("\(name): \(e)"); continue }
            }
        }
    }

    @Test func everyReaderReadsExactlyTheColumnsItSelects() throws {
        let path = try Self.everyKindOfRow()
        defer { SessionWriterTests.removeTemp(path) }
        let db = try Database(path: path, mode: .readOnly)
        try check(SessionReader.noteReader, "events", from: "events", in: db)
        try check(SessionReader.connectionReader, "connections", from: "connections", in: db)
        try check(SessionReader.exchangeReader, "exchanges", from: "exchanges e", aliases: ["exchanges": "e"], in: db)
        try check(SessionReader.messageReader, "messages", from: "messages", in: db)
        try check(SessionReader.replayReader, "replay_matches", from: "replay_matches", in: db)
        try check(SessionReader.tunnelReader, "tunnels", from: "tunnels", in: db)
        try check(SessionReader.exchangeRowReader, "timeline rows", from: "exchanges", in: db)
        try check(SessionReader.messageTagReader, "message tags", from: "messages", in: db)
        try check(SessionReader.messageRowReader, "rewriteMessages", from: "messages m JOIN exchanges e ON e.id = m.exchange_id",
                  aliases: ["messages": "m", "exchanges": "e"], in: db)
        // And what they read is what was written.
        let reader = try SessionReader(path: path)
        let all = try reader.exchanges()
        #expect(all.count == 2 && all[0].messages.map(\.type) == ["AReq", "ARes"] && all[0].replay?.faults == "hang")
        #expect(all[0].replay?.actualDelayMs == 1.5 && all[1].tunnel?.alpnOffered == ["h2"] && all[0].firstByte != nil)
        #expect(try reader.connections()[1]?.tls == "TLSv1.3" && reader.events().map(\.detail) == ["a note"])
        #expect(try reader.rows(ids: all.map(\.id)).map { $0.messages.compactMap(\.transStatus) } == [["Y"], []])
    }

    /// A new file's tables are the declared ones, column for column, with the `CREATE TABLE` text the declarations make.
    @Test func aNewFileDeclaresTheTablesAsDeclaredHere() throws {
        let path = try Self.everyKindOfRow()
        defer { SessionWriterTests.removeTemp(path) }
        let db = try Database(path: path, mode: .readOnly)
        for table in [MetaTable.table, ConnectionsTable.table, ExchangesTable.table, MessagesTable.table, EventsTable.table,
                      ReplayMatchesTable.table, TunnelsTable.table] {
            let info = try db.rows("PRAGMA table_info(\(table.name))")
            #expect(try info.map { try $0.text("name") } == table.columns.map(\.name), "\(table.name)")
            #expect(try info.map { try $0.text("type") } == table.columns.map(\.type), "\(table.name)")
            let sql = try db.rows("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", [.text(table.name)])
            #expect(try sql.first?.text("sql").map { $0 + ";" } == table.create, "\(table.name)")
        }
    }

    /// The sample sessions (a v1 file without `messages.decryption`, and v3 files) still open and read, and their tables'
    /// columns are the declared ones in the same order (the columns later versions added at the end aside).
    @Test func theSampleSessionsStillOpen() throws {
        let samples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../sessions").standardized
        for name in ["sample-reverse.3dstape", "demo-app.3dstape"] {
            let dir = try SessionWriterTests.tempPath()
            defer { SessionWriterTests.removeTemp(dir) }
            try FileManager.default.copyItem(atPath: samples.appendingPathComponent(name).path, toPath: dir)
            let reader = try SessionReader(path: dir)
            let all = try reader.exchanges()
            #expect(!all.isEmpty && all.contains { !$0.messages.isEmpty }, "\(name)")
            #expect(try reader.rows(ids: all.map(\.id)).count == all.count, "\(name)")
            #expect(try !reader.messageTags().isEmpty && !reader.connections().isEmpty, "\(name)")
            _ = try reader.events()
            #expect(try reader.summary().exchanges == all.count)
            let db = try Database(path: dir, mode: .readOnly)
            for table in [ConnectionsTable.table, ExchangesTable.table, MessagesTable.table] {
                let names = try db.rows("PRAGMA table_info(\(table.name))").map { try $0.text("name") ?? "" }
                #expect(Array(table.columns.map(\.name).prefix(names.count)) == names, "\(name): \(table.name)")
            }
        }
    }

    /// A column holding a value of another type (a hand-edited file) is refused with an error naming the column,
    /// not read as a default.
    @Test func aColumnOfTheWrongTypeIsNamed() throws {
        let path = try Self.everyKindOfRow()
        defer { SessionWriterTests.removeTemp(path) }
        try Database(path: path, mode: .readWrite).execute("UPDATE exchanges SET status = 'two hundred' WHERE seq = 1")
        #expect { try SessionReader(path: path).exchanges() } throws: { e in
            (e as? RowError) == RowError(column: "status", problem: .wrongType(expected: "INTEGER", found: "TEXT"))
        }
        #expect((try? SessionReader(path: path).exchanges()) == nil)
    }

    /// The writer's insert names each column beside its value: a second call naming other columns prepares its own SQL.
    @Test func anInsertTakesTheColumnsItIsGiven() throws {
        let path = try Self.everyKindOfRow()
        defer { SessionWriterTests.removeTemp(path) }
        let db = try Database(path: path, mode: .readWrite)
        let insert = RowWrite(.insert, into: EventsTable.table, db)
        try insert.insert([(EventsTable.at, .real(1)), (EventsTable.kind, .text("a")), (EventsTable.detail, .text("d"))])
        try insert.insert([(EventsTable.kind, .text("b")), (EventsTable.at, .real(2))])
        let rows = try db.rows("SELECT at, kind, detail FROM events WHERE at < 10 ORDER BY at")
        #expect(try rows.map { try $0.text("kind") } == ["a", "b"] && rows.map { try? $0.text("detail") } == ["d", nil])
    }
}
