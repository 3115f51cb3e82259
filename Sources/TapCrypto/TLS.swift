internal import COpenSSL
import TapCore
import Synchronization

/// Issues and caches TLS leaf certificates per host name under an interception CA (one shared P-256
/// leaf key, like mitmproxy), so that each new host costs one signature and later ones none.
public final class LeafCertificateCache: Sendable {
    public let authority: CertificateAuthority
    let leafKey: PrivateKey
    private let cache = Locked<[String: Certificate]>([:])
    private let capacity: Int

    public init(authority: CertificateAuthority, capacity: Int = 1000) throws(CryptoError) {
        self.authority = authority
        self.leafKey = try PrivateKey.generateP256()
        self.capacity = capacity
    }

    /// The leaf for `host` (a DNS name or IP address), minted on first use.
    public func certificate(for host: String) throws(CryptoError) -> Certificate { try certificate(for: [host]) }

    /// The leaf for all of `names` (DNS names or IP addresses; the first is its subject), minted on first use.
    public func certificate(for names: [String]) throws(CryptoError) -> Certificate {
        let lowered = names.map { $0.lowercased() }
        let key = lowered.joined(separator: " ")
        if let c = cache.withLock({ $0[key] }) { return c }
        let cert = try authority.issue(commonName: lowered.first ?? "", subjectKey: leafKey.publicKey, profile: .tlsServer(names: lowered), days: 397)
        cache.withLock { c in
            if c.count >= capacity { c.removeAll() }
            c[key] = cert
        }
        return cert
    }

    /// How many leaves are cached.
    public var count: Int { cache.withLock { $0.count } }
}

/// Which side of a TLS connection a context plays.
public enum TLSRole: Sendable { case server, client }

/// An `SSL_CTX`: a server that mints a leaf per SNI name, or a client that verifies its peer.
///
/// `@unchecked Sendable` is safe because the `SSL_CTX` is configured completely in `init` and only read
/// afterwards (OpenSSL allows concurrent `SSL_new` on a configured context), and the certificate cache
/// it calls into is itself synchronised.
public final class TLSContext: @unchecked Sendable {
    let pointer: OpaquePointer
    public let role: TLSRole
    let leaves: LeafCertificateCache?
    /// Whether client contexts verify the peer.
    public let verifiesPeer: Bool
    /// The one application protocol 3dstape speaks over TLS, offered to upstreams and chosen from clients' offers (ALPN).
    public static let applicationProtocol = "http/1.1"

    /// A server context for interception: no certificate of its own; each handshake gets a leaf for its SNI
    /// name (or the fallback host given to `TLSSession`).
    public init(interceptingWith leaves: LeafCertificateCache) throws(CryptoError) {
        pointer = try unwrap(SSL_CTX_new(TLS_server_method()), "SSL_CTX_new(server)")
        role = .server
        self.leaves = leaves
        verifiesPeer = false
        try configureCommon()
        SSL_CTX_set_alpn_select_cb(pointer, alpnSelect, nil)
        _ = tap_SSL_CTX_set_tlsext_servername_callback(pointer, serverNameCallback)
        _ = tap_SSL_CTX_set_tlsext_servername_arg(pointer, Unmanaged.passUnretained(self).toOpaque())
    }

    /// A server context with a fixed certificate and key (for test servers and the sandbox).
    public init(serverCertificate: Certificate, chain: [Certificate] = [], key: PrivateKey) throws(CryptoError) {
        pointer = try unwrap(SSL_CTX_new(TLS_server_method()), "SSL_CTX_new(server)")
        role = .server
        leaves = nil
        verifiesPeer = false
        try configureCommon()
        try check(SSL_CTX_use_certificate(pointer, serverCertificate.handle.pointer), "SSL_CTX_use_certificate")
        for c in chain { _ = SSL_CTX_add1_chain_cert_shim(pointer, c.handle.pointer) }
        try check(SSL_CTX_use_PrivateKey(pointer, key.key.pointer), "SSL_CTX_use_PrivateKey", kind: .invalidKey)
        SSL_CTX_set_alpn_select_cb(pointer, alpnSelect, nil)
    }

