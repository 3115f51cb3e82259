import TapCore
import TapCrypto

/// JWE content encryption algorithms used by EMV 3DS.
public enum ContentEncryption: String, Sendable, CaseIterable {
    case a128cbcHS256 = "A128CBC-HS256"
    case a128gcm = "A128GCM"

    /// Key length in bytes (32 for CBC-HS256: MAC key then AES key; 16 for GCM).
    public var keyLength: Int { self == .a128gcm ? 16 : 32 }
    /// IV length in bytes.
    public var ivLength: Int { self == .a128gcm ? 12 : 16 }

    /// Encrypts; returns ciphertext and tag (16 bytes for both algorithms).
    public func seal(cek: [UInt8], iv: [UInt8], plaintext: [UInt8], aad: [UInt8]) throws(JOSEError) -> (ciphertext: [UInt8], tag: [UInt8]) {
        guard cek.count == keyLength else { throw JOSEError(.wrongKey, "\(rawValue) needs a \(keyLength)-byte key, got \(cek.count)") }
        guard iv.count == ivLength else { throw JOSEError(.malformed, "\(rawValue) needs a \(ivLength)-byte IV, got \(iv.count)") }
        do {
            switch self {
            case .a128gcm:
                let s = try AES128.gcmSeal(key: cek, iv: iv, plaintext: plaintext, aad: aad)
                return (s.ciphertext, s.tag)
            case .a128cbcHS256:
                let ct = try AES128.cbcEncrypt(key: Array(cek[16..<32]), iv: iv, plaintext: plaintext)
                return (ct, Self.cbcTag(macKey: Array(cek[0..<16]), aad: aad, iv: iv, ciphertext: ct))
            }
        } catch { throw JOSEError.from(error, context: rawValue) }
    }

    /// Decrypts and authenticates; a tag mismatch throws `.authenticationFailed` and returns nothing.
    public func open(cek: [UInt8], iv: [UInt8], ciphertext: [UInt8], tag: [UInt8], aad: [UInt8]) throws(JOSEError) -> [UInt8] {
        guard cek.count == keyLength else { throw JOSEError(.wrongKey, "\(rawValue) needs a \(keyLength)-byte key, got \(cek.count)") }
        guard iv.count == ivLength else { throw JOSEError(.malformed, "\(rawValue) needs a \(ivLength)-byte IV, got \(iv.count)") }
        guard tag.count == 16 else { throw JOSEError(.malformed, "\(rawValue) tag must be 16 bytes, got \(tag.count)") }
        do {
            switch self {
            case .a128gcm:
                return try AES128.gcmOpen(key: cek, iv: iv, ciphertext: ciphertext, tag: tag, aad: aad)
            case .a128cbcHS256:
                let expected = Self.cbcTag(macKey: Array(cek[0..<16]), aad: aad, iv: iv, ciphertext: ciphertext)
                guard Digest.constantTimeEquals(expected, tag) else {
                    throw JOSEError(.authenticationFailed, "A128CBC-HS256 authentication tag mismatch (tampered data or wrong key)")
                }
                return try AES128.cbcDecrypt(key: Array(cek[16..<32]), iv: iv, ciphertext: ciphertext)
            }
        } catch let e as JOSEError {
            throw e
        } catch let e as CryptoError {
            throw JOSEError.from(e, context: rawValue)
        } catch {
            throw JOSEError(.malformed, "\(rawValue): \(error)")
        }
    }

    /// RFC 7518 §5.2.2.1: the first 16 bytes of HMAC-SHA256(MAC key, AAD ‖ IV ‖ C ‖ AL).
    static func cbcTag(macKey: [UInt8], aad: [UInt8], iv: [UInt8], ciphertext: [UInt8]) -> [UInt8] {
        let bits = UInt64(aad.count) * 8
        let al = (0..<8).map { UInt8(bits >> (56 - 8 * UInt64($0)) & 0xFF) }
        return Array(Digest.hmacSHA256(key: macKey, data: aad + iv + ciphertext + al).prefix(16))
    }
}

