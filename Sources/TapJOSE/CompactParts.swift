import TapCore

/// Splits compact JOSE serialisations and decodes their protected header.
enum CompactParts {
    /// Splits on '.', requiring exactly `count` parts made only of base64url characters.
    static func split(_ text: String, count: Int, what: String) throws(JOSEError) -> [Substring] {
        let trimmed = text.trimmingWhitespace
        // On UTF-8 bytes: no grapheme breaking over a few kilobytes of base64url.
        let parts = trimmed.pieces(separatedBy: UInt8(ascii: "."))
        guard parts.count == count else {
            throw JOSEError(.malformed, "\(what) must have \(count) dot-separated parts, found \(parts.count)")
        }
        for (i, part) in parts.enumerated() {
            var p = part
            // On the contiguous bytes: a Substring's UTF-8 view walked generically cost more than the split itself.
            if !p.withUTF8({ $0.allSatisfy(Base64URL.isAlphabetByte) }) {
                throw JOSEError(.malformed, "\(what) part \(i + 1) contains characters outside base64url")
            }
        }
        return parts
    }

    static func decode(_ part: Substring, name: String) throws(JOSEError) -> [UInt8] {
        guard let b = Base64URL.decode(part) else { throw JOSEError(.malformed, "\(name) is not valid base64url") }
        return b
    }

    static func header(_ part: Substring) throws(JOSEError) -> JSON {
        let bytes = try decode(part, name: "protected header")
        let json: JSON
        do { json = try JSON.parse(bytes) } catch { throw JOSEError(.malformed, "protected header is not JSON: \(error)") }
        guard json.isObject else { throw JOSEError(.malformed, "protected header is not a JSON object") }
        return json
    }
}
