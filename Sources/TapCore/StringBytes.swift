/// String operations done on UTF-8 bytes, for the hot paths that handle ASCII protocol text (header names, compact JOSE).
extension String {
    /// ASCII case-insensitive comparison (header names are ASCII tokens).
    public func caseInsensitiveEquals(_ other: String) -> Bool {
        guard utf8.count == other.utf8.count else { return false }
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
