internal import COpenSSL
import Foundation
import TapCore

/// Owns one `X509` reference.
///
/// `@unchecked Sendable` is safe because the certificate is never mutated after it is built or parsed;
/// OpenSSL's read accessors and `X509_verify_cert` on separate store contexts are thread-safe.
final class X509Handle: @unchecked Sendable {
    let pointer: OpaquePointer
    init(owning pointer: OpaquePointer) { self.pointer = pointer }
    deinit { X509_free(pointer) }
}

/// An X.509 certificate: parsed from PEM or DER, or issued by `CertificateAuthority`.
public struct Certificate: Sendable {
    let handle: X509Handle

    init(_ handle: X509Handle) { self.handle = handle }

    /// Parses one certificate from DER.
    public init(der: [UInt8]) throws(CryptoError) {
        let p = der.withUnsafeBufferPointer { b -> OpaquePointer? in
            var ptr: UnsafePointer<UInt8>? = b.baseAddress
            return d2i_X509(nil, &ptr, b.count)
        }
        handle = X509Handle(owning: try unwrap(p, "parsing a DER certificate", kind: .invalidInput))
    }

    /// Parses every certificate in PEM text (a bundle gives several), or one DER certificate.
    public static func parseAll(_ bytes: [UInt8]) throws(CryptoError) -> [Certificate] {
        guard PEMText.looksLikePEM(bytes) else { return [try Certificate(der: bytes)] }
        return try MemoryBIO.reading(bytes) { (bio) throws(CryptoError) -> [Certificate] in
            var certs: [Certificate] = []
            while let p = PEM_read_bio_X509(bio, nil, nil, nil) {
                certs.append(Certificate(X509Handle(owning: p)))
            }
            CryptoError.clearQueue() // the loop ends on a "no start line" error
            if certs.isEmpty { throw CryptoError(.invalidInput, "no PEM CERTIFICATE block found") }
            return certs
        }
    }

    /// Parses exactly one certificate from PEM or DER.
    public init(pemOrDER bytes: [UInt8]) throws(CryptoError) {
        self = try Certificate.parseAll(bytes)[0]
    }

    /// DER encoding.
    public var der: [UInt8] {
        let len = i2d_X509(handle.pointer, nil)
        guard len > 0 else { return [] }
        var out = [UInt8](repeating: 0, count: Int(len))
        _ = out.withUnsafeMutableBufferPointer { b -> Int32 in
            var p: UnsafeMutablePointer<UInt8>? = b.baseAddress
            return i2d_X509(handle.pointer, &p)
        }
        return out
    }

    /// PEM encoding.
    public var pem: String { PEMText.encode(label: "CERTIFICATE", der: der) }

    /// The subject as a one-line string (`/CN=...`).
    public var subject: String { Certificate.nameString(X509_get_subject_name(handle.pointer)) }

    /// The issuer as a one-line string.
    public var issuer: String { Certificate.nameString(X509_get_issuer_name(handle.pointer)) }

    /// The subject's common name, if any.
    public var commonName: String? {
        subject.split(separator: "/").first(where: { $0.hasPrefix("CN=") }).map { String($0.dropFirst(3)) }
    }

    /// Validity start.
    public var notBefore: Date? { Certificate.date(X509_get0_notBefore(handle.pointer)) }

    /// Validity end.
    public var notAfter: Date? { Certificate.date(X509_get0_notAfter(handle.pointer)) }

    /// The certified public key.
    public var publicKey: PublicKey {
        get throws(CryptoError) {
            let k = try unwrap(X509_get_pubkey(handle.pointer), "reading the certificate's key", kind: .invalidKey)
            return try PublicKey(EVPKey(owning: k))
        }
    }

    /// SHA-256 of the DER encoding, hex.
    public var sha256Fingerprint: String {
        Digest.sha256(der).map { String(format: "%02X", $0) }.joined(separator: ":")
    }

    static func nameString(_ name: OpaquePointer?) -> String {
        guard let name, let s = X509_NAME_oneline(name, nil, 0) else { return "" }
        defer { tap_OPENSSL_free(s) }
        return String(cString: s)
    }

