/// Word-at-a-time byte searches for the recorder's hot loops: eight bytes are tested at once with integer
/// arithmetic (SWAR), or sixteen with the standard library's SIMD vectors where a search tests several byte values,
/// so that the long strings of a 3DS message (base64 device data, JWEs, padding) are crossed at a fraction of a byte
/// loop's cost. Each search returns exactly what a byte loop would; the tests compare the two on random buffers.
public enum ByteScan {
    @usableFromInline static let ones: UInt64 = 0x0101_0101_0101_0101
    @usableFromInline static let highs: UInt64 = 0x8080_8080_8080_8080
    @usableFromInline static let low7: UInt64 = 0x7F7F_7F7F_7F7F_7F7F

    /// The high bit of each byte of `w` that is zero. The lowest flagged byte is always a true zero (a borrow
    /// only runs upwards from one), which is all the searches below rely on.
    @inlinable static func zeroBytes(_ w: UInt64) -> UInt64 { (w &- ones) & ~w & highs }

    /// The high bit of each byte of `w` below `n` (n ≤ 0x80), with the same lowest-byte guarantee.
    @inlinable static func bytesBelow(_ w: UInt64, _ n: UInt64) -> UInt64 { (w &- ones &* n) & ~w & highs }

    /// The high bit of each byte `b` of `w` with `m < b < n` (for m, n ≤ 0x80), exactly: no carry crosses a byte.
    @inlinable static func bytesBetween(_ w: UInt64, above m: UInt64, below n: UInt64) -> UInt64 {
        let x = w & low7
        return (ones &* (127 + n) &- x) & ~w & (x &+ ones &* (127 - m)) & highs
    }

    @inlinable static func word(_ u: UnsafeBufferPointer<UInt8>, _ i: Int) -> UInt64 {
        UInt64(littleEndian: UnsafeRawPointer(u.baseAddress! + i).loadUnaligned(as: UInt64.self))
    }

    /// The sixteen bytes at `i` (with `i + 16 <= u.count`) as a vector: compared with a vector of one byte value, each
    /// lane costs a fraction of an instruction (one SSE2 compare for all sixteen on x86_64).
    @inlinable @inline(__always) static func block(_ u: UnsafeBufferPointer<UInt8>, _ i: Int) -> SIMD16<UInt8> {
        UnsafeRawPointer(u.baseAddress! + i).loadUnaligned(as: SIMD16<UInt8>.self)
    }

    /// The lowest lane `m` sets, nil when it sets none: its two halves are read as words (a set lane is all ones).
    @inlinable @inline(__always) static func firstLane(_ m: SIMDMask<SIMD16<Int8>>) -> Int? {
        let halves = unsafeBitCast(m, to: SIMD2<UInt64>.self)
        if halves[0] != 0 { return UInt64(littleEndian: halves[0]).trailingZeroBitCount / 8 }
        if halves[1] != 0 { return 8 + UInt64(littleEndian: halves[1]).trailingZeroBitCount / 8 }
        return nil
    }

    /// Whether `m` sets no lane (one test for its sixteen).
    @inlinable @inline(__always) static func noLane(_ m: SIMDMask<SIMD16<Int8>>) -> Bool {
        let halves = unsafeBitCast(m, to: SIMD2<UInt64>.self)
        return halves[0] | halves[1] == 0
    }

    /// `jsonStops`, also setting the lanes holding `=` or `e` (`jsonStringStopOrHint`'s stops before it looks at the next byte).
    @inlinable @inline(__always) static func jsonStopsOrHints(_ v: SIMD16<UInt8>) -> SIMDMask<SIMD16<Int8>> {
        let equals = SIMD16<UInt8>(repeating: 0x3D), e = SIMD16<UInt8>(repeating: 0x65)
        return jsonStops(v) .| (v .== equals) .| (v .== e)
    }

    /// The lanes of `v` that end a run of plain JSON string content: `"`, `\`, a control character or a non-ASCII byte
    /// (the two last in one compare: subtracting 0x20 moves both above 0x5F, and only them). The constants are typed
    /// vectors: an untyped `SIMD16(repeating:)` let the compiler pick the generic operators, which test lane by lane.
    @inlinable @inline(__always) static func jsonStops(_ v: SIMD16<UInt8>) -> SIMDMask<SIMD16<Int8>> {
        let quote = SIMD16<UInt8>(repeating: 0x22), backslash = SIMD16<UInt8>(repeating: 0x5C)
        let space = SIMD16<UInt8>(repeating: 0x20), last = SIMD16<UInt8>(repeating: 0x5F)
        return (v .== quote) .| (v .== backslash) .| ((v &- space) .> last)
    }

