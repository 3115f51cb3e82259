#if canImport(Glibc)
import Glibc
#endif
import TapCore

/// The recorder's fast path for a JSON body: one pass over the bytes, no tree built. It masks what `Masking.masking`
/// masks (an `acctNumber` string to first 6 / last 4 in place, the secret fields' strings to `"***"`), keeping the
/// body's own formatting, and reads the message summary from the top-level members. Anything it is not sure of
/// (escape sequences in keys or in the values it reads, `\u` escapes anywhere, an escaped string or a summary value
/// that may be a JWT, invalid or deeply nested JSON) makes it give up (nil), and the caller takes the full parse.
/// A JWS's payload is masked as the full path masks it.
enum JSONBodyScan {
    struct Result {
        var stored: [UInt8]
        var summary: MessageSummary?
        var changed: Bool
    }

    static func scan(_ body: [UInt8]) -> Result? {
        // What the scan found, taken out of the closure (the scanner's pointer is valid only inside it).
        let table = keyTable
        let scanned: (splices: [(Range<Int>, [UInt8])], top: [String?], nonASCII: Bool)? = body.withUnsafeBufferPointer { u in
            table.names.withUnsafeBufferPointer { names in
                table.entries.withUnsafeBufferPointer { entries in
                    table.starts.withUnsafeBufferPointer { starts in
                        var s = Scanner(u: u, names: names, entries: entries, starts: starts)
                        return s.run() ? (s.splices, s.top, s.nonASCII) : nil
                    }
                }
            }
        }
        guard let s = scanned else { return nil }
        // As the full parse does, invalid UTF-8 makes it not JSON at all.
        if s.nonASCII, String(validating: body, as: UTF8.self) == nil { return nil }
        var out = body
        // Splices from the end, so that earlier offsets stay valid.
        for (range, replacement) in s.splices.sorted(by: { $0.0.lowerBound > $1.0.lowerBound }) {
            out.replaceSubrange(range, with: replacement)
        }
        var summary: MessageSummary?
        if let type = s.top[0] { // in the order of summaryNames
            var m = MessageSummary(messageType: type)
            m.messageVersion = s.top[1]
            m.threeDSServerTransID = s.top[2]
            m.dsTransID = s.top[3]
            m.acsTransID = s.top[4]
            m.sdkTransID = s.top[5]
            m.transStatus = s.top[6]
            m.errorCode = s.top[7]
            summary = m
        }
        return Result(stored: out, summary: summary, changed: !s.splices.isEmpty)
    }

    /// What a member's key means to the scan.
    enum Key: Equatable {
        case other
        case acctNumber
        case secret
        /// A top-level summary member, by its index in `summaryNames`.
        case summary(Int)
    }

