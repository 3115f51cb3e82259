import TapCore

/// The transaction IDs a message carries, as the wire had them (a JSON value, so a copied ID keeps its bytes), written in
/// the order every 3DS message carries them: threeDSServerTransID, dsTransID, acsTransID, sdkTransID.
public struct MessageIDs: Sendable, Equatable {
    public var threeDSServerTransID: JSON?
    public var dsTransID: JSON?
    public var acsTransID: JSON?
    public var sdkTransID: JSON?

    public init(threeDSServerTransID: JSON? = nil, dsTransID: JSON? = nil, acsTransID: JSON? = nil, sdkTransID: JSON? = nil) {
        self.threeDSServerTransID = threeDSServerTransID
        self.dsTransID = dsTransID
        self.acsTransID = acsTransID
        self.sdkTransID = sdkTransID
    }

    /// The IDs among `fields` that `message` has.
    public init(of message: JSON?, _ fields: [TransactionIDField] = TransactionIDField.allCases) {
        for f in fields { self[f] = message?[f.rawValue] }
    }

    public subscript(field: TransactionIDField) -> JSON? {
        get {
            switch field {
            case .threeDSServerTransID: threeDSServerTransID
            case .dsTransID: dsTransID
            case .acsTransID: acsTransID
            case .sdkTransID: sdkTransID
            }
        }
        set {
            switch field {
            case .threeDSServerTransID: threeDSServerTransID = newValue
            case .dsTransID: dsTransID = newValue
            case .acsTransID: acsTransID = newValue
            case .sdkTransID: sdkTransID = newValue
            }
        }
    }

    /// The IDs present, in message order.
    public var members: [(String, JSON)] {
        TransactionIDField.allCases.compactMap { f in self[f].map { (f.rawValue, $0) } }
    }
}

/// Builds JSON objects member by member, leaving out the members that have no value.
struct MessageWriter {
    var members: [(String, JSON)] = []

    init() {}

    /// A message that opens as the ARes, the CRes, the RReq and the RRes do: its IDs, messageType, messageVersion.
    init(ids: MessageIDs, kind: MessageKind, version: JSON) {
        add(ids: ids)
        add(.messageType, kind: kind)
        add(.messageVersion, version)
    }

    mutating func add(_ field: EMVField, _ value: JSON?) { if let value { members.append((field.rawValue, value)) } }
    mutating func add(_ field: EMVField, _ value: String?) { add(field, value.map(JSON.string)) }
    mutating func add(_ field: EMVField, _ value: (some EMVCode)?) { add(field, value?.json) }
    mutating func add(_ field: EMVField, kind: MessageKind) { add(field, .string(kind.rawValue)) }
    mutating func add(_ id: TransactionIDField, _ value: JSON?) { if let value { members.append((id.rawValue, value)) } }
    mutating func add(_ id: TransactionIDField, _ value: String?) { add(id, value.map(JSON.string)) }
    mutating func add(ids: MessageIDs) { members += ids.members }
    var json: JSON { .object(members) }
}

/// The EMV 3DS messages 3dstape writes (the sandbox's DS and ACS, the client's SDK and 3DS Server, the replayer's
/// faults): each builder names its members once, in the order the messages carry them, and leaves out what is nil.
/// A builder writes the members it is made with as it is made (`given`); those a caller sets afterwards are kept as
/// properties and written after them, in their order.
public enum ThreeDSMessage {
    /// An AReq from an app (`app` set) or a browser (`browser` set), as the client sends it.
    public struct AReq: Sendable {
        /// threeDSServerTransID to transType, written as the AReq was made.
        let given: MessageWriter
        public var browser: Browser?
        public var app: App?

        /// The browser members of a browser-based AReq (`browserJavascriptEnabled` is written from 2.2.0 on: nil leaves
        /// it out).
        public struct Browser: Sendable {
            let given: MessageWriter

