internal import COpenSSL
import TapCore

/// The kinds of asymmetric key 3dstape handles.
public enum KeyType: String, Sendable, Equatable {
    /// NIST P-256 (EC), for ECDH, ES256 and EMV ephemeral keys.
    case p256 = "EC P-256"
    /// RSA, for PS256/RS256 and RSA-OAEP-256.
    case rsa = "RSA"
}

/// The signature algorithms of JWS that 3dstape signs and verifies with asymmetric keys.
public enum SignatureAlgorithm: String, Sendable, CaseIterable {
    case es256 = "ES256"
    case ps256 = "PS256"
    case rs256 = "RS256"

    /// The key type this algorithm needs.
    public var keyType: KeyType { self == .es256 ? .p256 : .rsa }
}

/// The raw public components of an RSA key (big-endian unsigned integers).
public struct RSAPublicComponents: Sendable, Equatable {
    public var n: [UInt8]
    public var e: [UInt8]
    public init(n: [UInt8], e: [UInt8]) { self.n = n; self.e = e }
}

/// The raw private components of an RSA key; the CRT values are optional.
public struct RSAPrivateComponents: Sendable, Equatable {
    public var n, e, d: [UInt8]
    public var p, q, dp, dq, qi: [UInt8]?
    public init(n: [UInt8], e: [UInt8], d: [UInt8], p: [UInt8]? = nil, q: [UInt8]? = nil,
                dp: [UInt8]? = nil, dq: [UInt8]? = nil, qi: [UInt8]? = nil) {
        self.n = n; self.e = e; self.d = d; self.p = p; self.q = q; self.dp = dp; self.dq = dq; self.qi = qi
    }
}

