/// String operations done on UTF-8 bytes, for the hot paths that handle ASCII protocol text (header names, compact JOSE).
extension String {
    /// ASCII case-insensitive comparison (header names are ASCII tokens). Inlined where it is called, the lengths
    /// are compared there (most names looked up differ in length from most names looked at); the bytes apart.
    @inlinable
    public func caseInsensitiveEquals(_ other: String) -> Bool {
        utf8.count == other.utf8.count && caseInsensitiveEqualsSameLength(other)
    }

    /// `caseInsensitiveEquals` for strings of the same length: the same bytes (names spelt alike), or each byte the
    /// same letter in either case.
    @usableFromInline
    func caseInsensitiveEqualsSameLength(_ other: String) -> Bool {
        if self == other { return true }
        func same(_ a: UInt8, _ b: UInt8) -> Bool { a == b || (a | 0x20 == b | 0x20 && (a | 0x20) >= 0x61 && (a | 0x20) <= 0x7A) }
        // Native strings (all that the parser makes) are compared on their contiguous bytes.
        if let r = utf8.withContiguousStorageIfAvailable({ a in
            other.utf8.withContiguousStorageIfAvailable { b in (0..<a.count).allSatisfy { same(a[$0], b[$0]) } }
        }), let r { return r }
        return zip(utf8, other.utf8).allSatisfy(same)
    }
}

extension String {
    /// The pieces between each `separator` (an ASCII byte such as `.`), empty pieces kept, as substrings of this
    /// string, found by a byte search: no grapheme breaking over kilobytes of base64url (JWS, JWE).
    public func pieces(separatedBy separator: UInt8) -> [Substring] {
        let u = utf8
        let offsets: [Int]? = u.withContiguousStorageIfAvailable { b in
            var at: [Int] = []
            var i = 0
            while let d = UnsafeBufferPointer(rebasing: b[i...]).firstIndex(of: separator) {
                at.append(i + d)
                i += d + 1
            }
            return at
        }
        guard let offsets else { return u.split(separator: separator, omittingEmptySubsequences: false).map { Substring($0) } }
        var out: [Substring] = []
        out.reserveCapacity(offsets.count + 1)
        var start = u.startIndex
        for o in offsets {
            let end = u.index(u.startIndex, offsetBy: o)
            out.append(Substring(u[start..<end]))
            start = u.index(after: end)
        }
        out.append(Substring(u[start...]))
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

extension Array where Element == UInt8 {
    /// Appends `text`'s UTF-8 bytes in one copy, from its contiguous storage (the generic append over a `String.UTF8View`
    /// goes through the view's iterator: serialising heads that way cost the recorder's loop 585 more instructions an
    /// exchange).
    @inlinable public mutating func appendUTF8(_ text: String) {
        var text = text
        text.withUTF8 { append(contentsOf: $0) }
    }
}
