import Foundation
import TapCore
import TapCrypto

/// JWS algorithms 3dstape signs and verifies.
public enum JWSAlgorithm: String, Sendable, CaseIterable {
    case es256 = "ES256"
    case ps256 = "PS256"
    case rs256 = "RS256"
    case hs256 = "HS256"

    var asymmetric: SignatureAlgorithm? { SignatureAlgorithm(rawValue: rawValue) }
}

/// A compact JWS (RFC 7515): parsed, signed and verified, with x5c chain validation.
public struct JWS: Sendable {
    /// The protected header.
    public let header: JSON
    /// The payload bytes (usually JSON).
    public let payload: [UInt8]
    /// The signature bytes (r‖s for ES256).
    public let signature: [UInt8]
    /// `BASE64URL(header) || '.' || BASE64URL(payload)` as received, which is what was signed.
    public let signingInput: [UInt8]
    /// The compact serialisation.
    public let compact: String

    /// The `alg` header.
    public var algorithm: String? { header["alg"]?.stringValue }

    /// The payload parsed as JSON, if it is JSON.
    public var payloadJSON: JSON? { try? JSON.parse(payload) }

    /// Parses a compact JWS; throws `.malformed` naming the problem.
    public init(compact text: String) throws(JOSEError) {
        let parts = try CompactParts(Array(text.utf8), count: 3, what: "JWS")
        header = try parts.header()
        payload = try parts.decode(1, name: "JWS payload")
        signature = try parts.decode(2, name: "JWS signature")
        signingInput = parts.bytes(from: 0, through: 1)
        compact = String(decoding: parts.bytes(from: 0, through: 2), as: UTF8.self)
        guard algorithm != nil else { throw JOSEError(.malformed, "JWS header has no \"alg\"") }
    }

    /// Signs `payload` with an asymmetric key; `alg` is put first in the header, `extraHeader` members after it.
    public static func sign(payload: [UInt8], algorithm: SignatureAlgorithm, key: PrivateKey,
                            extraHeader: [(String, JSON)] = []) throws(JOSEError) -> JWS {
        try JWS(compact: try signCompact(payload: payload, algorithm: algorithm, key: key, extraHeader: extraHeader))
    }

    /// Signs and returns the compact serialisation only, without parsing it back (for servers signing per request).
    public static func signCompact(payload: [UInt8], algorithm: SignatureAlgorithm, key: PrivateKey,
                                   extraHeader: [(String, JSON)] = []) throws(JOSEError) -> String {
        try signCompact(payload: payload, algorithm: algorithm, key: key, protectedHeader: protectedHeader(algorithm: algorithm, extraHeader: extraHeader))
    }

    /// The encoded protected header (`alg` first, then `extraHeader`) that `signCompact` puts first: made once by a
    /// server that signs with the same header every time (an x5c chain is a few kilobytes to serialise and encode).
    public static func protectedHeader(algorithm: SignatureAlgorithm, extraHeader: [(String, JSON)] = []) -> String {
        Base64URL.encode(JSON.object([("alg", .string(algorithm.rawValue))] + extraHeader).bytes)
    }

    /// Signs `payload` under a protected header made by `protectedHeader(algorithm:extraHeader:)` with the same algorithm.
    public static func signCompact(payload: [UInt8], algorithm: SignatureAlgorithm, key: PrivateKey,
                                   protectedHeader: String) throws(JOSEError) -> String {
        try signCompact(payload: payload, protectedHeader: protectedHeader) { (input) throws(CryptoError) in try key.sign(input, algorithm: algorithm) }
    }

    /// The same with a signer prepared once for many signatures (the protected header made with its algorithm).
    public static func signCompact(payload: [UInt8], signer: PreparedSigner, protectedHeader: String) throws(JOSEError) -> String {
        try signCompact(payload: payload, protectedHeader: protectedHeader) { (input) throws(CryptoError) in try signer.sign(input) }
    }

    private static func signCompact(payload: [UInt8], protectedHeader: String,
                                    sign: ([UInt8]) throws(CryptoError) -> [UInt8]) throws(JOSEError) -> String {
        let input = protectedHeader + "." + Base64URL.encode(payload)
        let sig: [UInt8]
        do { sig = try sign(Array(input.utf8)) } catch { throw JOSEError.from(error, context: "signing") }
        return input + "." + Base64URL.encode(sig)
    }

    /// Signs with HMAC-SHA256 (HS256) under a shared secret.
    public static func signHS256(payload: [UInt8], secret: [UInt8], extraHeader: [(String, JSON)] = []) throws(JOSEError) -> JWS {
        let header = JSON.object([("alg", .string("HS256"))] + extraHeader)
        let input = Base64URL.encode(header.bytes) + "." + Base64URL.encode(payload)
        let mac = Digest.hmacSHA256(key: secret, data: Array(input.utf8))
        return try JWS(compact: input + "." + Base64URL.encode(mac))
    }

    /// Verifies the signature with the given public key. Throws `.badSignature` or `.unsupported`.
    public func verify(with key: PublicKey) throws(JOSEError) {
        guard let alg = algorithm.flatMap(JWSAlgorithm.init(rawValue:)), let asym = alg.asymmetric else {
            throw JOSEError(.unsupported, "JWS alg \(algorithm ?? "?") cannot be verified with a public key (ES256, PS256, RS256)")
        }
        guard asym.keyType == key.type else {
            throw JOSEError(.wrongKey, "JWS alg \(asym.rawValue) needs an \(asym.keyType.rawValue) key, got \(key.type.rawValue)")
        }
        guard key.verify(signature, of: signingInput, algorithm: asym) else {
            throw JOSEError(.badSignature, "JWS \(asym.rawValue) signature does not verify")
        }
    }

