import Testing
import TapCore
@testable import TapEMV

/// Each builder against the message the sandbox (or the client, or the replayer) wrote before the builders existed,
/// member for member in the same order (the IDs fixed here; SandboxGoldenMessagesTests compares a whole recorded run).
@Suite struct MessageBuildersTests {
    static let ids = MessageIDs(threeDSServerTransID: .string("S"), dsTransID: .string("D"), acsTransID: .string("A"), sdkTransID: .string("K"))

    @Test func aResFrictionlessAndChallenge() {
        var y = ThreeDSMessage.ARes(ids: MessageIDs(threeDSServerTransID: .string("S"), dsTransID: .string("D"), acsTransID: .string("A")),
                                    version: .v2_2, acsReferenceNumber: "3DSTAPE-SANDBOX-ACS", acsOperatorID: "3DSTAPE-ACS-OP",
                                    dsReferenceNumber: "3DSTAPE-SANDBOX-DS", transStatus: .authenticated)
        y.eci = "05"
        y.authenticationValue = "AV"
        y.authenticationType = "02"
        #expect(y.json.compact == #"{"threeDSServerTransID":"S","dsTransID":"D","acsTransID":"A","messageType":"ARes","messageVersion":"2.2.0","acsReferenceNumber":"3DSTAPE-SANDBOX-ACS","acsOperatorID":"3DSTAPE-ACS-OP","dsReferenceNumber":"3DSTAPE-SANDBOX-DS","transStatus":"Y","eci":"05","authenticationValue":"AV","authenticationType":"02"}"#)
        var c = ThreeDSMessage.ARes(ids: Self.ids, version: .v2_3, acsReferenceNumber: "R", acsOperatorID: "O", dsReferenceNumber: "DR",
                                    transStatus: .challenge)
        c.acsChallengeMandated = "Y"
        c.acsSignedContent = "JWS"
        c.acsRenderingType = ThreeDSMessage.ARes.renderingType(interface: "01", template: "04")
        #expect(c.json.compact == #"{"threeDSServerTransID":"S","dsTransID":"D","acsTransID":"A","sdkTransID":"K","messageType":"ARes","messageVersion":"2.3.1","acsReferenceNumber":"R","acsOperatorID":"O","dsReferenceNumber":"DR","transStatus":"C","acsChallengeMandated":"Y","acsSignedContent":"JWS","acsRenderingType":{"acsInterface":"01","acsUiTemplate":"04"}}"#)
        var d = ThreeDSMessage.ARes(ids: Self.ids, version: .v2_2, acsReferenceNumber: "R", acsOperatorID: "O", dsReferenceNumber: "DR",
                                    transStatus: .decoupled)
        d.acsChallengeMandated = "Y"
        d.acsDecConInd = "Y"
        d.cardholderInfo = "Approve"
        #expect(d.json.compact.hasSuffix(#""transStatus":"D","acsChallengeMandated":"Y","acsDecConInd":"Y","cardholderInfo":"Approve"}"#))
    }

    @Test func cResChallengeScreenAndFinal() {
        var ui = ThreeDSMessage.ChallengeCRes(ids: MessageIDs(threeDSServerTransID: .string("S"), acsTransID: .string("A"), sdkTransID: .string("K")),
                                              version: .v2_2, acsUiType: .text)
        ui.challengeInfoHeader = "H"
        ui.psImage = .object([("medium", .string("http://x/img/ps.png"))])
        ui.challengeInfoText = "T"
        ui.challengeInfoLabel = "Code"
        ui.submitAuthenticationLabel = "Submit"
        ui.resendInformationLabel = "Send a new code"
        ui.whyInfoLabel = "W"
        ui.whyInfoText = "WT"
        #expect(ui.json.compact == #"{"threeDSServerTransID":"S","acsTransID":"A","sdkTransID":"K","messageType":"CRes","messageVersion":"2.2.0","challengeCompletionInd":"N","acsUiType":"01","challengeInfoHeader":"H","psImage":{"medium":"http://x/img/ps.png"},"challengeInfoText":"T","challengeInfoLabel":"Code","submitAuthenticationLabel":"Submit","resendInformationLabel":"Send a new code","whyInfoLabel":"W","whyInfoText":"WT"}"#)
        let final = ThreeDSMessage.finalCRes(ids: MessageIDs(threeDSServerTransID: .string("S"), acsTransID: .string("A")), version: .v2_1,
                                             transStatus: .notAuthenticated)
        #expect(final.compact == #"{"threeDSServerTransID":"S","acsTransID":"A","challengeCompletionInd":"Y","messageType":"CRes","messageVersion":"2.1.0","transStatus":"N"}"#)
    }

