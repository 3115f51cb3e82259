import Foundation
import Testing
@testable import TapCore

@Suite struct JSONTests {
    @Test func keepsKeyOrderAndNumberText() throws {
        let text = #"{"z":1,"a":[true,false,null],"m":{"n":"1.50","x":-0.5e3}}"#
        let json = try JSON.parse(text)
        #expect(json.compact == text)
        #expect(json["z"] == .number("1"))
        #expect(json["m"]?["x"] == .number("-0.5e3"))
    }

    @Test func escapesRoundTrip() throws {
        let json = try JSON.parse(#"{"s":"a\"b\\c\n\u00e9\ud83d\ude00\u0001"}"#)
        #expect(json["s"]?.stringValue == "a\"b\\c\né😀\u{01}")
        #expect(try JSON.parse(json.compact) == json)
    }

    @Test(arguments: [
        ("", "unexpected end"), ("{", "expected a string key"), (#"{"a":}"#, "unexpected character"),
        (#"{"a":1,}"#, "expected a string key"), ("[1 2]", "expected ','"), (#""\ud800""#, "unpaired surrogate"),
        ("01", "unexpected data"), ("1.", "no digits after"), (#"{"a":1} x"#, "unexpected data"), ("\"\u{01}\"", "control character"),
    ])
    func rejectsMalformed(input: String, fragment: String) {
        #expect {
            _ = try JSON.parse(input)
        } throws: { error in
            "\(error)".contains(fragment)
        }
    }

    @Test func deepNestingIsAnErrorNotACrash() {
        let deep = String(repeating: "[", count: 100_000)
        #expect(throws: JSONError.self) { try JSON.parse(deep) }
    }

    @Test func settingAndRemovingKeepOrder() throws {
        let json = try JSON.parse(#"{"a":1,"b":2}"#)
        #expect(json.setting("a", to: .string("x")).compact == #"{"a":"x","b":2}"#)
        #expect(json.setting("c", to: .null).compact == #"{"a":1,"b":2,"c":null}"#)
        #expect(json.removing("a").compact == #"{"b":2}"#)
    }

    @Test func prettyPrints() throws {
        #expect(try JSON.parse(#"{"a":[1],"b":{}}"#).pretty == "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}")
    }
}

/// The copy-on-change rewrite both masking walks use: a member or item replaced where `change` says, the rest kept in
/// order, and nil (no copy) when nothing changes.
@Suite struct JSONChangingTests {
    @Test func membersAreReplacedWhereChangeSaysAndKeptInOrder() throws {
        let json = try JSON.parse(#"{"a":1,"b":"x","c":[2]}"#)
        let changed = json.changingMembers { key, value in key == "b" ? ("B", .string("y")) : nil }
        #expect(changed?.compact == #"{"a":1,"B":"y","c":[2]}"#)
        #expect(json.changingMembers { _, _ in nil } == nil)
        #expect(JSON.array([.null]).changingMembers { k, _ in (k, .null) } == nil)
    }

    @Test func itemsAreReplacedWhereChangeSays() throws {
        let json = try JSON.parse(#"[1,"x",true]"#)
        #expect(json.changingItems { $0 == .bool(true) ? .bool(false) : nil }?.compact == #"[1,"x",false]"#)
        #expect(json.changingItems { _ in nil } == nil)
        #expect(JSON.object([]).changingItems { $0 } == nil)
    }
}

@Suite struct Base64URLTests {
    @Test func paddedAndUnpadded() {
        #expect(Base64URL.encode(Array("{\"a\":1}".utf8)) == "eyJhIjoxfQ")
        #expect(Base64URL.decode("eyJhIjoxfQ") == Array("{\"a\":1}".utf8))
        #expect(Base64URL.decode("eyJhIjoxfQ==") == Array("{\"a\":1}".utf8))
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        #expect(Base64URL.decode("-_8") == [0xFB, 0xFF])
    }

    /// The alphabet's bit masks against RFC 4648 §5's table (the characters `encode` writes), for every byte.
    @Test func alphabetBytesAreExactlyTheSixtyFourCharacters() {
        let table = Set(Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8))
        for b in 0...255 { #expect(Base64URL.isAlphabetByte(UInt8(b)) == table.contains(UInt8(b)), "byte \(b)") }
        let encoded = Array(Base64URL.encode((0...255).map { UInt8($0) }).utf8)
        #expect(encoded.allSatisfy(Base64URL.isAlphabetByte) && Set(encoded) == table)
    }

    /// Encoding and decoding against Foundation's base64 (after mapping the URL alphabet back and padding) for random data of every
    /// length up to 70 bytes, padded and not, and for texts with one character changed to anything, anywhere.
    @Test func decodingAgreesWithFoundationOnRandomTexts() {
        var rng = SystemRandomNumberGenerator()
        func reference(_ text: [UInt8], lenient: Bool) -> [UInt8]? {
            var t = text
            while t.last == UInt8(ascii: "=") { t.removeLast() }
            // Padding only ends a text: Foundation takes "QUJDRE=B" as 5 bytes, RFC 4648 does not.
            if t.contains(UInt8(ascii: "=")) { return nil }
            if !lenient, t.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "/") }) { return nil }
            var std = t.map { $0 == UInt8(ascii: "-") ? UInt8(ascii: "+") : $0 == UInt8(ascii: "_") ? UInt8(ascii: "/") : $0 }
            if std.count % 4 == 1 { return nil }
            while std.count % 4 != 0 { std.append(UInt8(ascii: "=")) }
            return Data(base64Encoded: Data(std)).map { Array($0) }
        }
        for length in 0...70 {
            let data = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let text = Array(Base64URL.encode(data).utf8)
            let foundation = Data(data).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(String(decoding: text, as: UTF8.self) == foundation, "encoding, length \(length)")
            #expect(text.withUnsafeBufferPointer { Base64URL.decode(bytes: $0) } == data, "length \(length)")
            let padded = text + Array(repeating: UInt8(ascii: "="), count: (4 - text.count % 4) % 4)
            #expect(padded.withUnsafeBufferPointer { Base64URL.decode(bytes: $0) } == data, "padded, length \(length)")
            guard !text.isEmpty else { continue }
            for _ in 0..<20 {
                var changed = text
                changed[Int.random(in: 0..<changed.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                for lenient in [false, true] {
                    let ours = changed.withUnsafeBufferPointer { Base64URL.decode(bytes: $0, lenient: lenient) }
                    let theirs = reference(changed, lenient: lenient)
                    // Foundation refuses non-zero leftover bits where we ignore them: compare only where it decodes.
                    if let theirs { #expect(ours == theirs, "\(String(decoding: changed, as: UTF8.self)) lenient \(lenient)") }
                    else if changed.contains(where: { !Base64URL.isAlphabetByte($0) && !(lenient && ($0 == 0x2B || $0 == 0x2F)) }) {
                        #expect(ours == nil, "\(String(decoding: changed, as: UTF8.self)) lenient \(lenient)")
                    }
                }
            }
        }
    }

    @Test func rejectsOutsideAlphabet() {
        #expect(Base64URL.decode("+/8") == nil)
        #expect(Base64URL.decode("+/8", lenient: true) == [0xFB, 0xFF])
        #expect(Base64URL.decode("ab c") == nil)
        #expect(Base64URL.decode("a") == nil)
        #expect(Base64URL.decode("ab=c") == nil)
    }

    @Test func hex() {
        #expect(Hex.encode([0, 0xAB, 0xFF]) == "00abff")
        #expect(Hex.decode("00ABff") == [0, 0xAB, 0xFF])
        #expect(Hex.decode("0") == nil)
        #expect(Hex.decode("zz") == nil)
    }
}

@Suite struct JSONRobustnessTests {
    /// Mutated documents parse or throw; none crashes, and whatever parses re-serialises to valid JSON.
    @Test func mutationsNeverCrash() throws {
        let seed = Array(#"{"a":[1,-2.5e3,true,null,"x\u00e9\n"],"b":{"c":"\ud83d\ude00"}}"#.utf8)
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<5000 {
            var b = seed
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let i = Int.random(in: 0..<b.count, using: &rng)
                if Bool.random(using: &rng) { b[i] = UInt8.random(in: 0...255, using: &rng) } else { b.remove(at: i) }
                if b.isEmpty { b = [0x7B] }
            }
            if let j = try? JSON.parse(b) { #expect(try JSON.parse(j.bytes) == j) }
        }
    }
}

/// The byte-level base64url codec against Foundation's base64 (an independent implementation).
@Suite struct Base64URLCodecTests {
    @Test func matchesFoundationOnRandomInput() {
        var rng = SystemRandomNumberGenerator()
        for n in 0..<300 {
            let bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let foundation = Data(bytes).base64EncodedString()
            let expected = foundation.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == expected)
            #expect(Base64URL.decode(expected) == bytes)
            #expect(Base64URL.decode(foundation, lenient: true) == bytes, "standard, padded base64 when lenient")
        }
    }

    @Test func rejectsWhatIsNotBase64URL() {
        #expect(Base64URL.decode("ab+c") == nil && Base64URL.decode("ab/c") == nil)
        #expect(Base64URL.decode("a") == nil, "a single trailing character encodes no byte")
        #expect(Base64URL.decode("ab=c") == nil, "nothing after padding")
        #expect(Base64URL.decode("a b") == nil && Base64URL.decode("é") == nil)
        #expect(Base64URL.decode("") == [])
        #expect(Base64URL.decode("YQ==") == Array("a".utf8) && Base64URL.decode("YQ") == Array("a".utf8))
    }
}
