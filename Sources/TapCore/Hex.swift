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

    /// The first 16 of `bytes` as a version-4 UUID, lowercase (8-4-4-4-12), the version and RFC 4122 variant bits set
    /// in the text; written straight into the string. The caller brings the randomness (a DRBG, a seeded stream).
    public static func version4UUID(_ bytes: UnsafeRawBufferPointer) -> String {
        precondition(bytes.count >= 16, "a UUID takes 16 bytes")
        let digits: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: 36) { out in
            var k = 0
            for i in 0..<16 {
                if i == 4 || i == 6 || i == 8 || i == 10 { out[k] = UInt8(ascii: "-"); k += 1 }
                let b = i == 6 ? (bytes[i] & 0x0F) | 0x40 : i == 8 ? (bytes[i] & 0x3F) | 0x80 : bytes[i]
                out[k] = digits.utf8Start[Int(b >> 4)]
                out[k + 1] = digits.utf8Start[Int(b & 0x0F)]
                k += 2
            }
            return k
        }
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
