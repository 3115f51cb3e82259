/// Whether an app-channel message (a CReq or CRes JWE) is held in clear, read from the note stored with it
/// (`decrypted: key log`, `encrypted: no key log`, `encrypted: the … key for … does not open it (…)`): the note is kept as
/// it was written, and `outcome` is what code decides on, so no reader matches the note's wording itself.
public struct DecryptionState: Sendable, Equatable, CustomStringConvertible {
    /// What became of the decryption.
    public enum Outcome: Sendable, Equatable {
        /// The message is held in clear.
        case decrypted
        /// Still encrypted: there was no key for it (no key log, or none for its acsTransID).
        case noKey
        /// Still encrypted: a key was tried and did not open it, or the note says nothing this reader knows.
        case failed
    }

    /// The note as stored.
    public let note: String

    public init(note: String) { self.note = note }

    /// The checked reader of a stored note: nil where none was stored (a message that was never encrypted).
    public init?(_ note: String?) {
        guard let note else { return nil }
        self.note = note
    }

    public var outcome: Outcome {
        if note.hasPrefix("decrypted") { return .decrypted }
        if note.hasPrefix("encrypted: no") { return .noKey }
        return .failed
    }

    public var isDecrypted: Bool { outcome == .decrypted }
    /// Held in clear because an import brought it so (a HAR's `_3dstape` field), not decrypted by this tool.
    public var wasImportedInClear: Bool { isDecrypted && note.hasPrefix(DecryptionState.importedPrefix) }
    /// How the note of a message imported in clear begins.
    public static let importedPrefix = "decrypted: imported"
    public var description: String { note }
}

extension ThreeDSContent.Found {
    /// `decryption` typed; nil for a message that was never encrypted.
    public var decryptionState: DecryptionState? { DecryptionState(decryption) }
}
