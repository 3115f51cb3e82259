import Foundation
import Testing
import TapCore
@testable import TapEMV

/// The recorder's scan against the full parse: same masking, same summaries, and it gives up where it must.
@Suite struct JSONBodyScanTests {
    static func both(_ text: String) -> (fast: (stored: [UInt8], messages: [ThreeDSContent.Found]), full: (stored: [UInt8], messages: [ThreeDSContent.Found])) {
        let b = Array(text.utf8)
        return (ThreeDSContent.prepare(b, mask: true), ThreeDSContent.prepare(b, mask: true, scan: false))
    }

    @Test(arguments: [
        #"{"messageType":"AReq","messageVersion":"2.2.0","acctNumber":"4000000000001091","threeDSServerTransID":"8a880dc0-d2d2-4067-bcb1-b08d1690b26e"}"#,
        #"{ "messageType" : "CReq", "challengeDataEntry" : "1234", "nested": {"otp": "9999", "list": [ {"cvv": "123"}, 1.5e3, -0, true, null ] } }"#,
        #"{"messageType":"ARes","transStatus":"Y","authenticationValue":"AAABBBCCCDDDEEEFFFGGGHHHIII=","note":"card 4000000000001091 in text"}"#,
        #"{"messageType":"RReq","messageType":"Erro","acctNumber":"12","CVV2":"***"}"#,
        #"{"messageType":1,"transStatus":"Y"}"#,
        #"{"a":"x\"y","messageType":"PReq","b":"\/path"}"#,
        #"{"acctNumber":{"inner":"4000000000001091"},"otp":{"x":"1"}}"#,
        #"{}"#,
        // JWSs (acsSignedContent): a payload with something to mask is masked, its signature left out; one without is kept
        #"{"messageType":"ARes","acsSignedContent":"eyJhbGciOiJQUzI1NiJ9.eyJhY2N0TnVtYmVyIjoiNDAwMDAwMDAwMDAwMTA5MSIsIngiOjF9.c2ln","list":["eyJhbGciOiJQUzI1NiJ9.eyJvdHAiOiIxMjM0In0.c2ln"]}"#,
        #"{"jwt":"eyJhbGciOiJIUzI1NiJ9.eyJhIjoxfQ.sig","notJWT":"eyJ-no-dot"}"#,
        // five parts (a JWE: sdkEncData) and four are no JWS: kept as they are, as the full path keeps them; 13- and 12-digit PANs
        #"{"messageType":"AReq","sdkEncData":"eyJhbGciOiJSU0EtT0FFUC0yNTYifQ.eyJwIjoiNDAwMDAwMDAwMDAwMTA5MSJ9.aXY.Y2lwaGVy.dGFn","acctNumber":"4000000000006"}"#,
        #"{"x":"eyJhbGciOiJQUzI1NiJ9.eyJwIjoiNDAwMDAwMDAwMDAwMTA5MSJ9.c2ln.more","acctNumber":"400000000000"}"#,
        // Issue 23: numbers under secret keys and card numbers as numbers, forms, queries, tokens anywhere in a string.
        #"{"cvv":123,"otp": -1234.5e2,"pin":null,"PIN":true,"acctNumber":4000000000001091,"n":[4000000000001091, 1.5, 40000000000010920]}"#,
        #"{"a":["x=1&otp=9999&next=%2F", "https://h.example/?q=%224000000000001091%22&jwt=eyJhbGciOiJQUzI1NiJ9.eyJvdHAiOiIxMjM0In0.c2ln"]}"#,
        #"{"auth":"Bearer eyJhbGciOiJQUzI1NiJ9.eyJhY2N0TnVtYmVyIjoiNDAwMDAwMDAwMDAwMTA5MSIsIngiOjF9.c2ln","creq":"eyJvdHAiOiIxMjM0In0"}"#,
        #"{"card":"4000 0000 0000 1091","dashes":"4000-0000-0000-1091","t":"they key eyes=", "e": "e", "ew": "ew"}"#,
        #"{"text":"[4000000000001091, {}]","obj":"{}", "messageType": "CRes"}"#,
    ])
    func scanAgreesWithTheFullParse(_ text: String) throws {
        let (fast, full) = Self.both(text)
        #expect(fast.messages.map(\.summary) == full.messages.map(\.summary))
        #expect((try? JSON.parse(fast.stored)) == (try? JSON.parse(full.stored)), "\(String(decoding: fast.stored, as: UTF8.self))")
        let stored = String(decoding: fast.stored, as: UTF8.self)
        for secret in ["4000000000001091", "1234", "9999", "\"123\"", "AAABBBCCC", "eyJhY2N0TnVtYmVyIjoiNDAwMDAwMDAwMDAwMTA5MSIsIngiOjF9", "eyJvdHAiOiIxMjM0In0"] { #expect(!stored.contains(secret), "\(secret) in \(stored)") }
    }

    @Test func theScanKeepsTheBodysOwnFormattingAndFindsTheSummary() throws {
        let text = #"{ "messageType": "AReq",  "messageVersion": "2.3.1", "acctNumber": "4000000000001091" }"#
        let r = try #require(JSONBodyScan.scan(Array(text.utf8)))
        #expect(String(decoding: r.stored, as: UTF8.self) == #"{ "messageType": "AReq",  "messageVersion": "2.3.1", "acctNumber": "400000******1091" }"#)
        #expect(r.summary?.messageType == "AReq" && r.summary?.messageVersion == "2.3.1" && r.changed)
    }

    @Test(arguments: [
        #"{"messageType":"A\u0052eq"}"#,                        // \u escapes: the full parse decides
        #"{"jwt":"eyJhbGciOiJIUzI1NiJ9.eyJhIjoxfQ.s\/g"}"#,        // an escaped JWT: the full path decodes it first
        #"{"messageType":"eyJhbGciOiJIUzI1NiJ9.eyJhIjoxfQ.sig"}"#,  // a summary value that may be a JWT
        #"{"acct\nNumber":"1"}"#,                                 // an escaped key
        #"{"a":01}"#, #"{"a":}"#, #"{"a":1,}"#, #"{"a":1} x"#, #"[1]"#, // not strict JSON, or not an object
        #"{"messageType":"ARes","padding":"x\x"}"#,               // an escape JSON does not have (found by the fuzzer)
        #"{"password":["hunter2"]}"#, #"{"otp":{"a":1}}"#,         // secret arrays and objects are masked whole by the walk
        #"{"x":"a=b\/c"}"#, #"{"x":" \n{\"cvv\":\"1\"}"}"#,   // escaped strings that may hold an encoding
        #"{"messageType":"a=b"}"#,                                // a summary value that may
    ])
    func theScanGivesUpWhereItMust(_ text: String) {
        #expect(JSONBodyScan.scan(Array(text.utf8)) == nil)
        let (fast, full) = Self.both(text)
        #expect(fast.stored == full.stored && fast.messages.map(\.summary) == full.messages.map(\.summary))
    }

    /// The fast path masks its result without searching it for NUL bytes (`maskLuhnRuns(_:mayHoldNUL:)`): a raw NUL,
    /// in a string or between tokens, makes the scan give up, and a card number split by one is still masked.
    @Test func aRawNULIsNeverInWhatTheScanAccepts() {
        let inString = Array(#"{"messageType":"AReq","x":"4000"#.utf8) + [0] + Array(#"000000001091"}"#.utf8)
        let between = Array(#"{"messageType":"AReq","acctNumber":"4000000000001091"}"#.utf8) + [0]
        #expect(JSONBodyScan.scan(inString) == nil)
        #expect(JSONBodyScan.scan(between) == nil)
        #expect(!String(decoding: ThreeDSContent.prepare(inString, mask: true).stored, as: UTF8.self).contains("000000001091"))
        // An escaped NUL stays escaped text in what the scan stores.
        let escaped = Array(#"{"messageType":"AReq","x":"=\u0000"}"#.utf8)
        #expect(ThreeDSContent.prepare(escaped, mask: true).stored.firstIndex(of: 0) == nil)
    }

    @Test func invalidUTF8IsNotJSONForEither() {
        let body = Array(#"{"messageType":"AReq","x":""#.utf8) + [0xFF, 0xFE] + Array(#""}"#.utf8)
        #expect(JSONBodyScan.scan(body) == nil)
        #expect(ThreeDSContent.prepare(body, mask: true).messages.isEmpty)
    }
}