/// Owns one `EVP_PKEY` reference.
///
/// `@unchecked Sendable` is safe because the key is never mutated after construction, and OpenSSL 3
/// allows concurrent use of one `EVP_PKEY` by operations that each create their own `EVP_PKEY_CTX`.
final class EVPKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init(owning pointer: OpaquePointer) { self.pointer = pointer }
    deinit { EVP_PKEY_free(pointer) }

    /// A key read from PEM by `pem` or from DER by `der` (OpenSSL's readers of one kind of key, given a memory BIO over
    /// `bytes`); `what` names the failure.
    static func reading(_ bytes: [UInt8], _ what: String, pem: (OpaquePointer) -> OpaquePointer?,
                        der: (OpaquePointer) -> OpaquePointer?) throws(CryptoError) -> EVPKey {
        let pointer = try MemoryBIO.reading(bytes) { (bio) throws(CryptoError) -> OpaquePointer? in
            PEMText.looksLikePEM(bytes) ? pem(bio) : der(bio)
        }
        return EVPKey(owning: try unwrap(pointer, what, kind: .invalidKey))
    }

    var type: KeyType? {
        if EVP_PKEY_is_a(pointer, "RSA") == 1 { return .rsa }
        if EVP_PKEY_is_a(pointer, "EC") == 1 {
            var buf = [CChar](repeating: 0, count: 64)
            var len = 0
            guard EVP_PKEY_get_utf8_string_param(pointer, "group", &buf, buf.count, &len) == 1 else { return nil }
            let name = buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            return name == "prime256v1" || name == "P-256" ? .p256 : nil
        }
        return nil
    }

    /// The key type, or an error for anything but P-256 and RSA.
    func supportedType() throws(CryptoError) -> KeyType {
        guard let type else { throw CryptoError(.invalidKey, "unsupported key type (only EC P-256 and RSA are supported)") }
        return type
    }

    func bigNumber(_ name: String) -> [UInt8]? {
        var bn: OpaquePointer? = nil
        guard EVP_PKEY_get_bn_param(pointer, name, &bn) == 1, let bn else {
            CryptoError.clearQueue()
            return nil
        }
        defer { BN_clear_free(bn) }
        return BigNum.bytes(bn)
    }

    /// `(x, y)` of a P-256 key's point, 32 bytes each.
    func p256Coordinates() -> (x: [UInt8], y: [UInt8])? {
        guard let p = ecPoint(), p.count == 65, p[0] == 4 else { return nil }
        return (Array(p[1...32]), Array(p[33...64]))
    }

    /// The uncompressed EC point `04 || x || y`.
    func ecPoint() -> [UInt8]? {
        var buf = [UInt8](repeating: 0, count: 133)
        var len = 0
        guard EVP_PKEY_get_octet_string_param(pointer, "encoded-pub-key", &buf, buf.count, &len) == 1 else {
            CryptoError.clearQueue()
            return nil
        }
        return Array(buf.prefix(len))
    }

    /// DER SubjectPublicKeyInfo.
    func spkiDER() throws(CryptoError) -> [UInt8] {
        let len = i2d_PUBKEY(pointer, nil)
        guard len > 0 else { throw CryptoError.openSSL("encoding the public key") }
        var out = [UInt8](repeating: 0, count: Int(len))
        let written = out.withUnsafeMutableBufferPointer { b -> Int32 in
            var p: UnsafeMutablePointer<UInt8>? = b.baseAddress
            return i2d_PUBKEY(pointer, &p)
        }
        guard written == len else { throw CryptoError.openSSL("encoding the public key") }
        return out
    }

    static func fromData(type: String, selection: Int32, build: (ParamBuilder) throws(CryptoError) -> Void) throws(CryptoError) -> EVPKey {
        let bld = try ParamBuilder()
        try build(bld)
        let params = try unwrap(OSSL_PARAM_BLD_to_param(bld.pointer), "building key parameters", kind: .invalidKey)
        defer { OSSL_PARAM_free(params) }
        let ctx = try unwrap(EVP_PKEY_CTX_new_from_name(nil, type, nil), "EVP_PKEY_CTX_new_from_name(\(type))")
        defer { EVP_PKEY_CTX_free(ctx) }
        try check(EVP_PKEY_fromdata_init(ctx), "EVP_PKEY_fromdata_init")
        var key: OpaquePointer? = nil
        try check(EVP_PKEY_fromdata(ctx, &key, selection, params), "importing the \(type) key", kind: .invalidKey)
        return EVPKey(owning: try unwrap(key, "EVP_PKEY_fromdata"))
    }

    /// The P-256 domain parameters (a key without a point), built once and never changed. New P-256 keys start from
    /// them: building the curve group again for every key (its Montgomery constants, a modular inverse) was most of
    /// the cost of importing a peer's point or generating a key (C, 3,000 each: import 33 -> 14 us, keygen 34 -> 20 us).
    static let p256Parameters: EVPKey? = try? fromData(type: "EC", selection: tap_EVP_PKEY_KEY_PARAMETERS()) { (bld) throws(CryptoError) in
        try bld.push("group", utf8: "prime256v1")
    }

    /// A P-256 public key from its uncompressed point `04 || x || y`; OpenSSL rejects a point not on the curve.
    static func p256Public(point: [UInt8]) throws(CryptoError) -> EVPKey {
        guard let parameters = p256Parameters else {
            return try fromData(type: "EC", selection: tap_EVP_PKEY_PUBLIC_KEY()) { (bld) throws(CryptoError) in
                try bld.push("group", utf8: "prime256v1")
                try bld.push("pub", octets: point)
            }
        }
        let key = EVPKey(owning: try unwrap(EVP_PKEY_new(), "EVP_PKEY_new"))
        try check(EVP_PKEY_copy_parameters(key.pointer, parameters.pointer), "copying the P-256 parameters")
        try check(EVP_PKEY_set1_encoded_public_key(key.pointer, point, point.count), "importing the P-256 point", kind: .invalidKey)
        return key
    }

    /// Checks that the key is consistent (the point is on the curve, RSA components agree).
    func validate(privatePart: Bool) throws(CryptoError) {
        let ctx = try unwrap(EVP_PKEY_CTX_new_from_pkey(nil, pointer, nil), "EVP_PKEY_CTX_new_from_pkey")
        defer { EVP_PKEY_CTX_free(ctx) }
        // For a public key, the quick check (the point is on the curve, not infinity) is the whole check on P-256,
        // whose cofactor is 1: the full check adds only an n·P multiplication that cannot fail for an on-curve point.
        let rc = privatePart ? EVP_PKEY_pairwise_check(ctx) : EVP_PKEY_public_check_quick(ctx)
        try check(rc, "the key is not valid", kind: .invalidKey)
    }
}

