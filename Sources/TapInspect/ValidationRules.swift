import TapEMV

/// The element rules of `3dstape validate`, one line per element as the specification's Table A.1 lists it:
/// which messages carry it, when it is required, its format, and from which version it exists.
/// Sources: EMV 3DS Protocol and Core Functions Specification 2.3.1 (Tables A.1–A.4, B.3–B.12), the 2.1.0→2.2.0
/// differences as published by Clearhaus, and the seeds' lists (Cake3DS2's AReq parameters, device channels,
/// UI types 01–07, error codes 101–405).
public enum ValidationRules {
    public typealias Format = ElementRule.Format
    /// Every element rule. Rule ids are `<message>.<element>`; a finding adds `.required`, `.format`, `.version`
    /// or (a UUID of another version or variant than RFC 4122's, a warning) `.rfc4122`.
    public static let elements: [ElementRule] = common + areq + ares + creq + cres + rreq + rres + erro + preq + pres
    /// `elements` by the message they apply to, each list in the table's order.
    static let byKind: [MessageKind: [ElementRule]] = Dictionary(grouping: elements, by: \.message)

    static let versions = MessageVersion.known.map(\.wire)
    static let uuid = Format.uuid

    /// Elements that every message carries.
    static let common: [ElementRule] = [MessageKind.aReq, .aRes, .cReq, .cRes, .rReq, .rRes, .erro, .pReq, .pRes].flatMap { m in
        [ElementRule(m, .messageType, .required, .values([m.rawValue])),
         ElementRule(m, .messageVersion, .required, .values(Set(versions)))]
    }

    static let areq: [ElementRule] = [
        ElementRule(.aReq, .threeDSServerTransID, .required, uuid),
        ElementRule(.aReq, .deviceChannel, .required, .values(["01", "02", "03"])),
        ElementRule(.aReq, .messageCategory, .required, .values(["01", "02"])),
        ElementRule(.aReq, .threeDSRequestorID, .required, .text(max: 35)),
        ElementRule(.aReq, .threeDSRequestorName, .required, .text(max: 40)),
        ElementRule(.aReq, .threeDSRequestorURL, .required, .url),
        ElementRule(.aReq, .threeDSServerRefNumber, .required, .text(max: 32)),
        ElementRule(.aReq, .threeDSServerOperatorID, .optional, .text(max: 32)),
        ElementRule(.aReq, .threeDSServerURL, .when(.channel([.app, .browser])), .url),
        ElementRule(.aReq, .threeDSRequestorAuthenticationInd, .when(.channel([.app, .browser])), .numeric(2...2)),
        ElementRule(.aReq, .threeDSCompInd, .when(.channel([.browser])), .values(["Y", "N", "U"])),
        ElementRule(.aReq, .acquirerBIN, .when(.category([.payment])), .text(max: 11)),
        ElementRule(.aReq, .acquirerMerchantID, .when(.category([.payment])), .text(max: 35)),
        ElementRule(.aReq, .mcc, .when(.category([.payment])), .numeric(4...4)),
        ElementRule(.aReq, .merchantCountryCode, .when(.category([.payment])), .numeric(3...3)),
        ElementRule(.aReq, .merchantName, .when(.category([.payment])), .text(max: 40)),
        ElementRule(.aReq, .acctNumber, .required, .cardNumber),
        ElementRule(.aReq, .acctType, .optional, .values(["01", "02", "03"])),
        ElementRule(.aReq, .cardExpiryDate, .optional, .yearMonth),
        ElementRule(.aReq, .purchaseAmount, .when(.category([.payment])), .numeric(1...48)),
        ElementRule(.aReq, .purchaseCurrency, .when(.category([.payment])), .numeric(3...3)),
        ElementRule(.aReq, .purchaseExponent, .when(.category([.payment])), .numeric(1...1)),
        ElementRule(.aReq, .purchaseDate, .when(.category([.payment])), .dateTime),
        ElementRule(.aReq, .transType, .optional, .values(["01", "03", "10", "11", "28"])),
        ElementRule(.aReq, .sdkAppID, .when(.channel([.app])), uuid),
        ElementRule(.aReq, .sdkEncData, .when(.channel([.app])), .jose(parts: 5)),
        ElementRule(.aReq, .sdkEphemPubKey, .when(.channel([.app])), .ecPublicJWK),
        ElementRule(.aReq, .sdkMaxTimeout, .when(.channel([.app])), .numeric(2...2, atLeast: 5)),
        ElementRule(.aReq, .sdkReferenceNumber, .when(.channel([.app])), .text(max: 32)),
        ElementRule(.aReq, .sdkTransID, .when(.channel([.app])), uuid),
        ElementRule(.aReq, .deviceRenderOptions, .when(.channel([.app])), .object),
        ElementRule(.aReq, .notificationURL, .when(.channel([.browser])), .url),
        ElementRule(.aReq, .browserAcceptHeader, .when(.channel([.browser])), .text(max: 2048)),
        ElementRule(.aReq, .browserLanguage, .when(.channel([.browser])), .text(max: 8)),
        ElementRule(.aReq, .browserUserAgent, .when(.channel([.browser])), .text(max: 2048)),
        ElementRule(.aReq, .browserJavascriptEnabled, .when(.channel([.browser])), .boolean, since: .v2_2),
        ElementRule(.aReq, .browserJavaEnabled, .when(.all([.channel([.browser]), .browserJavaScript])), .boolean),
        ElementRule(.aReq, .browserColorDepth, .when(.all([.channel([.browser]), .browserJavaScript])),
                    .values(["1", "4", "8", "15", "16", "24", "32", "48"])),
        ElementRule(.aReq, .browserScreenHeight, .when(.all([.channel([.browser]), .browserJavaScript])), .numeric(1...6)),
        ElementRule(.aReq, .browserScreenWidth, .when(.all([.channel([.browser]), .browserJavaScript])), .numeric(1...6)),
        ElementRule(.aReq, .browserTZ, .when(.all([.channel([.browser]), .browserJavaScript])), .signedNumeric(1...5)),
        ElementRule(.aReq, .threeDSRequestorDecReqInd, .optional, .values(["Y", "N"]), since: .v2_2),
        ElementRule(.aReq, .threeDSRequestorDecMaxTime, .optional, .numeric(5...5), since: .v2_2),
    ]

