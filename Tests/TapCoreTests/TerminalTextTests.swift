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

    @Test func jsonKeepsItsValue() throws {
        let value = JSON.object([("messageType", .string("AReq\u{1B}[2J\u{9B}\u{7F}\u{202E}\u{2029}")), ("n", .number("1"))])
        let text = TerminalText.escapedJSON(value.pretty)
        #expect(!text.unicodeScalars.contains { TerminalText.isControl($0) && $0 != "\n" })
        #expect(text.contains(#""AReq\u001b[2J\u009b\u007f\u202e\u2029""#))
        #expect(try JSON.parse(text) == value)
    }
}
