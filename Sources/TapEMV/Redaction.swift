import TapCore

/// Card data redacted before anything is stored: a body masked by its structure, then on the bytes every card number (13–19
/// digits that pass the Luhn check, in one run or in groups split by spaces or dashes) cut to its first 6 and last 4 digits;
/// text (URLs, header values, log lines) by the same scan.
extension ThreeDSContent {
    /// Masks a body for storage: its structure as `Masking.maskedText` reads it (JSON walked field by field; a form's or
    /// a query's values decoded and masked, codes typed into a challenge form masked whole; JWTs and base64url JSON
    /// anywhere, re-encoded), and then, on the bytes, every card number (`luhnRuns`). A body that cannot be decoded (not
    /// UTF-8, cut short, still compressed) gets the byte scan alone, and so does anything nested deeper than
    /// `Masking.maxDepth` encodings.
    public static func maskBody(_ body: [UInt8]) -> [UInt8] { maskBody(body, depth: 0) }

    /// `maskBody` for content found `depth` encodings deep (a JWT's payload, a form value).
    static func maskBody(_ body: [UInt8], depth: Int) -> [UInt8] {
        guard !body.isEmpty else { return body }
        return maskLuhnRuns(Masking.maskedText(body, depth: depth) ?? body)
    }

    /// Masks each card number in `text` to its first 6 and last 4 digits (see `luhnRuns`): for text (URLs, header values,
    /// log lines).
    public static func maskLuhnRuns(_ text: String) -> String {
        var text = text
        let runs = text.withUTF8 { luhnRuns($0) }
        return runs.isEmpty ? text : String(decoding: maskingRuns(Array(text.utf8), runs), as: UTF8.self)
    }

    /// Whether `text` holds a run `maskLuhnRuns` would mask.
    static func hasLuhnRun(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { !luhnRuns($0).isEmpty }
    }

    /// Text from the network made safe to print on a terminal or in a log: card numbers (also inside a JWT or base64url
    /// JSON) and codes in a query masked as the recorder masks a URL, and control characters (terminal escape sequences
    /// included) escaped as `TerminalText` shows them.
    public static func printable(_ text: String) -> String {
        TerminalText.escaped(Masking.maskText(text))
    }

    /// Masks each card number in `bytes` (see `luhnRuns`), the byte-level scan every stored body ends with.
    public static func maskLuhnRuns(_ bytes: [UInt8]) -> [UInt8] { maskLuhnRuns(bytes, mayHoldNUL: true) }

    /// `maskLuhnRuns`; `mayHoldNUL: false` where the bytes are known to hold no NUL byte (JSON text that `JSONBodyScan`
    /// accepted: a raw control character is neither allowed in a JSON string nor whitespace, and what the scan splices in
    /// is written escaped), so that the body is not searched for one.
    static func maskLuhnRuns(_ bytes: [UInt8], mayHoldNUL: Bool) -> [UInt8] {
        // Find the runs to mask without copying; copy only when there is one (most bodies have none).
        let (runs, hasNUL) = bytes.withUnsafeBufferPointer { (luhnRuns($0), mayHoldNUL && ByteScan.contains($0, byte: 0)) }
        let masked = runs.isEmpty ? bytes : maskingRuns(bytes, runs)
        return hasNUL ? maskingRunsAcrossNULs(masked) : masked
    }

    /// `bytes` with the card numbers that NUL bytes hide from `luhnRuns` masked: UTF-16 text (`4\0 0\0 0\0 …`) and a number
    /// split by a NUL (`4000\0000000001091`). The bytes are scanned again with their NULs left out, and each number found
    /// is masked in place (its digits; the NULs between them stay).
    static func maskingRunsAcrossNULs(_ bytes: [UInt8]) -> [UInt8] {
        var kept: [UInt8] = [], at: [Int] = []
        kept.reserveCapacity(bytes.count)
        at.reserveCapacity(bytes.count)
        for (i, b) in bytes.enumerated() where b != 0 {
            kept.append(b)
            at.append(i)
        }
        let runs = kept.withUnsafeBufferPointer { luhnRuns($0) }
        return runs.isEmpty ? bytes : maskingRuns(bytes, runs.map { at[$0.lowerBound]..<(at[$0.upperBound - 1] + 1) })
    }

