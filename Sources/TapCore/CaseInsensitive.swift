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
