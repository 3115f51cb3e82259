/// Text from a session or the wire made safe to print on a terminal. Every character a terminal acts on instead of
/// showing (C0 controls such as ESC and BEL, DEL, the C1 controls U+0080–U+009F, which some terminals take as CSI or
/// OSC) and those that reorder or break what follows (the bidirectional embeddings, overrides and isolates, LRM, RLM,
/// ALM, the line and paragraph separators) is shown as a visible escape: `\x1B`, `\x9B`, `\u{202E}`. So a recorded
/// `messageType` of `ESC ] 0 ; … BEL` cannot retitle the window, clear the screen or write the clipboard (OSC 52).
public enum TerminalText {
    /// `text` with every such character escaped; with `keepingLineBreaks`, line feeds and tabs stay (a body printed
    /// over several lines), carriage returns never do (they would let a line overwrite itself).
    public static func escaped(_ text: String, keepingLineBreaks: Bool = false) -> String {
        replacingControls(text, keepingLineBreaks: keepingLineBreaks) { s in
            let hex = String(s.value, radix: 16, uppercase: true)
            return s.value <= 0xFF ? "\\x" + (hex.count < 2 ? "0" : "") + hex : "\\u{" + hex + "}"
        }
    }

    /// JSON text (as `JSON.pretty` or `compact` writes it) safe for a terminal and still the same JSON: the characters
    /// `escaped` shows, which the writer leaves as they are (it escapes only C0), become `\uXXXX` escapes. They can
    /// only stand inside strings, where such an escape means the same character.
    public static func escapedJSON(_ json: String) -> String {
        replacingControls(json, keepingLineBreaks: true) { s in
            let hex = String(s.value, radix: 16)
            return "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        }
    }

    /// `text` with each character a terminal acts on replaced by what `shown` makes of it (the text itself when none).
    static func replacingControls(_ text: String, keepingLineBreaks: Bool, _ shown: (Unicode.Scalar) -> String) -> String {
        guard text.unicodeScalars.contains(where: { needsEscape($0, keepingLineBreaks) }) else { return text }
        var out = String.UnicodeScalarView()
        for s in text.unicodeScalars {
            if needsEscape(s, keepingLineBreaks) { out.append(contentsOf: shown(s).unicodeScalars) } else { out.append(s) }
        }
        return String(out)
    }

    /// Whether a terminal would act on `s` (or reorder the text around it) rather than show it.
    public static func isControl(_ s: Unicode.Scalar) -> Bool { needsEscape(s, false) }

    static func needsEscape(_ s: Unicode.Scalar, _ keepingLineBreaks: Bool) -> Bool {
        switch s.value {
        case 0x0A, 0x09: return !keepingLineBreaks
        case 0x00...0x1F, 0x7F...0x9F: return true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029: return true
        default: return false
        }
    }
}