/// Helpers for OpenSSL BIGNUMs.
enum BigNum {
    static func bytes(_ bn: OpaquePointer) -> [UInt8] {
        let n = (Int(BN_num_bits(bn)) + 7) / 8
        var out = [UInt8](repeating: 0, count: n)
        _ = BN_bn2bin(bn, &out)
        return out
    }

    static func make(_ bytes: [UInt8]) throws(CryptoError) -> OpaquePointer {
        try unwrap(BN_bin2bn(bytes, Int32(bytes.count), nil), "BN_bin2bn")
    }

}

/// Owns an `OSSL_PARAM_BLD` and everything pushed into it. The builder keeps *pointers* to the key
/// names, BIGNUMs, strings and octets (it copies values only in `OSSL_PARAM_BLD_to_param`, and never
/// the names), so names are static strings and values are copied into buffers this object frees.
final class ParamBuilder {
    let pointer: OpaquePointer
    private var numbers: [OpaquePointer] = []
    private var buffers: [UnsafeMutableRawPointer] = []

    init() throws(CryptoError) { pointer = try unwrap(OSSL_PARAM_BLD_new(), "OSSL_PARAM_BLD_new") }

    deinit {
        OSSL_PARAM_BLD_free(pointer)
        numbers.forEach { BN_clear_free($0) }
        buffers.forEach { $0.deallocate() }
    }