    static let transStatusARes: Format = .values(["Y", "N", "U", "A", "C", "R"], added: ["2.2.0": ["D", "I"], "2.3.1": ["S"]])
    static let transStatusReason: Format = .values(Set((1...21).map { String(format2: $0) }),
                                                   added: ["2.2.0": (22...26).map { String(format2: $0) },
                                                           "2.3.1": (27...30).map { String(format2: $0) }])
    static let eci: Format = .numeric(2...2)

    static let ares: [ElementRule] = [
        ElementRule(.aRes, .threeDSServerTransID, .required, uuid),
        ElementRule(.aRes, .dsTransID, .required, uuid),
        ElementRule(.aRes, .acsTransID, .required, uuid),
        ElementRule(.aRes, .sdkTransID, .when(.channel([.app])), uuid),
        ElementRule(.aRes, .acsReferenceNumber, .required, .text(max: 32)),
        ElementRule(.aRes, .acsOperatorID, .optional, .text(max: 32)),
        ElementRule(.aRes, .dsReferenceNumber, .required, .text(max: 32)),
        ElementRule(.aRes, .transStatus, .required, transStatusARes),
        ElementRule(.aRes, .transStatusReason, .when(.field(.transStatus, ["N", "U", "R"])), transStatusReason),
        ElementRule(.aRes, .eci, .when(.all([.field(.transStatus, ["Y", "A"]), .category([.payment])])), eci),
        ElementRule(.aRes, .authenticationValue, .when(.field(.transStatus, ["Y", "A"])), .base64(length: 28)),
        ElementRule(.aRes, .authenticationType, .optional, .values(["01", "02", "03"], added: ["2.2.0": ["04"], "2.3.1": ["05", "06", "07", "08", "09"]])),
        ElementRule(.aRes, .acsChallengeMandated, .when(.field(.transStatus, ["C", "D"])), .values(["Y", "N"])),
        ElementRule(.aRes, .acsURL, .when(.all([.field(.transStatus, ["C"]), .channel([.browser])])), .url),
        ElementRule(.aRes, .acsSignedContent, .when(.all([.field(.transStatus, ["C"]), .channel([.app])])), .jose(parts: 3)),
        ElementRule(.aRes, .acsRenderingType, .when(.all([.field(.transStatus, ["C"]), .channel([.app])])), .renderingType),
        ElementRule(.aRes, .acsDecConInd, .when(.field(.transStatus, ["D"])), .values(["Y", "N"]), since: .v2_2),
        ElementRule(.aRes, .cardholderInfo, .optional, .text(max: 128)),
    ]

