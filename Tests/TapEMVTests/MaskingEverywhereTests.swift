import Foundation
import Testing
import TapCore
import TapJOSE
@testable import TapEMV

/// Issue 23, item 3: card data was stored in clear when it came in another container than a JSON string (a JWT as the
/// body, in a form field or in a query; a number; a card number with separators or percent-encoded). The masking walk
/// now reads every container the recorder decodes, and what it cannot decode gets the byte scan.
@Suite struct MaskingEverywhereTests {
    static let pan = "4000000000001000"
    /// The issue's JWT: HS256 over `{"pan":"4000000000001000","securitycode":"123"}`.
    static let jwt = try! JWS.signHS256(payload: Array(#"{"pan":"4000000000001000","securitycode":"123"}"#.utf8), secret: Array("k".utf8)).compact

    /// A text and everything it hides, decoded: percent escapes, and each base64url run (a JWT's parts, base64url JSON),
    /// repeated so that nested encodings are opened too.
    static func revealed(_ text: String) -> String {
        var all = text
        var layer = [text]
        for _ in 0..<6 {
            var next: [String] = []
            for t in layer {
                if let p = t.removingPercentEncoding, p != t { next.append(p) }
                let runs = t.split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }).filter { $0.count >= 8 }
                for r in runs {
                    if let d = Base64URL.decode(String(r)), let s = String(validating: d, as: UTF8.self) { next.append(s) }
                }
            }
            guard !next.isEmpty else { break }
            all += "\n" + next.joined(separator: "\n")
            layer = next
        }
        return all
    }

    /// No card number (in any spelling), security code, OTP or password of the fixtures is left in `text`.
    static func expectNothingInClear(_ text: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let all = revealed(text)
        for secret in [pan, "4000 0000 0000 1000", "4000-0000-0000-1000", #""123""#, ":123", "hunter2", ":1234", "=1234", "9876"] {
            #expect(!all.contains(secret), "\(what): \(secret) in \(all)", sourceLocation: sourceLocation)
        }
    }

    static func bothPaths(_ body: String) -> (fast: [UInt8], full: [UInt8]) {
        let b = Array(body.utf8)
        let fast = ThreeDSContent.prepare(b, mask: true), full = ThreeDSContent.prepare(b, mask: true, scan: false)
        #expect(fast.messages.map(\.summary) == full.messages.map(\.summary))
        return (fast.stored, full.stored)
    }