    /// The first index at or after `from` holding a byte that ends a run of plain JSON string content: `"`, `\`,
    /// a control character (below 0x20) or a non-ASCII byte (0x80 and above); `u.count` when there is none.
    @inlinable public static func jsonStringStop(_ u: UnsafeBufferPointer<UInt8>, from: Int) -> Int {
        var i = from
        // One block a step: most strings searched here are short (keys, header pairs), and a two-block step cost more
        // than it saved (2.1k -> 2.7k instructions an exchange in the recorder's writer).
        while i + 16 <= u.count {
            if let lane = firstLane(jsonStops(block(u, i))) { return i + lane }
            i += 16
        }
        while i + 8 <= u.count {
            let w = word(u, i)
            let hit = zeroBytes(w ^ (ones &* 0x22)) | zeroBytes(w ^ (ones &* 0x5C)) | bytesBelow(w, 0x20) | (w & highs)
            if hit != 0 { return i + hit.trailingZeroBitCount / 8 }
            i += 8
        }
        while i < u.count {
            let c = u[i]
            if c == 0x22 || c == 0x5C || c < 0x20 || c >= 0x80 { return i }
            i += 1
        }
        return i
    }

    /// The first index in `from..<end` holding a CR or an LF; `end` when there is none (an HTTP head's line ends).
    @inlinable public static func lineBreak(_ u: UnsafeBufferPointer<UInt8>, from: Int, end: Int) -> Int {
        var i = from
        while i + 8 <= end {
            let w = word(u, i)
            let hit = zeroBytes(w ^ (ones &* 0x0D)) | zeroBytes(w ^ (ones &* 0x0A))
            if hit != 0 { return i + hit.trailingZeroBitCount / 8 }
            i += 8
        }
        while i < end {
            if u[i] == 0x0D || u[i] == 0x0A { return i }
            i += 1
        }
        return end
    }

