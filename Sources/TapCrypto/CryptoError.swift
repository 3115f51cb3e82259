internal import COpenSSL
import TapCore

/// An error from a cryptographic operation, carrying OpenSSL's own messages where it had any.
public typealias CryptoError = KindedError<CryptoFailure>

/// What kind of failure a `CryptoError` is, for callers that react differently to each.
public enum CryptoFailure: Sendable, Equatable {
    /// An authentication tag or MAC did not match.
    case authenticationFailed
    /// A signature did not verify.
    case badSignature
    /// A key was missing, malformed, of the wrong type or the wrong size.
    case invalidKey
    /// Input (ciphertext, DER, PEM) was malformed or truncated.
    case invalidInput
    /// A certificate chain did not verify against the given roots.
    case untrustedChain
    /// Anything else OpenSSL refused.
    case library
}

extension CryptoError {
    /// Builds an error from OpenSSL's error queue (which it drains), prefixed by what we were doing.
    static func openSSL(_ what: String, kind: Kind = .library) -> CryptoError {
        openSSL(what, kind: kind, from: drainQueue())
    }

    /// Builds an error from entries already taken from OpenSSL's queue (`drainQueue`).
    static func openSSL(_ what: String, kind: Kind = .library, from entries: [QueuedError]) -> CryptoError {
        let detail = entries.isEmpty ? "" : ": " + entries.map(\.text).joined(separator: "; ")
        return CryptoError(kind, what + detail)
    }

    /// One entry of OpenSSL's error queue: its packed code and its text.
    struct QueuedError {
        let code: UInt
        let text: String
        /// The library that raised it (`ERR_LIB_SSL`, ...).
        var library: Int32 { ERR_GET_LIB(code) }
        /// Its reason code within that library.
        var reason: Int32 { ERR_GET_REASON(code) }
    }

    /// Takes every entry from OpenSSL's error queue, oldest first.
    static func drainQueue() -> [QueuedError] {
        var entries: [QueuedError] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buf = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buf, buf.count)
            entries.append(QueuedError(code: code, text: buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }))
        }
        return entries
    }

    /// Empties OpenSSL's error queue so stale entries do not leak into a later message.
    static func clearQueue() { ERR_clear_error() }
}

/// Throws the error from OpenSSL's queue unless `rc` is 1 (OpenSSL's success value for most calls).
@inline(__always)
func check(_ rc: Int32, _ what: @autoclosure () -> String, kind: CryptoError.Kind = .library) throws(CryptoError) {
    if rc != 1 { throw CryptoError.openSSL(what(), kind: kind) }
}

/// Unwraps a pointer that OpenSSL returned, or throws its error queue.
@inline(__always)
func unwrap<T>(_ p: T?, _ what: @autoclosure () -> String, kind: CryptoError.Kind = .library) throws(CryptoError) -> T {
    guard let p else { throw CryptoError.openSSL(what(), kind: kind) }
    return p
}