    static let uiType: Format = .values(["01", "02", "03", "04", "05"], added: ["2.3.1": ["06", "07"]])
    static let challengeCancel: Format = .values(["01", "04", "05", "06", "07", "08"], added: ["2.2.0": ["03"], "2.3.1": ["09", "10"]])

    static let creq: [ElementRule] = [
        ElementRule(.cReq, .threeDSServerTransID, .required, uuid),
        ElementRule(.cReq, .acsTransID, .required, uuid),
        ElementRule(.cReq, .sdkTransID, .when(.channel([.app])), uuid),
        ElementRule(.cReq, .sdkCounterStoA, .when(.channel([.app])), .counter),
        ElementRule(.cReq, .challengeWindowSize, .when(.channel([.browser])), .values(["01", "02", "03", "04", "05"])),
        ElementRule(.cReq, .challengeCancel, .optional, challengeCancel),
        ElementRule(.cReq, .challengeDataEntry, .optional, .text(max: 45)),
        ElementRule(.cReq, .challengeHTMLDataEntry, .optional, .text(max: 256)),
        ElementRule(.cReq, .challengeNoEntry, .optional, .values(["Y"])),
        ElementRule(.cReq, .resendChallenge, .optional, .values(["Y", "N"])),
        ElementRule(.cReq, .threeDSRequestorAppURL, .optional, .url, since: .v2_2),
    ]

    static let cres: [ElementRule] = [
        ElementRule(.cRes, .threeDSServerTransID, .required, uuid),
        ElementRule(.cRes, .acsTransID, .required, uuid),
        ElementRule(.cRes, .sdkTransID, .when(.channel([.app])), uuid),
        ElementRule(.cRes, .acsCounterAtoS, .when(.channel([.app])), .counter),
        // Both channels (Table A.1): a browser's final CRes without it is as wrong as an app's.
        ElementRule(.cRes, .challengeCompletionInd, .required, .values(["Y", "N"])),
        ElementRule(.cRes, .transStatus, .when(.any([.field(.challengeCompletionInd, ["Y"]), .channel([.browser])])), .values(["Y", "N"], added: ["2.3.1": ["D"]])),
        ElementRule(.cRes, .acsUiType, .when(.all([.field(.challengeCompletionInd, ["N"]), .channel([.app])])), uiType),
        ElementRule(.cRes, .submitAuthenticationLabel, .when(.field(.acsUiType, ["01", "02", "03"])), .text(max: 45)),
        ElementRule(.cRes, .challengeSelectInfo, .when(.field(.acsUiType, ["02", "03"])), .array),
        ElementRule(.cRes, .acsHTML, .when(.field(.acsUiType, ["05", "06"])), .text(max: 100_000)),
        ElementRule(.cRes, .oobContinueLabel, .when(.field(.acsUiType, ["04"])), .text(max: 45)),
        ElementRule(.cRes, .challengeInfoText, .when(.field(.acsUiType, ["01", "02", "03", "04"])), .text(max: 350)),
        ElementRule(.cRes, .challengeInfoLabel, .optional, .text(max: 45)),
        ElementRule(.cRes, .challengeInfoHeader, .optional, .text(max: 45)),
        ElementRule(.cRes, .resendInformationLabel, .optional, .text(max: 45)),
        ElementRule(.cRes, .whyInfoLabel, .optional, .text(max: 45)),
        ElementRule(.cRes, .whyInfoText, .optional, .text(max: 256)),
        ElementRule(.cRes, .psImage, .optional, .object),
        ElementRule(.cRes, .issuerImage, .optional, .object),
        ElementRule(.cRes, .whitelistingInfoText, .optional, .text(max: 64), since: .v2_2),
    ]

