/// An `application/x-www-form-urlencoded` body.
public enum FormBody {
    /// Parses `a=b&c=d` with percent and `+` decoding; nil unless every pair has a token-like name.
    public static func parse(_ text: String) -> [(String, String)]? {
        var out: [(String, String)] = []
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            guard let eq = pair.firstIndex(of: "=") else { return nil }
            let name = String(pair[..<eq]), value = String(pair[pair.index(after: eq)...])
            guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || "_-.[]".contains($0) }),
                  let n = percentDecode(name), let v = percentDecode(value) else { return nil }
            out.append((n, v))
        }
        return out.isEmpty ? nil : out
    }

    /// Percent and `+` decoding; nil for a broken escape or bytes that are not UTF-8.
    static func percentDecode(_ s: String) -> String? {
        var bytes: [UInt8] = []
        var it = Array(s.utf8)[...]
        while let c = it.popFirst() {
            if c == UInt8(ascii: "+") { bytes.append(0x20); continue }
            if c != UInt8(ascii: "%") { bytes.append(c); continue }
            guard it.count >= 2, let b = Hex.decode(String(decoding: it.prefix(2), as: UTF8.self)) else { return nil }
            bytes += b
            it = it.dropFirst(2)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Percent-encodes everything but unreserved characters (RFC 3986).
    public static func percentEncode(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            switch b {
            case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, 0x2D, 0x2E, 0x5F, 0x7E: out.unicodeScalars.append(Unicode.Scalar(b))
            default: out += "%" + String(format2: b)
            }
        }
        return out
    }

    /// Form-encodes fields: `a=b&c=d`, each name and value percent-encoded.
    public static func encode(_ fields: [(String, String)]) -> [UInt8] {
        Array(fields.map { "\(percentEncode($0.0))=\(percentEncode($0.1))" }.joined(separator: "&").utf8)
    }
}

private extension String {
    init(format2 b: UInt8) {
        let d = Array("0123456789ABCDEF")
        self = String([d[Int(b >> 4)], d[Int(b & 0xF)]])
    }
}
