import Foundation

/// Base64url (RFC 4648 §5) and hex helpers used by JOSE and the 3DS encodings.
public enum Base64URL {
    /// Encodes without padding, as JOSE requires.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Encodes the UTF-8 bytes of a string.
    public static func encode(_ text: String) -> String { encode(Array(text.utf8)) }

    /// Decodes base64url, padded or not. Returns nil on any character outside the alphabet
    /// (standard base64's `+` and `/` are rejected unless `lenient` is set).
    public static func decode(_ text: some StringProtocol, lenient: Bool = false) -> [UInt8]? {
        var s = ""
        s.reserveCapacity(text.utf8.count + 3)
        var sawPad = false
        for c in text.unicodeScalars {
            switch c {
            case "A"..."Z", "a"..."z", "0"..."9":
                if sawPad { return nil }
                s.unicodeScalars.append(c)
            case "-": if sawPad { return nil }; s += "+"
            case "_": if sawPad { return nil }; s += "/"
            case "+", "/":
                if !lenient || sawPad { return nil }
                s.unicodeScalars.append(c)
            case "=": sawPad = true
            default: return nil
            }
        }
        if s.count % 4 == 1 { return nil }
        while s.count % 4 != 0 { s += "=" }
        guard let d = Data(base64Encoded: s) else { return nil }
        return [UInt8](d)
    }
}

/// Hexadecimal encoding and decoding.
public enum Hex {
    /// Lowercase hex of the bytes.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes hex (either case, no separators); nil if malformed.
    public static func decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 2)
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: return c - 0x30
            case 0x41...0x46: return c - 0x41 + 10
            case 0x61...0x66: return c - 0x61 + 10
            default: return nil
            }
        }
        var i = 0
        while i < chars.count {
            guard let hi = nibble(chars[i]), let lo = nibble(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }
}

extension String {
    /// The text without leading and trailing spaces, tabs and newlines.
    public var trimmingWhitespace: String {
        let u = utf8
        func ws(_ c: UInt8) -> Bool { c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 }
        var start = u.startIndex, end = u.endIndex
        while start < end, ws(u[start]) { start = u.index(after: start) }
        while end > start, ws(u[u.index(before: end)]) { end = u.index(before: end) }
        if start == u.startIndex, end == u.endIndex { return self }
        return String(self[start..<end])
    }
}
