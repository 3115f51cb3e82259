import TapCore
import TapStore

/// A session as a Mermaid `sequenceDiagram` (`export --format mermaid`): the `SequenceDiagram` model as text.
public enum Mermaid {
    public static func sequenceDiagram(_ exchanges: [StoredExchange]) -> String {
        render(SequenceDiagram(exchanges))
    }

    public static func render(_ d: SequenceDiagram) -> String {
        var lines = ["sequenceDiagram"]
        for p in d.participants {
            lines.append(p.alias == p.name ? "    participant \(p.alias)" + (SequenceDiagram.roles.contains(p) ? " as \(p.name)" : "")
                                           : "    participant \(p.alias) as \(clean(p.name))")
        }
        for item in d.items {
            switch item {
            case let .note(from, to, text):
                lines.append("    Note over \(from),\(to): \(clean(text))")
            case let .arrow(a):
                switch a.kind {
                case .request: lines.append("    \(a.from)->>\(a.to): \(clean(a.label)) · \(a.timing)")
                case .response: lines.append("    \(a.from)-->>\(a.to): \(clean(a.label))\(a.timing.isEmpty ? "" : " · \(a.timing)")")
                case .failure: lines.append("    \(a.from)--x\(a.to): \(clean(a.label))\(a.timing.isEmpty ? "" : " · \(a.timing)")")
                }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Mermaid message text: no line breaks, semicolons or `#` (entity codes), which would end or garble the line, and
    /// no other control character (`TerminalText.isControl`: C0, DEL, C1 with NEL, the line and paragraph separators,
    /// bidirectional controls) nor U+FFFE/U+FFFF, each a space. Filtered by Unicode scalar: "\r\n" is one Swift
    /// `Character`, which a comparison with "\n" or "\r" never matched, so a CRLF in a messageType used to start a line.
    static func clean(_ s: String) -> String {
        var out = String.UnicodeScalarView()
        for c in s.unicodeScalars {
            out.append(c == ";" || c == "#" || c.value == 0xFFFE || c.value == 0xFFFF || TerminalText.isControl(c) ? " " : c)
        }
        return String(out)
    }
}
