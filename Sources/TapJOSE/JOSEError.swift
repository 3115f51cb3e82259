import TapCrypto
import TapCore

/// An error from parsing, verifying or decrypting a JOSE object; `message` names the problem.
public typealias JOSEError = KindedError<JOSEFailure>

/// The class of failure of a `JOSEError`.
public enum JOSEFailure: Sendable, Equatable {
    /// Not well-formed (wrong part count, bad base64url, bad JSON, bad lengths).
    case malformed
    /// An `alg` or `enc` value this implementation does not support.
    case unsupported
    /// A key needed to verify or decrypt was not given.
    case missingKey
    /// The key given does not fit (wrong type, or decryption with it failed).
    case wrongKey
    /// An authentication tag did not match: tampered data or a wrong key.
    case authenticationFailed
    /// A signature did not verify.
    case badSignature
    /// An x5c chain did not verify against the trusted roots.
    case untrustedChain
    /// A JWT's time claims (`exp`, `nbf`) make it invalid now.
    case invalidClaims
}

extension JOSEError {
    /// Maps a crypto-layer error into the JOSE vocabulary.
    static func from(_ e: CryptoError, context: String) -> JOSEError {
        let kind: JOSEFailure = switch e.kind {
        case .authenticationFailed: .authenticationFailed
        case .badSignature: .badSignature
        case .invalidKey: .wrongKey
        case .untrustedChain: .untrustedChain
        case .invalidInput, .library: .malformed
        }
        return JOSEError(kind, "\(context): \(e.message)")
    }
}
