import TapEMV
import TapStore

// A stored message's type read as TapEMV's MessageKind, for every module that reads sessions: TapStore keeps the
// messageType as the wire had it.

extension RecordedMessage {
    /// The stored messageType as a message kind, when it is one the specification names (a UL harness name or an
    /// unknown type is nil here, as no comparison with the specification's names matched it).
    public var kind: MessageKind? { type.flatMap(MessageKind.init(rawValue:)) }
}

extension MessageTag {
    /// As `RecordedMessage.kind`.
    public var kind: MessageKind? { type.flatMap(MessageKind.init(rawValue:)) }
}
