/// The eight text members a 3DS message is listed, stored and looked up by (its type and version, the four transaction
/// IDs, transStatus, errorCode), as the wire had them. It sits here, below both of its users, because TapEMV's
/// `MessageSummary` reads them from a message and TapStore's `MessageRecord` stores them as columns of the messages table,
/// and storage does not import the 3DS model.
public struct MessageFields: Sendable, Equatable {
    public var messageType: String?
    public var messageVersion: String?
    public var threeDSServerTransID: String?
    public var dsTransID: String?
    public var acsTransID: String?
    public var sdkTransID: String?
    public var transStatus: String?
    public var errorCode: String?

    /// The members' names on the wire, in the order of the properties.
    public static let names = ["messageType", "messageVersion", "threeDSServerTransID", "dsTransID", "acsTransID", "sdkTransID",
                               "transStatus", "errorCode"]

    public init() {}

    /// Each member by its name in `names` (nil: absent, or not a string).
    public init(_ member: (String) -> String?) {
        messageType = member("messageType")
        messageVersion = member("messageVersion")
        threeDSServerTransID = member("threeDSServerTransID")
        dsTransID = member("dsTransID")
        acsTransID = member("acsTransID")
        sdkTransID = member("sdkTransID")
        transStatus = member("transStatus")
        errorCode = member("errorCode")
    }

    /// The members of a JSON object that are strings.
    public init(_ json: JSON) { self.init { json[$0]?.stringValue } }
}

/// A value that carries a message's `MessageFields` and reads and sets them as its own (`summary.transStatus`), each
/// through its key path into `fields`. The accessors are always inlined, so at a use the optimizer folds the
/// key path into a plain stored-property access (a call to the key-path runtime otherwise, in the session writer's loop).
@dynamicMemberLookup
public protocol HasMessageFields {
    var fields: MessageFields { get set }
}

extension HasMessageFields {
    @inlinable public subscript<Value>(dynamicMember member: WritableKeyPath<MessageFields, Value>) -> Value {
        @inline(__always) get { fields[keyPath: member] }
        @inline(__always) set { fields[keyPath: member] = newValue }
    }
}