    private func cName(_ name: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    private func copy(_ bytes: [UInt8]) -> UnsafeMutableRawPointer {
        // One extra zero byte, so a UTF-8 value is also a C string.
        let p = UnsafeMutableRawPointer.allocate(byteCount: bytes.count + 1, alignment: 1)
        p.initializeMemory(as: UInt8.self, repeating: 0, count: bytes.count + 1)
        bytes.withUnsafeBytes { p.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        buffers.append(p)
        return p
    }

    func push(_ name: StaticString, bigEndian bytes: [UInt8]) throws(CryptoError) {
        let bn = try BigNum.make(bytes)
        numbers.append(bn)
        try check(OSSL_PARAM_BLD_push_BN(pointer, cName(name), bn), "adding \(name)", kind: .invalidKey)
    }

    func push(_ name: StaticString, utf8 value: String) throws(CryptoError) {
        let p = copy(Array(value.utf8))
        try check(OSSL_PARAM_BLD_push_utf8_string(pointer, cName(name), p.assumingMemoryBound(to: CChar.self), 0),
                  "adding \(name)", kind: .invalidKey)
    }

    func push(_ name: StaticString, octets: [UInt8]) throws(CryptoError) {
        let p = copy(octets)
        try check(OSSL_PARAM_BLD_push_octet_string(pointer, cName(name), p, octets.count), "adding \(name)", kind: .invalidKey)
    }
}

/// Helpers for memory BIOs.
enum MemoryBIO {
    static func reading<R>(_ bytes: [UInt8], _ body: (OpaquePointer) throws(CryptoError) -> R) throws(CryptoError) -> R {
        // BIO_new_mem_buf does not copy, so the BIO lives only inside the buffer's scope.
        try bytes.withUnsafeBufferPointer { (b: UnsafeBufferPointer<UInt8>) throws(CryptoError) -> R in
            let bio = try unwrap(BIO_new_mem_buf(b.baseAddress, Int32(b.count)), "BIO_new_mem_buf")
            defer { BIO_free(bio) }
            return try body(bio)
        }
    }

    static func writing(_ body: (OpaquePointer) throws(CryptoError) -> Void) throws(CryptoError) -> [UInt8] {
        let bio = try unwrap(BIO_new(BIO_s_mem()), "BIO_new")
        defer { BIO_free(bio) }
        try body(bio)
        var p: UnsafeMutablePointer<CChar>? = nil
        let len = tap_BIO_get_mem_data(bio, &p)
        guard len > 0, let p else { return [] }
        return p.withMemoryRebound(to: UInt8.self, capacity: len) { Array(UnsafeBufferPointer(start: $0, count: len)) }
    }
}

/// A key held by OpenSSL as `PublicKey` and `PrivateKey` hold one: with the type it was checked to be (P-256 or RSA).
protocol CheckedKeyType {
    /// A key whose type is known (made here as P-256 or RSA), without asking OpenSSL again.
    init(_ key: EVPKey, type: KeyType)
}

extension CheckedKeyType {
    /// A key from OpenSSL (parsed, or made from components), refused unless it is P-256 or RSA.
    init(_ key: EVPKey) throws(CryptoError) {
        self.init(key, type: try key.supportedType())
    }
}

/// A public key (EC P-256 or RSA): verifies signatures, encrypts with RSA-OAEP-256, is the peer in ECDH.
public struct PublicKey: Sendable, CheckedKeyType {
    let key: EVPKey
    /// Whether this is a P-256 or an RSA key.
    public let type: KeyType

    /// A P-256 public key from its 32-byte affine coordinates; rejects points not on the curve.
    public init(p256X x: [UInt8], y: [UInt8]) throws(CryptoError) {
        guard x.count == 32, y.count == 32 else {
            throw CryptoError(.invalidKey, "P-256 coordinates must be 32 bytes each, got \(x.count) and \(y.count)")
        }
        // Setting the point checks that it is on the curve (`EC_POINT_set_affine_coordinates`), and an uncompressed
        // point is never the point at infinity: that is the whole public-key check on P-256 (cofactor 1).
        self.init(try EVPKey.p256Public(point: [0x04] + x + y), type: .p256)
    }

    /// A key whose type is known (made here as P-256 or RSA), without asking OpenSSL again.
    init(_ key: EVPKey, type: KeyType) {
        self.key = key
        self.type = type
    }

    /// An RSA public key from its modulus and exponent.
    public init(rsa: RSAPublicComponents) throws(CryptoError) {
        let k = try EVPKey.fromData(type: "RSA", selection: tap_EVP_PKEY_PUBLIC_KEY()) { (bld) throws(CryptoError) in
            try bld.push("n", bigEndian: rsa.n)
            try bld.push("e", bigEndian: rsa.e)
        }
        try self.init(k)
    }

    /// A public key from PEM (`PUBLIC KEY`) or DER SubjectPublicKeyInfo.
    public init(pemOrDER bytes: [UInt8]) throws(CryptoError) {
        try self.init(try EVPKey.reading(bytes, "reading the public key", pem: { PEM_read_bio_PUBKEY($0, nil, nil, nil) },
                                         der: { d2i_PUBKEY_bio($0, nil) }))
    }

    /// `(x, y)` for a P-256 key, 32 bytes each.
    public var p256Coordinates: (x: [UInt8], y: [UInt8])? { type == .p256 ? key.p256Coordinates() : nil }

    /// `n` and `e` for an RSA key.
    public var rsaComponents: RSAPublicComponents? {
        guard type == .rsa, let n = key.bigNumber("n"), let e = key.bigNumber("e") else { return nil }
        return RSAPublicComponents(n: n, e: e)
    }

    /// DER SubjectPublicKeyInfo.
    public func derSPKI() throws(CryptoError) -> [UInt8] { try key.spkiDER() }

    /// PEM `PUBLIC KEY`.
    public func pem() throws(CryptoError) -> String {
        PEMText.encode(label: "PUBLIC KEY", der: try key.spkiDER())
    }

    /// Verifies a JOSE-form signature (r‖s for ES256; PKCS#1 for RS256; PSS with 32-byte salt for PS256).
    public func verify(_ signature: [UInt8], of data: [UInt8], algorithm: SignatureAlgorithm) -> Bool {
        guard algorithm.keyType == type else { return false }
        let sig: [UInt8]
        if algorithm == .es256 {
            guard signature.count == 64, let der = try? ECDSASignature.der(fromRaw: signature) else { return false }
            sig = der
        } else {
            sig = signature
        }
        guard let md = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(md) }
        var pctx: OpaquePointer? = nil
        guard EVP_DigestVerifyInit(md, &pctx, EVP_sha256(), nil, key.pointer) == 1 else {
            CryptoError.clearQueue()
            return false
        }
        if algorithm != .es256 {
            guard Signer.configureRSA(pctx, pss: algorithm == .ps256) else { CryptoError.clearQueue(); return false }
        }
        let rc = sig.withUnsafeBufferPointer { s in
            data.withUnsafeBufferPointer { d in
                EVP_DigestVerify(md, s.baseAddress, s.count, d.baseAddress, d.count)
            }
        }
        CryptoError.clearQueue()
        return rc == 1
    }

    /// RSA-OAEP with SHA-256 and MGF1-SHA-256 (JOSE `RSA-OAEP-256`).
    public func rsaOAEP256Encrypt(_ plaintext: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard type == .rsa else { throw CryptoError(.invalidKey, "RSA-OAEP-256 needs an RSA key, got \(type.rawValue)") }
        return try RSAOAEP.run(key: key, input: plaintext, encrypt: true)
    }
}

extension PublicKey: Equatable {
    /// Two public keys are equal when their SubjectPublicKeyInfo encodings are.
    public static func == (a: PublicKey, b: PublicKey) -> Bool {
        guard let x = try? a.derSPKI(), let y = try? b.derSPKI() else { return false }
        return x == y
    }
}

/// A private key (EC P-256 or RSA): signs, decrypts RSA-OAEP-256, derives ECDH secrets.
public struct PrivateKey: Sendable, CheckedKeyType {
    let key: EVPKey
    /// Whether this is a P-256 or an RSA key.
    public let type: KeyType