    /// Card numbers as the bytes hold them: 13–19 ASCII digits that pass the Luhn check, written in one run
    /// (`4000000000001000`) or in groups joined by single spaces or dashes (`4000 0000 0000 1000`, `4000-0000-0000-1000`).
    /// Each range starts and ends on a digit. A run of digits that follows a `%` starts after the escape's two hex digits
    /// (`%224000…`, `card%204000…` in a URL): the escape is not part of the number.
    ///
    /// The digits, spaces and dashes around a number of 13 or more digits fill at least 13 bytes, so they hold a whole
    /// 8-byte window starting at one of any six consecutive offsets: only every sixth window is tested until one may lie in
    /// a card number (`ByteScan.eightCardBytes`), and then the stretch around it is measured. The short digit runs of UUIDs,
    /// amounts and dates are never visited one by one.
    static func luhnRuns(_ b: UnsafeBufferPointer<UInt8>) -> [Range<Int>] {
        var runs: [Range<Int>] = []
        let n = b.count
        var next = 0
        while let p = ByteScan.nextCardWindow(b, from: next) {
            // The stretch of digit groups joined by single separators around the window (it starts and ends on a digit).
            var i = isDigit(b[p]) ? p : p + 1
            var j = i + 1
            while i > 0 {
                if isDigit(b[i - 1]) { i -= 1 } else if i >= 2, isSeparator(b[i - 1]), isDigit(b[i - 2]) { i -= 2 } else { break }
            }
            while j < n {
                if isDigit(b[j]) { j += 1 } else if j + 1 < n, isSeparator(b[j]), isDigit(b[j + 1]) { j += 2 } else { break }
            }
            // A percent escape's hex digits are not the number's.
            var afterEscape = false
            if i >= 1, b[i - 1] == UInt8(ascii: "%") {
                i = escapeEnd(b, i, 2, j)
                afterEscape = true
            } else if i >= 2, b[i - 2] == UInt8(ascii: "%"), isHexDigit(b[i - 1]) {
                i = escapeEnd(b, i, 1, j)
                afterEscape = true
            }
            if i < j { cardNumbers(b, i..<j, afterEscape: afterEscape, into: &runs) }
            next = j + 1 // b[j] is neither a digit nor a separator between digits: the next stretch starts after it
        }
        return runs
    }

    /// Where a stretch starting at `i` begins once the `count` digits of a percent escape are left out (and a separator after
    /// them); `j` when nothing is left.
    static func escapeEnd(_ b: UnsafeBufferPointer<UInt8>, _ i: Int, _ count: Int, _ j: Int) -> Int {
        var k = i
        for _ in 0..<count where k < j && isDigit(b[k]) { k += 1 }
        if k < j, isSeparator(b[k]) { k += 1 }
        return k
    }

    /// The card numbers in a stretch of digit groups: a group of 13–19 digits that passes the Luhn check on its own (a
    /// number written without separators, as before), and every sequence of neighbouring other groups with 13–19 digits in
    /// all that passes it. Candidates may overlap (`2 4000 0000 0000 1091` holds two): each is masked, so whichever is the
    /// card number is, and a digit masked by either stays masked.
    ///
    /// Groups joined by separators are a card number only when the written number stands alone: no letter or digit just
    /// before or after it, nor one behind a dash next to it (`…2ca-9935-4554-8523-0538780dc93f`, a UUID, holds
    /// Luhn-valid groups now and then: one random transaction ID in a few hundred was masked, and validation then found it
    /// malformed). Inside a stretch, a candidate may start or end at a space (`2 4000 0000 0000 1091`), not at a dash.
    static func cardNumbers(_ b: UnsafeBufferPointer<UInt8>, _ stretch: Range<Int>, afterEscape: Bool = false, into runs: inout [Range<Int>]) {
        // Most stretches are one group (a plain digit run); most of the others (dates, times, phone numbers) have too few
        // digits to hold a card number.
        var digitCount = 0
        for k in stretch where isDigit(b[k]) { digitCount += 1 }
        if digitCount == stretch.count {
            if (13...19).contains(stretch.count), luhn(UnsafeBufferPointer(rebasing: b[stretch])) { runs.append(stretch) }
            return
        }
        guard digitCount >= 13 else { return }
        var groups: [Range<Int>] = []
        var start = stretch.lowerBound
        for k in stretch where !isDigit(b[k]) {
            groups.append(start..<k)
            start = k + 1
        }
        groups.append(start..<stretch.upperBound)
        let alone = groups.map { (13...19).contains($0.count) && luhn(UnsafeBufferPointer(rebasing: b[$0])) }
        for s in groups.indices {
            if alone[s] { runs.append(groups[s]); continue }
            var digits = groups[s].count
            var e = s + 1
            guard standsAloneBefore(b, groups[s].lowerBound, stretch: stretch, afterEscape: afterEscape) else { continue }
            while e < groups.count, !alone[e], digits + groups[e].count <= 19 {
                digits += groups[e].count
                if digits >= 13, standsAloneAfter(b, groups[e].upperBound, stretch: stretch),
                   luhnSkippingSeparators(b, groups[s].lowerBound..<groups[e].upperBound) {
                    runs.append(groups[s].lowerBound..<groups[e].upperBound)
                }
                e += 1
            }
        }
    }

