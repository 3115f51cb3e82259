/// Base64url (RFC 4648 §5) and hex helpers used by JOSE and the 3DS encodings.
public enum Base64URL {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    /// Byte → 6-bit value; 64 marks `+` and `/` (standard base64, accepted when lenient), 255 anything else.
    static let values: [UInt8] = {
        var t = [UInt8](repeating: 255, count: 256)
        for (i, c) in alphabet.enumerated() { t[Int(c)] = UInt8(i) }
        t[Int(UInt8(ascii: "+"))] = 64
        t[Int(UInt8(ascii: "/"))] = 65
        return t
    }()

    /// Whether `c` is one of base64url's 64 characters (A-Z, a-z, 0-9, `-`, `_`; no padding): what each part of a
    /// compact JOSE serialisation is made of.
    /// One bit per byte, in two words (bytes 0-63 and 64-127): a lookup without branches, where a chain of range
    /// comparisons mispredicted on the random mix of letters and digits a base64url text is (tested against the ranges).
    @inlinable
    public static func isAlphabetByte(_ c: UInt8) -> Bool {
        let word = c < 64 ? alphabetMaskLow : alphabetMaskHigh
        return c < 128 && (word >> UInt64(c & 63)) & 1 != 0
    }
    /// `-` and `0`-`9`.
    @usableFromInline static let alphabetMaskLow: UInt64 = (1 << 0x2D) | (((1 << 10) - 1) << 0x30)
    /// `A`-`Z`, `_` and `a`-`z`, offset by 64.
    @usableFromInline static let alphabetMaskHigh: UInt64 = (((1 << 26) - 1) << (0x41 - 64)) | (1 << (0x5F - 64)) | (((1 << 26) - 1) << (0x61 - 64))

    /// Whether `c` is a space, tab, CR or LF (the whitespace `trimmingWhitespace` skips).
    @inlinable
    public static func isWhitespaceByte(_ c: UInt8) -> Bool { isASCIIWhitespace(c) }

    /// Encodes without padding, as JOSE requires.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let input = Array(bytes)
        var out = [UInt8]()
        out.reserveCapacity((input.count * 4 + 2) / 3)
        var i = 0
        while i + 3 <= input.count {
            let n = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
            out.append(alphabet[Int(n >> 18 & 63)]); out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)]); out.append(alphabet[Int(n & 63)])
            i += 3
        }
        let rest = input.count - i
        if rest == 1 {
            let n = UInt32(input[i]) << 16
            out.append(alphabet[Int(n >> 18 & 63)]); out.append(alphabet[Int(n >> 12 & 63)])
        } else if rest == 2 {
            let n = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8
            out.append(alphabet[Int(n >> 18 & 63)]); out.append(alphabet[Int(n >> 12 & 63)]); out.append(alphabet[Int(n >> 6 & 63)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Encodes the UTF-8 bytes of a string.
    public static func encode(_ text: String) -> String { encode(Array(text.utf8)) }

    /// Standard base64 (RFC 4648 §4: `+`, `/` and `=` padding), as HTTP Basic credentials use.
    public static func encodeStandard(_ bytes: some Sequence<UInt8>) -> String {
        var out = Array(encode(bytes).utf8).map { $0 == UInt8(ascii: "-") ? UInt8(ascii: "+") : $0 == UInt8(ascii: "_") ? UInt8(ascii: "/") : $0 }
        while out.count % 4 != 0 { out.append(UInt8(ascii: "=")) }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes base64url, padded or not. Returns nil on any character outside the alphabet
    /// (standard base64's `+` and `/` are rejected unless `lenient` is set).
    public static func decode(_ text: String, lenient: Bool = false) -> [UInt8]? {
        var t = text
        return t.withUTF8 { decode(bytes: $0, lenient: lenient) }
    }

    /// Decodes a substring (a part of a compact JOSE serialisation).
    public static func decode(_ text: Substring, lenient: Bool = false) -> [UInt8]? {
        var t = text
        return t.withUTF8 { decode(bytes: $0, lenient: lenient) }
    }

    /// Decodes base64url bytes.
    public static func decode(bytes: UnsafeBufferPointer<UInt8>, lenient: Bool = false) -> [UInt8]? {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 3 / 4 + 2)
        var acc: UInt32 = 0, bits = 0, count = 0
        var sawPad = false
        for c in bytes {
            if c == UInt8(ascii: "=") { sawPad = true; continue }
            var v = values[Int(c)]
            if v == 255 || sawPad { return nil }
            if v >= 64 {
                guard lenient else { return nil }
                v = v == 64 ? 62 : 63
            }
            acc = acc << 6 | UInt32(v)
            bits += 6
            count += 1
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
            }
        }
        if count % 4 == 1 { return nil }
        return out
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

/// The whitespace `trimmingWhitespace` and `firstNonWhitespace` skip: space, tab, CR, LF (JSON's and HTTP's).
@usableFromInline
func isASCIIWhitespace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 }

extension String {
    /// The text without leading and trailing spaces, tabs and newlines.
    public var trimmingWhitespace: String {
        let u = utf8
        var start = u.startIndex, end = u.endIndex
        while start < end, isASCIIWhitespace(u[start]) { start = u.index(after: start) }
        while end > start, isASCIIWhitespace(u[u.index(before: end)]) { end = u.index(before: end) }
        if start == u.startIndex, end == u.endIndex { return self }
        return String(self[start..<end])
    }
}

extension Collection<UInt8> {
    /// The first byte that is not a space, tab, CR or LF: what a body starts with (`{` for JSON), without making text.
    /// Inlinable, so that each caller gets it specialised for its collection (called on every body the writer stores).
    @inlinable
    public var firstNonWhitespace: UInt8? { first { !isASCIIWhitespace($0) } }
}