            public init(notificationURL: String, browserAcceptHeader: String, browserUserAgent: String, browserLanguage: String,
                        browserIP: String, browserJavaEnabled: Bool, browserColorDepth: String, browserScreenHeight: String,
                        browserScreenWidth: String, browserTZ: String, browserJavascriptEnabled: Bool?) {
                var w = MessageWriter()
                w.add(.notificationURL, notificationURL)
                w.add(.browserAcceptHeader, browserAcceptHeader)
                w.add(.browserUserAgent, browserUserAgent)
                w.add(.browserLanguage, browserLanguage)
                w.add(.browserIP, browserIP)
                w.add(.browserJavaEnabled, JSON.bool(browserJavaEnabled))
                w.add(.browserColorDepth, browserColorDepth)
                w.add(.browserScreenHeight, browserScreenHeight)
                w.add(.browserScreenWidth, browserScreenWidth)
                w.add(.browserTZ, browserTZ)
                w.add(.browserJavascriptEnabled, browserJavascriptEnabled.map(JSON.bool))
                given = w
            }
        }

        /// The SDK members of an app-based AReq.
        public struct App: Sendable {
            let given: MessageWriter

            public init(sdkAppID: String, sdkEncData: String, sdkEphemPubKey: JSON, sdkMaxTimeout: String, sdkReferenceNumber: String,
                        sdkTransID: String, deviceRenderOptions: JSON) {
                var w = MessageWriter()
                w.add(.sdkAppID, sdkAppID)
                w.add(.sdkEncData, sdkEncData)
                w.add(.sdkEphemPubKey, sdkEphemPubKey)
                w.add(.sdkMaxTimeout, sdkMaxTimeout)
                w.add(.sdkReferenceNumber, sdkReferenceNumber)
                w.add(.sdkTransID, sdkTransID)
                w.add(.deviceRenderOptions, deviceRenderOptions)
                given = w
            }
        }

        public init(threeDSServerTransID: String, version: MessageVersion, deviceChannel: DeviceChannel, messageCategory: MessageCategory,
                    threeDSCompInd: String, threeDSRequestorAuthenticationInd: String, threeDSRequestorID: String, threeDSRequestorName: String,
                    threeDSRequestorURL: String, threeDSServerRefNumber: String, threeDSServerOperatorID: String, threeDSServerURL: String,
                    acquirerBIN: String, acquirerMerchantID: String, mcc: String, merchantCountryCode: String, merchantName: String,
                    acctNumber: String, cardExpiryDate: String, acctType: String, purchaseAmount: String, purchaseCurrency: String,
                    purchaseExponent: String, purchaseDate: String, transType: String, browser: Browser? = nil, app: App? = nil) {
            var w = MessageWriter()
            w.add(.threeDSServerTransID, threeDSServerTransID)
            w.add(.messageType, kind: .aReq)
            w.add(.messageVersion, version)
            w.add(.deviceChannel, deviceChannel)
            w.add(.messageCategory, messageCategory)
            w.add(.threeDSCompInd, threeDSCompInd)
            w.add(.threeDSRequestorAuthenticationInd, threeDSRequestorAuthenticationInd)
            w.add(.threeDSRequestorID, threeDSRequestorID)
            w.add(.threeDSRequestorName, threeDSRequestorName)
            w.add(.threeDSRequestorURL, threeDSRequestorURL)
            w.add(.threeDSServerRefNumber, threeDSServerRefNumber)
            w.add(.threeDSServerOperatorID, threeDSServerOperatorID)
            w.add(.threeDSServerURL, threeDSServerURL)
            w.add(.acquirerBIN, acquirerBIN)
            w.add(.acquirerMerchantID, acquirerMerchantID)
            w.add(.mcc, mcc)
            w.add(.merchantCountryCode, merchantCountryCode)
            w.add(.merchantName, merchantName)
            w.add(.acctNumber, acctNumber)
            w.add(.cardExpiryDate, cardExpiryDate)
            w.add(.acctType, acctType)
            w.add(.purchaseAmount, purchaseAmount)
            w.add(.purchaseCurrency, purchaseCurrency)
            w.add(.purchaseExponent, purchaseExponent)
            w.add(.purchaseDate, purchaseDate)
            w.add(.transType, transType)
            given = w
            self.browser = browser
            self.app = app
        }