    /// A client context. `roots` nil means the system trust store; `verify` false accepts any certificate.
    public init(clientRoots roots: [Certificate]?, verify: Bool = true, clientCertificate: Certificate? = nil,
                clientKey: PrivateKey? = nil) throws(CryptoError) {
        pointer = try unwrap(SSL_CTX_new(TLS_client_method()), "SSL_CTX_new(client)")
        role = .client
        leaves = nil
        verifiesPeer = verify
        try configureCommon()
        SSL_CTX_set_verify(pointer, verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nil)
        if let roots {
            let store = SSL_CTX_get_cert_store(pointer)
            for r in roots { _ = X509_STORE_add_cert(store, r.handle.pointer) }
            CryptoError.clearQueue()
        } else {
            try check(SSL_CTX_set_default_verify_paths(pointer), "loading the system trust store")
        }
        if let clientCertificate, let clientKey {
            try check(SSL_CTX_use_certificate(pointer, clientCertificate.handle.pointer), "SSL_CTX_use_certificate (client)")
            try check(SSL_CTX_use_PrivateKey(pointer, clientKey.key.pointer), "SSL_CTX_use_PrivateKey (client)", kind: .invalidKey)
            try check(SSL_CTX_check_private_key(pointer), "the client key does not match the client certificate", kind: .invalidKey)
        }
        let alpn: [UInt8] = [UInt8(TLSContext.applicationProtocol.utf8.count)] + Array(TLSContext.applicationProtocol.utf8)
        // SSL_CTX_set_alpn_protos returns 0 on success (pitfall 4).
        guard SSL_CTX_set_alpn_protos(pointer, alpn, UInt32(alpn.count)) == 0 else { throw CryptoError.openSSL("setting ALPN") }
    }

    private func configureCommon() throws(CryptoError) {
        guard tap_SSL_CTX_set_min_proto_version(pointer, TLS1_2_VERSION) == 1 else { throw CryptoError.openSSL("TLS min version") }
        _ = SSL_CTX_set_options(pointer, tap_SSL_OP_NO_COMPRESSION())
        _ = tap_SSL_CTX_set_mode(pointer, tap_SSL_MODE_ENABLE_PARTIAL_WRITE() | tap_SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER())
    }

    deinit { SSL_CTX_free(pointer) }

    /// Installs the leaf for `names` on one SSL (used by the SNI callback and as the pre-handshake fallback).
    func installLeaf(on ssl: OpaquePointer, names: [String]) -> Bool {
        guard let leaves, !names.isEmpty, let cert = try? leaves.certificate(for: names) else { return false }
        return SSL_use_certificate(ssl, cert.handle.pointer) == 1 && SSL_use_PrivateKey(ssl, leaves.leafKey.key.pointer) == 1
    }
}

// The ALPN select callback of every 3dstape TLS server (interception, sandbox, test servers): 3dstape speaks HTTP/1.1
// only, so it picks http/1.1 when the client offers it. A client that offers ALPN without http/1.1 (an h2-only client)
// gets a fatal no_application_protocol alert (RFC 7301 §3.2), a clear handshake failure instead of HTTP/1.1 bytes it
// would not read; a client that offers no ALPN at all goes on without it. `out` must point into the client's `in` buffer.
private func alpnSelect(_ ssl: OpaquePointer?, _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
                        _ outlen: UnsafeMutablePointer<UInt8>?, _ input: UnsafePointer<UInt8>?, _ inlen: UInt32,
                        _ arg: UnsafeMutableRawPointer?) -> Int32 {
    guard let input, let out, let outlen else { return SSL_TLSEXT_ERR_NOACK }
    let want = Array(TLSContext.applicationProtocol.utf8)
    var i = 0
    while i < Int(inlen) {
        let len = Int(input[i])
        if i + 1 + len > Int(inlen) { break }
        if len == want.count, (0..<len).allSatisfy({ input[i + 1 + $0] == want[$0] }) {
            out.pointee = input + i + 1
            outlen.pointee = UInt8(len)
            return SSL_TLSEXT_ERR_OK
        }
        i += 1 + len
    }
    return inlen > 0 ? SSL_TLSEXT_ERR_ALERT_FATAL : SSL_TLSEXT_ERR_NOACK
}

// The SNI callback: mints (or fetches) the leaf for the requested name.
private func serverNameCallback(_ ssl: OpaquePointer?, _ alert: UnsafeMutablePointer<Int32>?, _ arg: UnsafeMutableRawPointer?) -> Int32 {
    guard let ssl, let arg else { return SSL_TLSEXT_ERR_NOACK }
    let context = Unmanaged<TLSContext>.fromOpaque(arg).takeUnretainedValue()
    guard let name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name) else { return SSL_TLSEXT_ERR_OK }
    return context.installLeaf(on: ssl, names: [String(cString: name)]) ? SSL_TLSEXT_ERR_OK : SSL_TLSEXT_ERR_ALERT_FATAL
}

