/// An error that says which of its module's failures it is (`kind`, for callers that react to each differently) and
/// names the problem in `message` (its description). The error types of TapCrypto, TapJOSE, TapHTTP and TapHTTPService
/// are this, each with its own list of kinds.
public struct KindedError<FailureKind: Sendable & Equatable>: Error, Equatable, Sendable, CustomStringConvertible {
    /// The module's list of failures (`CryptoError.Kind` …).
    public typealias Kind = FailureKind

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
