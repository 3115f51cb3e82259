import TapCore

/// The members of EMV 3DS messages that 3dstape reads or writes by name, other than the transaction IDs (those are
/// `TransactionIDField`), spelled as the specification spells them (SPEC Annex A), once: `message[.eci]` reads one, the
/// message builders write them; `validate`'s element table names its elements through it.
public enum EMVField: String, Sendable, CaseIterable {
    // Every message
    case messageType, messageVersion, messageExtension
    // AReq
    case deviceChannel, messageCategory, threeDSCompInd, threeDSRequestorAuthenticationInd, threeDSRequestorID, threeDSRequestorName,
         threeDSRequestorURL, threeDSServerRefNumber, threeDSServerOperatorID, threeDSServerURL, acquirerBIN, acquirerMerchantID, mcc,
         merchantCountryCode, merchantName, acctNumber, cardExpiryDate, acctType, purchaseAmount, purchaseCurrency, purchaseExponent,
         purchaseDate, transType, threeDSRequestorDecReqInd, threeDSRequestorDecMaxTime
    // AReq, browser
    case notificationURL, browserAcceptHeader, browserUserAgent, browserLanguage, browserIP, browserJavaEnabled, browserColorDepth,
         browserScreenHeight, browserScreenWidth, browserTZ, browserJavascriptEnabled
    // AReq, app
    case sdkAppID, sdkEncData, sdkEphemPubKey, sdkMaxTimeout, sdkReferenceNumber, deviceRenderOptions
    // ARes, RReq
    case acsReferenceNumber, acsOperatorID, dsReferenceNumber, transStatus, transStatusReason, eci, authenticationValue,
         authenticationType, acsChallengeMandated, acsDecConInd, cardholderInfo, acsSignedContent, acsURL, interactionCounter
    // acsRenderingType and its members
    case acsRenderingType, acsInterface, acsUiTemplate
    // CReq
    case challengeWindowSize, challengeCancel, challengeDataEntry, challengeHTMLDataEntry, challengeNoEntry, oobContinue,
         infoContinueIndicator, resendChallenge, sdkCounterStoA, threeDSRequestorAppURL
    // CRes
    case challengeCompletionInd, acsUiType, challengeInfoHeader, psImage, challengeInfoText, challengeInfoLabel, challengeSelectInfo,
         acsHTML, submitAuthenticationLabel, resendInformationLabel, oobContinueLabel, whyInfoLabel, whyInfoText, acsCounterAtoS,
         issuerImage, whitelistingInfoText
    // RRes
    case resultsStatus
    // PRes and its cardRangeData
    case serialNum, dsProtocolVersions, cardRangeData, startRange, endRange, actionInd, acsStartProtocolVersion, acsEndProtocolVersion,
         threeDSMethodURL, acsInfoInd
    // Erro
    case errorCode, errorComponent, errorDescription, errorDetail, errorMessageType
    // threeDSMethodData
    case threeDSMethodNotificationURL
}

/// A member a message must carry, by its specification name: a transaction ID or another field (a required-element
/// check lists them in the order its Erro names the missing ones).
public enum MessageMember: Hashable, Sendable, CustomStringConvertible {
    case id(TransactionIDField)
    case field(EMVField)

    /// The member's name as the specification spells it.
    public var name: String {
        switch self {
        case let .id(f): f.rawValue
        case let .field(f): f.rawValue
        }
    }

    public var description: String { name }
}

extension JSON {
    /// The member `field` of this message (nil when absent or when this is not an object).
    public subscript(field: EMVField) -> JSON? { self[field.rawValue] }
    /// The transaction ID `field` of this message, as the wire had it.
    public subscript(field: TransactionIDField) -> JSON? { self[field.rawValue] }
    /// The member `member` of this message.
    public subscript(member: MessageMember) -> JSON? { self[member.name] }

    /// This message with `field` set to `value` (in its place when present, else appended).
    public func setting(_ field: EMVField, to value: JSON) -> JSON { setting(field.rawValue, to: value) }
    /// This message with the transaction ID `field` set to `value` (in its place when present, else appended).
    public func setting(_ field: TransactionIDField, to value: JSON) -> JSON { setting(field.rawValue, to: value) }
}