    /// Verifies an HS256 signature with the shared secret (constant-time comparison).
    public func verifyHS256(secret: [UInt8]) throws(JOSEError) {
        guard algorithm == "HS256" else { throw JOSEError(.unsupported, "expected alg HS256, got \(algorithm ?? "?")") }
        let mac = Digest.hmacSHA256(key: secret, data: signingInput)
        guard Digest.constantTimeEquals(mac, signature) else {
            throw JOSEError(.badSignature, "HS256 signature does not verify with the given secret")
        }
    }

    /// An `x5c` header value: standard base64 DER, leaf first (give the chain without the root).
    public static func x5cHeader(_ chain: [Certificate]) -> JSON {
        .array(chain.map { .string(Data($0.der).base64EncodedString()) })
    }

    /// The certificates of the `x5c` header (standard base64 DER, leaf first).
    public func x5cChain() throws(JOSEError) -> [Certificate] { try x5cChain(parsedBy: nil) }

    /// The x5c certificates, each parsed by `trust` (once per DER) when given.
    func x5cChain(parsedBy trust: TrustedCertificates?) throws(JOSEError) -> [Certificate] {
        guard let x5c = header["x5c"] else { return [] }
        guard case let .array(items) = x5c, !items.isEmpty else { throw JOSEError(.malformed, "x5c must be a non-empty array") }
        var certs: [Certificate] = []
        for (i, item) in items.enumerated() {
            guard let s = item.stringValue, let der = Data(base64Encoded: s) else {
                throw JOSEError(.malformed, "x5c[\(i)] is not base64 DER")
            }
            do throws(CryptoError) {
                let bytes = [UInt8](der)
                if let trust { certs.append(try trust.certificate(der: bytes)) } else { certs.append(try Certificate(der: bytes)) }
            } catch {
                throw JOSEError(.malformed, "x5c[\(i)] is not a certificate: \(error.message)")
            }
        }
        return certs
    }

    /// Validates the x5c chain against `roots` and verifies the signature with the leaf's key.
    /// Returns the leaf certificate.
    @discardableResult
    public func verifyWithX5C(roots: [Certificate], at time: Date? = nil) throws(JOSEError) -> Certificate {
        try verifyWithX5C(time: time, parsedBy: nil) { (leaf, intermediates) throws(CryptoError) in
            try Certificate.verifyChain(leaf: leaf, intermediates: intermediates, roots: roots, at: time)
        }
    }

    /// `verifyWithX5C(roots:at:)` with the roots' store made once and the x5c certificates parsed once per run.
    @discardableResult
    public func verifyWithX5C(trust: TrustedCertificates, at time: Date? = nil) throws(JOSEError) -> Certificate {
        try verifyWithX5C(time: time, parsedBy: trust) { (leaf, intermediates) throws(CryptoError) in
            try trust.verifyChain(leaf: leaf, intermediates: intermediates, at: time)
        }
    }

    private func verifyWithX5C(time: Date?, parsedBy trust: TrustedCertificates?,
                               chainCheck: (Certificate, [Certificate]) throws(CryptoError) -> Void) throws(JOSEError) -> Certificate {
        let chain = try x5cChain(parsedBy: trust)
        guard let leaf = chain.first else { throw JOSEError(.missingKey, "JWS has no x5c header to verify against the trusted roots") }
        do {
            try chainCheck(leaf, Array(chain.dropFirst()))
        } catch {
            throw JOSEError(.untrustedChain, error.message)
        }
        let key: PublicKey
        do { key = try leaf.publicKey } catch { throw JOSEError.from(error, context: "x5c leaf key") }
        try verify(with: key)
        return leaf
    }
}

/// A JWT (RFC 7519) signed with HS256, as payment gateways use it to carry 3DS data.
public struct JWT: Sendable {
    public let jws: JWS
    /// The claims object.
    public let claims: JSON

    /// Parses a compact JWT whose payload is a JSON object.
    public init(compact: String) throws(JOSEError) {
        jws = try JWS(compact: compact)
        guard let c = jws.payloadJSON, c.isObject else { throw JOSEError(.malformed, "JWT payload is not a JSON object") }
        claims = c
    }

    /// Signs claims with HS256 (`{"alg":"HS256","typ":"JWT"}`).
    public static func signHS256(claims: JSON, secret: [UInt8]) throws(JOSEError) -> JWT {
        let jws = try JWS.signHS256(payload: claims.bytes, secret: secret, extraHeader: [("typ", .string("JWT"))])
        return try JWT(compact: jws.compact)
    }

    /// Verifies the HS256 signature and, when present, `exp` and `nbf` against `now` (with `leeway` seconds).
    public func verify(secret: [UInt8], now: Date = Date(), leeway: TimeInterval = 60) throws(JOSEError) {
        try jws.verifyHS256(secret: secret)
        let t = now.timeIntervalSince1970
        if case let .number(exp)? = claims["exp"], let e = Double(exp), t > e + leeway {
            throw JOSEError(.invalidClaims, "JWT expired at \(Checked.clampedInt(e)) (now \(Checked.clampedInt(t)))")
        }
        if case let .number(nbf)? = claims["nbf"], let n = Double(nbf), t + leeway < n {
            throw JOSEError(.invalidClaims, "JWT not valid before \(Checked.clampedInt(n)) (now \(Checked.clampedInt(t)))")
        }
    }
}
