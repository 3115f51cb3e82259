import Testing
import TapCore

@Suite struct TerminalTextTests {
    @Test func controlCharactersAreShownNotSent() {
        #expect(TerminalText.escaped("\u{1B}]0;PWNED\u{07}\u{1B}[2J") == "\\x1B]0;PWNED\\x07\\x1B[2J")
        #expect(TerminalText.escaped("a\u{0}b\u{7F}c\u{9B}31md\u{85}") == "a\\x00b\\x7Fc\\x9B31md\\x85")
        #expect(TerminalText.escaped("\u{202E}gnp.exe\u{202C} \u{2066}x\u{2069} \u{200F}\u{061C}\u{2028}")
                == "\\u{202E}gnp.exe\\u{202C} \\u{2066}x\\u{2069} \\u{200F}\\u{61C}\\u{2028}")
        #expect(TerminalText.escaped("one\r\ntwo\tthree") == "one\\x0D\\x0Atwo\\x09three")
        #expect(TerminalText.escaped("one\r\ntwo\tthree", keepingLineBreaks: true) == "one\\x0D\ntwo\tthree", "a CR never passes")
        #expect(TerminalText.escaped("plain · é 🙂 \\x1B") == "plain · é 🙂 \\x1B", "printable text is untouched")
    }

    /// Tester's find: a zero-width space in an SNI was shown raw (`pay\u{200B}pal.test` looked like `paypal.test`).
    /// Every format character (Unicode Cf) is escaped, except a joiner inside an emoji and the tags of a flag.
    @Test func invisibleFormatCharactersAreShown() throws {
        #expect(TerminalText.escaped("pay\u{200B}pal.test") == "pay\\u{200B}pal.test")
        for invisible: Unicode.Scalar in ["\u{200B}", "\u{200C}", "\u{200D}", "\u{2060}", "\u{FEFF}", "\u{AD}", "\u{2064}", "\u{600}", "\u{E0041}"] {
            #expect(TerminalText.escaped("a\(invisible)b") != "a\(invisible)b", "U+\(String(invisible.value, radix: 16))")
            #expect(TerminalText.isControl(invisible))
        }
        #expect(TerminalText.escaped("ab\u{AD}c") == "ab\\xADc")
        let family = "👩\u{200D}💻 👨\u{1F3FD}\u{200D}🚀 ❤\u{FE0F}\u{200D}🔥 🏴\u{E0067}\u{E0062}\u{E0065}\u{E006E}\u{E0067}\u{E007F}"
        #expect(TerminalText.escaped(family) == family, "emoji sequences stay drawn")
        #expect(TerminalText.escaped("a\u{200D}b 1\u{200D}2 👩\u{200D}") == "a\\u{200D}b 1\\u{200D}2 👩\\u{200D}")
        #expect(TerminalText.escaped("x\u{E0041}") == "x\\u{E0041}", "a tag outside a flag is escaped")
        let json = TerminalText.escapedJSON(#"{"sni":"a\#u{200B}b\#u{E0041}"}"#)
        #expect(json == #"{"sni":"a\u200bb\udb40\udc41"}"#)
        #expect(try JSON.parse(json)["sni"]?.stringValue == "a\u{200B}b\u{E0041}")
    }

    /// Table cells and log lines: a huge value is cut with an ellipsis and its full length; a list keeps commas inside names.
    @Test func longValuesAreAbbreviatedAndListsUnambiguous() {
        let sni = String(repeating: "a", count: 15000)
        #expect(TerminalText.abbreviated(sni) == String(repeating: "a", count: 64) + "… (15000 bytes)")
        #expect(TerminalText.abbreviated("short\u{1B}") == "short\\x1B")
        #expect(TerminalText.nameList(["a,b", "c"]) == #"["a,b", "c"]"#)
        let many = (0..<60).map { _ in String(repeating: "x", count: 255) }
        let shown = TerminalText.nameList(many, limit: 32)
        #expect(shown.count < 300 && shown.hasSuffix("… 56 more]") && shown.contains("… (255 bytes)"), "\(shown)")
    }

    @Test func jsonKeepsItsValue() throws {
        let value = JSON.object([("messageType", .string("AReq\u{1B}[2J\u{9B}\u{7F}\u{202E}\u{2029}")), ("n", .number("1"))])
        let text = TerminalText.escapedJSON(value.pretty)
        #expect(!text.unicodeScalars.contains { TerminalText.isControl($0) && $0 != "\n" })
        #expect(text.contains(#""AReq\u001b[2J\u009b\u007f\u202e\u2029""#))
        #expect(try JSON.parse(text) == value)
    }
}
