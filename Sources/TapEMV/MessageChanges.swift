import Foundation
import TapCore

/// One typed change to a recorded 3DS message, as the replayer makes it to the ARes, CRes and RReq it sends again (its
/// faults, a cancelled or timed-out challenge's outcome): the member replaced where the message has it, keeping its
/// place, or added at the end. A list of them is applied in its order, so the bytes come out as the list says.
public enum MessageChange: Sendable, Equatable {
    case transStatus(TransStatus)
    case transStatusReason(String)
    case challengeCancel(String)
    case acsSignedContent(String)

    /// The member as a message carries it.
    public var member: (String, JSON) {
        switch self {
        case let .transStatus(s): ("transStatus", s.json)
        case let .transStatusReason(r): ("transStatusReason", .string(r))
        case let .challengeCancel(c): ("challengeCancel", .string(c))
        case let .acsSignedContent(c): ("acsSignedContent", .string(c))
        }
    }
}

extension JSON {
    /// This message with `changes` made, in order (an object; anything else is returned as it is).
    public func applying(_ changes: [MessageChange]) -> JSON {
        changes.reduce(self) { message, change in
            let (name, value) = change.member
            return message.setting(name, to: value)
        }
    }
}

extension ThreeDSMessage {
    /// The ARes or RReq member names a replayed message's authentication value is regenerated in.
    public static let authenticationValueMember = "authenticationValue"
    /// The ARes member that carries the ACS's signed content.
    public static let acsSignedContentMember = "acsSignedContent"

    /// An authentication value (a CAVV, 28 characters of base64) made from 20 bytes: random in the sandbox, seeded in
    /// the replayer.
    public static func authenticationValue(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }

    /// An RReq (or ARes) whose transStatus is not an authentication (anything but Y and A) carries no authentication
    /// value, and eci 07; a message without a string transStatus is returned as it is.
    public static func withoutAuthenticationValueUnlessAuthenticated(_ message: JSON) -> JSON {
        guard let status = message.transStatus, !status.isAuthentication else { return message }
        return message.removing(authenticationValueMember).setting("eci", to: .string("07"))
    }
}
