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

    /// Mermaid message text: no line breaks, semicolons or `#` (entity codes), which would end or garble the line.
    static func clean(_ s: String) -> String {
        String(s.map { $0 == "\n" || $0 == "\r" || $0 == ";" || $0 == "#" ? " " : $0 })
    }
}
