import Foundation
import Testing
import TapCore
import TapCrypto
import TapJOSE
@testable import TapEMV

@Suite struct AppChannelCipherTests {
    let sdkRef = "3DS_LOA_SDK_TEST_020200_00001"
    let acsTransID = "8a880dc0-d2d2-4067-bcb1-b08d1690b26e"

    func pair(_ enc: ContentEncryption) throws -> (AppChannelCipher, AppChannelCipher) {
        let dC = try PrivateKey.generateP256(), dT = try PrivateKey.generateP256()
        let sdk = try AppChannelCipher(role: .sdk, privateKey: dC, peerPublicKey: dT.publicKey, sdkReferenceNumber: sdkRef,
                                       acsTransID: acsTransID, enc: enc)
        let acs = try AppChannelCipher(role: .acs, privateKey: dT, peerPublicKey: dC.publicKey, sdkReferenceNumber: sdkRef,
                                       acsTransID: acsTransID, enc: .a128cbcHS256)
        return (sdk, acs)
    }

    func creq(_ entry: String = "123456") -> JSON {
        .object([("messageType", .string("CReq")), ("messageVersion", .string("2.2.0")), ("acsTransID", .string(acsTransID)),
                 ("challengeDataEntry", .string(entry))])
    }

    @Test(arguments: ContentEncryption.allCases)
    func roundsOfChallenge(enc: ContentEncryption) throws {
        var (sdk, acs) = try pair(enc)
        #expect(sdk.cek == acs.cek)
        for round in 0..<3 {
            let jwe = try sdk.seal(creq())
            let parsed = try JWE(compact: jwe)
            #expect(parsed.header.compact == #"{"alg":"dir","enc":"\#(enc.rawValue)","kid":"\#(acsTransID)"}"#)
            if enc == .a128gcm { #expect(parsed.iv == [UInt8](repeating: 0, count: 11) + [UInt8(round)]) }
            let got = try acs.openRequest(jwe)
            #expect(got["sdkCounterStoA"]?.stringValue == String(format: "%03d", round))
            #expect(acs.enc == enc, "the ACS answers in the CReq's enc")
            let reply = try acs.seal(.object([("messageType", .string("CRes")), ("challengeCompletionInd", .string("N"))]))
            if enc == .a128gcm { #expect(try JWE(compact: reply).iv == [UInt8](repeating: 0xFF, count: 11) + [UInt8(round)]) }
            let cres = try sdk.open(reply)
            #expect(cres["acsCounterAtoS"]?.stringValue == String(format: "%03d", round))
        }
    }

    @Test func gcmUsesOneHalfPerDirection() throws {
        var (sdk, _) = try pair(.a128gcm)
        let jwe = try JWE(compact: try sdk.seal(creq()))
        #expect(throws: JOSEError.self) { try jwe.decrypt(cek: Array(sdk.cek.suffix(16))) }
        #expect(try JSON.parse(try jwe.decrypt(cek: Array(sdk.cek.prefix(16))))["messageType"]?.stringValue == "CReq")
    }

    @Test func replayedMessageIsACounterMismatch() throws {
        var (sdk, acs) = try pair(.a128cbcHS256)
        let first = try sdk.seal(creq())
        _ = try acs.open(first)
        #expect(throws: ChannelError(.decryptionFailure, "Counters are not equal: sdkCounterStoA is 000, expected 001")) {
            try acs.open(first)
        }
    }

    @Test func missingAndMalformedCounters() throws {
        let (_, acs) = try pair(.a128cbcHS256)
        let header = JSON.object([("alg", .string("dir")), ("enc", .string("A128CBC-HS256")), ("kid", .string(acsTransID))])
        func send(_ message: JSON) throws -> String {
            try JWE.encrypt(plaintext: message.bytes, cek: acs.cek, header: header).compact
        }
        var a = acs
        #expect { try a.open(try send(creq())) } throws: { ($0 as? ChannelError)?.code == .requiredElementMissing }
        for bad: JSON in [.string("1"), .number("0"), .string("256"), .string("abc")] {
            var b = acs
            #expect { try b.open(try send(creq().setting("sdkCounterStoA", to: bad))) } throws: {
                ($0 as? ChannelError)?.code == .formatInvalid
            }
        }
    }

    @Test func tamperedOrForeignMessagesAre302() throws {
        var (sdk, acs) = try pair(.a128gcm)
        var parts = try sdk.seal(creq()).split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var ct = Base64URL.decode(parts[3])!
        ct[0] ^= 1
        parts[3] = Base64URL.encode(ct)
        #expect { try acs.open(parts.joined(separator: ".")) } throws: { ($0 as? ChannelError)?.code == .decryptionFailure }
        var (other, _) = try pair(.a128gcm)
        #expect { try acs.open(try other.seal(creq())) } throws: { ($0 as? ChannelError)?.code == .decryptionFailure }
        #expect { try acs.open("not a jwe") } throws: { ($0 as? ChannelError)?.code == .decryptionFailure }
    }

    @Test func counterStopsAt255() throws {
        var (sdk, _) = try pair(.a128gcm)
        for _ in 0...255 { _ = try sdk.seal(creq()) }
        #expect(throws: ChannelError.self) { try sdk.seal(creq()) }
    }

    /// Python-made CReq/CRes (tools/interop) open with this implementation on the right side.
    @Test func pythonMadeChannelMessages() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../TapJOSETests/Fixtures/python-vectors.json")
        let doc = try JSON.parse([UInt8](try Data(contentsOf: url)))
        guard case let .array(cases)? = doc["cases"] else { Issue.record("no cases"); return }
        let channel = cases.filter { $0["kind"]?.stringValue == "channel" }
        #expect(channel.count == 4)
        for c in channel {
            let role = AppChannelCipher.Role(rawValue: c["role"]!.stringValue!)!
            let own = try JWK(json: doc["keys"]![role == .acs ? "acs" : "sdk"]!).privateKey()
            let peer = try JWK(json: doc["keys"]![role == .acs ? "sdk" : "acs"]!).publicKey()
            var cipher = try AppChannelCipher(role: role, privateKey: own, peerPublicKey: peer,
                                              sdkReferenceNumber: c["sdkReferenceNumber"]!.stringValue!,
                                              acsTransID: c["acsTransID"]!.stringValue!, enc: .a128cbcHS256)
            #expect(Hex.encode(cipher.cek) == c["cek"]!.stringValue!)
            let got = try cipher.open(c["compact"]!.stringValue!)
            #expect(got == (try JSON.parse(c["expect"]!.stringValue!)))
        }
    }
}
