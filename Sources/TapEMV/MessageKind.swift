import TapCore

/// The EMV 3DS message types, with the UL test platform's proprietary wrappers mapped to them.
public enum MessageKind: String, Sendable, CaseIterable {
    case aReq = "AReq", aRes = "ARes", cReq = "CReq", cRes = "CRes", pReq = "PReq", pRes = "PRes"
    case rReq = "RReq", rRes = "RRes", erro = "Erro"

    /// Reads `messageType`, accepting the UL harness names (pArq, pArs, pGcq, pGcs, pPrq, pPrs).
    public init?(messageType: String) {
        switch messageType {
        case "pArq": self = .aReq
        case "pArs": self = .aRes
        case "pGcq": self = .cReq
        case "pGcs": self = .cRes
        case "pPrq": self = .pReq
        case "pPrs": self = .pRes
        default:
            guard let k = MessageKind(rawValue: messageType) else { return nil }
            self = k
        }
    }
}

/// The identifying fields of any EMV 3DS message, as stored and shown.
public struct MessageSummary: Sendable, Equatable, HasMessageFields {
    public var kind: MessageKind?
    /// messageType, messageVersion, the IDs, transStatus and errorCode, read as the summary's own (`summary.transStatus`).
    public var fields: MessageFields

    /// Reads the summary from a JSON object; nil when it carries no `messageType`.
    public init?(_ json: JSON) {
        fields = MessageFields(json)
        guard let type = fields.messageType else { return nil }
        kind = MessageKind(messageType: type)
    }

    /// One line for a terminal: `CRes 2.2.0 transStatus=Y acsTransID=…`.
    public var line: String {
        var parts = [fields.messageType ?? "?", fields.messageVersion ?? "?"]
        if let transStatus = fields.transStatus { parts.append("transStatus=\(transStatus)") }
        if let errorCode = fields.errorCode { parts.append("errorCode=\(errorCode)") }
        if let acsTransID = fields.acsTransID { parts.append("acsTransID=\(acsTransID)") }
        return parts.joined(separator: " ")
    }
}

/// EMV 3DS protocol error codes (emv3ds.md §4, SPEC Table A.4) that 3dstape produces or checks.
public enum EMVErrorCode: String, Sendable {
    case messageInvalid = "101"
    case versionNotSupported = "102"
    case requiredElementMissing = "201"
    case criticalExtensionNotRecognised = "202"
    case formatInvalid = "203"
    case duplicateElement = "204"
    case transactionIDNotRecognised = "301"
    case decryptionFailure = "302"
    case accessDenied = "303"
    case transactionDataInvalid = "305"
    case timedOut = "402"
    case transientFailure = "403"
    case permanentFailure = "404"
    case connectionFailure = "405"
}

extension MessageSummary {
    /// A summary of `messageType` alone; the recorder's body scan fills in the rest.
    init(messageType type: String) {
        fields = MessageFields()
        fields.messageType = type
        kind = MessageKind(messageType: type)
    }
}
