/// A problem with a key, certificate or directory of the per-user identity (the interception CA, the test keys, a DS's
/// certificates), with a message for the user.
public struct IdentityError: Error, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
