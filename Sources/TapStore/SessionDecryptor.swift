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
        let meta = Dictionary(uniqueKeysWithValues: try db.query("SELECT key, value FROM meta").compactMap { r -> (String, String)? in
            guard let k = r[0].text, let v = r[1].text else { return nil }
            return (k, v)
        })
        let version = Int(meta["schema_version"] ?? "1") ?? 1
        let mask = meta["masked"] != "no"
        var outcome = Outcome()
        try db.transaction {
            if version < SessionSchema.version { try SessionSchema.migrate(db, from: version) }
            try db.execute(SessionSchema.closingIndexes) // a recording cut short never built it
            let rows = try db.query("""
                SELECT m.id, m.direction, m.json, m.decryption, e.request_body, e.request_body_compressed, e.response_body, e.response_body_compressed
                FROM messages m JOIN exchanges e ON e.id = m.exchange_id WHERE m.location = 'jwe'
                """)
            let update = try db.prepare("""
                UPDATE messages SET json = ?, message_type = ?, message_version = ?, three_ds_server_trans_id = ?, ds_trans_id = ?,
                  acs_trans_id = ?, sdk_trans_id = ?, trans_status = ?, error_code = ?, decryption = ? WHERE id = ?
                """)
            for r in rows {
                if r[3].text?.hasPrefix("decrypted") == true { outcome.alreadyDecrypted += 1; continue }
                let isRequest = r[1].text == "request"
                let body = SessionReader.body(isRequest ? r[4] : r[6], compressed: (isRequest ? r[5] : r[7]).integer == 1)
                guard let header = r[2].text.flatMap({ try? JSON.parse($0) }) else { continue }
                let found = ThreeDSContent.Found(location: "jwe", json: header, summary: nil)
                let result = ThreeDSContent.decryptAppChannel(found, body: body, isRequest: isRequest, keys: keys, mask: mask)
                guard result.decryption?.hasPrefix("decrypted") == true else {
                    if result.decryption?.hasPrefix("encrypted: no") == true { outcome.noKey += 1 } else { outcome.failed += 1 }
                    try update.bind([.text(header.compact), .text(isRequest ? "CReq" : "CRes"), .null, .null, .null,
                                     header["kid"]?.stringValue.map { .text($0) } ?? .null, .null, .null, .null,
                                     result.decryption.map { .text($0) } ?? .null, r[0]])
                    while try update.step() {}
                    continue
                }
                let s = result.summary
                func t(_ v: String?) -> SQLiteValue { v.map { .text($0) } ?? .null }
                try update.bind([.text(result.json.compact), t(s?.messageType), t(s?.messageVersion), t(s?.threeDSServerTransID),
                                 t(s?.dsTransID), t(s?.acsTransID), t(s?.sdkTransID), t(s?.transStatus), t(s?.errorCode),
                                 t(result.decryption), r[0]])
                while try update.step() {}
                outcome.decrypted += 1
            }
        }
        return outcome
    }
}