@inline(__always)
private func SSL_CTX_add1_chain_cert_shim(_ ctx: OpaquePointer, _ cert: OpaquePointer) -> Int {
    SSL_CTX_ctrl(ctx, SSL_CTRL_CHAIN_CERT, 1, UnsafeMutableRawPointer(cert))
}

/// A TLS failure: handshake, verification or record errors, with OpenSSL's reason.
public struct TLSError: Error, Equatable, CustomStringConvertible {
    public let message: String
    /// The fatal alert the peer sent, when the failure is the peer's refusal.
    public let peerAlert: TLSAlert?
    public init(_ message: String, peerAlert: TLSAlert? = nil) {
        self.message = message
        self.peerAlert = peerAlert
    }
    public var description: String { message }
}

/// A TLS alert the peer sent (RFC 8446 §6.2, RFC 5246 §7.2): its code, its name, and whether it says that the peer
/// refused the certificate it was shown (a client that does not trust the CA, or pins another certificate).
public struct TLSAlert: Sendable, Equatable, CustomStringConvertible {
    public let code: UInt8
    public init(code: UInt8) { self.code = code }

    /// The alert a received-alert error from OpenSSL's queue stands for: OpenSSL reports alert N from the peer as
    /// reason `SSL_AD_REASON_OFFSET + N` of the SSL library; any other error is none.
    init?(_ entry: CryptoError.QueuedError) {
        let offset = Int32(SSL_AD_REASON_OFFSET)
        guard entry.library == ERR_LIB_SSL, entry.reason >= offset, entry.reason - offset <= 255 else { return nil }
        code = UInt8(entry.reason - offset)
    }

    /// The RFC's name (`unknown_ca`), or `alert N` for a code without one here.
    public var name: String {
        switch code {
        case 0: return "close_notify"
        case 10: return "unexpected_message"
        case 20: return "bad_record_mac"
        case 22: return "record_overflow"
        case 40: return "handshake_failure"
        case 42: return "bad_certificate"
        case 43: return "unsupported_certificate"
        case 44: return "certificate_revoked"
        case 45: return "certificate_expired"
        case 46: return "certificate_unknown"
        case 47: return "illegal_parameter"
        case 48: return "unknown_ca"
        case 49: return "access_denied"
        case 50: return "decode_error"
        case 51: return "decrypt_error"
        case 70: return "protocol_version"
        case 71: return "insufficient_security"
        case 80: return "internal_error"
        case 86: return "inappropriate_fallback"
        case 90: return "user_canceled"
        case 109: return "missing_extension"
        case 110: return "unsupported_extension"
        case 112: return "unrecognized_name"
        case 116: return "certificate_required"
        case 120: return "no_application_protocol"
        default: return "alert \(code)"
        }
    }

    /// True for the alerts a client sends when it will not accept the server's certificate: bad_certificate,
    /// unsupported_certificate, certificate_revoked, certificate_expired, certificate_unknown and unknown_ca.
    public var refusesCertificate: Bool { [42, 43, 44, 45, 46, 48].contains(code) }

    public var description: String { "\(name) (\(code))" }
}

/// One TLS connection over memory buffers (sans-IO): feed it ciphertext from the socket, take the
/// ciphertext it wants sent, read and write plaintext. Owned by one connection; not Sendable.
public final class TLSSession {
    let ssl: OpaquePointer
    let rbio: OpaquePointer
    let wbio: OpaquePointer
    let context: TLSContext
    /// True once the handshake has completed.
    public private(set) var isEstablished = false
    /// True once the peer sent close_notify.
    public private(set) var receivedClose = false
    /// The fatal alert the peer sent, once one ended the connection.
    public private(set) var receivedAlert: TLSAlert?

