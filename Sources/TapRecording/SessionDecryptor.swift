import TapCore
import TapEMV
import TapStore

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
        var outcome = Outcome()
        try SessionReader.rewriteMessages(path: path, location: MessageLocation.jwe.stored) { row, meta in
            if DecryptionState(row.decryption)?.isDecrypted == true { outcome.alreadyDecrypted += 1; return nil }
            guard let header = row.json.flatMap({ try? JSON.parse($0) }) else { return nil }
            let found = ThreeDSContent.Found(location: .jwe, json: header, summary: nil)
            let result = ThreeDSContent.decryptAppChannel(found, body: row.body, isRequest: row.isRequest, keys: keys, mask: meta["masked"] != "no")
            let state = DecryptionState(result.decryption)
            guard state?.isDecrypted == true else {
                if state?.outcome == .noKey { outcome.noKey += 1 } else { outcome.failed += 1 }
                return MessageRecord(location: MessageLocation.jwe.stored, json: header, messageType: row.isRequest ? "CReq" : "CRes", acsTransID: header["kid"]?.stringValue,
                                     decryption: result.decryption)
            }
            outcome.decrypted += 1
            return MessageRecord(result)
        }
        return outcome
    }
}
