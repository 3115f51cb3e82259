import Foundation
import TapCore
import TapCrypto
import TapEMV

/// Helpers to build and check EMV 3DS JSON messages.
enum EMV {
    static func uuid() -> String { Digest.randomUUID() }

    /// The names in `required` that `message` lacks (or has empty).
    static func missing(_ required: [String], in message: JSON) -> [String] {
        required.filter { name in
            guard let v = message[name] else { return true }
            if case let .string(s) = v { return s.isEmpty }
            return false
        }
    }
}
