import Foundation
import Testing
import TapCore
@testable import TapEMV

/// Issue 29, item 2: masked values were never format-checked, so an RReq whose `authenticationValue` is 8 characters
/// (`dGVzdA==`) validated clean once masked. Masking now judges the value first and keeps a malformed one's verdict in the
/// mask; well-formed values keep the plain masks they always had.
@Suite struct MaskVerdictTests {
    /// Stored by the recorder's path (the scan, or the walk it hands over to) and by the full parse: the same bytes.
    static func stored(_ text: String) -> JSON {
        let b = Array(text.utf8)
        let fast = ThreeDSContent.prepare(b, mask: true), full = ThreeDSContent.prepare(b, mask: true, scan: false)
        #expect(fast.stored == full.stored, "\(String(decoding: fast.stored, as: UTF8.self)) vs \(String(decoding: full.stored, as: UTF8.self))")
        return (try? JSON.parse(fast.stored)) ?? .null
    }

    static let ids = #""threeDSServerTransID":"8a880dc0-d2d2-4067-bcb1-b08d1690b26e","acsTransID":"d7c1ee99-9478-44a6-b1f2-391e29c6b340""#

    /// The issue's messages: the element, the message holding it, and the verdict the mask must carry.
    static let malformed: [(element: String, message: String, problem: String)] = [
        ("authenticationValue", #"{"messageType":"RReq","messageVersion":"2.2.0",\#(Self.ids),"transStatus":"Y","authenticationValue":"dGVzdA=="}"#,
         "expected 28 characters of base64"),
        ("authenticationValue", #"{"messageType":"ARes","messageVersion":"2.2.0",\#(Self.ids),"transStatus":"Y","authenticationValue":"dGVzdA=="}"#,
         "expected 28 characters of base64"),
        ("authenticationValue", #"{"messageType":"ARes","transStatus":"Y","authenticationValue":"AAABBBCCCDDDEEEFFFGGGHHHII!="}"#,
         "expected 28 characters of base64"),
        ("authenticationValue", #"{"messageType":"RReq","authenticationValue":12345678}"#, "expected a string"),
        ("acctNumber", #"{"messageType":"AReq","acctNumber":"40000000000010001234"}"#, "not 13–19 digits"),
        ("acctNumber", #"{"messageType":"AReq","acctNumber":"400000000000"}"#, "not 13–19 digits"),
        ("acctNumber", #"{"messageType":"AReq","acctNumber":"400000ab00001091"}"#, "not 13–19 digits"),
        ("acctNumber", #"{"messageType":"AReq","acctNumber":"4000-0000-0000-1091"}"#, "not 13–19 digits"),
        ("acctNumber", #"{"acctNumber":4000000000001091,"messageType":"AReq"}"#, "expected a string"),
        ("challengeDataEntry", #"{"messageType":"CReq",\#(Self.ids),"challengeDataEntry":"\#(String(repeating: "1", count: 50))"}"#,
         "more than 45 characters"),
        ("challengeDataEntry", #"{"messageType":"CReq","challengeDataEntry":""}"#, "empty"),
        ("challengeDataEntry", #"{"messageType":"CReq","challengeDataEntry":1234}"#, "expected a string"),
        ("challengeHTMLDataEntry", #"{"messageType":"CReq","challengeHTMLDataEntry":"otp=\#(String(repeating: "9", count: 260))"}"#,
         "more than 256 characters"),
    ]

    @Test(arguments: malformed.indices)
    func aMalformedValueKeepsItsVerdictInTheMask(_ n: Int) throws {
        let (element, message, problem) = Self.malformed[n]
        let stored = Self.stored(message)
        let masked = try #require(stored[element]?.stringValue, "\(stored)")
        #expect(MaskVerdict.problem(in: masked) == problem, "\(masked)")
        #expect(masked.contains("***"))
        // The value itself is gone: only its mask and the sentence are stored.
        let original = try #require(try JSON.parse(message)[element])
        if let s = original.stringValue, s.count > 4 { #expect(!String(decoding: Self.stored(message).bytes, as: UTF8.self).contains(s)) }
        // Masking a stored body again changes nothing (an export imported again, a replay recorded again).
        #expect(Self.stored(String(decoding: stored.bytes, as: UTF8.self)) == stored)
    }

    @Test func wellFormedValuesKeepPlainMasksOnTheScansPath() throws {
        let body = #"{"messageType":"ARes",\#(Self.ids),"transStatus":"Y","authenticationValue":"AAABBBCCCDDDEEEFFFGGGHHHIII=","acctNumber":"4000000000001091","challengeDataEntry":"123456","cvv":123}"#
        let scanned = try #require(JSONBodyScan.scan(Array(body.utf8)), "the scan keeps the common case")
        let json = try JSON.parse(scanned.stored)
        #expect(json["authenticationValue"] == .string("***") && json["challengeDataEntry"] == .string("***") && json["cvv"] == .string("***"))
        #expect(json["acctNumber"] == .string("400000******1091"))
        #expect(Self.stored(body) == json)
    }

    @Test func outsideA3DSMessageTheMaskIsPlain() throws {
        // A payment API's own fields, and a 3DS message's nested objects, are masked as before: no verdict.
        #expect(Self.stored(#"{"authenticationValue":"dGVzdA==","acctNumber":"12"}"#) == (try JSON.parse(#"{"authenticationValue":"***","acctNumber":"**"}"#)))
        #expect(Self.stored(#"{"messageType":"Payment","otp":"1","challengeDataEntry":""}"#)["challengeDataEntry"] == .string("***"))
        let nested = Self.stored(#"{"messageType":"AReq","acctInfo":{"acctNumber":"400000000000"}}"#)
        #expect(nested["acctInfo"]?["acctNumber"] == .string("************"))
        // The scan gives a body up only when a 3DS message holds a value that may not fit.
        #expect(JSONBodyScan.scan(Array(#"{"authenticationValue":"dGVzdA==","acctNumber":4000000000001091}"#.utf8)) != nil)
        #expect(JSONBodyScan.scan(Array(#"{"authenticationValue":"dGVzdA==","messageType":"RReq"}"#.utf8)) == nil)
    }

    @Test func aBrowserMessageInAFormKeepsItsVerdict() throws {
        // The same walk masks base64url JSON in a form field (a browser CReq or CRes) and a decrypted app-channel CReq.
        let creq = #"{"messageType":"CReq","messageVersion":"2.2.0","challengeDataEntry":"\#(String(repeating: "7", count: 46))"}"#
        let body = "creq=" + Base64URL.encode(Array(creq.utf8))
        let stored = String(decoding: ThreeDSContent.prepare(Array(body.utf8), mask: true).stored, as: UTF8.self)
        let field = try #require(FormBody.parse(stored)?.first { $0.0 == "creq" }?.1)
        let json = try JSON.parse(try #require(Base64URL.decode(field)))
        #expect(json["challengeDataEntry"] == .string("*** (malformed: more than 45 characters)"))
        #expect(Masking.mask(try JSON.parse(creq))["challengeDataEntry"] == json["challengeDataEntry"])
    }

    @Test func onlyTheSentencesMaskingWritesAreRead() {
        #expect(MaskVerdict.problem(in: "***") == nil)
        #expect(MaskVerdict.problem(in: "400000******1091") == nil)
        #expect(MaskVerdict.problem(in: "*** (malformed: expected 28 characters of base64)") == "expected 28 characters of base64")
        #expect(MaskVerdict.problem(in: "*** (malformed: anything else)") == nil)
        #expect(MaskVerdict.problem(in: "clear text (malformed: empty)") == nil, "not a mask")
        // A cardholder's text that looks like a verdict but holds more than a mask is masked whole.
        let typed = Masking.mask(.object([("messageType", .string("CReq")), ("challengeDataEntry", .string("1234 (malformed: empty)"))]))
        #expect(typed["challengeDataEntry"] == .string("***"))
    }
}
