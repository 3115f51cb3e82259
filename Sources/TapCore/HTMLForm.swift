import Foundation

/// A tiny HTML form reader and writer for the browser flow: the form's action and its input fields (escaping and
/// unescaping by `HTMLEscape`, the one helper every page uses). Not a parser: it finds the first `action="…"` and each
/// `<input … name="…" value="…">`, which is what the ACS pages the SDK-like clients post back hold; the body they post is
/// `FormBody.encode`.
public enum HTMLForm {
    /// The first form's `action`, unescaped.
    public static func action(in html: String) -> String? {
        guard let r = html.range(of: "action=\"") else { return nil }
        let rest = html[r.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        return HTMLEscape.unescape(String(rest[..<end]))
    }

    /// `name=value` of every `<input ... name="x" value="y">`.
    public static func inputs(in html: String) -> [(String, String)] {
        var out: [(String, String)] = []
        var search = html[...]
        while let r = search.range(of: "<input") {
            let tagEnd = search[r.upperBound...].firstIndex(of: ">") ?? search.endIndex
            let tag = String(search[r.upperBound..<tagEnd])
            if let name = attribute("name", in: tag) { out.append((name, attribute("value", in: tag) ?? "")) }
            search = search[tagEnd...]
        }
        return out
    }

    /// The value of attribute `name` in a tag's text, unescaped.
    static func attribute(_ name: String, in tag: String) -> String? {
        guard let r = tag.range(of: " \(name)=\"") else { return nil }
        let rest = tag[r.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        return HTMLEscape.unescape(String(rest[..<end]))
    }

    /// An auto-posting form (with a no-JavaScript button), as an ACS sends the final CRes. Every value is escaped for
    /// where it goes; an `action` that is not an http(s) URL becomes `about:blank`.
    public static func autoPost(action: String, fields: [(String, String)], title: String) -> String {
        let inputs = fields.map { "<input type=\"hidden\" name=\"\(HTMLEscape.attribute($0.0))\" value=\"\(HTMLEscape.attribute($0.1))\">" }
            .joined(separator: "\n")
        return """
        <!DOCTYPE html><html><head><title>\(HTMLEscape.text(title))</title></head>
        <body onload="document.forms[0].submit()">
        <form method="post" action="\(HTMLEscape.url(action))">
        \(inputs)
        <noscript><button type="submit">Continue</button></noscript>
        </form></body></html>
        """
    }
}
