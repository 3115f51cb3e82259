import TapEMV
import TapStore

// A stored message's type and direction read as TapEMV's MessageKind and MessageDirection, for every module that reads sessions: TapStore keeps the
// messageType as the wire had it.

extension RecordedMessage {
    /// The stored messageType as a message kind, when it is one the specification names (a UL harness name or an
    /// unknown type is nil here, as no comparison with the specification's names matched it).
    public var kind: MessageKind? { type.flatMap(MessageKind.init(rawValue:)) }
    /// The stored direction typed; nil for a value that is neither `request` nor `response`.
    public var messageDirection: MessageDirection? { MessageDirection(rawValue: direction) }
    /// The stored location typed.
    public var messageLocation: MessageLocation { MessageLocation(stored: location) }
}

extension MessageTag {
    /// As `RecordedMessage.kind`.
    public var kind: MessageKind? { type.flatMap(MessageKind.init(rawValue:)) }
    /// As `RecordedMessage.messageLocation`.
    public var messageLocation: MessageLocation { MessageLocation(stored: location) }
}
