import TapCore
import TapEMV
import TapRecording
import TapStore

/// A 3DS message as the inspection commands see it: where it was found and its JSON (nil while still encrypted).
public struct InspectedMessage: Sendable {
    public var exchangeID: Int64
    /// `request` or `response`.
    public var direction: String
    /// `body`, `form:creq`, `jwe` …
    public var location: String
    public var type: String
    /// The message in clear; nil for an app-channel JWE that was not decrypted.
    public var json: JSON?
    /// For an encrypted app-channel message: the JWE header's `kid` (the acsTransID).
    public var kid: String?

    /// `type` as a message kind, when it is one the specification names (the UL harness names stay nil here).
    public var kind: MessageKind? { MessageKind(rawValue: type) }
    /// `direction` typed; nil for a value that is neither.
    public var messageDirection: MessageDirection? { MessageDirection(rawValue: direction) }
    /// `location` typed.
    public var messageLocation: MessageLocation { MessageLocation(stored: location) }

    public init(exchangeID: Int64, direction: String, location: String, type: String, json: JSON?, kid: String? = nil) {
        self.exchangeID = exchangeID
        self.direction = direction
        self.location = location
        self.type = type
        self.json = json
        self.kid = kid
    }

    /// The 3DS messages of a stored exchange, in order (request side first).
    public static func all(in x: StoredExchange) -> [InspectedMessage] {
        x.messages.compactMap { m in
            guard let type = m.type else { return nil }
            let encrypted = m.isEncrypted
            return InspectedMessage(exchangeID: x.id, direction: m.direction, location: m.location, type: type,
                                    json: encrypted ? nil : m.json, kid: encrypted ? m.json?["kid"]?.stringValue : nil)
        }
    }

    /// A string element of the message, or nil.
    public func string(_ name: String) -> String? { json?[name]?.stringValue }
    /// A string field of the message, or nil.
    public func string(_ field: EMVField) -> String? { json?[field]?.stringValue }
    /// A transaction ID of the message as a string, or nil.
    public func string(_ id: TransactionIDField) -> String? { json?[id]?.stringValue }
    public var version: String? { string(.messageVersion) }
    public var isEncrypted: Bool { json == nil }
}

/// One 3DS transaction: its messages in the order they were exchanged, tied by threeDSServerTransID (or, for an
/// encrypted CReq/CRes, by the JWE `kid`, which is the acsTransID).
public struct ThreeDSTransaction: Sendable {
    public var key: String
    public var messages: [InspectedMessage]

    public var areq: InspectedMessage? { messages.first { $0.kind == .aReq } }
    public var ares: InspectedMessage? { messages.first { $0.kind == .aRes } }
    /// `01` app, `02` browser, `03` 3RI (from the AReq), or nil.
    public var deviceChannel: String? { areq?.string(.deviceChannel) }
    /// `deviceChannel` typed.
    public var channel: DeviceChannel? { deviceChannel.map(DeviceChannel.init(wire:)) }
    public var messageCategory: String? { areq?.string(.messageCategory) ?? messages.lazy.compactMap { $0.string(.messageCategory) }.first }
    public var version: String? { messages.lazy.compactMap(\.version).first }
    /// The transaction's result: the RReq's transStatus, else the final CRes's, else the ARes's; or `Erro NNN`.
    public var outcome: String {
        if let r = messages.last(where: { $0.kind == .rReq })?.string(.transStatus) { return r }
        if let c = messages.last(where: { $0.kind == .cRes && $0.string(.transStatus) != nil })?.string(.transStatus) { return c }
        if let e = messages.last(where: { $0.kind == .erro })?.string(.errorCode) { return "Erro \(e)" }
        return ares?.string(.transStatus) ?? "no result"
    }
    /// The sequence of message types, e.g. `AReq ARes CReq CRes CReq CRes RReq RRes`.
    public var shape: [String] { messages.map(\.type) }
    /// The exchanges that carry its messages, in storage order.
    public var exchangeIDs: [Int64] { Array(Set(messages.map(\.exchangeID))).sorted() }

    /// Groups messages (in exchange order) into transactions, in the order each began. Messages that carry no
    /// transaction ID at all become a transaction of their own.
    public static func group(_ messages: [InspectedMessage]) -> [ThreeDSTransaction] {
        var out: [ThreeDSTransaction] = []
        var byServerID: [String: Int] = [:]
        var byACSID: [String: Int] = [:]
        for m in messages {
            let server = m.string(.threeDSServerTransID)
            let acs = m.string(.acsTransID) ?? m.kid
            var index = server.flatMap { byServerID[$0] } ?? acs.flatMap { byACSID[$0] }
            if index == nil {
                out.append(ThreeDSTransaction(key: server ?? acs ?? "exchange \(m.exchangeID)", messages: []))
                index = out.count - 1
            }
            out[index!].messages.append(m)
            if let server { byServerID[server] = index }
            if let acs { byACSID[acs] = index }
        }
        return out
    }

    /// The transactions of a session's exchanges.
    public static func group(_ exchanges: [StoredExchange]) -> [ThreeDSTransaction] {
        group(exchanges.flatMap(InspectedMessage.all))
    }
}
