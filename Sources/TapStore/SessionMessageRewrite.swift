import TapCore
import TapSQLite

/// A stored message with its side's body, as `SessionReader.rewriteMessages` hands it over.
public struct StoredMessageRow: Sendable {
    public var id: Int64
    public var isRequest: Bool
    /// The message's stored JSON (for an app-channel message still encrypted, the JWE's header).
    public var json: String?
    public var decryption: String?
    /// The side's body, decompressed.
    public var body: [UInt8]
}

extension SessionReader {
    /// Rewrites, in place and in one transaction, each message stored at `location`: `rewrite` gets the message with its
    /// side's body and the file's metadata, and returns the record to store instead (nil: leave it). An older file is
    /// migrated to this schema version first, and gets the closing indexes a recording cut short never built.
    /// (`3dstape decrypt`: TapRecording's `SessionDecryptor`.)
    public static func rewriteMessages(path: String, location: String,
                                       _ rewrite: (StoredMessageRow, _ meta: [String: String]) throws -> MessageRecord?) throws {
        let (meta, version) = try { // refuses what is not a session, or is newer; its connection closes here
            let reader = try SessionReader(path: path)
            return (reader.meta, reader.schemaVersion)
        }()
        let db = try Database(path: path, mode: .readWrite)
        try db.transaction {
            if version < SessionSchema.version { try SessionSchema.migrate(db, from: version) }
            try db.execute(SessionSchema.closingIndexes) // a recording cut short never built it
            typealias M = MessagesTable
            let read = SessionReader.messageRowReader
            let rows = try db.rows("SELECT \(read.selectList(["messages": "m", "exchanges": "e"])) FROM messages m JOIN exchanges e ON e.id = m.exchange_id "
                                   + "WHERE m.location = ?", [.text(location)])
            let update = RowWrite(.update(key: M.id), into: M.table, db)
            func t(_ v: String?) -> SQLiteValue { v.map { .text($0) } ?? .null }
            for r in rows {
                let row = try read.decode(r)
                guard let m = try rewrite(row, meta) else { continue }
                try update.update([(M.json, m.json.map { .text($0.compact) } ?? .null), (M.messageType, t(m.messageType)),
                                   (M.messageVersion, t(m.messageVersion)), (M.threeDSServerTransID, t(m.threeDSServerTransID)),
                                   (M.dsTransID, t(m.dsTransID)), (M.acsTransID, t(m.acsTransID)), (M.sdkTransID, t(m.sdkTransID)),
                                   (M.transStatus, t(m.transStatus)), (M.errorCode, t(m.errorCode)), (M.decryption, t(m.decryption))],
                                  key: .integer(row.id))
            }
        }
    }

    static let messageRowReader: RowReader<StoredMessageRow> = {
        typealias M = MessagesTable
        typealias E = ExchangesTable
        return RowReader([M.id, M.direction, M.json, M.decryption, E.requestBody, E.requestBodyCompressed, E.responseBody,
                          E.responseBodyCompressed]) { r in
            let isRequest = try r.text(M.direction) == "request"
            let request = (try r.value(E.requestBody), try r.integer(E.requestBodyCompressed) == 1)
            let response = (try r.value(E.responseBody), try r.integer(E.responseBodyCompressed) == 1)
            let (stored, compressed) = isRequest ? request : response
            return StoredMessageRow(id: try r.integer(M.id) ?? 0, isRequest: isRequest, json: try r.text(M.json),
                                    decryption: try r.text(M.decryption), body: SessionReader.body(stored, compressed: compressed))
        }
    }()
}