/// How a JWE's content key is established.
public enum JWEKeyManagement: Sendable, Equatable {
    /// `alg: RSA-OAEP-256`: the CEK is RSA-encrypted to the recipient.
    case rsaOAEP256
    /// The EMV deviceData EC variant: `alg: ECDH-ES` (or Stripe Android's `dir`) with an `epk`;
    /// CEK = Concat KDF over ECDH(Z) with PartyVInfo = the directoryServerID (emv3ds.md §2).
    case emvECDH
    /// `alg: dir` without `epk`: the CEK is shared in advance (the app channel's CReq/CRes).
    case direct
}

/// A compact JWE (RFC 7516) with the algorithms EMV 3DS uses.
public struct JWE: Sendable {
    /// The protected header.
    public let header: JSON
    /// The protected header segment as received: the AAD.
    public let protectedSegment: String
    public let encryptedKey: [UInt8]
    public let iv: [UInt8]
    public let ciphertext: [UInt8]
    public let tag: [UInt8]

    /// The compact serialisation.
    public var compact: String {
        [protectedSegment, Base64URL.encode(encryptedKey), Base64URL.encode(iv), Base64URL.encode(ciphertext),
         Base64URL.encode(tag)].joined(separator: ".")
    }

    /// `alg` as written.
    public var algorithm: String? { header["alg"]?.stringValue }
    /// `kid` as written.
    public var keyID: String? { header["kid"]?.stringValue }

    /// The content encryption named by `enc`.
    public var contentEncryption: ContentEncryption {
        get throws(JOSEError) {
            guard let name = header["enc"]?.stringValue else { throw JOSEError(.malformed, "JWE header has no \"enc\"") }
            guard let enc = ContentEncryption(rawValue: name) else {
                throw JOSEError(.unsupported, "JWE enc \"\(name)\" is not supported (A128CBC-HS256 or A128GCM)")
            }
            return enc
        }
    }

    /// The key management the header asks for.
    public var keyManagement: JWEKeyManagement {
        get throws(JOSEError) {
            switch algorithm {
            case "RSA-OAEP-256": return .rsaOAEP256
            case "ECDH-ES": return .emvECDH
            case "dir": return header["epk"] == nil ? .direct : .emvECDH
            case let other?: throw JOSEError(.unsupported, "JWE alg \"\(other)\" is not supported (RSA-OAEP-256, ECDH-ES, dir)")
            case nil: throw JOSEError(.malformed, "JWE header has no \"alg\"")
            }
        }
    }

    /// Parses a compact JWE; throws `.malformed` naming the part at fault.
    public init(compact text: String) throws(JOSEError) {
        try self.init(compact: Array(text.utf8))
    }

    /// Parses a compact JWE from its bytes (an HTTP body as it arrived, whitespace around it allowed).
    public init(compact bytes: [UInt8]) throws(JOSEError) {
        let parts = try CompactParts(bytes, count: 5, what: "JWE")
        header = try parts.header()
        protectedSegment = parts.text(0)
        encryptedKey = try parts.decode(1, name: "JWE encrypted key")
        iv = try parts.decode(2, name: "JWE IV")
        ciphertext = try parts.decode(3, name: "JWE ciphertext")
        tag = try parts.decode(4, name: "JWE tag")
    }

    /// The protected header of a compact JWE, the token's shape checked as `init(compact:)` checks it (five base64url
    /// parts, whitespace around them allowed) but only the header decoded: enough to tell what a body is.
    public static func protectedHeader(ofCompact bytes: [UInt8]) throws(JOSEError) -> JSON {
        try CompactParts(bytes, count: 5, what: "JWE").header()
    }