    static func date(_ t: UnsafePointer<ASN1_TIME>?) -> Date? {
        guard let t else { return nil }
        var tmv = tm()
        guard ASN1_TIME_to_tm(t, &tmv) == 1 else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(timegm(&tmv)))
    }

    /// Verifies that `leaf` chains, through `intermediates`, to one of `roots`, at `time` (now by default).
    /// Throws `.untrustedChain` with OpenSSL's verification message.
    public static func verifyChain(leaf: Certificate, intermediates: [Certificate], roots: [Certificate],
                                   at time: Date? = nil) throws(CryptoError) {
        guard !roots.isEmpty else { throw CryptoError(.untrustedChain, "no trusted roots were given") }
        let store = X509StoreHandle(owning: try unwrap(X509_STORE_new(), "X509_STORE_new"))
        for root in roots { _ = X509_STORE_add_cert(store.pointer, root.handle.pointer) }
        CryptoError.clearQueue() // a duplicate root is reported but harmless
        try verifyChain(leaf: leaf, intermediates: intermediates, store: store, at: time)
    }

    /// `verifyChain` against a store already holding the roots (`TrustedCertificates` keeps one per run). Returns the
    /// span of time in which every certificate of the verified chain, its root included, is valid (nil when a date
    /// cannot be read): the chain verifies the same way at any time inside it.
    @discardableResult
    static func verifyChain(leaf: Certificate, intermediates: [Certificate], store: X509StoreHandle,
                            at time: Date?) throws(CryptoError) -> ClosedRange<Date>? {
        let untrusted = try unwrap(tap_sk_X509_new_null(), "sk_X509_new_null")
        defer { tap_sk_X509_free(untrusted) }
        for c in intermediates { _ = tap_sk_X509_push(untrusted, c.handle.pointer) }
        let ctx = try unwrap(X509_STORE_CTX_new(), "X509_STORE_CTX_new")
        defer { X509_STORE_CTX_free(ctx) }
        try check(X509_STORE_CTX_init(ctx, store.pointer, leaf.handle.pointer, untrusted), "X509_STORE_CTX_init")
        if let time { X509_STORE_CTX_set_time(ctx, 0, time_t(time.timeIntervalSince1970)) }
        let ok = withExtendedLifetime((leaf, intermediates, store)) { X509_verify_cert(ctx) }
        if ok != 1 {
            let code = X509_STORE_CTX_get_error(ctx)
            let reason = String(cString: X509_verify_cert_error_string(Int(code)))
            CryptoError.clearQueue()
            throw CryptoError(.untrustedChain, "certificate chain for \(leaf.subject) did not verify: \(reason)")
        }
        guard let chain = tap_X509_STORE_CTX_get1_chain(ctx) else { return nil }
        defer { tap_sk_X509_pop_free(chain) }
        var from = Date.distantPast, until = Date.distantFuture
        for i in 0..<tap_sk_X509_num(chain) {
            guard let x = tap_sk_X509_value(chain, i), let nb = date(X509_get0_notBefore(x)), let na = date(X509_get0_notAfter(x)) else { return nil }
            from = max(from, nb)
            until = min(until, na)
        }
        return from <= until ? from...until : nil
    }
}

/// What a certificate is for; decides its extensions.
public enum CertificateProfile: Sendable {
    /// A CA that may issue further certificates (basicConstraints CA:TRUE, keyCertSign).
    case authority
    /// A TLS server leaf for the given DNS names and IP addresses.
    case tlsServer(names: [String])
    /// A signing leaf (for example an ACS certificate that signs acsSignedContent).
    case signing
    /// An encryption leaf (for example a DS encryption certificate).
    case encryption
}

/// A private key with its certificate: issues certificates signed by that key.
public struct CertificateAuthority: Sendable {
    public let certificate: Certificate
    public let key: PrivateKey

    public init(certificate: Certificate, key: PrivateKey) {
        self.certificate = certificate
        self.key = key
    }

    /// Creates a self-signed root CA.
    public static func selfSigned(commonName: String, key: PrivateKey, days: Int = 3650) throws(CryptoError) -> CertificateAuthority {
        let cert = try CertificateBuilder.build(commonName: commonName, subjectKey: key.publicKey, profile: .authority,
                                                issuer: nil, issuerKey: key, days: days)
        return CertificateAuthority(certificate: cert, key: key)
    }