    static let summaryNames = ["messageType", "messageVersion", "threeDSServerTransID", "dsTransID", "acsTransID", "sdkTransID",
                               "transStatus", "errorCode"]
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
            for n in Masking.secretFields where n != "acctNumber" { add(n, .secret) }
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
    /// The characters that may follow a backslash, `u` aside.
    static let simpleEscapes: Set<UInt8> = Set(#""\/bfnrt"#.utf8)

    struct Scanner {
        let u: UnsafeBufferPointer<UInt8>
        var i = 0
        var splices: [(Range<Int>, [UInt8])] = []
        /// Top-level summary values by their index in `summaryNames`, first occurrence kept (as `JSON`'s subscript does).
        var top = [String?](repeating: nil, count: JSONBodyScan.summaryNames.count)
        /// Top-level summary keys already seen (with any value): later duplicates are ignored, as the full parse does.
        var topSeen = [Bool](repeating: false, count: JSONBodyScan.summaryNames.count)
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

        /// A string at `i` (on its quote): the range of its content, and whether it holds an escape.
        mutating func string() -> (Range<Int>, Bool)? {
            guard i < u.count, u[i] == UInt8(ascii: "\"") else { return nil }
            i += 1
            let start = i
            var escaped = false
            while i < u.count {
                // Ordinary string bytes are skipped eight at a time.
                i = ByteScan.jsonStringStop(u, from: i)
                guard i < u.count else { break }
                let c = u[i]
                if c == UInt8(ascii: "\"") { i += 1; return (start..<(i - 1), escaped) }
                if c < 0x20 { return nil }
                if c >= 0x80 { nonASCII = true }
                if c == UInt8(ascii: "\\") {
                    // The escapes JSON allows, but \u (the full parse decides those); anything else is not JSON.
                    guard i + 1 < u.count, JSONBodyScan.simpleEscapes.contains(u[i + 1]) else { return nil }
                    escaped = true
                    i += 2
                    continue
                }
                i += 1
            }
            return nil
        }

        mutating func object(depth: Int) -> Bool {
            guard depth <= 64 else { return false }
            i += 1 // {
            skipSpace()
            if i < u.count, u[i] == UInt8(ascii: "}") { i += 1; return true }
            while true {
                skipSpace()
                guard let (keyRange, keyEscaped) = string(), !keyEscaped else { return false }
                skipSpace()
                guard i < u.count, u[i] == UInt8(ascii: ":") else { return false }
                i += 1
                skipSpace()
                guard i < u.count else { return false }
                let key = key(keyRange)
                if u[i] == UInt8(ascii: "\"") {
                    guard let (valueRange, valueEscaped) = string() else { return false }
                    switch key {
                    case .acctNumber:
                        guard !valueEscaped, (valueRange.lowerBound..<valueRange.upperBound).allSatisfy({ u[$0] < 0x80 }) else { return false }
                        let value = UnsafeBufferPointer(rebasing: u[valueRange])
                        let maskedPAN = Masking.maskedPAN(ascii: value)
                        if !maskedPAN.elementsEqual(value) { splices.append((valueRange, maskedPAN)) }
                    case .secret:
                        if !(valueRange.count == 3 && (valueRange.lowerBound..<valueRange.upperBound).allSatisfy({ u[$0] == UInt8(ascii: "*") })) {
                            splices.append((valueRange, JSONBodyScan.masked))
                        }
                    case let .summary(n) where depth == 1:
                        // A summary value that may be a JWT goes to the full path (it would be read masked there).
                        if mayBeJWT(valueRange) { return false }
                        if !topSeen[n] {
                            guard !valueEscaped else { return false }
                            top[n] = String(decoding: UnsafeBufferPointer(rebasing: u[valueRange]), as: UTF8.self)
                        }
                        topSeen[n] = true
                    default:
                        guard jws(valueRange, escaped: valueEscaped) else { return false }
                    }
                } else {
                    if depth == 1, case let .summary(n) = key { topSeen[n] = true }
                    guard value(depth: depth) else { return false }
                }
                skipSpace()
                guard i < u.count else { return false }
                if u[i] == UInt8(ascii: ",") { i += 1; continue }
                if u[i] == UInt8(ascii: "}") { i += 1; return true }
                return false
            }
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
                guard let (r, escaped) = string() else { return false }
                return jws(r, escaped: escaped)
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return literal("null")
            default: return number()
            }
        }

        /// A string value that may be a compact JWS (acsSignedContent, a JWT) gets its payload masked as the full path
        /// does (`Masking.maskedJWS`), spliced in; false (give up) when it holds escapes the scan does not decode.
        mutating func jws(_ r: Range<Int>, escaped: Bool) -> Bool {
            guard mayBeJWT(r) else { return true }
            // Only three parts can be a JWS (a five-part JWE, sdkEncData, has nothing to mask): counted on the bytes.
            var dots = 0
            var at = u.baseAddress! + r.lowerBound
            let end = u.baseAddress! + r.upperBound
            while at < end, let dot = memchr(at, Int32(UInt8(ascii: ".")), end - at) {
                dots += 1
                if dots > 2 { return true }
                at = UnsafePointer(dot.assumingMemoryBound(to: UInt8.self)) + 1
            }
            guard dots == 2 else { return true }
            guard !escaped else { return false }
            if let masked = Masking.maskedJWS(String(decoding: UnsafeBufferPointer(rebasing: u[r]), as: UTF8.self)) {
                splices.append((r, Array(masked.utf8)))
            }
            return true
        }

        /// `eyJ…` with a dot: perhaps a compact JWS.
        func mayBeJWT(_ r: Range<Int>) -> Bool {
            r.count > 3 && u[r.lowerBound] == 0x65 && u[r.lowerBound + 1] == 0x79 && u[r.lowerBound + 2] == 0x4A
                && (r.lowerBound..<r.upperBound).contains { u[$0] == UInt8(ascii: ".") }
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
