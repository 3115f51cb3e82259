/// Text for XML and HTML (the SVG sequence diagrams, the `timeouts` report): character data and attribute values alike.
/// The five markup characters become references; what XML 1.0 does not allow in a document at all (C0 controls but tab,
/// line feed and carriage return, and the noncharacters U+FFFE and U+FFFF) becomes U+FFFD, so a recorded label can
/// never make the document unparseable; and what a terminal would act on (DEL, C1, the bidirectional controls,
/// `TerminalText`) becomes a numeric reference, so a document read with cat is safe too and still says the same.
public enum MarkupText {
    public static func escaped(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for s in text.unicodeScalars {
            switch s {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            case "\t", "\n", "\r": out.unicodeScalars.append(s)
            default:
                if s.value < 0x20 || s.value == 0xFFFE || s.value == 0xFFFF {
                    out += "\u{FFFD}"
                } else if TerminalText.isControl(s) {
                    out += "&#x" + String(s.value, radix: 16, uppercase: true) + ";"
                } else {
                    out.unicodeScalars.append(s)
                }
            }
        }
        return out
    }
}
