import Foundation
import TapCompression
import TapCore
import TapEMV
import TapSQLite

/// Decrypts, in place, the app-channel CReq/CRes of a recorded session with a key log
/// (`3dstape decrypt SESSION --keylog FILE`). Bodies keep their ciphertext; the messages table gets the
/// (masked) plaintexts and how each was decrypted, or why not. Older sessions are migrated first.
public enum SessionDecryptor {
    /// What a run did.
    public struct Outcome: Sendable {
        public var decrypted = 0
        public var noKey = 0
        public var failed = 0
        public var alreadyDecrypted = 0
    }

    public static func decrypt(path: String, keys: any ChannelKeySource) throws -> Outcome {
        _ = try SessionReader(path: path) // refuses what is not a session, or is newer
        let db = try Database(path: path, mode: .readWrite)
        let meta = Dictionary(uniqueKeysWithValues: try db.rows("SELECT key, value FROM meta").compactMap { r -> (String, String)? in
            guard let k = try? r.text(MetaTable.key), let v = try? r.text(MetaTable.value) else { return nil }
            return (k, v)
        })
        let version = Int(meta["schema_version"] ?? "1") ?? 1
        let mask = meta["masked"] != "no"
        var outcome = Outcome()
        try db.transaction {
            if version < SessionSchema.version { try SessionSchema.migrate(db, from: version) }
            try db.execute(SessionSchema.closingIndexes) // a recording cut short never built it
            typealias M = MessagesTable
            let read = SessionDecryptor.jweReader
            let rows = try db.rows("SELECT \(read.selectList(["messages": "m", "exchanges": "e"])) FROM messages m JOIN exchanges e ON e.id = m.exchange_id "
                                   + "WHERE m.location = 'jwe'")
            let update = RowWrite(.update(key: M.id), into: M.table, db)
            for r in rows {
                let row = try read.decode(r)
                if row.decryption?.hasPrefix("decrypted") == true { outcome.alreadyDecrypted += 1; continue }
                guard let header = row.json.flatMap({ try? JSON.parse($0) }) else { continue }
                let found = ThreeDSContent.Found(location: "jwe", json: header, summary: nil)
                let result = ThreeDSContent.decryptAppChannel(found, body: row.body, isRequest: row.isRequest, keys: keys, mask: mask)
                func t(_ v: String?) -> SQLiteValue { v.map { .text($0) } ?? .null }
                guard result.decryption?.hasPrefix("decrypted") == true else {
                    if result.decryption?.hasPrefix("encrypted: no") == true { outcome.noKey += 1 } else { outcome.failed += 1 }
                    try update.update([(M.json, .text(header.compact)), (M.messageType, .text(row.isRequest ? "CReq" : "CRes")),
                                       (M.messageVersion, .null), (M.threeDSServerTransID, .null), (M.dsTransID, .null),
                                       (M.acsTransID, t(header["kid"]?.stringValue)), (M.sdkTransID, .null), (M.transStatus, .null),
                                       (M.errorCode, .null), (M.decryption, t(result.decryption))], key: .integer(row.id))
                    continue
                }
                let s = result.summary
                try update.update([(M.json, .text(result.json.compact)), (M.messageType, t(s?.messageType)), (M.messageVersion, t(s?.messageVersion)),
                                   (M.threeDSServerTransID, t(s?.threeDSServerTransID)), (M.dsTransID, t(s?.dsTransID)),
                                   (M.acsTransID, t(s?.acsTransID)), (M.sdkTransID, t(s?.sdkTransID)), (M.transStatus, t(s?.transStatus)),
                                   (M.errorCode, t(s?.errorCode)), (M.decryption, t(result.decryption))], key: .integer(row.id))
                outcome.decrypted += 1
            }
        }
        return outcome
    }

    /// An app-channel message to decrypt: its id, direction, stored header or plaintext, note, and its side's body.
    struct JWERow {
        var id: Int64
        var isRequest: Bool
        var json: String?
        var decryption: String?
        var body: [UInt8]
    }

    static let jweReader: RowReader<JWERow> = {
        typealias M = MessagesTable
        typealias E = ExchangesTable
        return RowReader([M.id, M.direction, M.json, M.decryption, E.requestBody, E.requestBodyCompressed, E.responseBody,
                          E.responseBodyCompressed]) { r in
            let isRequest = try r.text(M.direction) == "request"
            let request = (try r.value(E.requestBody), try r.integer(E.requestBodyCompressed) == 1)
            let response = (try r.value(E.responseBody), try r.integer(E.responseBodyCompressed) == 1)
            let (stored, compressed) = isRequest ? request : response
            let body = SessionReader.body(stored, compressed: compressed)
            return JWERow(id: try r.integer(M.id) ?? 0, isRequest: isRequest, json: try r.text(M.json), decryption: try r.text(M.decryption),
                          body: body)
        }
    }()
}
