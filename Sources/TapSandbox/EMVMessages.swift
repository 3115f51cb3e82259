import Foundation
import TapCore
import TapEMV

/// Helpers to build and check EMV 3DS JSON messages.
enum EMV {
    static func uuid() -> String { UUID().uuidString.lowercased() }

    /// The names in `required` that `message` lacks (or has empty).
    static func missing(_ required: [String], in message: JSON) -> [String] {
        required.filter { name in
            guard let v = message[name] else { return true }
            if case let .string(s) = v { return s.isEmpty }
            return false
        }
    }

}

/// A tiny HTML form reader and writer for the browser flow: the form's action and its input fields (escaping and
/// unescaping by `HTMLEscape`, the one helper every page uses).
enum HTMLForm {
    static func action(in html: String) -> String? {
        guard let r = html.range(of: "action=\"") else { return nil }
        let rest = html[r.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        return HTMLEscape.unescape(String(rest[..<end]))
    }

    /// `name=value` of every `<input ... name="x" value="y">`.
    static func inputs(in html: String) -> [(String, String)] {
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

    static func attribute(_ name: String, in tag: String) -> String? {
        guard let r = tag.range(of: " \(name)=\"") else { return nil }
        let rest = tag[r.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        return HTMLEscape.unescape(String(rest[..<end]))
    }

    /// An auto-posting form (with a no-JavaScript button), as an ACS sends the final CRes. Every value is escaped for
    /// where it goes; an `action` that is not an http(s) URL becomes `about:blank`.
    static func autoPost(action: String, fields: [(String, String)], title: String) -> String {
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

    /// Form-encodes fields.
    static func encode(_ fields: [(String, String)]) -> [UInt8] {
        Array(fields.map { "\(FormBody.percentEncode($0.0))=\(FormBody.percentEncode($0.1))" }.joined(separator: "&").utf8)
    }
}
