import Testing
@testable import TapCore

/// String operations on UTF-8 bytes (StringBytes.swift).
@Suite struct StringBytesTests {
    @Test func appendUTF8AddsTheTextsBytesWhateverItsStorage() {
        var out: [UInt8] = [0x41]
        out.appendUTF8("b-ü")                                   // native, small, non-ASCII
        out.appendUTF8(String(repeating: "x", count: 40))       // native, large
        out.appendUTF8(String(Substring("-€-").dropFirst()))    // made from a substring
        out.appendUTF8("")
        #expect(out == [0x41] + Array("b-ü".utf8) + Array(String(repeating: "x", count: 40).utf8) + Array("€-".utf8))
    }

    @Test func piecesKeepEmptyOnesAndCaseInsensitiveEqualsComparesLetters() {
        #expect("a..b".pieces(separatedBy: UInt8(ascii: ".")) == ["a", "", "b"])
        #expect("Content-Length".caseInsensitiveEquals("content-length") && !"Content-Length".caseInsensitiveEquals("content-lengtx"))
    }
}
