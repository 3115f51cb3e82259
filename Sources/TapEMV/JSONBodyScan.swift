#if canImport(Glibc)
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#endif
import TapCore

/// The recorder's fast path for a JSON body: one pass over the bytes, no tree built. It masks what `Masking.masking`
/// masks (an `acctNumber` to first 6 / last 4 in place, a secret field's string or number to `"***"`, a number holding a
/// card number to the masked number as a string), keeping the body's own formatting, and reads the message summary
/// from the top-level members. A string that may hold an encoding (`Masking.mayHoldStructure`: a JWT, base64url JSON, a
/// form or a query, JSON text) is masked by the same function the walk calls (`Masking.maskedString`) and spliced in.
/// Anything it is not sure of (escape sequences in keys or in the values it reads, `\u` escapes anywhere, an escaped
/// string that may hold an encoding, a summary value that may, a secret field holding an array or an object, invalid or
/// deeply nested JSON) makes it give up (nil), and the caller takes the full parse.
enum JSONBodyScan {
    struct Result {
        var stored: [UInt8]
        var summary: MessageSummary?
        var changed: Bool
    }

    static func scan(_ body: [UInt8]) -> Result? {
        let table = keyTable
        // The result is made inside the closures, by the scanner (whose pointers are valid only there): taking its findings
        // out first copied them twice (~1,300 instructions an exchange).
        return body.withUnsafeBufferPointer { u in
            table.names.withUnsafeBufferPointer { names in
                table.entries.withUnsafeBufferPointer { entries in
                    table.starts.withUnsafeBufferPointer { starts in
                        var s = Scanner(u: u, names: names, entries: entries, starts: starts)
                        return s.run() ? s.result(body) : nil
                    }
                }
            }
        }
    }

    /// What a member's key means to the scan.
    enum Key: Equatable {
        case other
        case acctNumber
        /// A secret field, with the format its value is judged by when it has one (`MaskedFormat.byElement`).
        case secret(MaskedFormat?)
        /// A top-level summary member, by its index in `summaryNames`.
        case summary(Int)
    }

    static let summaryNames = MessageFields.names
    /// The keys the scan acts on, flat: their names' bytes end to end, and entries grouped by name length
    /// (`starts[n]..<starts[n + 1]` are the names of length n), so that most keys are set aside by their length alone
    /// and the rest compared without touching reference-counted storage.
    struct KeyTable {
        struct Entry { var offset: Int; var key: Key }
        var names: [UInt8] = []
        var entries: [Entry] = []
        var starts: [Int] = []
        static let maxLength = 32