    @Test func rReqAndTheRResThatAnswersIt() throws {
        var r = ThreeDSMessage.RReq(ids: Self.ids, version: .v2_2, messageCategory: .payment, transStatus: .notAuthenticated, eci: "07",
                                    authenticationType: "02", interactionCounter: "02")
        r.transStatusReason = "01"
        r.challengeCancel = "01"
        r.acsRenderingType = ThreeDSMessage.ARes.renderingType(interface: "01", template: "01")
        #expect(r.json.compact == #"{"threeDSServerTransID":"S","dsTransID":"D","acsTransID":"A","sdkTransID":"K","messageType":"RReq","messageVersion":"2.2.0","messageCategory":"01","transStatus":"N","eci":"07","authenticationType":"02","interactionCounter":"02","transStatusReason":"01","challengeCancel":"01","acsRenderingType":{"acsInterface":"01","acsUiTemplate":"01"}}"#)
        #expect(ThreeDSMessage.rRes(answering: r.json, resultsStatus: "01").compact == #"{"threeDSServerTransID":"S","dsTransID":"D","acsTransID":"A","sdkTransID":"K","messageType":"RRes","messageVersion":"2.2.0","resultsStatus":"01"}"#)
        // An RReq missing IDs: null for the three every RRes has, no sdkTransID, null version.
        let bare = try JSON.parse(#"{"acsTransID":"A","messageType":"RReq"}"#)
        #expect(ThreeDSMessage.rRes(answering: bare, resultsStatus: "01").compact == #"{"threeDSServerTransID":null,"dsTransID":null,"acsTransID":"A","messageType":"RRes","messageVersion":null,"resultsStatus":"01"}"#)
    }

    @Test func aReqBrowserAndApp() {
        func aReq(_ channel: DeviceChannel) -> ThreeDSMessage.AReq {
            ThreeDSMessage.AReq(threeDSServerTransID: "S", version: .v2_2, deviceChannel: channel, messageCategory: .payment,
                                threeDSCompInd: "Y", threeDSRequestorAuthenticationInd: "01", threeDSRequestorID: "RID",
                                threeDSRequestorName: "RN", threeDSRequestorURL: "https://m.test", threeDSServerRefNumber: "REF",
                                threeDSServerOperatorID: "OP", threeDSServerURL: "http://l/3ds/rreq", acquirerBIN: "412345",
                                acquirerMerchantID: "M", mcc: "5999", merchantCountryCode: "826", merchantName: "Shop",
                                acctNumber: "4000000000001000", cardExpiryDate: "3012", acctType: "02", purchaseAmount: "1234",
                                purchaseCurrency: "978", purchaseExponent: "2", purchaseDate: "20260101000000", transType: "01")
        }
        var a = aReq(.browser)
        a.browser = .init(notificationURL: "http://l/3ds/notify", browserAcceptHeader: "text/html", browserUserAgent: "UA", browserLanguage: "en-GB",
                          browserIP: "192.0.2.10", browserJavaEnabled: false, browserColorDepth: "24", browserScreenHeight: "900",
                          browserScreenWidth: "1440", browserTZ: "0", browserJavascriptEnabled: true)
        #expect(a.json.compact == #"{"threeDSServerTransID":"S","messageType":"AReq","messageVersion":"2.2.0","deviceChannel":"02","messageCategory":"01","threeDSCompInd":"Y","threeDSRequestorAuthenticationInd":"01","threeDSRequestorID":"RID","threeDSRequestorName":"RN","threeDSRequestorURL":"https://m.test","threeDSServerRefNumber":"REF","threeDSServerOperatorID":"OP","threeDSServerURL":"http://l/3ds/rreq","acquirerBIN":"412345","acquirerMerchantID":"M","mcc":"5999","merchantCountryCode":"826","merchantName":"Shop","acctNumber":"4000000000001000","cardExpiryDate":"3012","acctType":"02","purchaseAmount":"1234","purchaseCurrency":"978","purchaseExponent":"2","purchaseDate":"20260101000000","transType":"01","notificationURL":"http://l/3ds/notify","browserAcceptHeader":"text/html","browserUserAgent":"UA","browserLanguage":"en-GB","browserIP":"192.0.2.10","browserJavaEnabled":false,"browserColorDepth":"24","browserScreenHeight":"900","browserScreenWidth":"1440","browserTZ":"0","browserJavascriptEnabled":true}"#)
        a = aReq(.app)
        a.app = .init(sdkAppID: "APP", sdkEncData: "JWE", sdkEphemPubKey: .object([("kty", .string("EC"))]), sdkMaxTimeout: "05",
                      sdkReferenceNumber: "SREF", sdkTransID: "K", deviceRenderOptions: .object([("sdkInterface", .string("03"))]))
        #expect(a.json.compact.hasSuffix(#""transType":"01","sdkAppID":"APP","sdkEncData":"JWE","sdkEphemPubKey":{"kty":"EC"},"sdkMaxTimeout":"05","sdkReferenceNumber":"SREF","sdkTransID":"K","deviceRenderOptions":{"sdkInterface":"03"}}"#))
    }

    @Test func cReqAppWithEntriesAndBrowser() {
        let app = ThreeDSMessage.CReq(threeDSServerTransID: .string("S"), acsTransID: .string("A"), version: .v2_3, sdkTransID: .null,
                                      entries: [.oobContinue(.string("01"))])
        #expect(app.json.compact == #"{"threeDSServerTransID":"S","acsTransID":"A","messageType":"CReq","messageVersion":"2.3.1","sdkTransID":null,"oobContinue":"01"}"#)
        let browser = ThreeDSMessage.CReq(threeDSServerTransID: .string("S"), acsTransID: .string("A"), version: .v2_2, challengeWindowSize: "05")
        #expect(browser.json.compact == #"{"threeDSServerTransID":"S","acsTransID":"A","messageType":"CReq","messageVersion":"2.2.0","challengeWindowSize":"05"}"#)
        let all: [ThreeDSMessage.ChallengeEntry] = [.cancel("08"), .dataEntry("1234"), .htmlDataEntry("otp=1"), .noEntry, .oobContinue(.bool(true)),
                                                    .infoContinue, .resend]
        #expect(JSON.object(all.map(\.member)).compact == #"{"challengeCancel":"08","challengeDataEntry":"1234","challengeHTMLDataEntry":"otp=1","challengeNoEntry":"Y","oobContinue":true,"infoContinueIndicator":"01","resendChallenge":"Y"}"#)
    }

    /// Client replay's RRes and CReqs, as it wrote them by hand before: the RRes copies only the members the RReq had; a
    /// CReq carries the recorded AReq's messageVersion as it was (even not a string) and the recorded entries in order.
    @Test func clientReplaysRResAndRecordedCReq() throws {
        let rreq = try JSON.parse(#"{"acsTransID":"A","threeDSServerTransID":"S","messageType":"RReq","sdkTransID":null}"#)
        #expect(ThreeDSMessage.rRes(ids: MessageIDs(of: rreq), version: rreq[.messageVersion], resultsStatus: "01").compact
            == #"{"threeDSServerTransID":"S","acsTransID":"A","sdkTransID":null,"messageType":"RRes","resultsStatus":"01"}"#)
        var creq = ThreeDSMessage.CReq(threeDSServerTransID: .string("S"), acsTransID: .string("A"), version: .v2_2, sdkTransID: .string("K"))
        #expect(creq.messageVersion == .string("2.2.0"))
        creq.messageVersion = .number("2.2")
        creq.entries = [.recorded(name: "challengeDataEntry", value: .string("1234")), .recorded(name: "x", value: .number("1"))]
        #expect(creq.json.compact == #"{"threeDSServerTransID":"S","acsTransID":"A","messageType":"CReq","messageVersion":2.2,"sdkTransID":"K","challengeDataEntry":"1234","x":1}"#)
    }

    @Test func pResWithACardRange() {
        let range = ThreeDSMessage.CardRange(startRange: "4000000000001000", endRange: "4000000000001999", actionInd: "A",
                                             acsStartProtocolVersion: .v2_1, acsEndProtocolVersion: .v2_3, threeDSMethodURL: "http://x/acs/method",
                                             acsInfoInd: ["01", "02"])
        let p = ThreeDSMessage.pRes(threeDSServerTransID: .string("S"), dsTransID: "D", version: .string("2.2.0"), serialNum: "1",
                                    dsProtocolVersions: MessageVersion.known, cardRangeData: [range])
        #expect(p.compact == #"{"threeDSServerTransID":"S","dsTransID":"D","messageType":"PRes","messageVersion":"2.2.0","serialNum":"1","dsProtocolVersions":["2.1.0","2.2.0","2.3.1"],"cardRangeData":[{"startRange":"4000000000001000","endRange":"4000000000001999","actionInd":"A","acsStartProtocolVersion":"2.1.0","acsEndProtocolVersion":"2.3.1","threeDSMethodURL":"http://x/acs/method","acsInfoInd":["01","02"]}]}"#)
    }

    @Test func erroNamesOnlyTheIDsItCouldRead() throws {
        let about = try JSON.parse(#"{"acsTransID":"A","threeDSServerTransID":"S","dsTransID":7,"messageVersion":"2.1.0"}"#)
        let e = Erro.make(.transactionIDNotRecognised, component: "A", description: "Transaction ID not recognised", detail: String(repeating: "d", count: 3000),
                          about: about, messageType: "CReq", version: "2.1.0")
        #expect(e.compact == #"{"threeDSServerTransID":"S","acsTransID":"A","errorCode":"301","errorComponent":"A","errorDescription":"Transaction ID not recognised","errorDetail":""# + String(repeating: "d", count: 2048) + #"","errorMessageType":"CReq","messageType":"Erro","messageVersion":"2.1.0"}"#)
        #expect(Erro.make(code: "101", component: "D", description: "x", detail: "y", about: nil, messageType: nil, version: nil).compact
                == #"{"errorCode":"101","errorComponent":"D","errorDescription":"x","errorDetail":"y","messageType":"Erro","messageVersion":"2.2.0"}"#)
    }
}