        public var json: JSON {
            var w = given
            if let browser { w.members += browser.given.members }
            if let app { w.members += app.given.members }
            return w.json
        }
    }

    /// An ARes, as a DS relays an ACS's answer.
    public struct ARes: Sendable {
        /// The IDs, messageType, messageVersion and acsReferenceNumber to transStatus, written as the ARes was made.
        let given: MessageWriter
        public var eci: String?
        public var authenticationValue: String?
        public var authenticationType: String?
        public var transStatusReason: String?
        public var acsChallengeMandated: String?
        public var acsDecConInd: String?
        public var cardholderInfo: String?
        public var acsSignedContent: String?
        public var acsRenderingType: JSON?
        public var acsURL: String?

        public init(ids: MessageIDs, version: MessageVersion, acsReferenceNumber: String, acsOperatorID: String, dsReferenceNumber: String,
                    transStatus: TransStatus) {
            var w = MessageWriter(ids: ids, kind: .aRes, version: version.json)
            w.add(.acsReferenceNumber, acsReferenceNumber)
            w.add(.acsOperatorID, acsOperatorID)
            w.add(.dsReferenceNumber, dsReferenceNumber)
            w.add(.transStatus, transStatus)
            given = w
        }

        public var json: JSON {
            var w = given
            w.add(.eci, eci)
            w.add(.authenticationValue, authenticationValue)
            w.add(.authenticationType, authenticationType)
            w.add(.transStatusReason, transStatusReason)
            w.add(.acsChallengeMandated, acsChallengeMandated)
            w.add(.acsDecConInd, acsDecConInd)
            w.add(.cardholderInfo, cardholderInfo)
            w.add(.acsSignedContent, acsSignedContent)
            w.add(.acsRenderingType, acsRenderingType)
            w.add(.acsURL, acsURL)
            return w.json
        }

        /// `acsRenderingType`: the interface (01 native, 02 HTML) and the UI template.
        public static func renderingType(interface: String, template: String) -> JSON {
            .object([(EMVField.acsInterface.rawValue, .string(interface)), (EMVField.acsUiTemplate.rawValue, .string(template))])
        }
    }

    /// What the cardholder's answer adds to a CReq.
    public enum ChallengeEntry: Sendable, Equatable {
        case cancel(String)
        case dataEntry(String)
        case htmlDataEntry(String)
        case noEntry
        /// `oobContinue`: a boolean before 2.3.1, "01" from 2.3.1 on.
        case oobContinue(JSON)
        case infoContinue
        case resend
        /// A member copied from a recorded CReq, as it was (client replay re-sends what the cardholder answered).
        case recorded(name: String, value: JSON)

        public var member: (String, JSON) {
            let (field, value): (EMVField, JSON)
            switch self {
            case let .cancel(c): (field, value) = (.challengeCancel, .string(c))
            case let .dataEntry(s): (field, value) = (.challengeDataEntry, .string(s))
            case let .htmlDataEntry(s): (field, value) = (.challengeHTMLDataEntry, .string(s))
            case .noEntry: (field, value) = (.challengeNoEntry, YesNoIndicator.yes.json)
            case let .oobContinue(v): (field, value) = (.oobContinue, v)
            case .infoContinue: (field, value) = (.infoContinueIndicator, InfoContinueIndicator.continued.json)
            case .resend: (field, value) = (.resendChallenge, YesNoIndicator.yes.json)
            case let .recorded(name, value): return (name, value)
            }
            return (field.rawValue, value)
        }
    }

    /// A CReq: on the app channel with `sdkTransID` (nil is written as null, as an SDK that lost it would), in a browser
    /// with `challengeWindowSize`; then the cardholder's entries.
    public struct CReq: Sendable {
        public var threeDSServerTransID: JSON
        public var acsTransID: JSON
        /// `messageVersion` as it is written: the version given, or (client replay) the recorded AReq's member as it was.
        public var messageVersion: JSON
        public var sdkTransID: JSON?
        public var challengeWindowSize: String?
        public var entries: [ChallengeEntry]

