import Foundation
import TapCore
import TapCrypto
import TapEMV

/// Helpers to build and check EMV 3DS JSON messages.
enum EMV {
    static func uuid() -> String { Digest.randomUUID() }

    static func isUUID(_ s: String) -> Bool {
        let u = Array(s.utf8)
        guard u.count == 36 else { return false }
        for (i, c) in u.enumerated() {
            if [8, 13, 18, 23].contains(i) { if c != UInt8(ascii: "-") { return false } } else if !((c >= 48 && c <= 57) || (c | 0x20 >= 97 && c | 0x20 <= 102)) { return false }
        }
        return true
    }

    /// The names in `required` that `message` lacks (or has empty).
    static func missing(_ required: [String], in message: JSON) -> [String] {
        required.filter { name in
            guard let v = message[name] else { return true }
            if case let .string(s) = v { return s.isEmpty }
            return false
        }
    }
}
