/// Text from outside (a message field, a form value, a recorded page) made safe for an HTML page, by where it lands:
/// element text, a quoted or unquoted attribute value, a URL attribute (`action`, `href`, `src` …), or a string in an
/// inline script or style. The one escaping helper of every page 3dstape writes (the sandbox's ACS pages, the
/// replayer's recorded pages with live values put in).
public enum HTMLEscape {
    /// For element text: `&`, `<`, `>` (and quotes, so that the result is also a valid quoted attribute value) as
    /// character references; control characters other than tab, CR and LF, which HTML forbids, as U+FFFD.
    public static func text(_ s: String) -> String { attribute(s) }

    /// For a quoted attribute value (either quote): `&`, `<`, `>`, `"`, `'` as character references, as
    /// `MarkupText.escaped` writes every page and diagram (characters a document may not hold as U+FFFD, terminal
    /// controls as numeric references).
    public static func attribute(_ s: String) -> String {
        guard s.utf8.contains(where: { $0 == 0x26 || $0 == 0x3C || $0 == 0x3E || $0 == 0x22 || $0 == 0x27 || $0 < 0x20 || $0 >= 0x7F })
        else { return s }
        return MarkupText.escaped(s)
    }

    /// For an unquoted attribute value: every character but letters, digits and `-._~:/?#@!$*+,;%=` as a numeric
    /// character reference (a space, quote, `>` or backtick would end the value or the tag).
    public static func unquotedAttribute(_ s: String) -> String {
        var out = ""
        for ch in s.unicodeScalars {
            if ch.isASCII, ch.properties.isAlphabetic || ("0"..."9").contains(ch) || "-._~:/?#@!$*+,;%=".unicodeScalars.contains(ch) {
                out.unicodeScalars.append(ch)
            } else if ch.value < 0x20 || ch.value == 0x7F {
                out += "&#xFFFD;"
            } else {
                out += "&#x\(String(ch.value, radix: 16, uppercase: true));"
            }
        }
        return out
    }

    /// For a URL attribute (`action`, `href`, `src` …): the URL escaped as a quoted attribute value when it is http,
    /// https or a relative reference, else `about:blank` (a `javascript:` or `data:` URL would run in the page).
    public static func url(_ s: String) -> String { isSafeURL(s) ? attribute(s) : "about:blank" }

    /// Whether a page may post to or link to `s`: an http or https URL, or a reference without a scheme. Read as a
    /// browser does: leading spaces and control characters dropped, tabs and line breaks removed anywhere.
    public static func isSafeURL(_ s: String) -> Bool {
        var scheme: [UInt8] = []
        var started = false
        for b in s.utf8 {
            if !started, b <= 0x20 { continue }
            started = true
            if b == 0x09 || b == 0x0A || b == 0x0D { continue }
            if b == 0x3A { // ':' ends a scheme
                let name = String(decoding: scheme, as: UTF8.self).lowercased()
                return name == "http" || name == "https"
            }
            if b == 0x2F || b == 0x3F || b == 0x23 { return true } // '/', '?', '#' first: a relative reference
            scheme.append(b)
        }
        return true
    }

    /// For text inside a raw-text element (`<script>`, `<style>`): every character that could end a string there,
    /// the element (`</script`), or a line (`\u2028`) as a `\uXXXX` escape, which means the same inside a JavaScript
    /// string and ends nothing.
    public static func script(_ s: String) -> String {
        var out = ""
        for ch in s.unicodeScalars {
            switch ch {
            case "<", ">", "&", "\"", "'", "`", "\\", "\u{2028}", "\u{2029}":
                out += "\\u" + String(repeating: "0", count: 4 - String(ch.value, radix: 16).count) + String(ch.value, radix: 16, uppercase: true)
            default:
                if ch.value < 0x20 || ch.value == 0x7F {
                    out += "\\u00" + (ch.value < 0x10 ? "0" : "") + String(ch.value, radix: 16, uppercase: true)
                } else {
                    out.unicodeScalars.append(ch)
                }
            }
        }
        return out
    }

