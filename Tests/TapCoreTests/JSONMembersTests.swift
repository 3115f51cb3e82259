import Testing
@testable import TapCore

/// `JSONMembers` against `JSON.parse`, the tree it stands in for: the same documents accepted, the same values read.
@Suite struct JSONMembersTests {
    /// Every member of an accepted object reads as the tree's; absent keys are nil.
    func agrees(_ bytes: [UInt8]) {
        let tree = try? JSON.parse(bytes)
        let members = try? JSONMembers(bytes)
        guard case let .object(pairs)? = tree else {
            #expect(members == nil, "accepted what the parser takes as no object: \(String(decoding: bytes, as: UTF8.self))")
            return
        }
        guard let members else {
            Issue.record("refused an object the parser takes: \(String(decoding: bytes, as: UTF8.self))")
            return
        }
        #expect(members.count == pairs.count)
        for (key, _) in pairs { #expect(members[key] == tree?[key], "member \(key)") }
        #expect(members["no such member"] == nil)
        #expect(members.tree == tree)
    }

    @Test func readsMembersWhereTheyLie() throws {
        let text = #"{"messageType":"AReq","n":-1.5e3,"o":{"kty":"EC","x":[1,{"y":null}]},"e":"a\"b\u00e9","t":true,"a":[]}"#
        let m = try JSONMembers(Array(text.utf8))
        #expect(m["messageType"]?.stringValue == "AReq")
        #expect(m["n"] == .number("-1.5e3"))
        #expect(m["o"]?["x"] == .array([.number("1"), .object([("y", .null)])]))
        #expect(m["e"]?.stringValue == "a\"bé")
        #expect(m["t"] == .bool(true))
        #expect(m["a"] == .array([]))
        agrees(Array(text.utf8))
    }

    @Test func escapedAndRepeatedKeys() throws {
        let m = try JSONMembers(Array(#"{"a\u0062":1,"ab":2,"x":3,"x":4," \n":5}"#.utf8))
        #expect(m["ab"] == .number("1"))
        #expect(m["x"] == .number("3"))
        #expect(m[" \n"] == .number("5"))
        agrees(Array(#"{"a\u0062":1,"ab":2,"x":3,"x":4}"#.utf8))
        agrees(Array(#" { } "#.utf8))
        agrees(Array(#"{"":0}"#.utf8))
    }

    @Test(arguments: ["[1,2]", #""s""#, "1", "null", "", "{", #"{"a":1,}"#, #"{"a":01}"#, #"{"a":"\ud800"}"#, #"{"a":[1 2]}"#,
                      #"{"a":1} x"#, #"{"a":tru}"#, "{\"a\":\"\u{01}\"}", #"{"a":"x\q"}"#, #"{"a":1.}"#, #"{"a":{"b":}}"#])
    func refusesWhatTheParserRefusesOrIsNoObject(text: String) {
        #expect(throws: JSONError.self) { try JSONMembers(Array(text.utf8)) }
        agrees(Array(text.utf8))
    }

    @Test func nestingLimitAsTheParser() {
        let deep = Array((String(repeating: #"{"a":"#, count: 300) + "1" + String(repeating: "}", count: 300)).utf8)
        #expect(throws: JSONError.self) { try JSONMembers(deep) }
        let fits = Array((String(repeating: #"{"a":"#, count: 200) + "1" + String(repeating: "}", count: 200)).utf8)
        agrees(fits)
    }

    /// Every prefix and many mutations of an AReq-like document: accepted exactly when the parser accepts an object,
    /// and then read alike.
    @Test func truncationsAndMutationsAgree() {
        let seed = Array(#"{"messageType":"AReq","threeDSServerTransID":"8a880dc0-d2d2-4067-bcb1-b08d1690b26e","acctNumber":"4000000000001091","purchaseAmount":1234,"sdkEphemPubKey":{"kty":"EC","crv":"P-256","x":"Np6w","y":"8Fy"},"deviceRenderOptions":{"sdkInterface":"03","sdkUiType":["01","02"]},"name":"Caf\u00e9 ☕","ok":false,"none":null}"#.utf8)
        for n in 0...seed.count { agrees(Array(seed[..<n])) }
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<3000 {
            var b = seed
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                let i = Int.random(in: 0..<b.count, using: &rng)
                if Bool.random(using: &rng) { b[i] = [0x22, 0x5C, 0x7B, 0x7D, 0x5B, 0x5D, 0x2C, 0x3A, 0x30, 0x80, 0x01].randomElement(using: &rng)! } else { b.remove(at: i) }
                if b.isEmpty { b = [0x7B] }
            }
            agrees(b)
        }
    }
}