        public init(threeDSServerTransID: JSON, acsTransID: JSON, version: MessageVersion, sdkTransID: JSON? = nil,
                    challengeWindowSize: String? = nil, entries: [ChallengeEntry] = []) {
            self.threeDSServerTransID = threeDSServerTransID
            self.acsTransID = acsTransID
            messageVersion = version.json
            self.sdkTransID = sdkTransID
            self.challengeWindowSize = challengeWindowSize
            self.entries = entries
        }

        public var json: JSON {
            var w = MessageWriter()
            w.add(.threeDSServerTransID, threeDSServerTransID)
            w.add(.acsTransID, acsTransID)
            w.add(.messageType, kind: .cReq)
            w.add(.messageVersion, messageVersion)
            w.add(.sdkTransID, sdkTransID)
            w.add(.challengeWindowSize, challengeWindowSize)
            w.members += entries.map(\.member)
            return w.json
        }
    }

    /// A CRes that shows a challenge screen (challengeCompletionInd N).
    public struct ChallengeCRes: Sendable {
        /// The IDs, messageType, messageVersion, challengeCompletionInd and acsUiType, written as the CRes was made.
        let given: MessageWriter
        public var challengeInfoHeader: String?
        public var psImage: JSON?
        public var challengeInfoText: String?
        public var challengeInfoLabel: String?
        public var challengeSelectInfo: JSON?
        public var acsHTML: String?
        public var submitAuthenticationLabel: String?
        public var resendInformationLabel: String?
        public var oobContinueLabel: String?
        public var whyInfoLabel: String?
        public var whyInfoText: String?

        public init(ids: MessageIDs, version: MessageVersion, acsUiType: ACSUIType) {
            var w = MessageWriter(ids: ids, kind: .cRes, version: version.json)
            w.add(.challengeCompletionInd, YesNoIndicator.no)
            w.add(.acsUiType, acsUiType)
            given = w
        }

        public var json: JSON {
            var w = given
            w.add(.challengeInfoHeader, challengeInfoHeader)
            w.add(.psImage, psImage)
            w.add(.challengeInfoText, challengeInfoText)
            w.add(.challengeInfoLabel, challengeInfoLabel)
            w.add(.challengeSelectInfo, challengeSelectInfo)
            w.add(.acsHTML, acsHTML)
            w.add(.submitAuthenticationLabel, submitAuthenticationLabel)
            w.add(.resendInformationLabel, resendInformationLabel)
            w.add(.oobContinueLabel, oobContinueLabel)
            w.add(.whyInfoLabel, whyInfoLabel)
            w.add(.whyInfoText, whyInfoText)
            return w.json
        }
    }

    /// The final CRes (challengeCompletionInd Y) with the challenge's outcome.
    public static func finalCRes(ids: MessageIDs, version: MessageVersion, transStatus: TransStatus) -> JSON {
        var w = MessageWriter()
        w.add(ids: ids)
        w.add(.challengeCompletionInd, YesNoIndicator.yes)
        w.add(.messageType, kind: .cRes)
        w.add(.messageVersion, version)
        w.add(.transStatus, transStatus)
        return w.json
    }

    /// An RReq, as the ACS sends the outcome of a challenge or of decoupled authentication to the 3DS Server.
    public struct RReq: Sendable {
        /// The IDs, messageType, messageVersion and messageCategory to interactionCounter, written as the RReq was made.
        let given: MessageWriter
        public var authenticationValue: String?
        public var transStatusReason: String?
        public var challengeCancel: String?
        public var acsRenderingType: JSON?

        public init(ids: MessageIDs, version: MessageVersion, messageCategory: MessageCategory, transStatus: TransStatus, eci: String,
                    authenticationType: String, interactionCounter: String) {
            var w = MessageWriter(ids: ids, kind: .rReq, version: version.json)
            w.add(.messageCategory, messageCategory)
            w.add(.transStatus, transStatus)
            w.add(.eci, eci)
            w.add(.authenticationType, authenticationType)
            w.add(.interactionCounter, interactionCounter)
            given = w
        }