        init() {
            var byLength = [[(String, Key)]](repeating: [], count: Self.maxLength + 1)
            func add(_ name: String, _ k: Key) { if name.utf8.count <= Self.maxLength { byLength[name.utf8.count].append((name, k)) } }
            add("acctNumber", .acctNumber)
            for n in Masking.secretFields where n != "acctNumber" { add(n, .secret(MaskedFormat.byElement[n])) }
            for (i, n) in summaryNames.enumerated() { add(n, .summary(i)) }
            for group in byLength {
                starts.append(entries.count)
                for (name, k) in group {
                    entries.append(Entry(offset: names.count, key: k))
                    names += Array(name.utf8)
                }
            }
            starts.append(entries.count)
        }
    }
    static let keyTable = KeyTable()
    static let masked = Array("***".utf8)
    static let verdictOpening = Array(MaskVerdict.opening.utf8)
    static let maskedQuoted = Array("\"***\"".utf8)
    /// The characters that may follow a backslash, `u` aside.
    static let simpleEscapes: Set<UInt8> = Set(#""\/bfnrt"#.utf8)

    struct Scanner {
        let u: UnsafeBufferPointer<UInt8>
        var i = 0
        var splices: [(Range<Int>, [UInt8])] = []
        /// Top-level summary values, first occurrence kept (as `JSON`'s subscript does). A struct of eight members, not an
        /// array: `[String?](repeating:count:)` and `[Bool](repeating:count:)` looked up their array type's metadata at run
        /// time on every body (about 3,800 instructions an exchange in the writer).
        var top = MessageFields()
        /// Top-level summary keys already seen (with any value), bit n for `summaryNames[n]`: later duplicates are ignored,
        /// as the full parse does.
        var topSeen: UInt32 = 0
        /// A byte above 0x7F was seen inside a string (the body's UTF-8 is then checked).
        var nonASCII = false

        /// The key table (`KeyTable`), borrowed for the scan.
        let names: UnsafeBufferPointer<UInt8>
        let entries: UnsafeBufferPointer<KeyTable.Entry>
        let starts: UnsafeBufferPointer<Int>

        init(u: UnsafeBufferPointer<UInt8>, names: UnsafeBufferPointer<UInt8>, entries: UnsafeBufferPointer<KeyTable.Entry>,
             starts: UnsafeBufferPointer<Int>) {
            self.u = u
            self.names = names
            self.entries = entries
            self.starts = starts
        }

        /// The scan's result once `run` has succeeded on `body` (the bytes `u` points at): the body with its splices made,
        /// and the summary; nil when a byte above 0x7F was seen and the body is not UTF-8.
        func result(_ body: [UInt8]) -> Result? {
            // As the full parse does, invalid UTF-8 makes it not JSON at all.
            if nonASCII, String(validating: body, as: UTF8.self) == nil { return nil }
            var out = body
            // Splices from the end, so that earlier offsets stay valid (the scan made them in the order of the body: it
            // only moves forward, and the ranges it splices do not overlap).
            for (range, replacement) in splices.reversed() {
                out.replaceSubrange(range, with: replacement)
            }
            var summary: MessageSummary?
            if let type = top.messageType {
                var m = MessageSummary(messageType: type)
                m.fields = top
                summary = m
            }
            return Result(stored: out, summary: summary, changed: !splices.isEmpty)
        }

        func key(_ r: Range<Int>) -> Key {
            guard r.count <= KeyTable.maxLength else { return .other }
            for e in starts[r.count]..<starts[r.count + 1]
            where memcmp(names.baseAddress! + entries[e].offset, u.baseAddress! + r.lowerBound, r.count) == 0 {
                return entries[e].key
            }
            return .other
        }

        mutating func run() -> Bool {
            skipSpace()
            guard i < u.count, u[i] == UInt8(ascii: "{"), object(depth: 1) else { return false }
            skipSpace()
            return i == u.count
        }

        mutating func skipSpace() {
            while i < u.count, u[i] == 0x20 || u[i] == 0x0A || u[i] == 0x0D || u[i] == 0x09 { i += 1 }
        }

        /// A string at `i` (on its quote): the range of its content, whether it holds an escape, and (with `hints`) whether
        /// it may hold an encoding to mask (`Masking.mayHoldStructure`, told on the raw bytes: the simple escapes the scan
        /// accepts neither make nor hide `=`, `e` then `y` or `w`, nor a leading `{` or `[` once whitespace escapes are
        /// skipped).
        mutating func string(hints: Bool = false) -> (Range<Int>, escaped: Bool, hint: Bool)? {
            guard i < u.count, u[i] == UInt8(ascii: "\"") else { return nil }
            i += 1
            let start = i
            var escaped = false, hint = false
            while i < u.count {
                // Ordinary string bytes are skipped eight at a time.
                i = hints && !hint ? ByteScan.jsonStringStopOrHint(u, from: i) : ByteScan.jsonStringStop(u, from: i)
                guard i < u.count else { break }
                let c = u[i]
                if c == UInt8(ascii: "\"") {
                    i += 1
                    let r = start..<(i - 1)
                    if hints, !hint, startsLikeJSON(r) { hint = true }
                    return (r, escaped, hint)
                }
                if c < 0x20 { return nil }
                if c >= 0x80 { nonASCII = true }
                if c == UInt8(ascii: "\\") {
                    // The escapes JSON allows, but \u (the full parse decides those); anything else is not JSON.
                    guard i + 1 < u.count, JSONBodyScan.simpleEscapes.contains(u[i + 1]) else { return nil }
                    escaped = true
                    i += 2
                    continue
                }
                if c == UInt8(ascii: "=") || (c == UInt8(ascii: "e") && i + 1 < u.count && (u[i + 1] == UInt8(ascii: "y") || u[i + 1] == UInt8(ascii: "w"))) {
                    hint = true
                }
                i += 1
            }
            return nil
        }

        /// Whether the string content `r` starts, after whitespace (raw or escaped), with `{` or `[`.
        func startsLikeJSON(_ r: Range<Int>) -> Bool {
            var k = r.lowerBound
            while k < r.upperBound {
                let c = u[k]
                if c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { k += 1; continue }
                if c == UInt8(ascii: "\\"), k + 1 < r.upperBound, [UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t")].contains(u[k + 1]) {
                    k += 2
                    continue
                }
                return c == UInt8(ascii: "{") || c == UInt8(ascii: "[")
            }
            return false
        }

        mutating func object(depth: Int) -> Bool {
            guard depth <= 64 else { return false }
            i += 1 // {
            skipSpace()
            if i < u.count, u[i] == UInt8(ascii: "}") { i += 1; return true }
            // In a 3DS message a masked element that does not fit its format gets the verdict in its mask (`MaskVerdict`),
            // which the walk writes: a value that may not fit is noted, and the object given up at its end if it is one.
            // Whether it is: its first `messageType` member (nil: none yet), as the walk tells it.
            var isMessage: Bool?
            var mayNotFit = false
            while true {
                skipSpace()
                guard let (keyRange, keyEscaped, _) = string(), !keyEscaped else { return false }
                skipSpace()
                guard i < u.count, u[i] == UInt8(ascii: ":") else { return false }
                i += 1
                skipSpace()
                guard i < u.count else { return false }
                let key = key(keyRange)
                if u[i] == UInt8(ascii: "\"") {
                    guard let (valueRange, valueEscaped, hint) = string(hints: true) else { return false }
                    if key == .summary(0), isMessage == nil {
                        isMessage = valueEscaped || MaskedFormat.messageTypes.contains(String(decoding: UnsafeBufferPointer(rebasing: u[valueRange]), as: UTF8.self))
                    }
                    switch key {
                    case .acctNumber:
                        guard !valueEscaped, (valueRange.lowerBound..<valueRange.upperBound).allSatisfy({ u[$0] < 0x80 }) else { return false }
                        let value = UnsafeBufferPointer(rebasing: u[valueRange])
                        if !MaskedFormat.cardNumber.certainlyFits(rawContent: value, escaped: false) {
                            // A mask with its verdict is kept as it is: the walk does that.
                            if Self.contains(value, JSONBodyScan.verdictOpening) { return false }
                            mayNotFit = true
                        }
                        let maskedPAN = Masking.maskedPAN(ascii: value)
                        if !maskedPAN.elementsEqual(value) { splices.append((valueRange, maskedPAN)) }
                    case let .secret(format):
                        if !(valueRange.count == 3 && (valueRange.lowerBound..<valueRange.upperBound).allSatisfy({ u[$0] == UInt8(ascii: "*") })) {
                            if let format {
                                let value = UnsafeBufferPointer(rebasing: u[valueRange])
                                // A mask with its verdict is kept as it is: the walk does that.
                                if value.starts(with: JSONBodyScan.masked) { return false }
                                if !format.certainlyFits(rawContent: value, escaped: valueEscaped) { mayNotFit = true }
                            }
                            splices.append((valueRange, JSONBodyScan.masked))
                        }
                    case let .summary(n) where depth == 1:
                        // A summary value that may hold an encoding goes to the full path (it would be read masked there).
                        if hint { return false }
                        if topSeen & 1 << n == 0 {
                            guard !valueEscaped else { return false }
                            top.set(n, String(decoding: UnsafeBufferPointer(rebasing: u[valueRange]), as: UTF8.self))
                        }
                        topSeen |= 1 << n
                    default:
                        guard structured(valueRange, escaped: valueEscaped, hint: hint) else { return false }
                    }
                } else {
                    if depth == 1, case let .summary(n) = key { topSeen |= 1 << n }
                    if key == .summary(0), isMessage == nil { isMessage = false } // not a string: the walk reads no type
                    let c = u[i]
                    let isNumber = c == UInt8(ascii: "-") || (c >= 0x30 && c <= 0x39)
                    switch key {
                    case .acctNumber where isNumber:
                        // A card number sent as a number: stored as the masked number, a string (not one: a verdict).
                        mayNotFit = true
                        let s = i
                        guard number() else { return false }
                        let masked = Masking.maskedPAN(ascii: UnsafeBufferPointer(rebasing: u[s..<i]))
                        splices.append((s..<i, [UInt8(ascii: "\"")] + masked + [UInt8(ascii: "\"")]))
                    case let .secret(format) where isNumber:
                        if format != nil { mayNotFit = true } // a number where a string is due: a verdict
                        let s = i
                        guard number() else { return false }
                        splices.append((s..<i, JSONBodyScan.maskedQuoted))
                    case .secret where c == UInt8(ascii: "{") || c == UInt8(ascii: "["):
                        return false // masked whole: the full path does it
                    default:
                        guard value(depth: depth) else { return false }
                    }
                }
                skipSpace()
                guard i < u.count else { return false }
                if u[i] == UInt8(ascii: ",") { i += 1; continue }
                if u[i] == UInt8(ascii: "}") { i += 1; return !(mayNotFit && isMessage == true) }
                return false
            }
        }

        /// Whether `needle` occurs in `u`.
        static func contains(_ u: UnsafeBufferPointer<UInt8>, _ needle: [UInt8]) -> Bool {
            guard u.count >= needle.count else { return false }
            for k in 0...(u.count - needle.count) where u[k] == needle[0] && needle.indices.allSatisfy({ u[k + $0] == needle[$0] }) {
                return true
            }
            return false
        }

        mutating func array(depth: Int) -> Bool {
            guard depth <= 64 else { return false }
            i += 1 // [
            skipSpace()
            if i < u.count, u[i] == UInt8(ascii: "]") { i += 1; return true }
            while true {
                skipSpace()
                guard value(depth: depth) else { return false }
                skipSpace()
                guard i < u.count else { return false }
                if u[i] == UInt8(ascii: ",") { i += 1; continue }
                if u[i] == UInt8(ascii: "]") { i += 1; return true }
                return false
            }
        }

        /// Any value other than a member's string (which `object` reads itself).
        mutating func value(depth: Int) -> Bool {
            guard i < u.count else { return false }
            switch u[i] {
            case UInt8(ascii: "{"): return object(depth: depth + 1)
            case UInt8(ascii: "["): return array(depth: depth + 1)
            case UInt8(ascii: "\""):
                guard let (r, escaped, hint) = string(hints: true) else { return false }
                return structured(r, escaped: escaped, hint: hint)
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return literal("null")
            default:
                let s = i
                guard number() else { return false }
                // A number holding a card number becomes the masked number as a string, as the walk makes it.
                if i - s >= 13 {
                    let digits = UnsafeBufferPointer(rebasing: u[s..<i])
                    if !ThreeDSContent.luhnRuns(digits).isEmpty {
                        let text = String(decoding: digits, as: UTF8.self)
                        splices.append((s..<i, [UInt8(ascii: "\"")] + Array(ThreeDSContent.maskLuhnRuns(text).utf8) + [UInt8(ascii: "\"")]))
                    }
                }
                return true
            }
        }

        /// A string value that may hold an encoding gets it masked as the walk masks it (`Masking.maskedString`), spliced
        /// in escaped; false (give up) when it holds escapes the scan does not decode.
        mutating func structured(_ r: Range<Int>, escaped: Bool, hint: Bool) -> Bool {
            guard hint else { return true }
            guard !escaped else { return false }
            if Masking.isOpaqueToken(UnsafeBufferPointer(rebasing: u[r])) { return true } // a JWE, kept: no copy made
            if let masked = Masking.maskedStringContent(Array(u[r]), depth: 0) {
                var quoted: [UInt8] = []
                JSON.writeString(String(decoding: masked, as: UTF8.self), into: &quoted)
                splices.append((r, Array(quoted.dropFirst().dropLast())))
            }
            return true
        }

        mutating func literal(_ word: StaticString) -> Bool {
            let n = word.utf8CodeUnitCount
            guard i + n <= u.count else { return false }
            let ok = word.withUTF8Buffer { w in (0..<n).allSatisfy { u[i + $0] == w[$0] } }
            i += n
            return ok
        }

        /// A JSON number, checked strictly: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
        mutating func number() -> Bool {
            func digits() -> Int {
                let s = i
                while i < u.count, u[i] >= 0x30, u[i] <= 0x39 { i += 1 }
                return i - s
            }
            if i < u.count, u[i] == UInt8(ascii: "-") { i += 1 }
            guard i < u.count else { return false }
            if u[i] == 0x30 { i += 1 } else if digits() == 0 { return false }
            if i < u.count, u[i] == UInt8(ascii: ".") { i += 1; guard digits() > 0 else { return false } }
            if i < u.count, u[i] == UInt8(ascii: "e") || u[i] == UInt8(ascii: "E") {
                i += 1
                if i < u.count, u[i] == UInt8(ascii: "+") || u[i] == UInt8(ascii: "-") { i += 1 }
                guard digits() > 0 else { return false }
            }
            return true
        }
    }
}

extension MessageFields {
    /// Sets the member that `MessageFields.names[n]` names (the scan's `Key.summary(n)`).
    fileprivate mutating func set(_ n: Int, _ value: String) {
        switch n {
        case 0: messageType = value
        case 1: messageVersion = value
        case 2: threeDSServerTransID = value
        case 3: dsTransID = value
        case 4: acsTransID = value
        case 5: sdkTransID = value
        case 6: transStatus = value
        case 7: errorCode = value
        default: preconditionFailure("MessageFields has eight members")
        }
    }
}
