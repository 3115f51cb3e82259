import Foundation
import Testing
import TapCore
import TapEMV
import TapStore
@testable import TapInspect

/// Issue 29: three rule gaps found with published 3DS messages, each with a message of the issue's shape.
@Suite struct ValidationGapsTests {
    static let ids = #""threeDSServerTransID":"8a880dc0-d2d2-4067-bcb1-b08d1690b26e","acsTransID":"d7c1ee99-9478-44a6-b1f2-391e29c6b340""#

    /// One transaction of the given messages, where each was found (`body`, `form:cres` …), validated.
    static func findings(_ messages: [(location: String, text: String)], channel: String? = nil) throws -> [Finding] {
        var list: [InspectedMessage] = []
        if let channel {
            let areq = try JSON.parse(#"{"messageType":"AReq","messageVersion":"2.2.0","deviceChannel":"\#(channel)","threeDSServerTransID":"8a880dc0-d2d2-4067-bcb1-b08d1690b26e"}"#)
            list.append(InspectedMessage(exchangeID: 1, direction: "request", location: "body", type: "AReq", json: areq))
        }
        for (i, m) in messages.enumerated() {
            let json = try JSON.parse(m.text)
            list.append(InspectedMessage(exchangeID: Int64(i + 2), direction: "request", location: m.location, type: json["messageType"]!.stringValue!, json: json))
        }
        let tx = ThreeDSTransaction(key: "8a880dc0-d2d2-4067-bcb1-b08d1690b26e", messages: list)
        return Validator.validate(transactions: [tx]).filter { $0.message != "AReq" }
    }

    /// Stars are a mask only where masking writes one: `Q***` as a transStatus or stars in an ID are judged, as a masked
    /// card number inside any value and a secret's `***` are not (a hostile tester's finding).
    @Test func starsOutsideAMaskAreJudged() throws {
        let final = #"{\#(Self.ids),"messageType":"CRes","messageVersion":"2.2.0","challengeCompletionInd":"Y","transStatus":"Q***"}"#
        #expect(try Self.findings([("form:cres", final)], channel: "02").map(\.rule).contains { $0.hasPrefix("CRes.transStatus") })
        #expect(Validator.isMasked(.string("400000******1067"), element: "acctNumber"))
        #expect(Validator.isMasked(.string("*** (malformed: expected 28 characters of base64)"), element: "authenticationValue"))
        #expect(!Validator.isMasked(.string("not-a-uuid***"), element: "threeDSServerTransID"))
        #expect(!Validator.isMasked(.string(String(repeating: "***", count: 200)), element: "acsReferenceNumber"))
    }

    // MARK: item 1, challengeCompletionInd in every CRes

    /// The issue's browser final CRes, as the browser posts it (`cres=`), with and without an AReq that names the channel.
    @Test func aBrowserFinalCResWithoutChallengeCompletionIndIsAnError() throws {
        let cres = #"{\#(Self.ids),"messageType":"CRes","messageVersion":"2.2.0","transStatus":"Y"}"#
        for channel in ["02", nil] {
            let found = try Self.findings([("form:cres", cres)], channel: channel)
            #expect(found.map(\.rule) == ["CRes.challengeCompletionInd.required"], "\(channel ?? "inferred"): \(found.map(\.rule))")
        }
        let complete = #"{\#(Self.ids),"messageType":"CRes","messageVersion":"2.2.0","transStatus":"Y","challengeCompletionInd":"Y"}"#
        #expect(try Self.findings([("form:cres", complete)], channel: "02").isEmpty)
        // The app channel, as before.
        let app = #"{\#(Self.ids),"sdkTransID":"b2d2b6b4-6f5e-4c1c-9d6e-0c6f3f0e9a11","acsCounterAtoS":"000","messageType":"CRes","messageVersion":"2.2.0","transStatus":"Y"}"#
        #expect(try Self.findings([("body", app)], channel: "01").map(\.rule) == ["CRes.challengeCompletionInd.required"])
    }

    @Test func theDemoBrowserFinalCResesCarryIt() throws {
        let tx = try #require(ValidatorTests.transactions.first { $0.deviceChannel == "02" && $0.messages.contains { $0.type == "CRes" } })
        let cres = try #require(tx.messages.first { $0.type == "CRes" })
        var t = tx
        let i = try #require(t.messages.firstIndex { $0.exchangeID == cres.exchangeID && $0.type == "CRes" })
        t.messages[i].json = cres.json!.removing("challengeCompletionInd")
        #expect(Validator.validate(transactions: [tx]).isEmpty)
        #expect(Validator.validate(transactions: [t]).contains { $0.rule == "CRes.challengeCompletionInd.required" && $0.exchangeID == cres.exchangeID })
    }

    // MARK: item 2, masked values keep their format verdict

    /// The issue's messages masked as the recorder and import store them, then validated.
    @Test func aMaskedValueIsFormatCheckedByTheVerdictItsMaskCarries() throws {
        func stored(_ text: String) -> String { String(decoding: ThreeDSContent.prepare(Array(text.utf8), mask: true).stored, as: UTF8.self) }
        let cases: [(text: String, rule: String, detail: String)] = [
            (#"{\#(Self.ids),"dsTransID":"0b2c7d54-ff21-4a4c-9f8a-3a0f3cb1e9a3","messageType":"RReq","messageVersion":"2.2.0","messageCategory":"01","transStatus":"Y","eci":"05","authenticationValue":"dGVzdA==","interactionCounter":"01"}"#,
             "RReq.authenticationValue.format", "expected 28 characters of base64"),
            (#"{\#(Self.ids),"dsTransID":"0b2c7d54-ff21-4a4c-9f8a-3a0f3cb1e9a3","messageType":"ARes","messageVersion":"2.2.0","transStatus":"Y","authenticationValue":"dGVzdA=="}"#,
             "ARes.authenticationValue.format", "expected 28 characters of base64"),
            (#"{\#(Self.ids),"messageType":"CReq","messageVersion":"2.2.0","challengeWindowSize":"05","challengeDataEntry":"\#(String(repeating: "1", count: 46))"}"#,
             "CReq.challengeDataEntry.format", "more than 45 characters"),
            (#"{"threeDSServerTransID":"8a880dc0-d2d2-4067-bcb1-b08d1690b26e","messageType":"AReq","messageVersion":"2.2.0","acctNumber":"4000000000001"}"#,
             "", ""), // 13 digits: well-formed, a plain mask
            (#"{"threeDSServerTransID":"8a880dc0-d2d2-4067-bcb1-b08d1690b26e","messageType":"AReq","messageVersion":"2.2.0","acctNumber":"40000000000010001234"}"#,
             "AReq.acctNumber.format", "not 13–19 digits"),
        ]
        for c in cases {
            let text = stored(c.text)
            #expect(!text.contains("dGVzdA==") && !text.contains("1111111111") && !text.contains("4000000000001"), "\(text)")
            let tx = ThreeDSTransaction(key: "t", messages: [
                InspectedMessage(exchangeID: 7, direction: "request", location: "body", type: try JSON.parse(text)["messageType"]!.stringValue!, json: try JSON.parse(text))])
            let found = Validator.validate(transactions: [tx]).filter { $0.rule.hasSuffix(".format") }
            if c.rule.isEmpty {
                #expect(found.isEmpty, "\(found.map(\.rule))")
            } else {
                #expect(found.map(\.rule) == [c.rule], "\(text): \(found.map(\.rule))")
                #expect(found.first?.detail == c.detail + " (judged when it was masked)" && found.first?.severity == .error)
            }
        }
    }

    /// Sessions written before keep plain masks: present, format unknown, no finding (as `maskedValuesArePresentButNotFormatChecked`).
    @Test func plainMasksOfOlderSessionsStayUnjudged() throws {
        let found = try Self.findings([("body", #"{\#(Self.ids),"messageType":"CReq","messageVersion":"2.2.0","challengeWindowSize":"05","challengeDataEntry":"***"}"#)])
        #expect(!found.contains { $0.rule.hasSuffix(".format") })
    }

    /// What masking judges is what the rules check: the same format for each element it hides, in every message that has one.
    @Test func maskingJudgesByTheRulesFormats() throws {
        let samples: [JSON] = [.string(""), .string("1"), .string("dGVzdA=="), .string("AAABBBCCCDDDEEEFFFGGGHHHIII="), .string("AAABBBCCCDDDEEEFFFGGGHHHII=="),
                               .string("AAABBBCCCDDDEEEFFFGGGHHH=III"), .string("4000000000001091"), .string("400000******1091"), .string("400000000000"),
                               .string("4000000000001091000"), .string("40000000000010910001"), .string("4000 0000 0000 1091"), .string(String(repeating: "x", count: 45)),
                               .string(String(repeating: "x", count: 46)), .string(String(repeating: "é", count: 45)), .string(String(repeating: "x", count: 256)),
                               .string(String(repeating: "x", count: 257)), .number("12345678"), .bool(true)]
        var checked = 0
        for rule in ValidationRules.elements {
            guard let masked = MaskedFormat.byElement[rule.element] else { continue }
            switch (masked, rule.format) {
            case (.cardNumber, .cardNumber): break
            case let (.base64(a), .base64(b)) where a == b: break
            case let (.text(a), .text(b)) where a == b: break
            default: Issue.record("\(rule.id): masking judges \(masked), the rule checks \(rule.format)")
            }
            for v in samples { #expect((masked.problem(v) == nil) == (rule.format.problem(v, version: .v2_3) == nil), "\(rule.id) \(v)") }
            checked += 1
        }
        #expect(checked == 5) // AReq.acctNumber, ARes and RReq authenticationValue, CReq's two entries
    }

    // MARK: item 3, UUIDs outside RFC 4122

    @Test func aUUIDOfAnotherVersionOrVariantIsAWarning() throws {
        func warnings(_ id: String) throws -> [Finding] {
            try Self.findings([("body", #"{"threeDSServerTransID":"\#(id)","acsTransID":"d7c1ee99-9478-44a6-b1f2-391e29c6b340","messageType":"CRes","messageVersion":"2.2.0","transStatus":"Y","challengeCompletionInd":"Y"}"#)])
        }
        let placeholder = try warnings("12341234-1234-1234-1234-123412341234")
        #expect(placeholder.map(\.rule) == ["CRes.threeDSServerTransID.rfc4122"] && placeholder.allSatisfy { $0.severity == .warning }, "\(placeholder)")
        #expect(placeholder.first?.detail.contains("variant") == true && placeholder.first?.pointer == "/threeDSServerTransID")
        #expect(try warnings("00000000-0000-0000-0000-000000000000").first?.detail.contains("nil UUID") == true)
        #expect(try warnings("8a880dc0-d2d2-0067-bcb1-b08d1690b26e").first?.detail.contains("version 0") == true)
        #expect(try warnings("8a880dc0-d2d2-7067-bcb1-b08d1690b26e").first?.detail.contains("version 7") == true)
        #expect(try warnings("8a880dc0-d2d2-4067-ccb1-b08d1690b26e").first?.detail.contains("variant digit c") == true)
        // What real systems send: versions 1, 4 and 5, RFC 4122's variant, either case.
        for ok in ["c232ab00-9414-11ec-b3c8-9f6bdeced846", "8a880dc0-d2d2-4067-bcb1-b08d1690b26e", "886313e1-3b8a-5372-9b90-0c9aee199e5d",
                   "8A880DC0-D2D2-4067-BCB1-B08D1690B26E", UUID().uuidString] {
            #expect(try warnings(ok).isEmpty, "\(ok)")
        }
        // A UUID of the wrong shape stays an error, without a warning beside it.
        #expect(try warnings("12341234-1234-1234-1234-12341234123").map(\.rule) == ["CRes.threeDSServerTransID.format"])
    }
}
