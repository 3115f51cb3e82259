import Testing
import TapCore
@testable import TapEMV

/// The typed 3DS values: parsed from the wire string, unknown values kept, versions ordered by their numbers.
@Suite struct EMVValuesTests {
    @Test func versionsAreOrderedByTheirNumbersNotTheirText() {
        #expect(MessageVersion.v2_1 < .v2_2 && MessageVersion.v2_2 < .v2_3)
        #expect(MessageVersion(wire: "2.2.0") >= .v2_2 && !(MessageVersion(wire: "2.1.0") >= .v2_2))
        // As strings "2.10.0" < "2.2.0"; as versions it is the later one.
        #expect(MessageVersion(wire: "2.10.0") > .v2_3)
        #expect(MessageVersion(wire: "2.2.0") == .v2_2 && MessageVersion(wire: "2.2.0").isKnown)
    }

    @Test func anUnknownVersionIsKeptAsItCameAndSortsFirst() {
        for wire in ["2.2", "3.0.0", "2.2.0-beta", "", "x", "2..0", "99999999.0.0"] {
            let v = MessageVersion(wire: wire)
            #expect(v.wire == wire && v.description == wire && !v.isKnown, "\(wire)")
        }
        #expect(MessageVersion(wire: "2.2.0-beta") < .v2_1)
        #expect(MessageVersion(wire: "3.0.0") > .v2_3)
        #expect(MessageVersion(wire: "99999999.0.0").numbers == nil, "no number too long to be a version part")
    }

