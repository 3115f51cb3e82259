import Foundation
import TapCore
import TapCrypto
import TapEMV

/// Helpers to build and check EMV 3DS JSON messages.
enum EMV {
    static func uuid() -> String { Digest.randomUUID() }

    /// The members in `required` that `message` lacks (or has empty).
    static func missing(_ required: [MessageMember], in message: JSON) -> [MessageMember] {
        required.filter { member in
            guard let v = message[member] else { return true }
            if case let .string(s) = v { return s.isEmpty }
            return false
        }
    }

    /// Members' names as an Erro's errorDetail lists them (comma-separated, in order).
    static func names(_ members: [MessageMember]) -> String { members.map(\.name).joined(separator: ",") }
}
