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

    static let versions = ["2.1.0", "2.2.0", "2.3.1"]
    static let uuid = Format.uuid

    /// Elements that every message carries.
    static let common: [ElementRule] = ["AReq", "ARes", "CReq", "CRes", "RReq", "RRes", "Erro", "PReq", "PRes"].flatMap { m in
        [ElementRule(m, "messageType", .required, .values([m])),
         ElementRule(m, "messageVersion", .required, .values(Set(versions)))]
    }

    static let areq: [ElementRule] = [
        ElementRule("AReq", "threeDSServerTransID", .required, uuid),
        ElementRule("AReq", "deviceChannel", .required, .values(["01", "02", "03"])),
        ElementRule("AReq", "messageCategory", .required, .values(["01", "02"])),
        ElementRule("AReq", "threeDSRequestorID", .required, .text(max: 35)),
        ElementRule("AReq", "threeDSRequestorName", .required, .text(max: 40)),
        ElementRule("AReq", "threeDSRequestorURL", .required, .url),
        ElementRule("AReq", "threeDSServerRefNumber", .required, .text(max: 32)),
        ElementRule("AReq", "threeDSServerOperatorID", .optional, .text(max: 32)),
        ElementRule("AReq", "threeDSServerURL", .when(.channel(["01", "02"])), .url),
        ElementRule("AReq", "threeDSRequestorAuthenticationInd", .when(.channel(["01", "02"])), .numeric(2...2)),
        ElementRule("AReq", "threeDSCompInd", .when(.channel(["02"])), .values(["Y", "N", "U"])),
        ElementRule("AReq", "acquirerBIN", .when(.category(["01"])), .text(max: 11)),
        ElementRule("AReq", "acquirerMerchantID", .when(.category(["01"])), .text(max: 35)),
        ElementRule("AReq", "mcc", .when(.category(["01"])), .numeric(4...4)),
        ElementRule("AReq", "merchantCountryCode", .when(.category(["01"])), .numeric(3...3)),
        ElementRule("AReq", "merchantName", .when(.category(["01"])), .text(max: 40)),
        ElementRule("AReq", "acctNumber", .required, .cardNumber),
        ElementRule("AReq", "acctType", .optional, .values(["01", "02", "03"])),
        ElementRule("AReq", "cardExpiryDate", .optional, .yearMonth),
        ElementRule("AReq", "purchaseAmount", .when(.category(["01"])), .numeric(1...48)),
        ElementRule("AReq", "purchaseCurrency", .when(.category(["01"])), .numeric(3...3)),
        ElementRule("AReq", "purchaseExponent", .when(.category(["01"])), .numeric(1...1)),
        ElementRule("AReq", "purchaseDate", .when(.category(["01"])), .dateTime),
        ElementRule("AReq", "transType", .optional, .values(["01", "03", "10", "11", "28"])),
        ElementRule("AReq", "sdkAppID", .when(.channel(["01"])), uuid),
        ElementRule("AReq", "sdkEncData", .when(.channel(["01"])), .jose(parts: 5)),
        ElementRule("AReq", "sdkEphemPubKey", .when(.channel(["01"])), .ecPublicJWK),
        ElementRule("AReq", "sdkMaxTimeout", .when(.channel(["01"])), .numeric(2...2, atLeast: 5)),
        ElementRule("AReq", "sdkReferenceNumber", .when(.channel(["01"])), .text(max: 32)),
        ElementRule("AReq", "sdkTransID", .when(.channel(["01"])), uuid),
        ElementRule("AReq", "deviceRenderOptions", .when(.channel(["01"])), .object),
        ElementRule("AReq", "notificationURL", .when(.channel(["02"])), .url),
        ElementRule("AReq", "browserAcceptHeader", .when(.channel(["02"])), .text(max: 2048)),
        ElementRule("AReq", "browserLanguage", .when(.channel(["02"])), .text(max: 8)),
        ElementRule("AReq", "browserUserAgent", .when(.channel(["02"])), .text(max: 2048)),
        ElementRule("AReq", "browserJavascriptEnabled", .when(.channel(["02"])), .boolean, since: "2.2.0"),
        ElementRule("AReq", "browserJavaEnabled", .when(.all([.channel(["02"]), .browserJavaScript])), .boolean),
        ElementRule("AReq", "browserColorDepth", .when(.all([.channel(["02"]), .browserJavaScript])),
                    .values(["1", "4", "8", "15", "16", "24", "32", "48"])),
        ElementRule("AReq", "browserScreenHeight", .when(.all([.channel(["02"]), .browserJavaScript])), .numeric(1...6)),
        ElementRule("AReq", "browserScreenWidth", .when(.all([.channel(["02"]), .browserJavaScript])), .numeric(1...6)),
        ElementRule("AReq", "browserTZ", .when(.all([.channel(["02"]), .browserJavaScript])), .signedNumeric(1...5)),
        ElementRule("AReq", "threeDSRequestorDecReqInd", .optional, .values(["Y", "N"]), since: "2.2.0"),
        ElementRule("AReq", "threeDSRequestorDecMaxTime", .optional, .numeric(5...5), since: "2.2.0"),
    ]

    static let transStatusARes: Format = .values(["Y", "N", "U", "A", "C", "R"], added: ["2.2.0": ["D", "I"], "2.3.1": ["S"]])
    static let transStatusReason: Format = .values(Set((1...21).map { String(format2: $0) }),
                                                   added: ["2.2.0": (22...26).map { String(format2: $0) },
                                                           "2.3.1": (27...30).map { String(format2: $0) }])
    static let eci: Format = .numeric(2...2)

    static let ares: [ElementRule] = [
        ElementRule("ARes", "threeDSServerTransID", .required, uuid),
        ElementRule("ARes", "dsTransID", .required, uuid),
        ElementRule("ARes", "acsTransID", .required, uuid),
        ElementRule("ARes", "sdkTransID", .when(.channel(["01"])), uuid),
        ElementRule("ARes", "acsReferenceNumber", .required, .text(max: 32)),
        ElementRule("ARes", "acsOperatorID", .optional, .text(max: 32)),
        ElementRule("ARes", "dsReferenceNumber", .required, .text(max: 32)),
        ElementRule("ARes", "transStatus", .required, transStatusARes),
        ElementRule("ARes", "transStatusReason", .when(.field("transStatus", ["N", "U", "R"])), transStatusReason),
        ElementRule("ARes", "eci", .when(.all([.field("transStatus", ["Y", "A"]), .category(["01"])])), eci),
        ElementRule("ARes", "authenticationValue", .when(.field("transStatus", ["Y", "A"])), .base64(length: 28)),
        ElementRule("ARes", "authenticationType", .optional, .values(["01", "02", "03"], added: ["2.2.0": ["04"], "2.3.1": ["05", "06", "07", "08", "09"]])),
        ElementRule("ARes", "acsChallengeMandated", .when(.field("transStatus", ["C", "D"])), .values(["Y", "N"])),
        ElementRule("ARes", "acsURL", .when(.all([.field("transStatus", ["C"]), .channel(["02"])])), .url),
        ElementRule("ARes", "acsSignedContent", .when(.all([.field("transStatus", ["C"]), .channel(["01"])])), .jose(parts: 3)),
        ElementRule("ARes", "acsRenderingType", .when(.all([.field("transStatus", ["C"]), .channel(["01"])])), .renderingType),
        ElementRule("ARes", "acsDecConInd", .when(.field("transStatus", ["D"])), .values(["Y", "N"]), since: "2.2.0"),
        ElementRule("ARes", "cardholderInfo", .optional, .text(max: 128)),
    ]

    static let uiType: Format = .values(["01", "02", "03", "04", "05"], added: ["2.3.1": ["06", "07"]])
    static let challengeCancel: Format = .values(["01", "04", "05", "06", "07", "08"], added: ["2.2.0": ["03"], "2.3.1": ["09", "10"]])

    static let creq: [ElementRule] = [
        ElementRule("CReq", "threeDSServerTransID", .required, uuid),
        ElementRule("CReq", "acsTransID", .required, uuid),
        ElementRule("CReq", "sdkTransID", .when(.channel(["01"])), uuid),
        ElementRule("CReq", "sdkCounterStoA", .when(.channel(["01"])), .counter),
        ElementRule("CReq", "challengeWindowSize", .when(.channel(["02"])), .values(["01", "02", "03", "04", "05"])),
        ElementRule("CReq", "challengeCancel", .optional, challengeCancel),
        ElementRule("CReq", "challengeDataEntry", .optional, .text(max: 45)),
        ElementRule("CReq", "challengeHTMLDataEntry", .optional, .text(max: 256)),
        ElementRule("CReq", "challengeNoEntry", .optional, .values(["Y"])),
        ElementRule("CReq", "resendChallenge", .optional, .values(["Y", "N"])),
        ElementRule("CReq", "threeDSRequestorAppURL", .optional, .url, since: "2.2.0"),
    ]

    static let cres: [ElementRule] = [
        ElementRule("CRes", "threeDSServerTransID", .required, uuid),
        ElementRule("CRes", "acsTransID", .required, uuid),
        ElementRule("CRes", "sdkTransID", .when(.channel(["01"])), uuid),
        ElementRule("CRes", "acsCounterAtoS", .when(.channel(["01"])), .counter),
        // Both channels (Table A.1): a browser's final CRes without it is as wrong as an app's.
        ElementRule("CRes", "challengeCompletionInd", .required, .values(["Y", "N"])),
        ElementRule("CRes", "transStatus", .when(.any([.field("challengeCompletionInd", ["Y"]), .channel(["02"])])), .values(["Y", "N"], added: ["2.3.1": ["D"]])),
        ElementRule("CRes", "acsUiType", .when(.all([.field("challengeCompletionInd", ["N"]), .channel(["01"])])), uiType),
        ElementRule("CRes", "submitAuthenticationLabel", .when(.field("acsUiType", ["01", "02", "03"])), .text(max: 45)),
        ElementRule("CRes", "challengeSelectInfo", .when(.field("acsUiType", ["02", "03"])), .array),
        ElementRule("CRes", "acsHTML", .when(.field("acsUiType", ["05", "06"])), .text(max: 100_000)),
        ElementRule("CRes", "oobContinueLabel", .when(.field("acsUiType", ["04"])), .text(max: 45)),
        ElementRule("CRes", "challengeInfoText", .when(.field("acsUiType", ["01", "02", "03", "04"])), .text(max: 350)),
        ElementRule("CRes", "challengeInfoLabel", .optional, .text(max: 45)),
        ElementRule("CRes", "challengeInfoHeader", .optional, .text(max: 45)),
        ElementRule("CRes", "resendInformationLabel", .optional, .text(max: 45)),
        ElementRule("CRes", "whyInfoLabel", .optional, .text(max: 45)),
        ElementRule("CRes", "whyInfoText", .optional, .text(max: 256)),
        ElementRule("CRes", "psImage", .optional, .object),
        ElementRule("CRes", "issuerImage", .optional, .object),
        ElementRule("CRes", "whitelistingInfoText", .optional, .text(max: 64), since: "2.2.0"),
    ]

    static let rreq: [ElementRule] = [
        ElementRule("RReq", "threeDSServerTransID", .required, uuid),
        ElementRule("RReq", "dsTransID", .required, uuid),
        ElementRule("RReq", "acsTransID", .required, uuid),
        ElementRule("RReq", "sdkTransID", .when(.channel(["01"])), uuid, since: "2.2.0"),
        ElementRule("RReq", "messageCategory", .required, .values(["01", "02"])),
        ElementRule("RReq", "transStatus", .required, .values(["Y", "N", "U", "A", "R"])),
        ElementRule("RReq", "transStatusReason", .when(.field("transStatus", ["N", "U", "R"])), transStatusReason),
        ElementRule("RReq", "eci", .when(.all([.field("transStatus", ["Y", "A"]), .category(["01"])])), eci),
        ElementRule("RReq", "authenticationValue", .when(.field("transStatus", ["Y", "A"])), .base64(length: 28)),
        ElementRule("RReq", "authenticationType", .optional, .values(["01", "02", "03"], added: ["2.2.0": ["04"], "2.3.1": ["05", "06", "07", "08", "09"]])),
        ElementRule("RReq", "interactionCounter", .required, .numeric(2...2)),
        ElementRule("RReq", "challengeCancel", .optional, challengeCancel),
        ElementRule("RReq", "acsRenderingType", .optional, .renderingType, since: "2.2.0"),
    ]

    static let rres: [ElementRule] = [
        ElementRule("RRes", "threeDSServerTransID", .required, uuid),
        ElementRule("RRes", "dsTransID", .required, uuid),
        ElementRule("RRes", "acsTransID", .required, uuid),
        ElementRule("RRes", "sdkTransID", .when(.channel(["01"])), uuid, since: "2.2.0"),
        ElementRule("RRes", "resultsStatus", .required, .values(["01", "02", "03"], added: ["2.3.1": ["04"]])),
    ]

    /// Error codes of Table A.4 (the Cake3DS2 guide's 101–402 among them), by the version that defines them.
    static let errorCode: Format = .values(["101", "102", "103", "201", "202", "203", "204", "301", "302", "303", "304", "305", "306", "307",
                                            "402", "403", "404", "405"],
                                           added: ["2.2.0": ["205", "206"], "2.3.1": ["207", "308", "309", "310", "311", "312", "313", "314", "315"]])

    static let erro: [ElementRule] = [
        ElementRule("Erro", "threeDSServerTransID", .optional, uuid),
        ElementRule("Erro", "dsTransID", .optional, uuid),
        ElementRule("Erro", "acsTransID", .optional, uuid),
        ElementRule("Erro", "sdkTransID", .optional, uuid),
        ElementRule("Erro", "errorCode", .required, errorCode),
        ElementRule("Erro", "errorComponent", .required, .values(["C", "S", "D", "A"])),
        ElementRule("Erro", "errorDescription", .required, .text(max: 2048)),
        ElementRule("Erro", "errorDetail", .required, .text(max: 2048)),
        ElementRule("Erro", "errorMessageType", .optional, .values(["AReq", "ARes", "CReq", "CRes", "PReq", "PRes", "RReq", "RRes"])),
    ]

    static let preq: [ElementRule] = [
        ElementRule("PReq", "threeDSServerTransID", .required, uuid),
        ElementRule("PReq", "threeDSServerRefNumber", .required, .text(max: 32)),
        ElementRule("PReq", "serialNum", .optional, .text(max: 20)),
    ]

    static let pres: [ElementRule] = [
        ElementRule("PRes", "threeDSServerTransID", .required, uuid),
        ElementRule("PRes", "dsTransID", .required, uuid),
        ElementRule("PRes", "serialNum", .required, .text(max: 20)),
        ElementRule("PRes", "cardRangeData", .optional, .array),
    ]

    /// The only elements a final CRes (challengeCompletionInd Y) may carry (SPEC Table B.5; Stripe's SDK answers others with Erro 101).
    public static let finalCResElements: Set<String> = ["threeDSServerTransID", "acsTransID", "sdkTransID", "acsCounterAtoS", "challengeCompletionInd",
                                                        "messageExtension", "messageType", "messageVersion", "transStatus", "transStatusReason"]
}

extension String {
    /// A two-digit code: 1 → "01".
    init(format2 n: Int) { self = n < 10 ? "0\(n)" : String(n) }
}