    /// Generates a fresh P-256 key pair.
    public static func generateP256() throws(CryptoError) -> PrivateKey {
        let parameters = EVPKey.p256Parameters
        let ctx = try unwrap(parameters.map { EVP_PKEY_CTX_new_from_pkey(nil, $0.pointer, nil) } ?? EVP_PKEY_CTX_new_from_name(nil, "EC", nil),
                             "EVP_PKEY_CTX_new for P-256 key generation")
        defer { EVP_PKEY_CTX_free(ctx) }
        try check(EVP_PKEY_keygen_init(ctx), "EVP_PKEY_keygen_init")
        if parameters == nil { try check(EVP_PKEY_CTX_set_group_name(ctx, "P-256"), "setting the P-256 group") }
        var k: OpaquePointer? = nil
        try check(EVP_PKEY_generate(ctx, &k), "generating a P-256 key")
        return PrivateKey(EVPKey(owning: try unwrap(k, "EVP_PKEY_generate")), type: .p256)
    }

    /// A key whose type is known (made here as P-256 or RSA), without asking OpenSSL again.
    init(_ key: EVPKey, type: KeyType) {
        self.key = key
        self.type = type
    }

    /// Generates a fresh RSA key pair (e = 65537).
    public static func generateRSA(bits: Int = 2048) throws(CryptoError) -> PrivateKey {
        let ctx = try unwrap(EVP_PKEY_CTX_new_from_name(nil, "RSA", nil), "EVP_PKEY_CTX_new_from_name(RSA)")
        defer { EVP_PKEY_CTX_free(ctx) }
        try check(EVP_PKEY_keygen_init(ctx), "EVP_PKEY_keygen_init")
        try check(EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, Int32(bits)), "setting the RSA size")
        var k: OpaquePointer? = nil
        try check(EVP_PKEY_generate(ctx, &k), "generating an RSA key")
        return try PrivateKey(EVPKey(owning: try unwrap(k, "EVP_PKEY_generate")))
    }

    /// A P-256 private key from its scalar `d` and public coordinates; the pair is checked for consistency.
    public init(p256D d: [UInt8], x: [UInt8], y: [UInt8]) throws(CryptoError) {
        guard d.count == 32, x.count == 32, y.count == 32 else {
            throw CryptoError(.invalidKey, "P-256 d, x and y must be 32 bytes each")
        }
        let point = [0x04] + x + y
        let k = try EVPKey.fromData(type: "EC", selection: tap_EVP_PKEY_KEYPAIR()) { (bld) throws(CryptoError) in
            try bld.push("group", utf8: "prime256v1")
            try bld.push("pub", octets: point)
            try bld.push("priv", bigEndian: d)
        }
        try k.validate(privatePart: true)
        try self.init(k)
    }

    /// An RSA private key from its components.
    public init(rsa c: RSAPrivateComponents) throws(CryptoError) {
        let k = try EVPKey.fromData(type: "RSA", selection: tap_EVP_PKEY_KEYPAIR()) { (bld) throws(CryptoError) in
            try bld.push("n", bigEndian: c.n)
            try bld.push("e", bigEndian: c.e)
            try bld.push("d", bigEndian: c.d)
            if let p = c.p, let q = c.q, let dp = c.dp, let dq = c.dq, let qi = c.qi {
                try bld.push("rsa-factor1", bigEndian: p)
                try bld.push("rsa-factor2", bigEndian: q)
                try bld.push("rsa-exponent1", bigEndian: dp)
                try bld.push("rsa-exponent2", bigEndian: dq)
                try bld.push("rsa-coefficient1", bigEndian: qi)
            }
        }
        try self.init(k)
    }

