import TapCore

/// The recorder's fast path for a JSON body: one pass over the bytes, no tree built. It masks what `Masking.masking`
/// masks (an `acctNumber` string to first 6 / last 4 in place, the secret fields' strings to `"***"`), keeping the
/// body's own formatting, and reads the message summary from the top-level members. Anything it is not sure of
/// (escape sequences in keys or in the values it reads, `\u` escapes anywhere, a string that may be a JWT, invalid
/// or deeply nested JSON) makes it give up (nil), and the caller takes the full parse.
enum JSONBodyScan {
    struct Result {
        var stored: [UInt8]
        var summary: MessageSummary?
        var changed: Bool
    }

    static func scan(_ body: [UInt8]) -> Result? {
        // As the full parse does, invalid UTF-8 makes it not JSON at all.
        guard body.allSatisfy({ $0 < 0x80 }) || String(validating: body, as: UTF8.self) != nil else { return nil }
        var s = Scanner(u: body)
        guard s.run() else { return nil }
        var out = body
        // Splices from the end, so that earlier offsets stay valid.
        for (range, replacement) in s.splices.sorted(by: { $0.0.lowerBound > $1.0.lowerBound }) {
            out.replaceSubrange(range, with: replacement)
        }
        var summary: MessageSummary?
        if let type = s.top["messageType"] {
            var m = MessageSummary(messageType: type)
            m.messageVersion = s.top["messageVersion"]
            m.threeDSServerTransID = s.top["threeDSServerTransID"]
            m.dsTransID = s.top["dsTransID"]
            m.acsTransID = s.top["acsTransID"]
            m.sdkTransID = s.top["sdkTransID"]
            m.transStatus = s.top["transStatus"]
            m.errorCode = s.top["errorCode"]
            summary = m
        }
        return Result(stored: out, summary: summary, changed: !s.splices.isEmpty)
    }

    /// Top-level members whose string values make the summary.
    static let summaryKeys: Set<[UInt8]> = Set(["messageType", "messageVersion", "threeDSServerTransID", "dsTransID", "acsTransID",
                                                "sdkTransID", "transStatus", "errorCode"].map { Array($0.utf8) })
    static let secretKeys: Set<[UInt8]> = Set(Masking.secretFields.map { Array($0.utf8) })
    static let acctNumber = Array("acctNumber".utf8)
    static let masked = Array("***".utf8)

    struct Scanner {
        let u: [UInt8]
        var i = 0
        var splices: [(Range<Int>, [UInt8])] = []
        /// Top-level summary values, first occurrence kept (as `JSON`'s subscript does).
        var top: [String: String] = [:]
        /// Top-level keys seen with a non-string value: the full parse would read them as absent, so must we.
        var topSeen = Set<[UInt8]>()

        init(u: [UInt8]) { self.u = u }

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
                let c = u[i]
                if c == UInt8(ascii: "\"") { i += 1; return (start..<(i - 1), escaped) }
                if c < 0x20 { return nil }
                if c == UInt8(ascii: "\\") {
                    guard i + 1 < u.count, u[i + 1] != UInt8(ascii: "u") else { return nil } // \u: the full parse decides
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
                let key = Array(u[keyRange])
                if u[i] == UInt8(ascii: "\"") {
                    guard let (valueRange, valueEscaped) = string() else { return false }
                    let value = u[valueRange]
                    // A string that may be a JWT goes to the full path (its payload is masked there).
                    if value.count > 3, value.starts(with: [0x65, 0x79, 0x4A]), value.contains(UInt8(ascii: ".")) { return false }
                    if key == JSONBodyScan.acctNumber {
                        guard !valueEscaped, value.allSatisfy({ $0 < 0x80 }) else { return false }
                        let maskedPAN = Array(Masking.maskPAN(String(decoding: value, as: UTF8.self)).utf8)
                        if maskedPAN != Array(value) { splices.append((valueRange, maskedPAN)) }
                    } else if JSONBodyScan.secretKeys.contains(key) {
                        if Array(value) != JSONBodyScan.masked { splices.append((valueRange, JSONBodyScan.masked)) }
                    } else if depth == 1, JSONBodyScan.summaryKeys.contains(key), !topSeen.contains(key) {
                        guard !valueEscaped else { return false }
                        top[String(decoding: key, as: UTF8.self)] = String(decoding: value, as: UTF8.self)
                    }
                    if depth == 1 { topSeen.insert(key) }
                } else {
                    if depth == 1 { topSeen.insert(key) }
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
                guard let (r, _) = string() else { return false }
                let v = u[r]
                return !(v.count > 3 && v.starts(with: [0x65, 0x79, 0x4A]) && v.contains(UInt8(ascii: ".")))
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return literal("null")
            default: return number()
            }
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