    static var shapes: [(String, String)] {
        let b64 = { (s: String) in Base64URL.encode(Array(s.utf8)) }
        let nested = b64(#"{"form":"x=1&jwt=\#(jwt)"}"#) // a JWT in a form in base64url JSON
        return [
            ("a JWT as the body (application/jwt)", jwt),
            ("a JWT in a form field", "jwt=\(jwt)"),
            ("a JWT in a form field beside others", "a=1&jwt=\(jwt)&b=two+words"),
            ("a JWT in a JSON string", #"{"jwt":"\#(jwt)"}"#),
            ("a JWT in a URL in a JSON string", #"{"next":"https://shop.example/return?jwt=\#(jwt)&x=1"}"#),
            ("a JWT after a scheme in text", "Bearer \(jwt) more text"),
            ("numbers under secret keys", #"{"cvv":123,"otp":1234,"challengeDataEntry":1234,"password":["hunter2"]}"#),
            ("an object under a secret key", #"{"pin":{"value":"9876"},"x":1}"#),
            ("acctNumber as a number", #"{"messageType":"AReq","acctNumber":4000000000001000}"#),
            ("a card number as a number elsewhere", #"{"card":{"number":4000000000001000,"exp":1228}}"#),
            ("a card number with spaces", #"{"card":"4000 0000 0000 1000"}"#),
            ("a card number with dashes in text", "card 4000-0000-0000-1000"),
            ("a percent-encoded card number in a form", "note=card%204000000000001000"),
            ("percent-encoded quotes around a card number", #"{"url":"https://x.example/?q=%224000000000001000%22"}"#),
            ("JSON text in a JSON string", #"{"data":"{\"pan\":\"4000000000001000\",\"cvv\":\"123\"}"}"#),
            ("base64url JSON in a JSON string", #"{"creq":"\#(b64(#"{"acctNumber":"4000000000001000","otp":"1234"}"#))"}"#),
            ("base64url JSON in HTML", #"<form><input type="hidden" name="creq" value="\#(b64(#"{"messageType":"CReq","challengeDataEntry":"1234","x":"4000 0000 0000 1000"}"#))"></form>"#),
            ("a JWT in a form in base64url JSON in a JSON string", #"{"state":"\#(nested)"}"#),
            ("a card number in an array", #"[{"n":"4000000000001000"},4000000000001000]"#),
        ]
    }

    @Test(arguments: shapes)
    func everyShapeIsStoredMasked(_ name: String, _ body: String) throws {
        let (fast, full) = Self.bothPaths(body)
        Self.expectNothingInClear(String(decoding: fast, as: UTF8.self), "\(name) (recorder's path)")
        Self.expectNothingInClear(String(decoding: full, as: UTF8.self), "\(name) (full parse)")
        if let a = try? JSON.parse(fast) {
            #expect(a == (try? JSON.parse(full)), "\(name): both paths store the same JSON")
        }
    }

    @Test func aMaskedJWTIsReEncodedAndLosesItsSignature() throws {
        let stored = String(decoding: ThreeDSContent.prepare(Array(Self.jwt.utf8), mask: true).stored, as: UTF8.self)
        let parts = stored.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3 && parts[2].isEmpty, "the signature no longer covers the payload: left out (\(stored))")
        #expect(parts[0] == Self.jwt.split(separator: ".")[0], "the header is kept")
        let payload = try JSON.parse(try #require(Base64URL.decode(parts[1])))
        #expect(payload == .object([("pan", .string("400000******1000")), ("securitycode", .string("***"))]))
        // A JWT with nothing to mask is kept as signed, wherever it is.
        let clean = try JWS.signHS256(payload: Array(#"{"sub":"merchant-7","amount":1250}"#.utf8), secret: Array("k".utf8)).compact
        for text in [clean, "jwt=\(clean)", #"{"jwt":"\#(clean)"}"#, "https://x.example/cb?jwt=\(clean)"] {
            #expect(ThreeDSContent.prepare(Array(text.utf8), mask: true).stored == Array(text.utf8), "\(text)")
        }
    }

    @Test func urlsKeepTheirBytesButForWhatIsMasked() {
        #expect(Masking.maskText("/pct?q=%224000000000001000%22") == "/pct?q=%22400000******1000%22")
        #expect(Masking.maskText("http://h:1/c?pin=1234&next=%2Fhome&otp=***") == "http://h:1/c?pin=***&next=%2Fhome&otp=***")
        #expect(Masking.maskText("/p?note=card+4000-0000-0000-1000&x=a%20b") == "/p?note=card%204000-00**-****-1000&x=a%20b")
        let masked = Masking.maskText("http://h/jwt-query?jwt=\(Self.jwt)&x=1")
        #expect(masked.hasPrefix("http://h/jwt-query?jwt=eyJ") && masked.hasSuffix(".&x=1"), "\(masked)")
        Self.expectNothingInClear(masked, "a JWT in a query")
        let path = "/verify/\(Self.jwt)"
        Self.expectNothingInClear(Masking.maskText(path), "a JWT in a path")
        for clean in ["http://127.0.0.1:8443/ds/areq", "/a?b=1&c=%2F&d", "/x?threeDSSessionData=eyJub3QiOiJqc29u", "https://h/?q=2026-11-30"] {
            #expect(Masking.maskText(clean) == clean)
        }
    }

    @Test func secretKeysAreMaskedWhateverTheValue() throws {
        let json = try JSON.parse(#"{"cvv":123,"otp":"1234","pin":[1,2],"password":{"a":"b"},"passcode":null,"PIN":true,"acctNumber":4000000000001000}"#)
        let m = Masking.mask(json)
        for key in ["cvv", "otp", "pin", "password"] { #expect(m[key] == .string("***"), "\(key)") }
        #expect(m["passcode"] == .null && m["PIN"] == .bool(true), "null and booleans hold nothing to mask")
        #expect(m["acctNumber"] == .string("400000******1000"))
        // The recorder's scan masks numbers in place and leaves arrays and objects under secret keys to the full parse.
        let numbers = try #require(JSONBodyScan.scan(Array(#"{ "cvv" : 123, "acctNumber": 4000000000001000, "n": 4000000000001000.5 }"#.utf8)))
        #expect(String(decoding: numbers.stored, as: UTF8.self) == #"{ "cvv" : "***", "acctNumber": "400000******1000", "n": "400000******1000.5" }"#)
        #expect(JSONBodyScan.scan(Array(#"{"password":["hunter2"]}"#.utf8)) == nil)
    }

    /// Each encoding is a layer; past `Masking.maxDepth` of them only the byte scan looks (and it cannot look inside
    /// base64url): deep chains cost no more than the limit's worth of decoding.
    @Test func nestingIsFollowedToALimit() {
        func wrap(_ inner: String, _ times: Int) -> String {
            var t = inner
            for _ in 0..<times {
                t = (try? JWS.signHS256(payload: JSON.object([("jwt", .string(t))]).bytes, secret: Array("k".utf8)).compact) ?? ""
            }
            return t
        }
        // Each JWT adds two layers (its payload, then the JSON string in it).
        let shallow = wrap(Self.jwt, 3)
        Self.expectNothingInClear(String(decoding: ThreeDSContent.maskBody(Array(shallow.utf8)), as: UTF8.self), "three JWTs deep")
        let deep = wrap(Self.jwt, 16) // about 150 KB: each JWT is a third larger than the one inside
        let started = Date()
        let stored = ThreeDSContent.maskBody(Array(deep.utf8))
        #expect(Date().timeIntervalSince(started) < 2)
        #expect(stored == Array(deep.utf8), "beyond the limit nothing is re-encoded")
    }

    /// JSON text nested in strings, each level escaped again, and JSON too deep to read inside a string: no crash, and the
    /// card number is masked either by the walk or by the byte scan.
    @Test func nestedJSONTextIsReadWithinBounds() throws {
        func nested(_ levels: Int) -> [UInt8] {
            var inner = JSON.object([("cvv", .string("123")), ("n", .number("4000000000001000"))])
            for _ in 0..<levels { inner = .object([("data", .string(inner.compact))]) }
            return inner.bytes
        }
        let six = String(decoding: ThreeDSContent.maskBody(nested(6)), as: UTF8.self).replacingOccurrences(of: "\\", with: "")
        Self.expectNothingInClear(six, "JSON text six strings deep")
        // Past the limit the walk does not look: the byte scan still masks the card number, not the code.
        let twelve = String(decoding: ThreeDSContent.maskBody(nested(12)), as: UTF8.self)
        #expect(twelve.contains("400000******1000") && !twelve.contains(Self.pan))
        let deep = String(repeating: "[", count: 40) + "4000000000001000" + String(repeating: "]", count: 40)
        let body = Array(JSON.object([("a", .string(deep))]).bytes)
        for scan in [true, false] {
            let stored = String(decoding: ThreeDSContent.prepare(body, mask: true, scan: scan).stored, as: UTF8.self)
            #expect(stored.contains("400000******1000") && !stored.contains(Self.pan))
        }
    }

    @Test func whatCannotBeDecodedGetsTheByteScan() {
        // Not UTF-8 (the form path gave up and stored it in clear), cut short, or binary: the card numbers are masked.
        let notUTF8 = Array("a=1&pan=4000-0000-0000-1000&b=".utf8) + [0xFF, 0xFE] + Array("&c=4000 0000 0000 1000".utf8)
        Self.expectNothingInClear(String(decoding: ThreeDSContent.prepare(notUTF8, mask: true).stored, as: UTF8.self), "not UTF-8")
        let truncated = Array(#"{"acctNumber":"4000000000001000","note":"4000 0000 0000 1000","cvv":"1"#.utf8)
        Self.expectNothingInClear(String(decoding: ThreeDSContent.prepare(truncated, mask: true).stored, as: UTF8.self), "truncated JSON")
        let binary: [UInt8] = [0x1F, 0x8B, 0x08, 0x00] + Array("4000000000001000".utf8) + [0x00, 0xC3]
        #expect(!String(decoding: ThreeDSContent.prepare(binary, mask: true).stored, as: UTF8.self).contains(Self.pan))
    }

    /// Bodies with nothing to mask are stored byte for byte as they came (the recorder's sessions do not change).
    @Test func cleanBodiesAreKeptByteForByte() throws {
        let jws = try JWS.signHS256(payload: Array(#"{"acsEphemPubKey":{"kty":"EC"},"acsURL":"https://acs.example/c"}"#.utf8), secret: Array("k".utf8)).compact
        let jwe = "eyJhbGciOiJSU0EtT0FFUC0yNTYiLCJlbmMiOiJBMTI4Q0JDLUhTMjU2In0.a2V5.aXY.Y2lwaGVydGV4dA.dGFn"
        let bodies = [
            #"{"messageType":"AReq","messageVersion":"2.2.0","sdkEncData":"\#(jwe)","acctNumber":"400000******1000","purchaseAmount":"1250","purchaseDate":"20261130160000","notificationURL":"https://m.example/n?order=42&x=y","threeDSServerTransID":"8a880dc0-d2d2-4067-bcb1-b08d1690b26e"}"#,
            #"{ "messageType": "ARes", "acsSignedContent": "\#(jws)", "authenticationValue": "***", "list": [1, 2.5, -3, "eye", "they=key"] }"#,
            jwe, "a=1&b=2", "acsTransID=48874f8b-05e9-4e4a-b734-f53329f09606&uiType=01&answer=***&action=submit",
            "<html><p>They say: eyes on the key. Order 1234567890123, 2026-11-30 16:00, +44 20 7946 0958.</p></html>",
            "plain text with an = sign and eyJ but no token", "",
        ]
        for body in bodies {
            let b = Array(body.utf8)
            #expect(ThreeDSContent.prepare(b, mask: true).stored == b, "\(body)")
            #expect(ThreeDSContent.prepare(b, mask: true, scan: false).stored == b, "\(body)")
        }
    }

    @Test func headersHoldNoJWTWithACardNumber() {
        let masked = Masking.maskHeaders([("X-Payment-Token", Self.jwt), ("Accept", "*/*")])
        Self.expectNothingInClear(masked[0].1, "a JWT in a header")
        #expect(masked[1].1 == "*/*")
        let clean = [("Host", "127.0.0.1:8443"), ("User-Agent", "curl/7.88.1"), ("Connection", "keep-alive"), ("X-Key", "eyes")]
        #expect(Masking.maskHeaders(clean).map(\.1) == clean.map(\.1))
    }
}

/// NUL bytes between a card number's digits hid it from the byte scan: a UTF-16 body (`4\0 0\0 …`, either byte order)
/// and a number split by one NUL were stored whole (a hostile client's find). They are masked in place.
@Suite struct MaskingAcrossNULTests {
    static func stored(_ bytes: [UInt8]) -> [UInt8] { ThreeDSContent.maskLuhnRuns(bytes) }

    @Test func utf16BodiesAreMasked() {
        let text = #"{"acctNumber":"4000000000001091"}"#
        for bigEndian in [false, true] {
            var bytes: [UInt8] = bigEndian ? [0xFE, 0xFF] : [0xFF, 0xFE]
            for unit in text.utf16 {
                let pair = [UInt8(unit & 0xFF), UInt8(unit >> 8)]
                bytes += bigEndian ? pair.reversed() : pair
            }
            let out = Self.stored(bytes)
            var units: [UInt16] = []
            for k in stride(from: 2, to: out.count - 1, by: 2) {
                let (high, low) = bigEndian ? (out[k], out[k + 1]) : (out[k + 1], out[k])
                units.append(UInt16(high) << 8 | UInt16(low))
            }
            #expect(String(decoding: units, as: UTF16.self) == #"{"acctNumber":"400000******1091"}"#, "big-endian \(bigEndian)")
        }
    }

    @Test func aNumberSplitByANulIsMaskedAndTheNulKept() {
        let out = Self.stored(Array("pan=4000\u{0}000000001091&x=1".utf8))
        #expect(String(decoding: out, as: UTF8.self) == "pan=4000\u{0}00******1091&x=1")
        let plain = Array("no card here\u{0}12345 and 2024-01-01".utf8)
        #expect(Self.stored(plain) == plain, "nothing else changes")
    }

    @Test func containsFindsAByteAnywhere() {
        for n in [0, 1, 15, 16, 17, 40] {
            for at in 0..<n {
                var b = [UInt8](repeating: 0x41, count: n)
                b[at] = 0
                #expect(b.withUnsafeBufferPointer { ByteScan.contains($0, byte: 0) })
            }
            #expect(![UInt8](repeating: 0x41, count: n).withUnsafeBufferPointer { ByteScan.contains($0, byte: 0) })
        }
    }
}

/// A card number that JSON escapes hide from the byte scan (digits written `\u0034`, an escaped NUL between them) in a
/// string that is not acctNumber was stored whole (a hostile client's find); it is masked in the decoded text.
@Suite struct MaskingEscapedDigitsTests {
    static func stored(_ body: String) -> String {
        String(decoding: ThreeDSContent.prepare(Array(body.utf8), mask: true).stored, as: UTF8.self)
    }

    @Test func escapedDigitsAndNulsAreMasked() throws {
        for body in [#"{"note":"\u0034000000000001091"}"#, #"{"note":"40000000\u000000001091"}"#, #"{"a":["x",{"b":"4\u00000\u00000\u00000\u0000000000001091"}]}"#,
                     #"{"\u0034000000000001091":1}"#] {
            let out = Self.stored(body)
            let decoded = try JSON.parse(Array(out.utf8))
            let text = decoded.compact.replacingOccurrences(of: "\\u0000", with: "")
            #expect(!text.contains("4000000000001091") && text.contains("400000"), "\(body) -> \(out)")
        }
    }

    @Test func escapesWithoutACardNumberAreKeptAsSent() {
        let body = #"{"note": "caf\u00e9 \u0031\u0032\u0033", "id": "2026-01-01"}"#
        #expect(Self.stored(body) == body)
    }
}