    /// A private key from PEM (PKCS#8, SEC1 `EC PRIVATE KEY` or PKCS#1 `RSA PRIVATE KEY`) or DER PKCS#8.
    public init(pemOrDER bytes: [UInt8]) throws(CryptoError) {
        try self.init(try EVPKey.reading(bytes, "reading the private key", pem: { PEM_read_bio_PrivateKey($0, nil, nil, nil) },
                                         der: { d2i_PrivateKey_bio($0, nil) }))
    }

    /// The matching public key.
    public var publicKey: PublicKey {
        // Rebuilt from the point alone, so the public key holds no private material: the shared P-256 parameters
        // and this key's own point (which needs no validation). The SPKI round trip remains the fallback.
        if type == .p256, let point = key.ecPoint(), let k = try? EVPKey.p256Public(point: point) {
            return PublicKey(k, type: .p256)
        }
        if type == .rsa, let n = key.bigNumber("n"), let e = key.bigNumber("e"), let pub = try? PublicKey(rsa: RSAPublicComponents(n: n, e: e)) {
            return pub
        }
        let der = try! key.spkiDER()
        return try! PublicKey(pemOrDER: der)
    }

    /// `(x, y)` of a P-256 key's public point, 32 bytes each, read from this key (no public key built).
    public var p256Coordinates: (x: [UInt8], y: [UInt8])? { type == .p256 ? key.p256Coordinates() : nil }

    /// The private scalar of a P-256 key, 32 bytes.
    public var p256D: [UInt8]? {
        guard type == .p256, let d = key.bigNumber("priv") else { return nil }
        return [UInt8](repeating: 0, count: max(0, 32 - d.count)) + d
    }

    /// The components of an RSA key (with CRT values).
    public var rsaComponents: RSAPrivateComponents? {
        guard type == .rsa, let n = key.bigNumber("n"), let e = key.bigNumber("e"), let d = key.bigNumber("d") else { return nil }
        return RSAPrivateComponents(n: n, e: e, d: d, p: key.bigNumber("rsa-factor1"), q: key.bigNumber("rsa-factor2"),
                                    dp: key.bigNumber("rsa-exponent1"), dq: key.bigNumber("rsa-exponent2"),
                                    qi: key.bigNumber("rsa-coefficient1"))
    }

