import Foundation
import TapCore
import TapJOSE

/// A key log: the keys that open recorded app-channel messages, one per line, like TLS's SSLKEYLOGFILE.
///
///     # comment
///     CEK <acsTransID> <64 hex digits: the 32-byte channel CEK of emv3ds.md §1>
///
/// A CEK opens both directions (A128CBC-HS256 uses all of it; A128GCM its left half for CReq and its right
/// half for CRes). `3dstape sandbox --keylog FILE` writes such lines; `record --keylog` and `decrypt` read them.
public struct KeyLog: Sendable {
    /// Channel CEKs by acsTransID (lowercased).
    public private(set) var ceks: [String: [UInt8]] = [:]

    public init() {}

    /// Parses key-log text; a malformed line is an error that names its line number.
    public init(text: String) throws(KeyLogError) {
        for (n, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(raw).trimmingWhitespace
            if line.isEmpty || line.hasPrefix("#") { continue }
            let parts = line.split(separator: " ", omittingEmptySubsequences: true)
            guard parts.count == 3, parts[0] == "CEK" else {
                throw KeyLogError("line \(n + 1): expected 'CEK <acsTransID> <64 hex digits>'")
            }
            guard let key = Hex.decode(String(parts[2])), key.count == 32 else {
                throw KeyLogError("line \(n + 1): the CEK must be 64 hex digits")
            }
            ceks[parts[1].lowercased()] = key
        }
    }

    /// Reads a key-log file.
    public static func load(path: String) throws(KeyLogError) -> KeyLog {
        guard let data = FileManager.default.contents(atPath: path) else { throw KeyLogError("cannot read key log \(path)") }
        return try KeyLog(text: String(decoding: data, as: UTF8.self))
    }

    /// The CEK for an acsTransID.
    public func cek(for acsTransID: String) -> [UInt8]? { ceks[acsTransID.lowercased()] }
}

/// A key-log problem with a message for the user.
public struct KeyLogError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Something that can give the channel CEK for an acsTransID (a key log file being written as we record).
public protocol ChannelKeySource: Sendable {
    func cek(for acsTransID: String) -> [UInt8]?
    /// How the keys were obtained, as recorded: `key log` or `key substitution`.
    var method: String { get }
}

extension ChannelKeySource {
    public var method: String { "key log" }
}

/// A key-log file that is read again when asked for a key it does not have yet and the file has grown,
/// so that a recorder can follow a sandbox (or SDK build) that appends keys as transactions start.
public final class KeyLogFile: ChannelKeySource, @unchecked Sendable {
    // Safe: `log` and `size` are guarded by `lock`.
    public let path: String
    private let lock = NSLock()
    private var log = KeyLog()
    private var size: UInt64 = 0

    public init(path: String) { self.path = path }

    public func cek(for acsTransID: String) -> [UInt8]? {
        lock.lock()
        defer { lock.unlock() }
        if let k = log.cek(for: acsTransID) { return k }
        let current = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? UInt64) ?? 0
        if current != size, let fresh = try? KeyLog.load(path: path) {
            log = fresh
            size = current
        }
        return log.cek(for: acsTransID)
    }
}

extension ThreeDSContent {
    /// Opens a recorded app-channel JWE with the key source: the plaintext (masked when asked) as the
    /// message, marked `decrypted: key log`; or the header with the reason it stays encrypted.
    public static func decryptAppChannel(_ found: Found, body: [UInt8], isRequest: Bool, keys: (any ChannelKeySource)?,
                                         mask: Bool) -> Found {
        guard let kid = found.json["kid"]?.stringValue else { return found }
        guard let keys else { return found.with(decryption: "encrypted: no key log") }
        guard let cek = keys.cek(for: kid) else { return found.with(decryption: "encrypted: no \(keys.method) key for acsTransID \(kid)") }
        // The receiver of a CReq is the ACS; of a CRes, the SDK.
        let cipher = AppChannelCipher(role: isRequest ? .acs : .sdk, cek: cek, acsTransID: kid, enc: .a128cbcHS256)
        do {
            let plain = try cipher.decrypt(String(decoding: body, as: UTF8.self).trimmingWhitespace)
            let shown = mask ? Masking.mask(plain) : plain
            var f = Found(location: .jwe, json: shown, summary: MessageSummary(shown))
            f.decryption = "decrypted: \(keys.method)"
            return f
        } catch {
            return found.with(decryption: "encrypted: the \(keys.method) key for \(kid) does not open it (\(error.message))")
        }
    }
}
