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
        for (i, p) in parts.enumerated() where !p.utf8.allSatisfy(CompactParts.isBase64URLByte) {
            throw JOSEError(.malformed, "\(what) part \(i + 1) contains characters outside base64url")
        }
        return parts
    }

    static func isBase64URLByte(_ a: UInt8) -> Bool {
        (a >= 0x41 && a <= 0x5A) || (a >= 0x61 && a <= 0x7A) || (a >= 0x30 && a <= 0x39) || a == 0x2D || a == 0x5F
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