    /// PEM PKCS#8 `PRIVATE KEY` (unencrypted; store it with mode 0600).
    public func pem() throws(CryptoError) -> String {
        let bytes = try MemoryBIO.writing { (bio) throws(CryptoError) in
            try check(PEM_write_bio_PrivateKey(bio, key.pointer, nil, nil, 0, nil, nil), "writing the private key")
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Signs in JOSE form (r‖s for ES256): one signature, with a signing context made for it (`PreparedSigner`, which
    /// a server signing many messages keeps).
    public func sign(_ data: [UInt8], algorithm: SignatureAlgorithm) throws(CryptoError) -> [UInt8] {
        try PreparedSigner(key: self, algorithm: algorithm).sign(data)
    }

    /// The ECDH shared secret (the 32-byte x-coordinate) with a peer's P-256 public key.
    public func sharedSecret(with peer: PublicKey) throws(CryptoError) -> [UInt8] {
        guard type == .p256, peer.type == .p256 else { throw CryptoError(.invalidKey, "ECDH needs two P-256 keys") }
        let ctx = try unwrap(EVP_PKEY_CTX_new(key.pointer, nil), "EVP_PKEY_CTX_new")
        defer { EVP_PKEY_CTX_free(ctx) }
        try check(EVP_PKEY_derive_init(ctx), "EVP_PKEY_derive_init")
        // No second validation of the peer: every PublicKey was checked to be on the curve when it was made (import
        // or parameters), which on P-256 is all a peer check can establish.
        try check(EVP_PKEY_derive_set_peer_ex(ctx, peer.key.pointer, 0), "setting the ECDH peer", kind: .invalidKey)
        var len = 0
        try check(EVP_PKEY_derive(ctx, nil, &len), "ECDH length")
        var out = [UInt8](repeating: 0, count: len)
        try check(EVP_PKEY_derive(ctx, &out, &len), "ECDH")
        return Array(out.prefix(len))
    }

    /// RSA-OAEP-256 decryption.
    public func rsaOAEP256Decrypt(_ ciphertext: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard type == .rsa else { throw CryptoError(.invalidKey, "RSA-OAEP-256 needs an RSA key, got \(type.rawValue)") }
        return try RSAOAEP.run(key: key, input: ciphertext, encrypt: false)
    }
}

/// A private key made ready to sign many messages with one algorithm: OpenSSL's signing context (the algorithm fetched,
/// the padding and digest set) is made once instead of for every signature, as a server signing for every transaction
/// wants (the replayer's acsSignedContent: 8-9 us less per PS256 signature in the replayer). Like the context it owns,
/// it is used by one thread at a time.
public final class PreparedSigner {
    public let algorithm: SignatureAlgorithm
    /// Holds its own reference to the key (EVP_PKEY_CTX_new_from_pkey takes one; EVP_PKEY_CTX_free drops it).
    private let ctx: OpaquePointer

    public init(key: PrivateKey, algorithm: SignatureAlgorithm) throws(CryptoError) {
        guard algorithm.keyType == key.type else {
            throw CryptoError(.invalidKey, "\(algorithm.rawValue) needs an \(algorithm.keyType.rawValue) key, got \(key.type.rawValue)")
        }
        let ctx = try unwrap(EVP_PKEY_CTX_new_from_pkey(nil, key.key.pointer, nil), "EVP_PKEY_CTX_new_from_pkey")
        do throws(CryptoError) {
            try check(EVP_PKEY_sign_init(ctx), "EVP_PKEY_sign_init")
            if algorithm != .es256, !Signer.configureRSA(ctx, pss: algorithm == .ps256) { throw CryptoError.openSSL("configuring RSA padding") }
            try check(EVP_PKEY_CTX_set_signature_md(ctx, EVP_sha256()), "setting the signature digest")
        } catch {
            EVP_PKEY_CTX_free(ctx)
            throw error
        }
        self.algorithm = algorithm
        self.ctx = ctx
    }

    deinit { EVP_PKEY_CTX_free(ctx) }

    /// Signs SHA-256 of `data`, in JOSE form (r‖s for ES256).
    public func sign(_ data: [UInt8]) throws(CryptoError) -> [UInt8] {
        let digest = Digest.sha256(data)
        var len = 0
        try check(EVP_PKEY_sign(ctx, nil, &len, digest, digest.count), "signature length")
        var sig = [UInt8](repeating: 0, count: len)
        try check(EVP_PKEY_sign(ctx, &sig, &len, digest, digest.count), "signing")
        let der = Array(sig.prefix(len))
        return algorithm == .es256 ? try ECDSASignature.raw(fromDER: der) : der
    }
}

enum Signer {
    /// Applies RSA padding to a digest-sign/verify context. Returns false if OpenSSL refused.
    static func configureRSA(_ pctx: OpaquePointer?, pss: Bool) -> Bool {
        if pss {
            return EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) > 0
                && EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, 32) > 0
                && EVP_PKEY_CTX_set_rsa_mgf1_md(pctx, EVP_sha256()) > 0
        }
        return EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) > 0
    }
}

enum RSAOAEP {
    static func run(key: EVPKey, input: [UInt8], encrypt: Bool) throws(CryptoError) -> [UInt8] {
        let ctx = try unwrap(EVP_PKEY_CTX_new(key.pointer, nil), "EVP_PKEY_CTX_new")
        defer { EVP_PKEY_CTX_free(ctx) }
        try check(encrypt ? EVP_PKEY_encrypt_init(ctx) : EVP_PKEY_decrypt_init(ctx), "RSA-OAEP init")
        guard EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING) > 0,
              EVP_PKEY_CTX_set_rsa_oaep_md(ctx, EVP_sha256()) > 0,
              EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, EVP_sha256()) > 0 else {
            throw CryptoError.openSSL("configuring RSA-OAEP-256")
        }
        var len = 0
        let what = encrypt ? "RSA-OAEP-256 encryption" : "RSA-OAEP-256 decryption (wrong key or corrupted data)"
        let kind: CryptoError.Kind = encrypt ? .invalidInput : .authenticationFailed
        try input.withUnsafeBufferPointer { (i) throws(CryptoError) in
            let rc = encrypt ? EVP_PKEY_encrypt(ctx, nil, &len, i.baseAddress, i.count)
                             : EVP_PKEY_decrypt(ctx, nil, &len, i.baseAddress, i.count)
            try check(rc, what, kind: kind)
        }
        var out = [UInt8](repeating: 0, count: len)
        try input.withUnsafeBufferPointer { (i) throws(CryptoError) in
            let rc = encrypt ? EVP_PKEY_encrypt(ctx, &out, &len, i.baseAddress, i.count)
                             : EVP_PKEY_decrypt(ctx, &out, &len, i.baseAddress, i.count)
            try check(rc, what, kind: kind)
        }
        return Array(out.prefix(len))
    }
}