    @Test func membersParseOnlyWhenTheyAreStrings() throws {
        let m = try JSON.parse(#"{"messageType":"AReq","messageVersion":"2.3.1","deviceChannel":"04","messageCategory":2,"transStatus":"Z"}"#)
        #expect(m.messageKind == .aReq && m.messageVersion == .v2_3)
        #expect(DeviceChannel(m["deviceChannel"])?.wire == "04" && DeviceChannel(m["deviceChannel"])?.isKnown == false)
        #expect(MessageCategory(m["messageCategory"]) == nil, "a number is not a messageCategory")
        #expect(TransStatus(m["transStatus"]).map { !$0.isKnown } == true)
        #expect(TransStatus(m["eci"]) == nil)
        #expect(DeviceChannel(wire: "01") == .app && DeviceChannel(wire: "02") == .browser && MessageCategory(wire: "01") == .payment)
        #expect(TransStatus.known.map(\.wire) == ["Y", "N", "U", "A", "C", "R", "D", "I", "S"])
    }

    @Test func messageKindIsStrictWhereTheULNamesAreNot() throws {
        #expect(try JSON.parse(#"{"messageType":"pArq"}"#).messageKind == nil)
        #expect(MessageKind(messageType: "pArq") == .aReq)
        #expect(try JSON.parse(#"{"messageType":"RRes"}"#).messageKind == .rRes)
        #expect(try JSON.parse(#"{"messageType":["AReq"]}"#).messageKind == nil)
    }

    /// The values the sequence diagram, the replayer and the sandbox compared as strings ("02", "01", uiType "05"/"06").
    @Test func channelCancelAndUITypeValuesSayWhatTheWireMeans() throws {
        #expect(DeviceChannel.known.map { $0.shortName } == ["app", "browser", "3RI"])
        #expect(DeviceChannel(wire: "04").shortName == nil && DeviceChannel(wire: "2").shortName == nil)
        #expect(ChallengeCancel(wire: "01") == .cardholderCancelled && ChallengeCancel(wire: "08") == .sdkTimeout)
        #expect(ChallengeCancel(wire: "1") != .cardholderCancelled && !ChallengeCancel(wire: "02").isKnown)
        #expect(ACSUIType.known.map(\.acsInterface) == ["01", "01", "01", "01", "02", "02", "01"])
        #expect(ACSUIType(wire: "08").acsInterface == "01" && !ACSUIType(wire: "08").isKnown)
    }

    @Test func statusAndIndicatorValuesSayWhatTheWireMeans() throws {
        #expect(TransStatus.known.filter(\.isAuthentication) == [.authenticated, .attempted])
        #expect(TransStatus.known.filter(\.isRefusal) == [.notAuthenticated, .rejected])
        #expect(!TransStatus(wire: "y").isAuthentication && !TransStatus(wire: "").isRefusal)
        let final = try JSON.parse(#"{"messageType":"CRes","challengeCompletionInd":"Y","transStatus":"A"}"#)
        let round = try JSON.parse(#"{"messageType":"CRes","challengeCompletionInd":"N"}"#)
        let odd = try JSON.parse(#"{"messageType":"CRes","challengeCompletionInd":true,"transStatus":1}"#)
        #expect(final.completesChallenge && !round.completesChallenge && !odd.completesChallenge)
        #expect(final.transStatus == .attempted && round.transStatus == nil && odd.transStatus == nil)
        #expect(OOBContinue.continues(.bool(true)) && OOBContinue.continues(.string("01")) && OOBContinue.continues(.string("02")))
        #expect(!OOBContinue.continues(.bool(false)) && !OOBContinue.continues(.string("03")) && !OOBContinue.continues(nil))
        #expect(InfoContinueIndicator(.string("01")) == .continued && YesNoIndicator(.string("Y")) == .yes && YesNoIndicator(.string("n")) != .no)
    }

    @Test func locationsReadAndWriteAsSessionFilesStoreThem() {
        for stored in ["body", "jwe", "form:creq", "form:threeDSMethodData", "form:", "header", ""] {
            #expect(MessageLocation(stored: stored).stored == stored)
        }
        #expect(MessageLocation(stored: "form:cres") == .form(field: "cres") && MessageLocation(stored: "form:cres").isForm)
        #expect(MessageLocation(stored: "jwe") == .jwe && !MessageLocation(stored: "jwe").isForm)
        #expect(MessageLocation(stored: "JWE") == .other("JWE") && MessageLocation(stored: "formcreq") == .other("formcreq"))
    }

    @Test func transactionIDsKeepTheirTextAndCheckTheirForm() throws {
        #expect(TransactionID(wire: "8a880dc0-d2d2-4067-bcb1-b08d1690b26e").isWellFormed)
        #expect(TransactionID(wire: "8A880DC0-D2D2-4067-BCB1-B08D1690B26E").isWellFormed)
        for bad in ["", "8a880dc0d2d24067bcb1b08d1690b26e", "8a880dc0-d2d2-4067-bcb1-b08d1690b26g", "8a880dc0-d2d2-4067-bcb1_b08d1690b26e",
                    "8a880dc0-d2d2-4067-bcb1-b08d1690b26e0"] {
            #expect(!TransactionID(wire: bad).isWellFormed, "\(bad)")
        }
        let m = try JSON.parse(#"{"acsTransID":"x","dsTransID":7}"#)
        #expect(TransactionID(m["acsTransID"])?.wire == "x" && TransactionID(m["dsTransID"]) == nil)
        #expect(TransactionIDField.allCases.map(\.rawValue) == ["threeDSServerTransID", "dsTransID", "acsTransID", "sdkTransID"])
        #expect(MessageDirection(rawValue: "request") == .request && MessageDirection(rawValue: "sideways") == nil)
    }

    @Test func theSignatureBitFlipChangesOneBitOfTheSignatureOnly() {
        let sig: [UInt8] = [1, 2, 3, 4, 5]
        let compact = "aGVhZA.Ym9keQ." + Base64URL.encode(sig)
        let flipped = SignatureFault.flippingSignatureBit(compact)
        let parts = flipped.split(separator: ".").map(String.init)
        #expect(parts[0] == "aGVhZA" && parts[1] == "Ym9keQ")
        #expect(Base64URL.decode(parts[2]) == [1, 2, 2, 4, 5])
        #expect(SignatureFault.flippingSignatureBit(flipped) == compact)
        for notJWS in ["", "a.b", "a.b.", "a.b.c.d", "a..!!"] { #expect(SignatureFault.flippingSignatureBit(notJWS) == notJWS) }
    }
}

/// The decryption state read from the notes the recorder and `3dstape decrypt` write.
@Suite struct DecryptionStateTests {
    @Test func everyNoteTheKeyLogWritesReadsAsWhatItSays() throws {
        let json = try JSON.parse(#"{"kid":"a-1"}"#)
        let found = ThreeDSContent.Found(location: .jwe, json: json, summary: nil)
        // The notes KeyLog writes: no key source at all, none for this acsTransID.
        let none = ThreeDSContent.decryptAppChannel(found, body: [], isRequest: true, keys: nil, mask: false)
        #expect(none.decryptionState?.outcome == .noKey && none.decryptionState?.isDecrypted == false)
        #expect(DecryptionState(note: "decrypted: key log").outcome == .decrypted)
        #expect(DecryptionState(note: "decrypted: imported in clear from the HAR's _3dstape field").isDecrypted)
        #expect(DecryptionState(note: "decrypted: imported in clear from the HAR's _3dstape field").wasImportedInClear)
        #expect(!DecryptionState(note: "decrypted: key log").wasImportedInClear)
        #expect(DecryptionState(note: "encrypted: no key log for acsTransID x").outcome == .noKey)
        #expect(DecryptionState(note: "encrypted: the key log key for x does not open it (tag mismatch)").outcome == .failed)
        #expect(DecryptionState(note: "something else").outcome == .failed)
        #expect(DecryptionState(nil) == nil)
        #expect(DecryptionState(note: "decrypted: key log").description == "decrypted: key log")
    }
}