    init(header: JSON, encryptedKey: [UInt8], iv: [UInt8], ciphertext: [UInt8], tag: [UInt8], protectedSegment: String) {
        self.header = header
        self.protectedSegment = protectedSegment
        self.encryptedKey = encryptedKey
        self.iv = iv
        self.ciphertext = ciphertext
        self.tag = tag
    }

    // MARK: decryption

    /// Decrypts with a content key known in advance (`dir`, or any JWE whose CEK was logged).
    public func decrypt(cek: [UInt8]) throws(JOSEError) -> [UInt8] {
        try contentEncryption.open(cek: cek, iv: iv, ciphertext: ciphertext, tag: tag, aad: Array(protectedSegment.utf8))
    }

    /// Decrypts an `RSA-OAEP-256` JWE with the recipient's RSA private key.
    public func decrypt(rsaKey: PrivateKey) throws(JOSEError) -> [UInt8] {
        try decrypt(cek: try unwrapRSA(rsaKey))
    }

    /// Recovers the CEK of an `RSA-OAEP-256` JWE.
    public func unwrapRSA(_ rsaKey: PrivateKey) throws(JOSEError) -> [UInt8] {
        guard try keyManagement == .rsaOAEP256 else { throw JOSEError(.wrongKey, "JWE alg is \(algorithm ?? "?"), not RSA-OAEP-256") }
        guard rsaKey.type == .rsa else { throw JOSEError(.wrongKey, "RSA-OAEP-256 needs an RSA private key, got \(rsaKey.type.rawValue)") }
        let cek: [UInt8]
        do { cek = try rsaKey.rsaOAEP256Decrypt(encryptedKey) } catch {
            throw JOSEError(.wrongKey, "RSA-OAEP-256 key unwrap failed: wrong private key or corrupted encrypted key")
        }
        let enc = try contentEncryption
        guard cek.count == enc.keyLength else { throw JOSEError(.malformed, "unwrapped CEK is \(cek.count) bytes; \(enc.rawValue) needs \(enc.keyLength)") }
        return cek
    }

    /// Decrypts the EMV EC deviceData variant with the DS's P-256 private key and the directoryServerID.
    public func decrypt(ecKey: PrivateKey, directoryServerID: String) throws(JOSEError) -> [UInt8] {
        try decrypt(cek: try deriveEMVKey(ecKey: ecKey, directoryServerID: directoryServerID))
    }

    /// The CEK of an EMV EC deviceData JWE (emv3ds.md §2): KDF(Z, PartyV = DS id); GCM takes the leftmost 16 bytes.
    public func deriveEMVKey(ecKey: PrivateKey, directoryServerID: String) throws(JOSEError) -> [UInt8] {
        guard try keyManagement == .emvECDH else { throw JOSEError(.wrongKey, "JWE alg is \(algorithm ?? "?") without epk, not ECDH-ES") }
        guard let epkJSON = header["epk"] else { throw JOSEError(.malformed, "ECDH-ES JWE has no \"epk\" header") }
        guard ecKey.type == .p256 else { throw JOSEError(.wrongKey, "ECDH-ES needs a P-256 private key, got \(ecKey.type.rawValue)") }
        let epk = try JWK(json: epkJSON).publicKey()
        let z: [UInt8]
        do { z = try ecKey.sharedSecret(with: epk) } catch { throw JOSEError.from(error, context: "ECDH") }
        let full = ConcatKDF.emv(z: z, partyV: directoryServerID)
        return try contentEncryption == .a128gcm ? Array(full.prefix(16)) : full
    }