/// Converts ECDSA P-256 signatures between DER (OpenSSL) and r‖s (JOSE).
enum ECDSASignature {
    static func raw(fromDER der: [UInt8]) throws(CryptoError) -> [UInt8] {
        let sig = der.withUnsafeBufferPointer { b -> OpaquePointer? in
            var p: UnsafePointer<UInt8>? = b.baseAddress
            return d2i_ECDSA_SIG(nil, &p, b.count)
        }
        guard let sig else { throw CryptoError.openSSL("parsing an ECDSA signature", kind: .invalidInput) }
        defer { ECDSA_SIG_free(sig) }
        var out = [UInt8](repeating: 0, count: 64)
        out.withUnsafeMutableBufferPointer { o in
            _ = BN_bn2binpad(ECDSA_SIG_get0_r(sig), o.baseAddress, 32)
            _ = BN_bn2binpad(ECDSA_SIG_get0_s(sig), o.baseAddress! + 32, 32)
        }
        return out
    }

    static func der(fromRaw raw: [UInt8]) throws(CryptoError) -> [UInt8] {
        let sig = try unwrap(ECDSA_SIG_new(), "ECDSA_SIG_new")
        defer { ECDSA_SIG_free(sig) }
        let r = try BigNum.make(Array(raw[0..<32]))
        let s = try BigNum.make(Array(raw[32..<64]))
        guard ECDSA_SIG_set0(sig, r, s) == 1 else {
            BN_free(r); BN_free(s)
            throw CryptoError.openSSL("ECDSA_SIG_set0")
        }
        let len = i2d_ECDSA_SIG(sig, nil)
        guard len > 0 else { throw CryptoError.openSSL("encoding an ECDSA signature") }
        var out = [UInt8](repeating: 0, count: Int(len))
        _ = out.withUnsafeMutableBufferPointer { b -> Int32 in
            var p: UnsafeMutablePointer<UInt8>? = b.baseAddress
            return i2d_ECDSA_SIG(sig, &p)
        }
        return out
    }
}

/// PEM armour: detection and encoding.
public enum PEMText {
    /// True when the bytes look like PEM text rather than DER.
    public static func looksLikePEM(_ bytes: [UInt8]) -> Bool {
        String(decoding: bytes.prefix(4096), as: UTF8.self).contains("-----BEGIN ")
    }

    /// Wraps DER in PEM armour with 64-column lines.
    public static func encode(label: String, der: [UInt8]) -> String {
        let b64 = Base64Std.encode(der)
        var lines: [String] = []
        var i = b64.startIndex
        while i < b64.endIndex {
            let j = b64.index(i, offsetBy: 64, limitedBy: b64.endIndex) ?? b64.endIndex
            lines.append(String(b64[i..<j]))
            i = j
        }
        return "-----BEGIN \(label)-----\n" + lines.joined(separator: "\n") + "\n-----END \(label)-----\n"
    }
}

/// Standard base64 through OpenSSL's encoder (kept here so PEM needs nothing else).
enum Base64Std {
    static func encode(_ bytes: [UInt8]) -> String {
        if bytes.isEmpty { return "" }
        var out = [UInt8](repeating: 0, count: 4 * ((bytes.count + 2) / 3) + 1)
        let n = EVP_EncodeBlock(&out, bytes, Int32(bytes.count))
        return String(decoding: out.prefix(Int(n)), as: UTF8.self)
    }
}
