internal import COpenSSL
import Foundation
import TapCore

/// Trusted roots made into one verification store once, and the certificates met on the wire (a JWS's x5c) parsed once
/// by their DER: for a client that verifies the same few signers thousands of times in a run (client-replay), where
/// building the store and decoding the certificates again for every signature was a fifth of a flow's CPU.
public final class TrustedCertificates: Sendable {
    public let roots: [Certificate]
    let store: X509StoreHandle
    /// Parsed certificates by DER; cleared when `maxCached` are held, so memory stays bounded whatever the peers send.
    private let parsed = Locked<[[UInt8]: Certificate]>([:])
    /// Chains that verified (DER of the leaf and intermediates, in order) with the span in which they are valid;
    /// bounded as `parsed` is.
    private let verified = Locked<[[UInt8]: ClosedRange<Date>]>([:])
    public let maxCached: Int

    public init(roots: [Certificate], maxCached: Int = 256) throws(CryptoError) {
        guard !roots.isEmpty else { throw CryptoError(.untrustedChain, "no trusted roots were given") }
        self.roots = roots
        self.maxCached = max(1, maxCached)
        let store = X509StoreHandle(owning: try unwrap(X509_STORE_new(), "X509_STORE_new"))
        for root in roots { _ = X509_STORE_add_cert(store.pointer, root.handle.pointer) }
        CryptoError.clearQueue() // a duplicate root is reported but harmless
        self.store = store
    }

    /// The certificate in `der`, parsed on its first sight.
    public func certificate(der: [UInt8]) throws(CryptoError) -> Certificate {
        if let c = parsed.withLock({ $0[der] }) { return c }
        let c = try Certificate(der: der)
        parsed.withLock { cache in
            if cache.count >= maxCached { cache.removeAll() }
            cache[der] = c
        }
        return c
    }

    /// Certificates held parsed now (for tests).
    public var cachedCount: Int { parsed.withLock { $0.count } }

    /// Verifies that `leaf` chains, through `intermediates`, to one of the roots, at `time` (now by default); as
    /// `Certificate.verifyChain`, with the store made once. A chain that verified is remembered by its certificates'
    /// DER with the span in which all of its certificates are valid: the same chain at a time inside that span verifies
    /// without OpenSSL's chain building and signature checks again (the roots never change; a chain that failed is
    /// always checked again, and one met outside its span too). Client replay verifies the ACS's one chain for every
    /// challenge: 7% of a flow's CPU before.
    public func verifyChain(leaf: Certificate, intermediates: [Certificate], at time: Date? = nil) throws(CryptoError) {
        var key = leaf.der
        for c in intermediates { key += c.der } // DER is self-delimiting: the concatenation names the chain
        let when = time ?? Date()
        if let span = verified.withLock({ $0[key] }), span.contains(when) { return }
        guard let span = try Certificate.verifyChain(leaf: leaf, intermediates: intermediates, store: store, at: time) else { return }
        verified.withLock { cache in
            if cache.count >= maxCached { cache.removeAll() }
            cache[key] = span
        }
    }

    /// Chains held as verified now (for tests).
    public var verifiedCount: Int { verified.withLock { $0.count } }
}

/// Owns one `X509_STORE`.
///
/// `@unchecked Sendable` is safe because the store is filled once in `TrustedCertificates.init` and only read afterwards;
/// OpenSSL locks a store's internals itself, and each verification has its own `X509_STORE_CTX`.
final class X509StoreHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    init(owning pointer: OpaquePointer) { self.pointer = pointer }
    deinit { X509_STORE_free(pointer) }
}