    /// The text an attribute value or element text stands for: named references for `& < > " '` and `&nbsp;`, and
    /// numeric ones (`&#39;`, `&#x27;`); anything else is left as it is.
    public static func unescape(_ s: String) -> String {
        guard s.contains("&") else { return s }
        var out = ""
        var rest = Substring(s)
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            let after = rest[rest.index(after: amp)...]
            guard let semi = after.prefix(12).firstIndex(of: ";") else {
                out += "&"
                rest = after
                continue
            }
            let name = after[..<semi]
            let decoded: Unicode.Scalar?
            switch name {
            case "amp": decoded = "&"
            case "lt": decoded = "<"
            case "gt": decoded = ">"
            case "quot": decoded = "\""
            case "apos": decoded = "'"
            case "nbsp": decoded = "\u{A0}"
            default:
                if name.hasPrefix("#x") || name.hasPrefix("#X") {
                    decoded = UInt32(name.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init)
                } else if name.hasPrefix("#") {
                    decoded = UInt32(name.dropFirst(), radix: 10).flatMap(Unicode.Scalar.init)
                } else {
                    decoded = nil
                }
            }
            if let decoded {
                out.unicodeScalars.append(decoded)
                rest = after[after.index(after: semi)...]
            } else {
                out += "&"
                rest = after
            }
        }
        out += rest
        return out
    }
}

/// Puts live text in place of recorded text in an HTML page (a recorded ACS page replayed with the live
/// transaction's IDs, URLs and session data), each live value escaped for where it lands: element text, a quoted or
/// unquoted attribute value, a URL attribute (where a value that begins it must be a safe URL), a script or style,
/// a comment. Recorded text is found as it is or as it was escaped into the page (`&amp;` in a URL).
public enum HTMLSubstitution {
    /// Where a piece of the page is.
    enum Context: Equatable {
        case text
        case comment
        /// Inside `<script>` or `<style>`.
        case rawText
        /// Tag and attribute names, `=`, whitespace between attributes.
        case markup
        case quotedValue(url: Bool)
        case unquotedValue(url: Bool)
    }

    /// `html` with every occurrence of each pair's first string replaced by its second, escaped for its context. At
    /// each place the first pair (in order) that matches wins; replaced text is not searched again.
    public static func replacing(_ pairs: [(recorded: String, live: String)], in html: String) -> String {
        let pairs = pairs.filter { !$0.recorded.isEmpty }
        guard pairs.contains(where: { p in
            html.utf8.firstRange(of: p.recorded.utf8) != nil || html.utf8.firstRange(of: HTMLEscape.attribute(p.recorded).utf8) != nil
        }) else { return html }
        var out = ""
        out.reserveCapacity(html.utf8.count + 64)
        for (piece, context) in segments(html) {
            out += substitute(pairs, in: piece, context)
        }
        return out
    }

    /// Replaces in one piece of the page, whose context is known.
    static func substitute(_ pairs: [(recorded: String, live: String)], in piece: Substring, _ context: Context) -> String {
        // The recorded text as it may appear here: as it is, or escaped (outside scripts, where references mean nothing).
        var needles: [(needle: [UInt8], live: String)] = []
        for p in pairs {
            needles.append((Array(p.recorded.utf8), p.live))
            if context != .rawText {
                let escaped = HTMLEscape.attribute(p.recorded)
                if escaped != p.recorded { needles.append((Array(escaped.utf8), p.live)) }
            }
        }
        let bytes = Array(piece.utf8)
        var out: [UInt8] = []
        var copied = 0
        var i = 0
        // Where a URL attribute's value really begins (after leading spaces and controls, as browsers read it).
        let valueStart = bytes.firstIndex { $0 > 0x20 } ?? bytes.count
        while i < bytes.count {
            var matched: (length: Int, live: String)?
            for n in needles where bytes.count - i >= n.needle.count && bytes[i] == n.needle[0] {
                if bytes[i..<(i + n.needle.count)].elementsEqual(n.needle) { matched = (n.needle.count, n.live); break }
            }
            guard let m = matched else { i += 1; continue }
            out += bytes[copied..<i]
            out += Array(encode(m.live, context, beginsURL: i <= valueStart).utf8)
            i += m.length
            copied = i
        }
        guard copied > 0 else { return String(piece) }
        out += bytes[copied...]
        return String(decoding: out, as: UTF8.self)
    }

    /// A live value escaped for its context.
    static func encode(_ live: String, _ context: Context, beginsURL: Bool) -> String {
        switch context {
        case .text, .comment: return HTMLEscape.text(live)
        case .rawText: return HTMLEscape.script(live)
        case .markup: return HTMLEscape.unquotedAttribute(live)
        case let .quotedValue(url): return url && beginsURL ? HTMLEscape.url(live) : HTMLEscape.attribute(live)
        case let .unquotedValue(url):
            return HTMLEscape.unquotedAttribute(url && beginsURL && !HTMLEscape.isSafeURL(live) ? "about:blank" : live)
        }
    }