        public var json: JSON {
            var w = given
            w.add(.authenticationValue, authenticationValue)
            w.add(.transStatusReason, transStatusReason)
            w.add(.challengeCancel, challengeCancel)
            w.add(.acsRenderingType, acsRenderingType)
            return w.json
        }
    }

    /// The RRes a 3DS Server answers an RReq with: the RReq's IDs (null where it lacked one; sdkTransID only when it had
    /// one) and version, and `resultsStatus`.
    public static func rRes(answering rreq: JSON, resultsStatus: String) -> JSON {
        var ids = MessageIDs(of: rreq)
        for f in [TransactionIDField.threeDSServerTransID, .dsTransID, .acsTransID] where ids[f] == nil { ids[f] = .null }
        return rRes(ids: ids, version: rreq[.messageVersion] ?? .null, resultsStatus: resultsStatus)
    }

    /// An RRes with the IDs and version given, leaving out those that are nil (client replay's listener copies only what
    /// the RReq carried).
    public static func rRes(ids: MessageIDs, version: JSON?, resultsStatus: String) -> JSON {
        var w = MessageWriter()
        w.add(ids: ids)
        w.add(.messageType, kind: .rRes)
        w.add(.messageVersion, version)
        w.add(.resultsStatus, resultsStatus)
        return w.json
    }

    /// A PRes listing the DS's versions and its card ranges.
    public static func pRes(threeDSServerTransID: JSON, dsTransID: String, version: JSON, serialNum: String,
                            dsProtocolVersions: [MessageVersion], cardRangeData: [CardRange]) -> JSON {
        var w = MessageWriter()
        w.add(.threeDSServerTransID, threeDSServerTransID)
        w.add(.dsTransID, dsTransID)
        w.add(.messageType, kind: .pRes)
        w.add(.messageVersion, version)
        w.add(.serialNum, serialNum)
        w.add(.dsProtocolVersions, JSON.array(dsProtocolVersions.map(\.json)))
        w.add(.cardRangeData, JSON.array(cardRangeData.map(\.json)))
        return w.json
    }

    /// One entry of a PRes's `cardRangeData`.
    public struct CardRange: Sendable {
        public let json: JSON

        public init(startRange: String, endRange: String, actionInd: String, acsStartProtocolVersion: MessageVersion,
                    acsEndProtocolVersion: MessageVersion, threeDSMethodURL: String?, acsInfoInd: [String]) {
            var w = MessageWriter()
            w.add(.startRange, startRange)
            w.add(.endRange, endRange)
            w.add(.actionInd, actionInd)
            w.add(.acsStartProtocolVersion, acsStartProtocolVersion)
            w.add(.acsEndProtocolVersion, acsEndProtocolVersion)
            w.add(.threeDSMethodURL, threeDSMethodURL)
            w.add(.acsInfoInd, JSON.array(acsInfoInd.map(JSON.string)))
            json = w.json
        }
    }
}

/// Erro messages (SPEC B.12): the IDs known from the message it is about, the code, component and texts.
public enum Erro {
    public static func make(code: String, component: String, description: String, detail: String, about message: JSON?,
                            messageType: String?, version: String?) -> JSON {
        var w = MessageWriter()
        w.add(ids: MessageIDs(of: message).onlyStrings)
        w.add(.errorCode, code)
        w.add(.errorComponent, component)
        w.add(.errorDescription, description)
        w.add(.errorDetail, String(detail.prefix(2048)))
        w.add(.errorMessageType, messageType)
        w.add(.messageType, kind: .erro)
        w.add(.messageVersion, version ?? MessageVersion.v2_2.wire)
        return w.json
    }

    public static func make(_ code: EMVErrorCode, component: String, description: String, detail: String, about message: JSON?,
                            messageType: String?, version: String?) -> JSON {
        make(code: code.rawValue, component: component, description: description, detail: detail, about: message,
             messageType: messageType, version: version)
    }
}

extension MessageIDs {
    /// Only the IDs that are JSON strings (an Erro names no ID it could not read).
    var onlyStrings: MessageIDs {
        var out = MessageIDs()
        for f in TransactionIDField.allCases { out[f] = self[f]?.stringValue.map(JSON.string) }
        return out
    }
}
