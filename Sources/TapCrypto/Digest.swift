internal import COpenSSL
import TapCore

/// SHA-256, HMAC-SHA256, random bytes and constant-time comparison.
public enum Digest {
    /// SHA-256 of the bytes.
    public static func sha256(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var len: UInt32 = 0
        let rc = data.withUnsafeBytes { d in
            EVP_Digest(d.baseAddress, d.count, &out, &len, EVP_sha256(), nil)
        }
        precondition(rc == 1 && len == 32, "EVP_Digest(SHA-256) cannot fail on valid input")
        return out
    }

    /// HMAC-SHA256 of `data` under `key`.
    public static func hmacSHA256(key: [UInt8], data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var len: UInt32 = 0
        let result = key.withUnsafeBytes { k in
            data.withUnsafeBytes { d in
                // A zero-length key or message still needs a valid pointer.
                HMAC(EVP_sha256(), k.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(k.count),
                     d.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(bitPattern: 1), d.count,
                     &out, &len)
            }
        }
        precondition(result != nil && len == 32, "HMAC-SHA256 cannot fail on valid input")
        return out
    }

    /// Cryptographically secure random bytes from OpenSSL's DRBG.
    public static func randomBytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        if count > 0 {
            let rc = RAND_bytes(&out, Int32(count))
            precondition(rc == 1, "RAND_bytes failed: the system has no entropy source")
        }
        return out
    }

    /// A random version-4 UUID, lowercase, from OpenSSL's DRBG: Foundation's `UUID()` opens and reads /dev/urandom
    /// for each one (three system calls), and client replay makes several for every transaction.
    public static func randomUUID() -> String {
        randomBytes(16).withUnsafeBytes { Hex.version4UUID($0) }
    }

    /// Compares two byte strings in time that depends only on their lengths.
    public static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in CRYPTO_memcmp(pa.baseAddress, pb.baseAddress, a.count) == 0 }
        }
    }
}

/// The single-step key derivation of NIST SP 800-56A (Concat KDF) with SHA-256, as JOSE and EMV 3DS use it.
public enum ConcatKDF {
    /// Derives `keyBits` bits from the shared secret `z` and the already-encoded `otherInfo`.
    public static func derive(z: [UInt8], otherInfo: [UInt8], keyBits: Int) -> [UInt8] {
        let needed = (keyBits + 7) / 8
        var out: [UInt8] = []
        var counter: UInt32 = 1
        while out.count < needed {
            out += Digest.sha256(bigEndian(counter) + z + otherInfo)
            counter += 1
        }
        return Array(out.prefix(needed))
    }

    /// OtherInfo as JOSE lays it out: each of AlgorithmID, PartyUInfo and PartyVInfo as a 4-byte
    /// big-endian length and the data; then SuppPubInfo (the key length in bits, 4 bytes big-endian).
    public static func otherInfo(algorithmID: [UInt8], partyUInfo: [UInt8], partyVInfo: [UInt8], keyBits: Int) -> [UInt8] {
        func field(_ d: [UInt8]) -> [UInt8] { bigEndian(UInt32(d.count)) + d }
        return field(algorithmID) + field(partyUInfo) + field(partyVInfo) + bigEndian(UInt32(keyBits))
    }

    /// The EMV 3DS variant (emv3ds.md §1 and §2): empty AlgorithmID and PartyUInfo, PartyVInfo the ASCII of
    /// `partyV` (the sdkReferenceNumber for the app channel, the directoryServerID for deviceData), 256 bits.
    public static func emv(z: [UInt8], partyV: String) -> [UInt8] {
        derive(z: z, otherInfo: otherInfo(algorithmID: [], partyUInfo: [], partyVInfo: Array(partyV.utf8), keyBits: 256),
               keyBits: 256)
    }

    static func bigEndian(_ v: UInt32) -> [UInt8] {
        [UInt8(v >> 24 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
    }
}