    /// Attributes whose value is a URL a browser loads, posts to or follows.
    static let urlAttributes: Set<String> = ["action", "formaction", "href", "src", "srcset", "data", "poster", "cite", "background",
                                             "longdesc", "manifest", "codebase", "ping", "xlink:href", "lowsrc", "dynsrc"]

    /// The page cut into pieces, each with its context (a small HTML tokenizer: tags, attributes, comments, raw text).
    static func segments(_ html: String) -> [(Substring, Context)] {
        let u = html.utf8
        var out: [(Substring, Context)] = []
        var i = u.startIndex
        var pieceStart = i
        func emit(_ end: String.Index, _ c: Context) {
            if pieceStart < end { out.append((html[pieceStart..<end], c)) }
            pieceStart = end
        }
        func at(_ idx: String.Index, _ s: String) -> Bool {
            var j = idx
            for b in s.utf8 {
                guard j < u.endIndex, u[j] | (b >= 0x61 && b <= 0x7A ? 0x20 : 0) == b else { return false }
                j = u.index(after: j)
            }
            return true
        }
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0C || b == 0x0D }
        func isLetter(_ b: UInt8) -> Bool { (b | 0x20) >= 0x61 && (b | 0x20) <= 0x7A }
        while i < u.endIndex {
            guard u[i] == 0x3C else { i = u.index(after: i); continue } // '<'
            let next = u.index(after: i)
            if at(i, "<!--") {
                emit(i, .text)
                let bodyStart = u.index(i, offsetBy: 4)
                var j = bodyStart
                while j < u.endIndex, !at(j, "-->") { j = u.index(after: j) }
                emit(bodyStart, .markup)
                emit(j, .comment)
                i = j < u.endIndex ? u.index(j, offsetBy: 3) : j
                emit(i, .markup)
                continue
            }
            guard next < u.endIndex, isLetter(u[next]) || u[next] == 0x2F || u[next] == 0x21 || u[next] == 0x3F else {
                i = next
                continue
            }
            // A tag: its name, then attributes.
            emit(i, .text)
            var j = next
            if u[j] == 0x2F { j = u.index(after: j) }
            let nameStart = j
            while j < u.endIndex, !isSpace(u[j]), u[j] != 0x3E, u[j] != 0x2F { j = u.index(after: j) }
            let tagName = String(html[nameStart..<j]).lowercased()
            let closing = u[next] == 0x2F
            while j < u.endIndex, u[j] != 0x3E {
                if isSpace(u[j]) || u[j] == 0x2F { j = u.index(after: j); continue }
                let attrStart = j
                while j < u.endIndex, !isSpace(u[j]), u[j] != 0x3E, u[j] != 0x3D, u[j] != 0x2F { j = u.index(after: j) }
                let attr = String(html[attrStart..<j]).lowercased()
                var k = j
                while k < u.endIndex, isSpace(u[k]) { k = u.index(after: k) }
                guard k < u.endIndex, u[k] == 0x3D else { continue } // no value
                k = u.index(after: k)
                while k < u.endIndex, isSpace(u[k]) { k = u.index(after: k) }
                guard k < u.endIndex else { j = k; break }
                let isURL = urlAttributes.contains(attr)
                if u[k] == 0x22 || u[k] == 0x27 {
                    let quote = u[k]
                    let valueStart = u.index(after: k)
                    var e = valueStart
                    while e < u.endIndex, u[e] != quote { e = u.index(after: e) }
                    emit(valueStart, .markup)
                    emit(e, .quotedValue(url: isURL))
                    j = e < u.endIndex ? u.index(after: e) : e
                } else {
                    var e = k
                    while e < u.endIndex, !isSpace(u[e]), u[e] != 0x3E { e = u.index(after: e) }
                    emit(k, .markup)
                    emit(e, .unquotedValue(url: isURL))
                    j = e
                }
            }
            i = j < u.endIndex ? u.index(after: j) : j
            emit(i, .markup)
            // Raw text up to the matching end tag.
            if !closing, tagName == "script" || tagName == "style" {
                var e = i
                while e < u.endIndex, !at(e, "</" + tagName) { e = u.index(after: e) }
                emit(e, .rawText)
                i = e
            }
        }
        emit(u.endIndex, .text)
        return out
    }
}
