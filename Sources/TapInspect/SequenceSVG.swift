import TapCore

/// A `SequenceDiagram` drawn as standalone SVG (for `3dstape web`): lifelines with their names on top, one row per
/// note or arrow, labels with timings, and for a replay session the recorded exchange each answer came from.
/// Every text from a session goes through `MarkupText.escaped` (markup characters as references, characters XML forbids
/// as U+FFFD); the SVG holds no script, no links and no styles from the session.
public enum SequenceSVG {
    static let column = 190.0, top = 56.0, row = 40.0, margin = 30.0

    public static func render(_ d: SequenceDiagram) -> String {
        let count = max(d.participants.count, 1)
        let width = margin * 2 + Double(count - 1) * column + column * 0.6
        let rows = d.items.reduce(0.0) { n, item in
            if case let .arrow(a) = item, a.replay != nil { return n + 1.45 }
            return n + 1
        }
        let height = top + rows * row + 30
        var x: [String: Double] = [:]
        for (i, p) in d.participants.enumerated() { x[p.alias] = margin + column * 0.3 + Double(i) * column }
        var out: [String] = []
        var head = ##"<svg xmlns="http://www.w3.org/2000/svg" class="sequence" width="\##(fmt(width))" height="\##(fmt(height))" "##
        head += ##"viewBox="0 0 \##(fmt(width)) \##(fmt(height))" font-family="sans-serif" font-size="12">"##
        out.append(head)
        out.append(##"<defs><marker id="head" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse">"##
                   + ##"<path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker></defs>"## as String)
        for p in d.participants {
            let cx = x[p.alias]!
            var g = ##"<g class="participant" data-alias="\##(MarkupText.escaped(p.alias))">"##
            g += ##"<line x1="\##(fmt(cx))" y1="\##(fmt(top - 10))" x2="\##(fmt(cx))" y2="\##(fmt(height - 10))" stroke="#bbb" stroke-dasharray="4 4"/>"##
            g += ##"<rect x="\##(fmt(cx - 75))" y="8" width="150" height="30" rx="4" fill="#eef3fb" stroke="#5a7bb5"/>"##
            g += ##"<text x="\##(fmt(cx))" y="28" text-anchor="middle" font-weight="bold">\##(MarkupText.escaped(p.name))</text></g>"##
            out.append(g)
        }
        var y = top
        for item in d.items {
            switch item {
            case let .note(from, to, text):
                let a = x[from] ?? margin, b = x[to] ?? margin
                let left = min(a, b) - 60, right = max(a, b) + 60
                var g = ##"<g class="note"><rect x="\##(fmt(left))" y="\##(fmt(y + 6))" width="\##(fmt(right - left))" height="24" fill="#fff8d6" stroke="#c9b458"/>"##
                g += ##"<text x="\##(fmt((left + right) / 2))" y="\##(fmt(y + 22))" text-anchor="middle">\##(MarkupText.escaped(text))</text></g>"##
                out.append(g)
                y += row
            case let .arrow(arrow):
                let a = x[arrow.from] ?? margin, b = x[arrow.to] ?? margin
                let lineY = y + 26
                let dash = arrow.kind == .request ? "" : ##" stroke-dasharray="6 3""##
                let colour = arrow.kind == .failure ? "#c0392b" : "#333"
                let kind = arrow.kind == .request ? "request" : arrow.kind == .response ? "response" : "failure"
                var g = ##"<g class="message \##(kind)" data-exchange="\##(arrow.exchangeID)" data-from="\##(MarkupText.escaped(arrow.from))" data-to="\##(MarkupText.escaped(arrow.to))">"##
                g += ##"<title>exchange #\##(arrow.exchangeID)</title>"##
                g += ##"<line x1="\##(fmt(a))" y1="\##(fmt(lineY))" x2="\##(fmt(b))" y2="\##(fmt(lineY))" stroke="\##(colour)"\##(dash) marker-end="url(#head)"/>"##
                g += ##"<text class="label" x="\##(fmt((a + b) / 2))" y="\##(fmt(lineY - 6))" text-anchor="middle" fill="\##(colour)">\##(MarkupText.escaped(arrow.label))</text>"##
                if !arrow.timing.isEmpty {
                    g += ##"<text class="timing" x="\##(fmt((a + b) / 2))" y="\##(fmt(lineY + 13))" text-anchor="middle" fill="#777" font-size="10">\##(MarkupText.escaped(arrow.timing))</text>"##
                }
                if let r = arrow.replay {
                    g += ##"<text class="replay" x="\##(fmt((a + b) / 2))" y="\##(fmt(lineY + 26))" text-anchor="middle" fill="#7d3c98" font-size="10">\##(MarkupText.escaped(r))</text>"##
                }
                out.append(g + "</g>")
                y += arrow.replay == nil ? row : row * 1.45
            }
        }
        out.append("</svg>")
        return out.joined(separator: "\n")
    }

    /// A coordinate: `12` for a whole number, `12.5` otherwise (through the checked conversion, so no value traps).
    static func fmt(_ v: Double) -> String {
        if let i = Checked.int(v), Double(i) == v { return String(i) }
        return String(v)
    }
}
