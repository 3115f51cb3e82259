/// Base64url (RFC 4648 §5), as JOSE and the 3DS encodings use it.
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
    /// One bit per byte, in two words (bytes 0-63: `-`, `0`-`9`; bytes 64-127: `A`-`Z`, `_`, `a`-`z`): a lookup without
    /// branches, where a chain of range comparisons mispredicted on the random mix of letters and digits a base64url text
    /// is. The words are literals here (a static let in another module is read through an accessor call per byte).
    @inlinable
    public static func isAlphabetByte(_ c: UInt8) -> Bool {
        let word: UInt64 = c < 64 ? 0x03FF_2000_0000_0000 : 0x07FF_FFFE_87FF_FFFE
        return c < 128 && (word >> UInt64(c & 63)) & 1 != 0
    }

    /// Whether `c` is a space, tab, CR or LF (the whitespace `trimmingWhitespace` skips).
    @inlinable
    public static func isWhitespaceByte(_ c: UInt8) -> Bool { isASCIIWhitespace(c) }

    /// Encodes without padding, as JOSE requires.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        if let text = bytes.withContiguousStorageIfAvailable({ encode(buffer: $0) }) { return text }
        return Array(bytes).withUnsafeBufferPointer { encode(buffer: $0) }
    }

    /// Three bytes at a time into a string of the final size (a character-at-a-time append into an array, then a
    /// String made of it, cost four times as much).
    static func encode(buffer input: UnsafeBufferPointer<UInt8>) -> String {
        if input.isEmpty { return "" }
        let whole = input.count / 3, rest = input.count % 3
        let outCount = whole * 4 + (rest == 0 ? 0 : rest + 1)
        return alphabet.withUnsafeBufferPointer { letters in
            String(unsafeUninitializedCapacity: outCount) { out in
                var i = 0, o = 0
                for _ in 0..<whole {
                    let n = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
                    out[o] = letters[Int(n >> 18 & 63)]
                    out[o + 1] = letters[Int(n >> 12 & 63)]
                    out[o + 2] = letters[Int(n >> 6 & 63)]
                    out[o + 3] = letters[Int(n & 63)]
                    i += 3
                    o += 4
                }
                if rest > 0 {
                    let n = UInt32(input[i]) << 16 | (rest == 2 ? UInt32(input[i + 1]) << 8 : 0)
                    out[o] = letters[Int(n >> 18 & 63)]
                    out[o + 1] = letters[Int(n >> 12 & 63)]
                    if rest == 2 { out[o + 2] = letters[Int(n >> 6 & 63)] }
                }
                return outCount
            }
        }
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

    /// Decodes base64url bytes. Padding may only end the text; the bits left over by a partial group are ignored.
    /// Four characters at a time into an array of the final size (a byte-at-a-time append was most of the time
    /// of parsing a JWE).
    public static func decode(bytes: UnsafeBufferPointer<UInt8>, lenient: Bool = false) -> [UInt8]? {
        var n = bytes.count
        while n > 0, bytes[n - 1] == UInt8(ascii: "=") { n -= 1 }
        let rest = n % 4
        if rest == 1 { return nil }
        // Nothing to decode (a JWE's empty key part): no array made, since one of capacity 0 is the shared empty
        // storage, whose count `unsafeUninitializedCapacity` would write (a race ThreadSanitizer reports).
        if n == 0 { return [] }
        let outCount = n / 4 * 3 + (rest == 0 ? 0 : rest - 1)
        var valid = true
        let out = values.withUnsafeBufferPointer { table in
            [UInt8](unsafeUninitializedCapacity: outCount) { buffer, initialized in
                // A character's 6-bit value; nil outside the alphabet (padding inside the text included).
                func value(_ c: UInt8) -> UInt32? {
                    let v = table[Int(c)]
                    if v < 64 { return UInt32(v) }
                    if v == 255 || !lenient { return nil }
                    return v == 64 ? 62 : 63
                }
                var i = 0, o = 0
                while i + 4 <= n {
                    let a = table[Int(bytes[i])], b = table[Int(bytes[i + 1])], c = table[Int(bytes[i + 2])], d = table[Int(bytes[i + 3])]
                    let group: UInt32
                    if (a | b | c | d) < 64 {
                        group = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    } else if let a = value(bytes[i]), let b = value(bytes[i + 1]), let c = value(bytes[i + 2]), let d = value(bytes[i + 3]) {
                        group = a << 18 | b << 12 | c << 6 | d
                    } else {
                        valid = false
                        break
                    }
                    buffer[o] = UInt8(truncatingIfNeeded: group >> 16)
                    buffer[o + 1] = UInt8(truncatingIfNeeded: group >> 8)
                    buffer[o + 2] = UInt8(truncatingIfNeeded: group)
                    i += 4
                    o += 3
                }
                if valid, rest > 0 {
                    var group: UInt32 = 0
                    for k in 0..<rest {
                        guard let v = value(bytes[i + k]) else { valid = false; break }
                        group |= v << (18 - 6 * UInt32(k))
                    }
                    if valid {
                        buffer[o] = UInt8(truncatingIfNeeded: group >> 16)
                        if rest == 3 { buffer[o + 1] = UInt8(truncatingIfNeeded: group >> 8) }
                        o += rest - 1
                    }
                }
                initialized = valid ? o : 0
            }
        }
        return valid ? out : nil
    }
}
