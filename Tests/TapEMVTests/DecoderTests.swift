import Testing
import TapCore
import TapCrypto
import TapJOSE
@testable import TapEMV

@Suite struct DecoderTests {
    let areq = #"{"messageType":"AReq","messageVersion":"2.2.0","acctNumber":"4000000000001091","threeDSServerTransID":"t1"}"#

    func decode(_ s: String, _ keys: DecodeKeys = DecodeKeys()) -> DecodeResult { Decoder.decode(Array(s.utf8), keys: keys) }

    @Test func plainJSONIsMaskedByDefault() {
        let r = decode(areq)
        #expect(r.kind == .json)
        #expect(r.payload?["acctNumber"]?.stringValue == "400000******1091")
        var keys = DecodeKeys()
        keys.mask = false
        #expect(decode(areq, keys).payload?["acctNumber"]?.stringValue == "4000000000001091")
    }

    @Test func base64urlJSONPaddedOrNot() {
        let b = Base64URL.encode(Array(#"{"messageType":"CReq","messageVersion":"2.2.0"}"#.utf8))
        for s in [b, b + String(repeating: "=", count: (4 - b.count % 4) % 4)] {
            let r = decode(s)
            #expect(r.kind == .base64urlJSON)
            #expect(r.payload?["messageType"]?.stringValue == "CReq")
        }
    }

    @Test func formWithCresAndSessionData() {
        let cres = Base64URL.encode(Array(#"{"messageType":"CRes","transStatus":"Y"}"#.utf8))
        let r = decode("cres=\(cres)&threeDSSessionData=opaque%2Bvalue")
        #expect(r.kind == .form)
        #expect(r.fields?.first?.1.payload?["transStatus"]?.stringValue == "Y")
        #expect(r.fields?.last?.1.payload == .string("opaque+value"))
        #expect(r.error == nil)
    }

    @Test func jweNeedsTheRightKey() throws {
        let rsa = try PrivateKey.generateRSA()
        let jwe = try JWE.encryptRSAOAEP256(plaintext: Array(areq.utf8), recipient: rsa.publicKey, enc: .a128gcm).compact
        #expect(decode(jwe).error?.hasPrefix("missing key") == true && decode(jwe).error?.hasSuffix("give --key PEM") == true)
        var keys = DecodeKeys()
        // A key of the other type is not "missing": the error says which type was given and which one is needed.
        keys.privateKeys = [try PrivateKey.generateP256()]
        #expect(decode(jwe, keys).error?.hasSuffix("the --key given (1) is EC P-256, not an RSA one") == true, "\(decode(jwe, keys).error ?? "")")
        keys.privateKeys = [try PrivateKey.generateRSA()]
        let wrong = decode(jwe, keys)
        #expect(wrong.error?.hasPrefix("wrong key") == true)
        #expect(wrong.payload == nil, "never a plaintext after a failure")
        keys.privateKeys.append(rsa)
        let ok = decode(jwe, keys)
        #expect(ok.error == nil)
        #expect(ok.payload?["messageType"]?.stringValue == "AReq")
        #expect(ok.notes.first?.contains("RSA key #2") == true)
    }

    @Test func ecDeviceDataTriesKnownDSIDs() throws {
        let ds = try PrivateKey.generateP256()
        let jwe = try JWE.encryptEMVECDH(plaintext: Array(#"{"DV":"1.6"}"#.utf8), recipient: ds.publicKey,
                                         directoryServerID: "A000000004", enc: .a128cbcHS256).compact
        var keys = DecodeKeys()
        keys.privateKeys = [ds]
        let r = decode(jwe, keys)
        #expect(r.payload?["DV"]?.stringValue == "1.6")
        #expect(r.notes.first?.contains("A000000004") == true)
        keys.directoryServerIDs = ["A000000003"]
        #expect(decode(jwe, keys).error?.contains("wrong key") == true)
    }

    @Test func channelCEKDecryptsBothDirectionsOfGCM() throws {
        let cek = Digest.randomBytes(32)
        var acs = AppChannelCipher(role: .acs, cek: cek, acsTransID: "a", enc: .a128gcm)
        let cres = try acs.seal(.object([("messageType", .string("CRes"))]))
        var keys = DecodeKeys()
        keys.contentKeys = [cek]
        let r = decode(cres, keys)
        #expect(r.payload?["messageType"]?.stringValue == "CRes")
        #expect(r.notes.first?.contains("ACS→SDK") == true)
        keys.contentKeys = [Digest.randomBytes(32)]
        #expect(decode(cres, keys).error?.hasPrefix("bad tag") == true)
    }

    @Test func jwsVerificationStates() throws {
        let root = try CertificateAuthority.selfSigned(commonName: "Root", key: try PrivateKey.generateP256())
        let acsKey = try PrivateKey.generateP256()
        let cert = try root.issue(commonName: "ACS", subjectKey: acsKey.publicKey, profile: .signing)
        let jws = try JWS.sign(payload: Array(#"{"acsURL":"https://acs.test"}"#.utf8), algorithm: .es256, key: acsKey,
                               extraHeader: [("x5c", JWS.x5cHeader([cert]))]).compact
        #expect(decode(jws).verified == nil)
        var keys = DecodeKeys()
        keys.trustRoots = [root.certificate]
        #expect(decode(jws, keys).verified == true)
        keys.trustRoots = [try CertificateAuthority.selfSigned(commonName: "Other", key: try PrivateKey.generateP256()).certificate]
        let bad = decode(jws, keys)
        #expect(bad.verified == false)
        #expect(bad.error?.hasPrefix("untrusted chain") == true)
        #expect(bad.payload == nil)
    }

    @Test func jwtWithSecret() throws {
        let jwt = try JWT.signHS256(claims: try JSON.parse(#"{"sub":"x"}"#), secret: Array("k".utf8)).jws.compact
        #expect(decode(jwt).kind == .jwt)
        #expect(decode(jwt).verified == nil)
        var keys = DecodeKeys()
        keys.secrets = [Array("k".utf8)]
        #expect(decode(jwt, keys).verified == true)
        keys.secrets = [Array("no".utf8)]
        #expect(decode(jwt, keys).error?.hasPrefix("bad signature") == true)
    }

    @Test(arguments: ["", "   ", "{", "a.b.c", "a.b.c.d.e", "%%%", "\u{0}\u{1}"])
    func malformedInputIsAnErrorNotACrash(input: String) {
        #expect(decode(input).error != nil)
    }
}

@Suite struct MaskingTests {
    @Test func whatACardholderTypesIntoAChallengeFormIsMasked() {
        let body = Array("acsTransID=48874f8b-05e9-4e4a-b734-f53329f09606&uiType=01&answer=1234&action=submit".utf8)
        let stored = String(decoding: ThreeDSContent.maskBody(body), as: UTF8.self)
        #expect(stored.contains("answer=%2A%2A%2A") || stored.contains("answer=***"), "\(stored)")
        #expect(!stored.contains("1234") && stored.contains("uiType=01") && stored.contains("action=submit"))
        let other = Array("OTP=9999&next=1".utf8)
        #expect(!String(decoding: ThreeDSContent.maskBody(other), as: UTF8.self).contains("9999"))
        let untouched = Array("a=1&b=2".utf8)
        #expect(ThreeDSContent.maskBody(untouched) == untouched)
    }

    @Test func aJWTCarryingACardNumberIsMaskedAndLosesItsSignature() throws {
        let secret = Array("s".utf8)
        let withCard = try JWS.signHS256(payload: Array(#"{"payload":{"pan":"4000000000001091","securitycode":"123"}}"#.utf8), secret: secret).compact
        let body = JSON.object([("jwt", .string(withCard))])
        let masked = Masking.mask(body)["jwt"]!.stringValue!
        #expect(masked.hasSuffix("."), "the signature no longer covers the payload, so it is left out")
        let payload = String(decoding: Base64URL.decode(masked.split(separator: ".")[1])!, as: UTF8.self)
        #expect(payload.contains("400000******1091") && payload.contains(#""securitycode":"***""#))
        #expect(!payload.contains("4000000000001091") && !payload.contains("123"))
        // A JWT with nothing to mask is stored as signed, so its signature can be checked later.
        let clean = try JWS.signHS256(payload: Array(#"{"payload":{"maskedpan":"400000######1091"}}"#.utf8), secret: secret).compact
        #expect(Masking.mask(.object([("jwt", .string(clean))]))["jwt"]?.stringValue == clean)
    }

    @Test func masksAtAnyDepth() throws {
        let j = try JSON.parse(#"{"acctNumber":"5100000000000008","x":[{"challengeDataEntry":"1234"}],"authenticationValue":"AAAB"}"#)
        #expect(Masking.mask(j).compact == #"{"acctNumber":"510000******0008","x":[{"challengeDataEntry":"***"}],"authenticationValue":"***"}"#)
        #expect(Masking.maskPAN("1234") == "****")
        // Whether anything changed, and the members around a change kept in order.
        let clean = try JSON.parse(#"{"a":{"b":[1,"x",{"c":null}]},"acctNumber":"400000******1091","otp":"***"}"#)
        let (same, changed) = Masking.masking(clean)
        #expect(!changed && same.compact == clean.compact)
        let deep = try JSON.parse(#"{"a":1,"b":{"c":2,"d":[{"e":3},{"challengeDataEntry":"99"}],"f":4},"g":5}"#)
        let (masked, didMask) = Masking.masking(deep)
        #expect(didMask && masked.compact == #"{"a":1,"b":{"c":2,"d":[{"e":3},{"challengeDataEntry":"***"}],"f":4},"g":5}"#)
    }
}

@Suite struct RedactionTests {
    @Test func luhnRunsAreMaskedAnywhere() {
        let html = Array("<p>card 4000000000001091 and order 1234567890123 (not Luhn)</p>".utf8)
        #expect(String(decoding: ThreeDSContent.maskLuhnRuns(html), as: UTF8.self) ==
                "<p>card 400000******1091 and order 1234567890123 (not Luhn)</p>")
    }

    /// The window-skipping search finds exactly the card numbers a byte-by-byte walk finds (the same stretches of digit
    /// groups, told apart by the same rules), on buffers dense with digit runs of every length around 13 and 19, joined
    /// by spaces, dashes and percent escapes, at every alignment.
    @Test func luhnRunsMatchAByteWalk() {
        func digit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
        func separator(_ c: UInt8) -> Bool { c == 0x20 || c == 0x2D }
        func walk(_ b: [UInt8]) -> [Range<Int>] {
            var runs: [Range<Int>] = [], i = 0
            while i < b.count {
                guard digit(b[i]) else { i += 1; continue }
                var j = i
                while j < b.count {
                    if digit(b[j]) { j += 1 } else if j + 1 < b.count, separator(b[j]), digit(b[j + 1]) { j += 2 } else { break }
                }
                var s = i, afterEscape = false
                if s >= 1, b[s - 1] == UInt8(ascii: "%") {
                    for _ in 0..<2 where s < j && digit(b[s]) { s += 1 }
                    if s < j, separator(b[s]) { s += 1 }
                    afterEscape = true
                } else if s >= 2, b[s - 2] == UInt8(ascii: "%"), b[s - 1].isHexDigitASCII {
                    if s < j, digit(b[s]) { s += 1 }
                    if s < j, separator(b[s]) { s += 1 }
                    afterEscape = true
                }
                if s < j { b.withUnsafeBufferPointer { ThreeDSContent.cardNumbers($0, s..<j, afterEscape: afterEscape, into: &runs) } }
                i = j
            }
            return runs
        }
        var rng = SystemRandomNumberGenerator()
        let joints: [[UInt8]] = [[0x20], [0x2D], Array("%20".utf8), Array("%2".utf8), Array("%".utf8), [0x20, 0x20], Array("- ".utf8), Array("a".utf8)]
        for _ in 0..<3000 {
            var b: [UInt8] = []
            for _ in 0..<Int.random(in: 0...12, using: &rng) {
                if Bool.random(using: &rng) {
                    b += joints.randomElement(using: &rng)!
                } else {
                    b += (0..<Int.random(in: 0...3, using: &rng)).map { _ in UInt8.random(in: 0x20...0x7E, using: &rng) }
                }
                b += (0..<Int.random(in: 1...22, using: &rng)).map { _ in UInt8(ascii: "0") + UInt8.random(in: 0...9, using: &rng) }
            }
            // Card numbers that pass the check, as people write them, at random places.
            if Bool.random(using: &rng) {
                let pan = ["4000000000001091", "4000 0000 0000 1091", "4000-0000-0000-1091", "%224000000000001091%22", "3782 822463 10005"]
                    .randomElement(using: &rng)!
                b.insert(contentsOf: Array(pan.utf8), at: Int.random(in: 0...b.count, using: &rng))
            }
            let found = b.withUnsafeBufferPointer { ThreeDSContent.luhnRuns($0) }
            #expect(found == walk(b), "\(String(decoding: b, as: UTF8.self))")
        }
    }

    /// Card numbers as people write them: grouped by spaces or dashes, percent-encoded in a URL, beside other digits.
    @Test(arguments: [
        ("card 4000 0000 0000 1091 ok", "card 4000 00** **** 1091 ok"),
        ("4000-0000-0000-1091", "4000-00**-****-1091"),
        ("amex 3782 822463 10005", "amex 3782 82**** *0005"),
        ("/pay?q=%224000000000001091%22", "/pay?q=%22400000******1091%22"),
        ("note=card%204000000000001091", "note=card%20400000******1091"),
        ("x=%A24000000000001091", "x=%A2400000******1091"),
        ("qty 2 4000 0000 0000 1091", "qty 2 4000 0*** **** 1091"), // 2 4000 0000 0000 passes the check too: both masked
        ("12-4000000000001091", "12-400000******1091"),                 // a run that passes on its own is masked as before
        ("2026-11-30 16:00 order 1234567890123", "2026-11-30 16:00 order 1234567890123"),
        ("4000  0000 0000 1091", "4000  0000 0000 1091"),               // two spaces: not one number (12 digits after them)
        ("-4000000000001091", "-400000******1091"),
        ("4000000000001091 4000000000001091", "400000******1091 400000******1091"),
    ])
    func cardNumbersAsWritten(_ text: String, _ masked: String) {
        #expect(ThreeDSContent.maskLuhnRuns(text) == masked)
    }

    @Test func prepareMasksJSONAndFindsMessages() throws {
        let body = Array(#"{"messageType":"CReq","messageVersion":"2.2.0","challengeDataEntry":"123456","note":"5100000000000008"}"#.utf8)
        let (stored, found) = ThreeDSContent.prepare(body, mask: true)
        let text = String(decoding: stored, as: UTF8.self)
        #expect(text.contains(#""challengeDataEntry":"***""#) && text.contains("510000******0008"))
        #expect(found.first?.summary?.messageType == "CReq")
        let (raw, _) = ThreeDSContent.prepare(body, mask: false)
        #expect(raw == body)
    }

    @Test func formFieldsAreMaskedInsideTheirBase64() throws {
        let creq = Base64URL.encode(Array(#"{"messageType":"CReq","acctNumber":"4000000000001091"}"#.utf8))
        let (stored, found) = ThreeDSContent.prepare(Array("creq=\(creq)&threeDSSessionData=abc".utf8), mask: true)
        #expect(found.first?.json["acctNumber"]?.stringValue == "400000******1091")
        #expect(!String(decoding: stored, as: UTF8.self).contains(creq))
    }
}

extension UInt8 {
    var isHexDigitASCII: Bool { (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self) }
}

@Suite struct KeyLogTests {
    @Test func parsesAndRejectsWithLineNumbers() throws {
        let cek = String(repeating: "0f", count: 32)
        let log = try KeyLog(text: "# 3dstape key log\n\nCEK ABC-1 \(cek)\n")
        #expect(log.cek(for: "abc-1") == Hex.decode(cek))
        #expect(throws: KeyLogError("line 2: expected 'CEK <acsTransID> <64 hex digits>'")) { try KeyLog(text: "CEK a \(cek)\nKEY b c") }
        #expect(throws: KeyLogError("line 1: the CEK must be 64 hex digits")) { try KeyLog(text: "CEK a 0011") }
    }

    @Test func decryptsBothDirectionsOrSaysWhyNot() throws {
        let cek = Digest.randomBytes(32)
        struct Keys: ChannelKeySource { let cek: [UInt8]; func cek(for id: String) -> [UInt8]? { id == "tx" ? cek : nil } }
        var sdk = AppChannelCipher(role: .sdk, cek: cek, acsTransID: "tx", enc: .a128gcm)
        var acs = AppChannelCipher(role: .acs, cek: cek, acsTransID: "tx", enc: .a128gcm)
        let creq = Array(try sdk.seal(.object([("messageType", .string("CReq")), ("challengeDataEntry", .string("1234"))])).utf8)
        let cres = Array(try acs.seal(.object([("messageType", .string("CRes")), ("transStatus", .string("Y"))])).utf8)
        let f1 = try #require(ThreeDSContent.appChannelJWE(in: creq, isRequest: true))
        let d1 = ThreeDSContent.decryptAppChannel(f1, body: creq, isRequest: true, keys: Keys(cek: cek), mask: true)
        #expect(d1.decryption == "decrypted: key log" && d1.json["challengeDataEntry"]?.stringValue == "***")
        let f2 = try #require(ThreeDSContent.appChannelJWE(in: cres, isRequest: false))
        #expect(ThreeDSContent.decryptAppChannel(f2, body: cres, isRequest: false, keys: Keys(cek: cek), mask: true).summary?.transStatus == "Y")
        let wrong = ThreeDSContent.decryptAppChannel(f2, body: cres, isRequest: false, keys: Keys(cek: Digest.randomBytes(32)), mask: true)
        #expect(wrong.decryption?.hasPrefix("encrypted: the key log key for tx does not open it") == true)
        #expect(wrong.json["messageType"] == nil, "no plaintext when the key is wrong")
        #expect(ThreeDSContent.decryptAppChannel(f2, body: cres, isRequest: false, keys: nil, mask: true).decryption == "encrypted: no key log")
    }

    /// An app-channel JWE is told from other bodies on its bytes: five base64url parts (whitespace around them aside), a
    /// `dir` header with a kid; anything else, as the JOSE parser would refuse it, is no app-channel message.
    @Test func anAppChannelJWEIsFoundOnItsBytesAndNothingElseIs() throws {
        var sdk = AppChannelCipher(role: .sdk, cek: Digest.randomBytes(32), acsTransID: "tx-1", enc: .a128cbcHS256)
        let sealed = try sdk.seal(.object([("messageType", .string("CReq"))]))
        let parts = sealed.split(separator: ".", omittingEmptySubsequences: false).map(String.init) // dir: the key part is empty
        func found(_ text: String) -> String? { ThreeDSContent.appChannelJWE(in: Array(text.utf8), isRequest: true)?.summary?.acsTransID }
        #expect(found(sealed) == "tx-1")
        #expect(found(" \r\n" + sealed + "\n") == "tx-1", "surrounding whitespace")
        #expect(try JWE(compact: " \r\n" + sealed + "\n").keyID == "tx-1", "as the JOSE parser reads it")
        for (what, text) in [
            ("a fifth dot", sealed + ".x"), ("four parts", parts.dropLast().joined(separator: ".")),
            ("a character outside base64url in the ciphertext", parts[0...2].joined(separator: ".") + ".a+b." + parts[4]),
            ("padding", parts[0] + "=." + parts[1...].joined(separator: ".")), ("a space inside", parts[0] + ". " + parts[1...].joined(separator: ".")),
            ("a header that is not JSON", "bm90IGpzb24." + parts[1...].joined(separator: ".")),
            ("a header without dir", Base64URL.encode(Array("{\"alg\":\"RSA-OAEP-256\",\"kid\":\"tx-1\"}".utf8)) + "." + parts[1...].joined(separator: ".")),
            ("a header without kid", Base64URL.encode(Array("{\"alg\":\"dir\",\"enc\":\"A128CBC-HS256\"}".utf8)) + "." + parts[1...].joined(separator: ".")),
            ("JSON", "{\"messageType\":\"CReq\"}"), ("nothing", ""),
        ] {
            #expect(found(text) == nil, "\(what)")
            if what != "a header without kid", what != "a header without dir" { #expect(throws: JOSEError.self, "\(what)") { try JWE(compact: text) } }
        }
    }
}

/// Hardening defect 4b: what is stored or printed keeps card numbers, credentials and security codes masked.
@Suite struct StoredTextMaskingTests {
    @Test func credentialHeadersAreRedactedAndCardNumbersMaskedInEveryHeader() {
        let masked = Masking.maskHeaders([("Authorization", "Bearer abc.def"), ("Proxy-Authorization", "Basic dXNlcjpwYXNz"),
                                          ("Cookie", "sid=42"), ("X-Card", "pan 4000000000001091 here"), ("Accept", "*/*")])
        #expect(masked.map(\.1) == ["Bearer ***", "Basic ***", "***", "pan 400000******1091 here", "*/*"])
        // Each on its own (the set is copied only when something in it is masked), and a set with nothing to mask.
        #expect(Masking.maskHeaders([("Host", "a"), ("x-card", "4000000000001091")]).map(\.1) == ["a", "400000******1091"])
        #expect(Masking.maskHeaders([("cookie", "sid=1")]).map(\.1) == ["***"])
        let plain = [("Host", "127.0.0.1:8443"), ("Content-Length", "4000000000001090"), ("Date", "Mon, 30 Nov 2026 16:00:00 GMT")]
        #expect(Masking.maskHeaders(plain).map(\.1) == plain.map(\.1), "digit runs that fail the Luhn check stay")
    }

    @Test func securityCodesAndPasswordsAreMaskedAtAnyDepth() throws {
        let json = try JSON.parse(#"{"card":{"number":"4000000000001091","cvv":"123","CVC":"999","securityCode":"456"},"password":"hunter2","otp":"1234","note":"ok"}"#)
        let m = Masking.mask(json)
        #expect(m["card"]?["cvv"]?.stringValue == "***" && m["card"]?["CVC"]?.stringValue == "***" && m["card"]?["securityCode"]?.stringValue == "***")
        #expect(m["password"]?.stringValue == "***" && m["otp"]?.stringValue == "***" && m["note"]?.stringValue == "ok")
        let (stored, _) = ThreeDSContent.prepare(json.bytes, mask: true)
        #expect(!String(decoding: stored, as: UTF8.self).contains("4000000000001091"), "the Luhn scan catches the number field")
    }

    @Test func printableTextHasNoCardNumbersOrTerminalEscapes() {
        #expect(ThreeDSContent.printable("GET /pay?pan=4000000000001091 \u{1B}[31mred") == "GET /pay?pan=400000******1091 \\x1B[31mred")
        #expect(ThreeDSContent.printable("plain") == "plain")
    }
}

/// Hardening defect 10: 40 KB of nested form values (`a=a=…`) crashed `decode` (one recursion per `=`).
@Suite struct DecoderNestingTests {
    @Test func nestedFormValuesAreDecodedOneLevelDeep() {
        let input = Array(String(repeating: "a=", count: 20_000).utf8)
        let r = Decoder.decode(input, keys: DecodeKeys())
        #expect(r.kind == .form && r.fields?.count == 1)
        #expect(r.fields?.first?.1.payload?.stringValue?.hasPrefix("a=a=") == true, "the value is kept as text, not decoded again")
    }
}
