/// A sandbox or client failure with a message for the user.
public struct SandboxError: Error, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
