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

/// A value that carries a message's `MessageFields` and reads and sets them as its own (`summary.transStatus`). Plain
/// properties, not key paths (`@dynamicMemberLookup`), which the optimizer left as calls in the session writer's loop.
public protocol HasMessageFields {
    var fields: MessageFields { get set }
}

extension HasMessageFields {
    @inlinable public var messageType: String? { get { fields.messageType } set { fields.messageType = newValue } }
    @inlinable public var messageVersion: String? { get { fields.messageVersion } set { fields.messageVersion = newValue } }
    @inlinable public var threeDSServerTransID: String? { get { fields.threeDSServerTransID } set { fields.threeDSServerTransID = newValue } }
    @inlinable public var dsTransID: String? { get { fields.dsTransID } set { fields.dsTransID = newValue } }
    @inlinable public var acsTransID: String? { get { fields.acsTransID } set { fields.acsTransID = newValue } }
    @inlinable public var sdkTransID: String? { get { fields.sdkTransID } set { fields.sdkTransID = newValue } }
    @inlinable public var transStatus: String? { get { fields.transStatus } set { fields.transStatus = newValue } }
    @inlinable public var errorCode: String? { get { fields.errorCode } set { fields.errorCode = newValue } }
}
