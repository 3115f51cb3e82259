import TapCore

/// Splits compact JOSE serialisations and decodes their parts, on the bytes (no text is made of a whole token).
struct CompactParts {
    /// The serialisation's bytes; `ranges` are its parts, between the dots, whitespace around the whole left out.
    let bytes: [UInt8]
    let ranges: [Range<Int>]

    /// Splits on '.', requiring exactly `count` parts made only of base64url characters.
    init(_ bytes: [UInt8], count: Int, what: String) throws(JOSEError) {
        self.bytes = bytes
        var ranges: [Range<Int>] = []
        ranges.reserveCapacity(count)
        var badPart: Int?
        bytes.withUnsafeBufferPointer { b in
            var lo = 0, hi = b.count
            while lo < hi, Base64URL.isWhitespaceByte(b[lo]) { lo += 1 }
            while hi > lo, Base64URL.isWhitespaceByte(b[hi - 1]) { hi -= 1 }
            var start = lo
            for i in lo..<hi {
                let c = b[i]
                if c == 0x2E {
                    ranges.append(start..<i)
                    start = i + 1
                } else if badPart == nil, !Base64URL.isAlphabetByte(c) {
                    badPart = ranges.count
                }
            }
            ranges.append(start..<hi)
        }
        guard ranges.count == count else {
            throw JOSEError(.malformed, "\(what) must have \(count) dot-separated parts, found \(ranges.count)")
        }
        if let badPart { throw JOSEError(.malformed, "\(what) part \(badPart + 1) contains characters outside base64url") }
        self.ranges = ranges
    }

    /// Part `i` as text (base64url is ASCII).
    func text(_ i: Int) -> String { String(decoding: bytes[ranges[i]], as: UTF8.self) }

    /// Parts `from` through `through` with the dots between them, as bytes (a JWS signing input).
    func bytes(from: Int, through: Int) -> [UInt8] { Array(bytes[ranges[from].lowerBound..<ranges[through].upperBound]) }

    /// Part `i` decoded.
    func decode(_ i: Int, name: String) throws(JOSEError) -> [UInt8] {
        let decoded = bytes.withUnsafeBufferPointer { Base64URL.decode(bytes: UnsafeBufferPointer(rebasing: $0[ranges[i]])) }
        guard let decoded else { throw JOSEError(.malformed, "\(name) is not valid base64url") }
        return decoded
    }

    /// Part `i` decoded as the protected header: a JSON object.
    func header(_ i: Int = 0) throws(JOSEError) -> JSON {
        let bytes = try decode(i, name: "protected header")
        let json: JSON
        do { json = try JSON.parse(bytes) } catch { throw JOSEError(.malformed, "protected header is not JSON: \(error)") }
        guard json.isObject else { throw JOSEError(.malformed, "protected header is not a JSON object") }
        return json
    }
}