    /// `serverName`: for a client, the SNI and the name verified; for an intercepting server, the leaf to
    /// use when the client sends no SNI. `fallbackNames`: for an intercepting server without `serverName`, the names of
    /// that leaf (the address the client reached and `localhost`, for clients that connect by IP address and so send
    /// no SNI).
    public init(context: TLSContext, serverName: String?, fallbackNames: [String] = []) throws(TLSError) {
        self.context = context
        guard let ssl = SSL_new(context.pointer) else { throw TLSError(CryptoError.openSSL("SSL_new").message) }
        guard let r = BIO_new(BIO_s_mem()), let w = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw TLSError("BIO_new failed")
        }
        _ = tap_BIO_set_mem_eof_return(r, -1) // an empty read BIO means "want more", not EOF
        SSL_set_bio(ssl, r, w)
        self.ssl = ssl
        rbio = r
        wbio = w
        switch context.role {
        case .server:
            SSL_set_accept_state(ssl)
            if context.leaves != nil { _ = context.installLeaf(on: ssl, names: serverName.map { [$0] } ?? fallbackNames) }
        case .client:
            SSL_set_connect_state(ssl)
            if let serverName {
                if CertificateBuilder.isIPAddress(serverName) {
                    _ = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName)
                } else {
                    _ = tap_SSL_set_tlsext_host_name(ssl, serverName)
                    if context.verifiesPeer { _ = SSL_set1_host(ssl, serverName) }
                }
            }
        }
    }

    deinit { SSL_free(ssl) } // frees both BIOs too

    /// Hands received ciphertext to OpenSSL.
    public func feed(_ ciphertext: [UInt8]) {
        guard !ciphertext.isEmpty else { return }
        _ = ciphertext.withUnsafeBytes { BIO_write(rbio, $0.baseAddress, Int32($0.count)) }
    }

    /// Advances the handshake. Returns true once established.
    public func handshake() throws(TLSError) -> Bool {
        if isEstablished { return true }
        let rc = SSL_do_handshake(ssl)
        if rc == 1 {
            isEstablished = true
            return true
        }
        let err = SSL_get_error(ssl, rc)
        if err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE { return false }
        throw failure("TLS handshake failed")
    }

    /// Decrypts everything available.
    public func readPlaintext() throws(TLSError) -> [UInt8] {
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = buf.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
            if n > 0 {
                out += buf.prefix(Int(n))
                continue
            }
            let err = SSL_get_error(ssl, n)
            if err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE { break }
            if err == SSL_ERROR_ZERO_RETURN { receivedClose = true; break }
            throw failure("TLS read failed")
        }
        return out
    }

    /// Encrypts plaintext for sending (take it with `takeCiphertext`).
    public func writePlaintext(_ bytes: [UInt8]) throws(TLSError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { SSL_write(ssl, $0.baseAddress! + offset, Int32($0.count - offset)) }
            if n <= 0 { throw failure("TLS write failed") }
            offset += Int(n)
        }
    }

    /// Sends close_notify.
    public func shutdown() { _ = SSL_shutdown(ssl); CryptoError.clearQueue() }

    /// The ciphertext OpenSSL produced since the last call.
    public func takeCiphertext() -> [UInt8] {
        let pending = Int(tap_BIO_pending(wbio))
        guard pending > 0 else { return [] }
        var out = [UInt8](repeating: 0, count: pending)
        let n = out.withUnsafeMutableBytes { BIO_read(wbio, $0.baseAddress, Int32(pending)) }
        return Array(out.prefix(max(0, Int(n))))
    }

    /// "TLSv1.3" and so on.
    public var protocolVersion: String { String(cString: SSL_get_version(ssl)) }

    /// Whether this end is the TLS server (it reads the peer's ClientHello).
    public var isServer: Bool { context.role == .server }

    /// The negotiated ALPN protocol, if any.
    public var alpn: String? {
        var p: UnsafePointer<UInt8>?
        var len: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &p, &len)
        guard let p, len > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: p, count: Int(len)), as: UTF8.self)
    }

    /// The SNI name the client sent (server side) or asked for (client side).
    public var serverName: String? {
        guard let n = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name) else { return nil }
        return String(cString: n)
    }

    /// The cipher suite name.
    public var cipher: String? {
        guard let c = SSL_get_current_cipher(ssl), let n = SSL_CIPHER_get_name(c) else { return nil }
        return String(cString: n)
    }

    private func failure(_ what: String) -> TLSError {
        let verify = SSL_get_verify_result(ssl)
        let queued = CryptoError.drainQueue()
        if let alert = queued.lazy.compactMap(TLSAlert.init).first { receivedAlert = alert }
        var message = CryptoError.openSSL(what, from: queued).message
        if verify != Int(tap_X509_V_OK()) {
            message += " (certificate: \(String(cString: X509_verify_cert_error_string(verify))))"
        }
        return TLSError(message, peerAlert: receivedAlert)
    }
}
