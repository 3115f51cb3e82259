/// Text from a session or the wire made safe to print on a terminal. Every character a terminal acts on instead of
/// showing (C0 controls such as ESC and BEL, DEL, the C1 controls U+0080–U+009F, which some terminals take as CSI or
/// OSC) and those that reorder or break what follows (the bidirectional embeddings, overrides and isolates, LRM, RLM,
/// ALM, the line and paragraph separators) is shown as a visible escape: `\x1B`, `\x9B`, `\u{202E}`. So a recorded
/// `messageType` of `ESC ] 0 ; … BEL` cannot retitle the window, clear the screen or write the clipboard (OSC 52).
///
/// The invisible format characters are escaped too: every scalar of Unicode's general category Cf (format), such as
/// the zero-width space, joiners and no-break U+200B–U+200D and U+2060, the byte order mark U+FEFF, the soft hyphen
/// U+00AD, the Arabic number signs and the tag characters, so `pay\u{200B}pal.test` cannot pass for `paypal.test`.
/// Two uses of Cf that draw one visible emoji stay as they are in `escaped`: a zero-width joiner between two emoji
/// (👩‍💻) and the tag characters after a black flag (🏴 subdivision flags). Other invisible characters that are not Cf
/// (variation selectors, the combining grapheme joiner, Hangul fillers) are left alone: they only change how the
/// character before them looks.
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
            // Beyond the BMP (the tag characters), JSON writes the UTF-16 surrogate pair.
            let units = s.value > 0xFFFF ? [0xD800 + ((s.value - 0x10000) >> 10), 0xDC00 + ((s.value - 0x10000) & 0x3FF)] : [s.value]
            return units.map { unit in
                let hex = String(unit, radix: 16)
                return "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            }.joined()
        }
    }

    /// `text` with each character a terminal acts on replaced by what `shown` makes of it (the text itself when none).
    static func replacingControls(_ text: String, keepingLineBreaks: Bool, _ shown: (Unicode.Scalar) -> String) -> String {
        guard text.unicodeScalars.contains(where: { needsEscape($0, keepingLineBreaks) }) else { return text }
        let scalars = Array(text.unicodeScalars)
        var out = String.UnicodeScalarView()
        for (i, s) in scalars.enumerated() {
            if needsEscape(s, keepingLineBreaks), !drawsAnEmoji(scalars, at: i) {
                out.append(contentsOf: shown(s).unicodeScalars)
            } else {
                out.append(s)
            }
        }
        return String(out)
    }

    /// Whether the format character at `i` is part of one emoji: a zero-width joiner between two emoji (an emoji
    /// modifier or presentation selector may stand before it), or a tag character in a black flag's tag sequence.
    static func drawsAnEmoji(_ scalars: [Unicode.Scalar], at i: Int) -> Bool {
        func isEmoji(_ s: Unicode.Scalar) -> Bool { s.value > 0x7F && s.properties.isEmoji }
        switch scalars[i].value {
        case 0x200D:
            guard i > 0, i + 1 < scalars.count, isEmoji(scalars[i + 1]) else { return false }
            let before = scalars[i - 1]
            return isEmoji(before) || before.value == 0xFE0F
        case 0xE0020...0xE007F:
            var j = i - 1
            while j >= 0, (0xE0020...0xE007E).contains(scalars[j].value) { j -= 1 }
            return j >= 0 && scalars[j].value == 0x1F3F4
        default:
            return false
        }
    }

    /// At most `limit` characters of `text` escaped for a terminal; a longer text is cut, with an ellipsis and its full
    /// length (`aaaa… (15000 bytes)`), so one huge value from the wire (a client's SNI) cannot widen every row of a
    /// table or make a 15 KB log line. Tables and log lines show values through this; the full value stays where one
    /// exchange is shown in full (`show --exchange N`, HAR, web).
    public static func abbreviated(_ text: String, limit: Int = 64) -> String {
        guard text.count > limit else { return escaped(text) }
        return escaped(String(text.prefix(max(1, limit)))) + "… (\(text.utf8.count) bytes)"
    }

    /// Names (the ALPN protocols a client offered) shown without ambiguity, as a JSON array (`["a,b", "c"]`: a comma
    /// inside a name stays inside its quotes) safe for a terminal; with `limit`, each name is `abbreviated` to it and
    /// at most four names are shown, then how many more there are.
    public static func nameList(_ names: [String], limit: Int? = nil) -> String {
        guard let limit else { return "[" + names.map { escapedJSON(JSON.string($0).compact) }.joined(separator: ", ") + "]" }
        var shown = names.prefix(4).map { name -> String in
            let cut = name.count > limit ? String(name.prefix(max(1, limit))) : name
            return escapedJSON(JSON.string(cut).compact) + (cut.count < name.count ? "… (\(name.utf8.count) bytes)" : "")
        }
        if names.count > 4 { shown.append("… \(names.count - 4) more") }
        return "[" + shown.joined(separator: ", ") + "]"
    }

    /// Whether a terminal would act on `s` (or reorder the text around it, or not show it at all) rather than show it.
    public static func isControl(_ s: Unicode.Scalar) -> Bool { needsEscape(s, false) }

    static func needsEscape(_ s: Unicode.Scalar, _ keepingLineBreaks: Bool) -> Bool {
        switch s.value {
        case 0x0A, 0x09: return !keepingLineBreaks
        case 0x00...0x1F, 0x7F...0x9F: return true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029: return true
        case 0x20...0x7E: return false
        default: return s.properties.generalCategory == .format
        }
    }
}
