internal import COpenSSL
import TapCore

/// AES-128 in GCM and CBC (PKCS#7 padding) modes.
public enum AES128 {
    /// A GCM result: ciphertext and 16-byte tag.
    public struct Sealed: Sendable, Equatable {
        public let ciphertext: [UInt8]
        public let tag: [UInt8]
    }

    /// AES-128-GCM encryption with a 12-byte IV.
    public static func gcmSeal(key: [UInt8], iv: [UInt8], plaintext: [UInt8], aad: [UInt8]) throws(CryptoError) -> Sealed {
        try checkSizes(key: key, iv: iv, ivSize: 12)
        let ctx = try CipherContext()
        try ctx.initialise(EVP_aes_128_gcm(), key: key, iv: iv, encrypt: true, gcmIVLength: 12)
        if !aad.isEmpty { _ = try ctx.update(aad, aadOnly: true) }
        var out = plaintext.isEmpty ? [] : try ctx.update(plaintext, aadOnly: false)
        out += try ctx.finish()
        var tag = [UInt8](repeating: 0, count: 16)
        try check(EVP_CIPHER_CTX_ctrl(ctx.pointer, EVP_CTRL_GCM_GET_TAG, 16, &tag), "reading the GCM tag")
        return Sealed(ciphertext: out, tag: tag)
    }

    /// AES-128-GCM decryption; throws `.authenticationFailed` if the tag does not match.
    public static func gcmOpen(key: [UInt8], iv: [UInt8], ciphertext: [UInt8], tag: [UInt8], aad: [UInt8]) throws(CryptoError) -> [UInt8] {
        try checkSizes(key: key, iv: iv, ivSize: 12)
        guard tag.count == 16 else { throw CryptoError(.invalidInput, "GCM tag must be 16 bytes, got \(tag.count)") }
        let ctx = try CipherContext()
        try ctx.initialise(EVP_aes_128_gcm(), key: key, iv: iv, encrypt: false, gcmIVLength: 12)
        if !aad.isEmpty { _ = try ctx.update(aad, aadOnly: true) }
        var out = ciphertext.isEmpty ? [] : try ctx.update(ciphertext, aadOnly: false)
        var t = tag
        try check(EVP_CIPHER_CTX_ctrl(ctx.pointer, EVP_CTRL_GCM_SET_TAG, 16, &t), "setting the GCM tag")
        do {
            out += try ctx.finish()
        } catch {
            CryptoError.clearQueue()
            throw CryptoError(.authenticationFailed, "AES-GCM authentication tag mismatch")
        }
        return out
    }

    /// AES-128-CBC encryption with PKCS#7 padding and a 16-byte IV.
    public static func cbcEncrypt(key: [UInt8], iv: [UInt8], plaintext: [UInt8]) throws(CryptoError) -> [UInt8] {
        try checkSizes(key: key, iv: iv, ivSize: 16)
        let ctx = try CipherContext()
        try ctx.initialise(EVP_aes_128_cbc(), key: key, iv: iv, encrypt: true, gcmIVLength: nil)
        let out = plaintext.isEmpty ? [] : try ctx.update(plaintext, aadOnly: false)
        return out + (try ctx.finish())
    }

    /// AES-128-CBC decryption; throws `.invalidInput` on bad padding or a length that is not a block multiple.
    public static func cbcDecrypt(key: [UInt8], iv: [UInt8], ciphertext: [UInt8]) throws(CryptoError) -> [UInt8] {
        try checkSizes(key: key, iv: iv, ivSize: 16)
        guard !ciphertext.isEmpty, ciphertext.count % 16 == 0 else {
            throw CryptoError(.invalidInput, "AES-CBC ciphertext length \(ciphertext.count) is not a positive multiple of 16")
        }
        let ctx = try CipherContext()
        try ctx.initialise(EVP_aes_128_cbc(), key: key, iv: iv, encrypt: false, gcmIVLength: nil)
        let out = try ctx.update(ciphertext, aadOnly: false)
        do {
            return out + (try ctx.finish())
        } catch {
            CryptoError.clearQueue()
            throw CryptoError(.invalidInput, "AES-CBC padding is invalid (wrong key or corrupted ciphertext)")
        }
    }

    private static func checkSizes(key: [UInt8], iv: [UInt8], ivSize: Int) throws(CryptoError) {
        guard key.count == 16 else { throw CryptoError(.invalidKey, "AES-128 key must be 16 bytes, got \(key.count)") }
        guard iv.count == ivSize else { throw CryptoError(.invalidInput, "IV must be \(ivSize) bytes, got \(iv.count)") }
    }
}

/// Owns one `EVP_CIPHER_CTX` for the length of one operation.
private final class CipherContext {
    let pointer: OpaquePointer
    var encrypting = true

    init() throws(CryptoError) {
        pointer = try unwrap(EVP_CIPHER_CTX_new(), "EVP_CIPHER_CTX_new")
    }

    deinit { EVP_CIPHER_CTX_free(pointer) }

    func initialise(_ cipher: OpaquePointer?, key: [UInt8], iv: [UInt8], encrypt: Bool, gcmIVLength: Int32?) throws(CryptoError) {
        encrypting = encrypt
        let e: Int32 = encrypt ? 1 : 0
        try check(EVP_CipherInit_ex(pointer, cipher, nil, nil, nil, e), "cipher init")
        if let gcmIVLength {
            try check(EVP_CIPHER_CTX_ctrl(pointer, EVP_CTRL_GCM_SET_IVLEN, gcmIVLength, nil), "setting the GCM IV length")
        }
        try check(EVP_CipherInit_ex(pointer, nil, nil, key, iv, e), "setting key and IV")
    }

    func update(_ input: [UInt8], aadOnly: Bool) throws(CryptoError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: aadOnly ? 0 : input.count + 32)
        var len: Int32 = 0
        let rc: Int32 = input.withUnsafeBufferPointer { inp in
            if aadOnly {
                return EVP_CipherUpdate(pointer, nil, &len, inp.baseAddress, Int32(inp.count))
            }
            return out.withUnsafeMutableBufferPointer { o in
                EVP_CipherUpdate(pointer, o.baseAddress, &len, inp.baseAddress, Int32(inp.count))
            }
        }
        try check(rc, "cipher update", kind: .invalidInput)
        return aadOnly ? [] : Array(out.prefix(Int(len)))
    }

    func finish() throws(CryptoError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var len: Int32 = 0
        try check(EVP_CipherFinal_ex(pointer, &out, &len), "cipher final", kind: .invalidInput)
        return Array(out.prefix(Int(len)))
    }
}