    /// Whether a number of joined groups may start at `k`: at a stretch's start, after no letter or digit (nor a dash
    /// behind one), or after a percent escape; inside a stretch, after a space.
    static func standsAloneBefore(_ b: UnsafeBufferPointer<UInt8>, _ k: Int, stretch: Range<Int>, afterEscape: Bool) -> Bool {
        guard k == stretch.lowerBound else { return b[k - 1] == 0x20 }
        if afterEscape || k == 0 { return true }
        if isAlphanumeric(b[k - 1]) { return false }
        return !(b[k - 1] == 0x2D && k >= 2 && isAlphanumeric(b[k - 2]))
    }

    /// Whether a number of joined groups may end before `k`: at a stretch's end, before no letter or digit (nor a dash
    /// ahead of one); inside a stretch, before a space.
    static func standsAloneAfter(_ b: UnsafeBufferPointer<UInt8>, _ k: Int, stretch: Range<Int>) -> Bool {
        guard k == stretch.upperBound else { return b[k] == 0x20 }
        if k == b.count { return true }
        if isAlphanumeric(b[k]) { return false }
        return !(b[k] == 0x2D && k + 1 < b.count && isAlphanumeric(b[k + 1]))
    }

    @inline(__always) static func isAlphanumeric(_ c: UInt8) -> Bool { isDigit(c) || (c | 0x20) &- 0x61 <= 25 }

    /// `bytes` with each run's digits kept to the first 6 and last 4, `*` between (separators kept).
    static func maskingRuns(_ bytes: [UInt8], _ runs: [Range<Int>]) -> [UInt8] {
        var out = bytes
        for r in runs {
            let digits = r.reduce(0) { $0 + (isDigit(bytes[$1]) ? 1 : 0) }
            var d = 0
            for k in r where isDigit(bytes[k]) {
                if d >= 6, d < digits - 4 { out[k] = UInt8(ascii: "*") }
                d += 1
            }
        }
        return out
    }

    @inline(__always) static func isDigit(_ c: UInt8) -> Bool { c &- 0x30 <= 9 }
    @inline(__always) static func isSeparator(_ c: UInt8) -> Bool { c == 0x20 || c == 0x2D }
    @inline(__always) static func isHexDigit(_ c: UInt8) -> Bool { isDigit(c) || (c | 0x20) &- 0x61 <= 5 }

    /// The Luhn check over the digits of `range`, separators left out.
    static func luhnSkippingSeparators(_ b: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Bool {
        var sum = 0, n = 0
        for k in range.reversed() where isDigit(b[k]) {
            var d = Int(b[k] - 0x30)
            if n % 2 == 1 { d *= 2; if d > 9 { d -= 9 } }
            sum += d
            n += 1
        }
        return sum % 10 == 0
    }

    /// The Luhn (mod 10) check over ASCII digits.
    public static func luhn(_ digits: some Collection<UInt8>) -> Bool {
        var sum = 0
        for (n, c) in digits.reversed().enumerated() {
            var d = Int(c - 0x30)
            if n % 2 == 1 { d *= 2; if d > 9 { d -= 9 } }
            sum += d
        }
        return sum % 10 == 0
    }
}
