import Foundation
import TapCore
import TapCrypto
import TapJOSE

/// The ARes's `acsSignedContent` (SPEC §6.2.3.2–6.2.3.3): the ACS's ephemeral key, the SDK's own key echoed, and the
/// acsURL, signed PS256 or ES256 with an x5c chain to the DS root (without the root). The one place the sandbox ACS,
/// key substitution, the replayer and the client make and check it.
public struct ACSSignedContent: Sendable {
    public var acsEphemPubKey: JSON
    public var sdkEphemPubKey: JSON
    public var acsURL: String

    public init(acsEphemPubKey: JSON, sdkEphemPubKey: JSON, acsURL: String) {
        self.acsEphemPubKey = acsEphemPubKey
        self.sdkEphemPubKey = sdkEphemPubKey
        self.acsURL = acsURL
    }

    /// The JWS payload, members in the order SDKs and the spec show them.
    public var json: JSON {
        .object([("acsEphemPubKey", acsEphemPubKey), ("sdkEphemPubKey", sdkEphemPubKey), ("acsURL", .string(acsURL))])
    }

    /// The compact JWS, signed by `key` with `certificate` (and any intermediates) in x5c.
    public func sign(key: PrivateKey, certificate: Certificate, intermediates: [Certificate] = [],
                     algorithm: SignatureAlgorithm) throws(JOSEError) -> String {
        try sign(key: key, protectedHeader: ACSSignedContent.protectedHeader(certificate: certificate, intermediates: intermediates, algorithm: algorithm),
                 algorithm: algorithm)
    }

    /// The same under a protected header encoded once in advance (`ACSSignedContent.protectedHeader`), as a server
    /// signing for every challenge does.
    public func sign(key: PrivateKey, protectedHeader: String, algorithm: SignatureAlgorithm) throws(JOSEError) -> String {
        try JWS.signCompact(payload: json.bytes, algorithm: algorithm, key: key, protectedHeader: protectedHeader)
    }

    /// The same with a signer prepared once (a replayer or simulator signing for every challenge).
    public func sign(signer: PreparedSigner, protectedHeader: String) throws(JOSEError) -> String {
        try JWS.signCompact(payload: json.bytes, signer: signer, protectedHeader: protectedHeader)
    }

    /// The encoded protected header an ACS signs acsSignedContent under: `alg` and the x5c chain of its certificate.
    public static func protectedHeader(certificate: Certificate, intermediates: [Certificate] = [], algorithm: SignatureAlgorithm) -> String {
        JWS.protectedHeader(algorithm: algorithm, extraHeader: [("x5c", JWS.x5cHeader([certificate] + intermediates))])
    }

    /// The content of a compact acsSignedContent, unverified (for a recording already checked when it was made).
    public init(unverified compact: String) throws(JOSEError) {
        try self.init(payload: try JWS(compact: compact))
    }

    /// Verifies `compact` against the DS roots (x5c chain and signature) and returns its content and the signer.
    public static func verify(_ compact: String, roots: [Certificate]) throws(JOSEError) -> (content: ACSSignedContent, signer: Certificate) {
        let jws = try JWS(compact: compact)
        let leaf = try jws.verifyWithX5C(roots: roots)
        return (try ACSSignedContent(payload: jws), leaf)
    }

    /// As `verify(_:roots:)`, with the roots' store and the ACS certificates kept by `trust` across calls.
    public static func verify(_ compact: String, trust: TrustedCertificates) throws(JOSEError) -> (content: ACSSignedContent, signer: Certificate) {
        let jws = try JWS(compact: compact)
        let leaf = try jws.verifyWithX5C(trust: trust)
        return (try ACSSignedContent(payload: jws), leaf)
    }

    init(payload jws: JWS) throws(JOSEError) {
        guard let p = jws.payloadJSON, let acs = p["acsEphemPubKey"], let sdk = p["sdkEphemPubKey"], let url = p["acsURL"]?.stringValue else {
            throw JOSEError(.malformed, "acsSignedContent lacks acsEphemPubKey, sdkEphemPubKey or acsURL")
        }
        self.init(acsEphemPubKey: acs, sdkEphemPubKey: sdk, acsURL: url)
    }
}

/// The ACS side of the app channel's key agreement: a fresh P-256 key (its public half goes into acsEphemPubKey), ECDH
/// with the SDK's sdkEphemPubKey, and the channel keyed with the sdkReferenceNumber (emv3ds.md §1).
public enum ACSChannel {
    public static func open(sdkEphemPubKey: JSON, sdkReferenceNumber: String, acsTransID: String,
                            enc: ContentEncryption = .a128cbcHS256) throws -> (cipher: AppChannelCipher, acsEphemPubKey: JSON) {
        let sdkKey = try JWK(json: sdkEphemPubKey).publicKey()
        let ephemeral = try PrivateKey.generateP256()
        let cipher = try AppChannelCipher(role: .acs, privateKey: ephemeral, peerPublicKey: sdkKey, sdkReferenceNumber: sdkReferenceNumber,
                                          acsTransID: acsTransID, enc: enc)
        return (cipher, JWK(publicKeyOf: ephemeral).json())
    }
}