    /// Whether every byte in `range` is ASCII (below 0x80).
    @inlinable public static func isASCII(_ u: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Bool {
        var i = range.lowerBound
        while i + 8 <= range.upperBound {
            if word(u, i) & highs != 0 { return false }
            i += 8
        }
        while i < range.upperBound {
            if u[i] >= 0x80 { return false }
            i += 1
        }
        return true
    }

    /// Whether the eight bytes at `i` (with `i + 8 <= u.count`) are all ASCII digits.
    @inlinable public static func eightDigits(_ u: UnsafeBufferPointer<UInt8>, at i: Int) -> Bool {
        bytesBetween(word(u, i), above: 0x2F, below: 0x3A) == highs
    }

    /// Whether the eight bytes at `i` (with `i + 8 <= u.count`) may lie inside a card number as people write one: each an
    /// ASCII digit, a space or a dash, and no two of the separators side by side (`4000 0000`, `0-0000-0`, `40000000`).
    @inlinable public static func eightCardBytes(_ u: UnsafeBufferPointer<UInt8>, at i: Int) -> Bool {
        let w = word(u, i)
        // Most windows hold a letter or a control byte: two operations set aside a word with a byte outside 0x20...0x3F
        // (the bytes whose top three bits are 001), the exact range test (space to `9`) follows, and the rest is out of
        // line, so that the compiler does not compute it for every window.
        guard (w ^ (ones &* 0x20)) & (ones &* 0xE0) == 0, bytesBetween(w, above: 0x1F, below: 0x3A) == highs else { return false }
        return cardWord(w)
    }

    /// The lanes of `v` holding a byte between space and `?` (top three bits 001): `eightCardBytes`' first test, for
    /// sixteen bytes at once.
    @inlinable @inline(__always) static func spaceToQuestionMark(_ v: SIMD16<UInt8>) -> SIMDMask<SIMD16<Int8>> {
        v & SIMD16<UInt8>(repeating: 0xE0) .== SIMD16<UInt8>(repeating: 0x20)
    }

    /// Whether `u` holds the byte `value`, sixteen bytes a step.
    @inlinable public static func contains(_ u: UnsafeBufferPointer<UInt8>, byte value: UInt8) -> Bool {
        var p = 0
        let v = SIMD16<UInt8>(repeating: value)
        while p + 16 <= u.count {
            if any(block(u, p) .== v) { return true }
            p += 16
        }
        while p < u.count {
            if u[p] == value { return true }
            p += 1
        }
        return false
    }

    /// The first offset `from`, `from + 6`, `from + 12` … whose 8 bytes pass `eightCardBytes`, or nil: the card-number
    /// scan's skip over text, in one tight loop.
    @inlinable public static func nextCardWindow(_ u: UnsafeBufferPointer<UInt8>, from: Int) -> Int? {
        var p = from
        // Sixteen bytes at a time: which lie between space and `?` (eightCardBytes' first test, on every byte of the
        // windows at p and p + 6, both inside the block). A block with none of them fails the windows at p, p + 6 and
        // p + 12 (each holds one of its bytes): text and padding are crossed 18 bytes a step.
        while p + 16 <= u.count {
            let lanes = unsafeBitCast(spaceToQuestionMark(block(u, p)), to: SIMD2<UInt64>.self)
            let low = UInt64(littleEndian: lanes[0]), high = UInt64(littleEndian: lanes[1])
            if low | high == 0 {
                p += 18
                // Padding or letters: as long as two blocks hold no such byte, the six windows starting in them fail.
                while p + 32 <= u.count, noLane(spaceToQuestionMark(block(u, p)) .| spaceToQuestionMark(block(u, p + 16))) { p += 36 }
                continue
            }
            if low == ~0, eightCardBytes(u, at: p) { return p }
            if low >> 48 | high << 16 == ~0, eightCardBytes(u, at: p + 6) { return p + 6 }
            p += 12
        }
        while p + 8 <= u.count {
            if eightCardBytes(u, at: p) { return p }
            p += 6
        }
        return nil
    }

    /// `eightCardBytes` for a word whose bytes all lie between space and `9`.
    @usableFromInline @inline(never) static func cardWord(_ w: UInt64) -> Bool {
        let digits = bytesBetween(w, above: 0x2F, below: 0x3A)
        if digits == highs { return true }
        let separators = bytesBetween(w, above: 0x1F, below: 0x21) | bytesBetween(w, above: 0x2C, below: 0x2E)
        return digits | separators == highs && separators & (separators << 8) == 0
    }

    /// The first index at or after `from` holding a byte outside base64url's alphabet and `.` (where a compact JOSE
    /// serialisation or a base64url run ends); `u.count` when there is none.
    @inlinable public static func base64URLRunEnd(_ u: UnsafeBufferPointer<UInt8>, from: Int) -> Int {
        var i = from
        while i + 8 <= u.count {
            let w = word(u, i)
            let inside = bytesBetween(w, above: 0x2C, below: 0x2F) | bytesBetween(w, above: 0x2F, below: 0x3A) // - . and digits
                | bytesBetween(w, above: 0x40, below: 0x5B) | bytesBetween(w, above: 0x60, below: 0x7B) // letters
                | bytesBetween(w, above: 0x5E, below: 0x60) // _
            let outside = ~inside & highs
            if outside != 0 { return i + outside.trailingZeroBitCount / 8 }
            i += 8
        }
        while i < u.count {
            let c = u[i]
            let inside = (c >= 0x2D && c <= 0x2E) || (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x5F
            if !inside { return i }
            i += 1
        }
        return i
    }

    /// `jsonStringStop`, also stopping at `=` and at `e` followed by `y` or `w` (or by nothing): where the string may hold
    /// a form, a query or a base64url token (the recorder's JSON scan asks those of the masking; `ey` and `ew` start the
    /// base64url of `{`). `u.count` when there is none.
    @inlinable public static func jsonStringStopOrHint(_ u: UnsafeBufferPointer<UInt8>, from: Int) -> Int {
        var i = from
        while true {
            var found = false
            while i + 32 <= u.count, noLane(jsonStopsOrHints(block(u, i)) .| jsonStopsOrHints(block(u, i + 16))) { i += 32 }
            while i + 16 <= u.count {
                if let lane = firstLane(jsonStopsOrHints(block(u, i))) {
                    i += lane
                    found = true
                    break
                }
                i += 16
            }
            while !found, i + 8 <= u.count {
                let w = word(u, i)
                let hit = zeroBytes(w ^ (ones &* 0x22)) | zeroBytes(w ^ (ones &* 0x5C)) | bytesBelow(w, 0x20) | (w & highs)
                    | zeroBytes(w ^ (ones &* 0x3D)) | zeroBytes(w ^ (ones &* 0x65))
                if hit != 0 { i += hit.trailingZeroBitCount / 8; found = true; break }
                i += 8
            }
            if !found {
                while i < u.count {
                    let c = u[i]
                    if c == 0x22 || c == 0x5C || c < 0x20 || c >= 0x80 || c == 0x3D || c == 0x65 { break }
                    i += 1
                }
            }
            // An `e` that no `y` or `w` follows is passed over here, without returning (UUIDs are full of them).
            guard i + 1 < u.count, u[i] == 0x65, u[i + 1] != 0x79, u[i + 1] != 0x77 else { return i }
            i += 1
        }
    }
}