    /// Decrypts deviceData (AReq `sdkEncData`) as a DS does: RSA-OAEP-256 with its RSA key, or the EMV EC
    /// variant with its EC key and directoryServerID, whichever the header names.
    public func decryptDeviceData(rsaKey: PrivateKey?, ecKey: PrivateKey?, directoryServerID: String) throws(JOSEError) -> [UInt8] {
        switch try keyManagement {
        case .rsaOAEP256:
            guard let rsaKey else { throw JOSEError(.missingKey, "deviceData is RSA-OAEP-256 but there is no RSA DS key") }
            return try decrypt(rsaKey: rsaKey)
        case .emvECDH:
            guard let ecKey else { throw JOSEError(.missingKey, "deviceData is ECDH-ES but there is no EC DS key") }
            return try decrypt(ecKey: ecKey, directoryServerID: directoryServerID)
        case .direct:
            throw JOSEError(.unsupported, "deviceData with alg dir and no epk")
        }
    }

    // MARK: encryption

    /// Encrypts with a known content key and the given header (`alg` `dir` for the app channel).
    /// The IV is random unless given (the app channel derives GCM IVs from its counters).
    public static func encrypt(plaintext: [UInt8], cek: [UInt8], header: JSON, iv: [UInt8]? = nil,
                               encryptedKey: [UInt8] = []) throws(JOSEError) -> JWE {
        guard let encName = header["enc"]?.stringValue, let enc = ContentEncryption(rawValue: encName) else {
            throw JOSEError(.unsupported, "header enc must be A128CBC-HS256 or A128GCM")
        }
        let segment = Base64URL.encode(header.bytes)
        let iv = iv ?? Digest.randomBytes(enc.ivLength)
        let (ct, tag) = try enc.seal(cek: cek, iv: iv, plaintext: plaintext, aad: Array(segment.utf8))
        return JWE(header: header, encryptedKey: encryptedKey, iv: iv, ciphertext: ct, tag: tag, protectedSegment: segment)
    }

    /// Encrypts to an RSA public key with `RSA-OAEP-256` and a random CEK.
    public static func encryptRSAOAEP256(plaintext: [UInt8], recipient: PublicKey, enc: ContentEncryption,
                                         keyID: String? = nil) throws(JOSEError) -> JWE {
        let cek = Digest.randomBytes(enc.keyLength)
        let wrapped: [UInt8]
        do { wrapped = try recipient.rsaOAEP256Encrypt(cek) } catch { throw JOSEError.from(error, context: "RSA-OAEP-256") }
        var h: [(String, JSON)] = [("alg", .string("RSA-OAEP-256")), ("enc", .string(enc.rawValue))]
        if let keyID { h.append(("kid", .string(keyID))) }
        return try encrypt(plaintext: plaintext, cek: cek, header: .object(h), encryptedKey: wrapped)
    }

    /// Encrypts to a DS's P-256 key with the EMV deviceData variant: a fresh ephemeral key as `epk`,
    /// CEK from the Concat KDF with PartyVInfo = `directoryServerID`. `alg` is `ECDH-ES` (the spec) or `dir`
    /// (as Stripe Android sends it).
    public static func encryptEMVECDH(plaintext: [UInt8], recipient: PublicKey, directoryServerID: String,
                                      enc: ContentEncryption, keyID: String? = nil, algName: String = "ECDH-ES",
                                      ephemeralKey: PrivateKey? = nil) throws(JOSEError) -> JWE {
        guard recipient.type == .p256 else { throw JOSEError(.wrongKey, "the EC deviceData variant needs a P-256 DS key") }
        let eph: PrivateKey
        let z: [UInt8]
        do {
            if let ephemeralKey { eph = ephemeralKey } else { eph = try PrivateKey.generateP256() }
            z = try eph.sharedSecret(with: recipient)
        } catch { throw JOSEError.from(error, context: "ECDH") }
        let full = ConcatKDF.emv(z: z, partyV: directoryServerID)
        let cek = enc == .a128gcm ? Array(full.prefix(16)) : full
        var h: [(String, JSON)] = [("alg", .string(algName)), ("enc", .string(enc.rawValue)),
                                   ("epk", JWK(publicKeyOf: eph).json())]
        if let keyID { h.append(("kid", .string(keyID))) }
        return try encrypt(plaintext: plaintext, cek: cek, header: .object(h))
    }
}