    /// Issues a certificate for `subjectKey` under this CA.
    public func issue(commonName: String, subjectKey: PublicKey, profile: CertificateProfile, days: Int = 825) throws(CryptoError) -> Certificate {
        try CertificateBuilder.build(commonName: commonName, subjectKey: subjectKey, profile: profile,
                                     issuer: certificate, issuerKey: key, days: days)
    }
}

enum CertificateBuilder {
    static func build(commonName: String, subjectKey: PublicKey, profile: CertificateProfile,
                      issuer: Certificate?, issuerKey: PrivateKey, days: Int) throws(CryptoError) -> Certificate {
        let x = try unwrap(X509_new(), "X509_new")
        let cert = Certificate(X509Handle(owning: x))
        try check(X509_set_version(x, 2), "X509_set_version")
        let serial = try unwrap(BN_new(), "BN_new")
        defer { BN_free(serial) }
        try check(BN_rand(serial, 63, 0, 0), "BN_rand")
        guard BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) != nil else { throw CryptoError.openSSL("serial") }
        guard X509_gmtime_adj(X509_getm_notBefore(x), -3600) != nil,
              X509_gmtime_adj(X509_getm_notAfter(x), days * 86400) != nil else { throw CryptoError.openSSL("validity") }
        try check(X509_set_pubkey(x, subjectKey.key.pointer), "X509_set_pubkey")
        let name = try unwrap(X509_get_subject_name(x), "subject name")
        let mbstringASC: Int32 = 0x1001 // MBSTRING_ASC, a nested macro that does not import
        try check(X509_NAME_add_entry_by_txt(name, "O", mbstringASC, "3dstape", -1, -1, 0), "subject O")
        // X.509 caps a CN at 64 characters (ub-common-name); a longer host name is carried by the SAN alone, as
        // clients match names against the SAN anyway (a 65-character host once failed interception).
        if commonName.utf8.count <= 64 {
            try check(X509_NAME_add_entry_by_txt(name, "CN", mbstringASC, commonName, -1, -1, 0), "subject CN")
        }
        let issuerCert = issuer?.handle.pointer ?? x
        try check(X509_set_issuer_name(x, X509_get_subject_name(issuerCert)), "X509_set_issuer_name")

        var ext: [(Int32, String)] = [(NID_subject_key_identifier, "hash"), (NID_authority_key_identifier, "keyid:always")]
        switch profile {
        case .authority:
            ext += [(NID_basic_constraints, "critical,CA:TRUE"), (NID_key_usage, "critical,keyCertSign,cRLSign")]
        case let .tlsServer(names):
            let san = names.map { isIPAddress($0) ? "IP:\($0)" : "DNS:\($0)" }.joined(separator: ",")
            // keyEncipherment only for RSA: RFC 5480 §3 forbids it for EC keys, which sign (ECDHE) and agree keys.
            ext += [(NID_basic_constraints, "critical,CA:FALSE"),
                    (NID_key_usage, subjectKey.type == .rsa ? "critical,digitalSignature,keyEncipherment" : "critical,digitalSignature"),
                    (NID_ext_key_usage, "serverAuth")]
            if !san.isEmpty { ext.append((NID_subject_alt_name, san)) }
        case .signing:
            ext += [(NID_basic_constraints, "critical,CA:FALSE"), (NID_key_usage, "critical,digitalSignature")]
        case .encryption:
            ext += [(NID_basic_constraints, "critical,CA:FALSE"),
                    (NID_key_usage, subjectKey.type == .rsa ? "critical,keyEncipherment,dataEncipherment" : "critical,keyAgreement")]
        }
        var v3 = X509V3_CTX()
        X509V3_set_ctx(&v3, issuerCert, x, nil, nil, 0)
        for (nid, value) in ext {
            let e = try unwrap(X509V3_EXT_conf_nid(nil, &v3, nid, value), "extension \(value)")
            defer { X509_EXTENSION_free(e) }
            try check(X509_add_ext(x, e, -1), "X509_add_ext")
        }
        guard X509_sign(x, issuerKey.key.pointer, EVP_sha256()) > 0 else { throw CryptoError.openSSL("signing the certificate") }
        return cert
    }

    static func isIPAddress(_ s: String) -> Bool {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        if parts.count == 4, parts.allSatisfy({ UInt8($0) != nil }) { return true }
        return s.contains(":")
    }
}
