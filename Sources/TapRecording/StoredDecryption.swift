import TapEMV
import TapStore

// A stored message's decryption note read as TapEMV's DecryptionState, in one place for every module that reads
// sessions (inspect, replay, web, client replay, the CLI). TapStore keeps the note as text and knows nothing of what it
// says; nothing else matches the note's wording.

extension RecordedMessage {
    /// The stored note on the app-channel decryption, typed; nil for a message that was never encrypted.
    public var decryptionState: DecryptionState? { DecryptionState(decryption) }
    /// Held in clear after an app-channel decryption.
    public var isDecrypted: Bool { decryptionState?.isDecrypted == true }
    /// Held in clear because an import brought it so, not decrypted here.
    public var wasImportedInClear: Bool { decryptionState?.wasImportedInClear == true }
    /// An app-channel JWE that was not decrypted (shown encrypted).
    public var isEncrypted: Bool { StoredDecryption.isEncrypted(location: location, decryption: decryption) }
}

extension MessageTag {
    /// An app-channel JWE that was not decrypted.
    public var encrypted: Bool { StoredDecryption.isEncrypted(location: location, decryption: decryption) }
}

/// The rule both views of a stored message share.
enum StoredDecryption {
    /// Whether a message stored at `location` with this decryption note is an app-channel JWE still encrypted.
    static func isEncrypted(location: String, decryption: String?) -> Bool {
        location == "jwe" && DecryptionState(decryption)?.isDecrypted != true
    }
}