    static let rreq: [ElementRule] = [
        ElementRule(.rReq, .threeDSServerTransID, .required, uuid),
        ElementRule(.rReq, .dsTransID, .required, uuid),
        ElementRule(.rReq, .acsTransID, .required, uuid),
        ElementRule(.rReq, .sdkTransID, .when(.channel([.app])), uuid, since: .v2_2),
        ElementRule(.rReq, .messageCategory, .required, .values(["01", "02"])),
        ElementRule(.rReq, .transStatus, .required, .values(["Y", "N", "U", "A", "R"])),
        ElementRule(.rReq, .transStatusReason, .when(.field(.transStatus, ["N", "U", "R"])), transStatusReason),
        ElementRule(.rReq, .eci, .when(.all([.field(.transStatus, ["Y", "A"]), .category([.payment])])), eci),
        ElementRule(.rReq, .authenticationValue, .when(.field(.transStatus, ["Y", "A"])), .base64(length: 28)),
        ElementRule(.rReq, .authenticationType, .optional, .values(["01", "02", "03"], added: ["2.2.0": ["04"], "2.3.1": ["05", "06", "07", "08", "09"]])),
        ElementRule(.rReq, .interactionCounter, .required, .numeric(2...2)),
        ElementRule(.rReq, .challengeCancel, .optional, challengeCancel),
        ElementRule(.rReq, .acsRenderingType, .optional, .renderingType, since: .v2_2),
    ]

    static let rres: [ElementRule] = [
        ElementRule(.rRes, .threeDSServerTransID, .required, uuid),
        ElementRule(.rRes, .dsTransID, .required, uuid),
        ElementRule(.rRes, .acsTransID, .required, uuid),
        ElementRule(.rRes, .sdkTransID, .when(.channel([.app])), uuid, since: .v2_2),
        ElementRule(.rRes, .resultsStatus, .required, .values(["01", "02", "03"], added: ["2.3.1": ["04"]])),
    ]

    /// Error codes of Table A.4 (the Cake3DS2 guide's 101–402 among them), by the version that defines them.
    static let errorCode: Format = .values(["101", "102", "103", "201", "202", "203", "204", "301", "302", "303", "304", "305", "306", "307",
                                            "402", "403", "404", "405"],
                                           added: ["2.2.0": ["205", "206"], "2.3.1": ["207", "308", "309", "310", "311", "312", "313", "314", "315"]])

    static let erro: [ElementRule] = [
        ElementRule(.erro, .threeDSServerTransID, .optional, uuid),
        ElementRule(.erro, .dsTransID, .optional, uuid),
        ElementRule(.erro, .acsTransID, .optional, uuid),
        ElementRule(.erro, .sdkTransID, .optional, uuid),
        ElementRule(.erro, .errorCode, .required, errorCode),
        ElementRule(.erro, .errorComponent, .required, .values(["C", "S", "D", "A"])),
        ElementRule(.erro, .errorDescription, .required, .text(max: 2048)),
        ElementRule(.erro, .errorDetail, .required, .text(max: 2048)),
        ElementRule(.erro, .errorMessageType, .optional, .values(["AReq", "ARes", "CReq", "CRes", "PReq", "PRes", "RReq", "RRes"])),
    ]

    static let preq: [ElementRule] = [
        ElementRule(.pReq, .threeDSServerTransID, .required, uuid),
        ElementRule(.pReq, .threeDSServerRefNumber, .required, .text(max: 32)),
        ElementRule(.pReq, .serialNum, .optional, .text(max: 20)),
    ]

    static let pres: [ElementRule] = [
        ElementRule(.pRes, .threeDSServerTransID, .required, uuid),
        ElementRule(.pRes, .dsTransID, .required, uuid),
        ElementRule(.pRes, .serialNum, .required, .text(max: 20)),
        ElementRule(.pRes, .cardRangeData, .optional, .array),
    ]

    /// The only elements a final CRes (challengeCompletionInd Y) may carry (SPEC Table B.5; Stripe's SDK answers others with Erro 101).
    public static let finalCResElements: Set<String> = Set(
        [TransactionIDField.threeDSServerTransID, .acsTransID, .sdkTransID].map(\.rawValue)
            + [EMVField.acsCounterAtoS, .challengeCompletionInd, .messageExtension, .messageType, .messageVersion, .transStatus,
               .transStatusReason].map(\.rawValue))
}

extension String {
    /// A two-digit code: 1 → "01".
    init(format2 n: Int) { self = n < 10 ? "0\(n)" : String(n) }
}
