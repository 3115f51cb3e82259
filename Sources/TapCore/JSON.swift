/// A JSON value that keeps object keys in the order they were written, and numbers as their text,
/// so that a decoded 3DS message prints as it was sent and re-serialises byte for byte where possible.
public enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number's literal text, as it appeared (for example `"2"` or `"1.50"`).
    case number(String)
    case string(String)
    case array([JSON])
    /// Members in document order. Duplicate keys are kept as written; lookups return the first.
    case object([(String, JSON)])

    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// The member named `key` of an object, or nil (also for non-objects).
    public subscript(key: String) -> JSON? {
        guard case let .object(members) = self else { return nil }
        return members.first(where: { $0.0 == key })?.1
    }

    /// The string value, or nil for any other kind.
    public var stringValue: String? {
        if case let .string(s) = self { return s }
        return nil
    }

    /// The elements of an array, or nil for any other kind.
    public var arrayValue: [JSON]? {
        if case let .array(a) = self { return a }
        return nil
    }

    /// A number's text as it was written (or will be), or nil for any other kind.
    public var numberValue: String? {
        if case let .number(n) = self { return n }
        return nil
    }

    /// The members of an object, or nil for any other kind.
    public var objectMembers: [(String, JSON)]? {
        if case let .object(m) = self { return m }
        return nil
    }

    /// True for `.object`.
    public var isObject: Bool { objectMembers != nil }

    /// Returns this object with `key` set to `value`: replaced in place if present, appended otherwise.
    public func setting(_ key: String, to value: JSON) -> JSON {
        guard case var .object(members) = self else { return self }
        if let i = members.firstIndex(where: { $0.0 == key }) {
            members[i].1 = value
        } else {
            members.append((key, value))
        }
        return .object(members)
    }

    /// Returns this object without `key`.
    public func removing(_ key: String) -> JSON {
        guard case let .object(members) = self else { return self }
        return .object(members.filter { $0.0 != key })
    }
}

/// A JSON syntax error with the byte offset where parsing stopped.
public struct JSONError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public let offset: Int
    public var description: String { "invalid JSON at byte \(offset): \(message)" }
}

extension JSON {
    /// Parses UTF-8 JSON text (RFC 8259). Nesting deeper than `maxDepth` is an error, never a crash.
    public static func parse(_ bytes: [UInt8], maxDepth: Int = 256) throws(JSONError) -> JSON {
        try bytes.withUnsafeBufferPointer { (buffer) throws(JSONError) -> JSON in
            var parser = JSONParser(bytes: buffer, maxDepth: maxDepth)
            return try parser.parseDocument()
        }
    }

    /// Parses JSON text given as a string.
    public static func parse(_ text: String) throws(JSONError) -> JSON {
        try parse(Array(text.utf8))
    }
}

/// The parser works on the caller's buffer for speed; every read is preceded by an explicit bounds check.
/// (Internal: `JSONMembers` walks documents with it too.)
struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var i = 0
    var depth = 0

    init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    func fail(_ message: String) -> JSONError { JSONError(message: message, offset: i) }

    mutating func parseDocument() throws(JSONError) -> JSON {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        if i != bytes.count { throw fail("unexpected data after the JSON value") }
        return value
    }

    mutating func skipWhitespace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    mutating func parseValue() throws(JSONError) -> JSON {
        guard i < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[i] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw fail("unexpected character '\(Character(Unicode.Scalar(bytes[i])))'")
        }
    }

    mutating func literal(_ word: String) throws(JSONError) {
        let w = Array(word.utf8)
        guard i + w.count <= bytes.count, Array(bytes[i..<i + w.count]) == w else { throw fail("invalid literal") }
        i += w.count
    }

    mutating func enter() throws(JSONError) {
        depth += 1
        if depth > maxDepth { throw fail("nesting deeper than \(maxDepth)") }
    }

    mutating func parseObject() throws(JSONError) -> JSON {
        try enter()
        i += 1
        var members: [(String, JSON)] = []
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; depth -= 1; return .object(members) }
        while true {
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let key = try parseString()
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':' after a key") }
            i += 1
            skipWhitespace()
            members.append((key, try parseValue()))
            skipWhitespace()
            guard i < bytes.count else { throw fail("unterminated object") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "}") { i += 1; break }
            throw fail("expected ',' or '}' in an object")
        }
        depth -= 1
        return .object(members)
    }

    mutating func parseArray() throws(JSONError) -> JSON {
        try enter()
        i += 1
        var items: [JSON] = []
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; depth -= 1; return .array(items) }
        while true {
            skipWhitespace()
            items.append(try parseValue())
            skipWhitespace()
            guard i < bytes.count else { throw fail("unterminated array") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "]") { i += 1; break }
            throw fail("expected ',' or ']' in an array")
        }
        depth -= 1
        return .array(items)
    }

    mutating func parseNumber() throws(JSONError) -> String {
        let start = try skipNumber()
        return String(decoding: bytes[start..<i], as: UTF8.self)
    }

    /// Moves past a number, checking its syntax; returns where it started.
    mutating func skipNumber() throws(JSONError) -> Int {
        let start = i
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        func digits(_ p: inout JSONParser) -> Int {
            let s = p.i
            while p.i < p.bytes.count, p.bytes[p.i] >= 0x30, p.bytes[p.i] <= 0x39 { p.i += 1 }
            return p.i - s
        }
        guard i < bytes.count else { throw fail("truncated number") }
        if bytes[i] == UInt8(ascii: "0") { i += 1 } else if digits(&self) == 0 { throw fail("invalid number") }
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            if digits(&self) == 0 { throw fail("invalid number: no digits after '.'") }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            if digits(&self) == 0 { throw fail("invalid number: no digits in the exponent") }
        }
        return start
    }

    mutating func hex4() throws(JSONError) -> UInt32 {
        guard i + 4 <= bytes.count else { throw fail("truncated \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[i]
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            default: throw fail("invalid \\u escape")
            }
            v = v << 4 | d
            i += 1
        }
        return v
    }

    /// Where the string starting at `i` (its opening quote) would end if it had no escape: the index of the first
    /// quote, backslash, control character or the end, and whether all before it is ASCII.
    func plainRun() -> (end: Int, ascii: Bool) {
        var j = i + 1
        var ascii = true
        while true {
            // Eight bytes at a time up to a quote, a backslash, a control character or a non-ASCII byte.
            j = ByteScan.jsonStringStop(bytes, from: j)
            guard j < bytes.count, bytes[j] >= 0x80 else { break }
            ascii = false
            j += 1
        }
        return (j, ascii)
    }

    /// Moves past a string, checking it as `parseString` does; builds nothing unless it holds an escape.
    mutating func skipString() throws(JSONError) {
        let (j, ascii) = plainRun()
        guard j < bytes.count, bytes[j] == UInt8(ascii: "\""), ascii else { _ = try parseString(); return }
        i = j + 1
    }

    /// Moves past one value, checking it as `parseValue` does, without building it.
    mutating func skipValue() throws(JSONError) {
        guard i < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[i] {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            let object = bytes[i] == UInt8(ascii: "{")
            let close = object ? UInt8(ascii: "}") : UInt8(ascii: "]")
            try enter()
            i += 1
            skipWhitespace()
            if i < bytes.count, bytes[i] == close { i += 1; depth -= 1; return }
            while true {
                skipWhitespace()
                if object {
                    guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
                    try skipString()
                    skipWhitespace()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':' after a key") }
                    i += 1
                    skipWhitespace()
                }
                try skipValue()
                skipWhitespace()
                guard i < bytes.count else { throw fail(object ? "unterminated object" : "unterminated array") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == close { i += 1; break }
                throw fail(object ? "expected ',' or '}' in an object" : "expected ',' or ']' in an array")
            }
            depth -= 1
        case UInt8(ascii: "\""): try skipString()
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): _ = try skipNumber()
        default: _ = try parseValue()
        }
    }

    mutating func parseString() throws(JSONError) -> String {
        // Fast path: no escapes before the closing quote.
        let (j, ascii) = plainRun()
        i += 1
        if j < bytes.count, bytes[j] == UInt8(ascii: "\"") {
            let run = UnsafeBufferPointer(rebasing: bytes[i..<j])
            // ASCII needs no validation; anything else is validated (the concrete buffer type keeps both on the fast path).
            let s: String
            if ascii {
                s = String(decoding: run, as: UTF8.self)
            } else {
                guard let v = String(validating: run, as: UTF8.self) else { throw fail("invalid UTF-8 in a string") }
                s = v
            }
            i = j + 1
            return s
        }
        var out: [UInt8] = []
        while true {
            guard i < bytes.count else { throw fail("unterminated string") }
            let c = bytes[i]
            if c == UInt8(ascii: "\"") { i += 1; break }
            if c < 0x20 { throw fail("control character in a string") }
            if c != UInt8(ascii: "\\") { out.append(c); i += 1; continue }
            i += 1
            guard i < bytes.count else { throw fail("unterminated escape") }
            let e = bytes[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if scalar >= 0xD800, scalar < 0xDC00 {
                    guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                        throw fail("unpaired surrogate")
                    }
                    i += 2
                    let low = try hex4()
                    guard low >= 0xDC00, low < 0xE000 else { throw fail("invalid low surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if scalar >= 0xDC00, scalar < 0xE000 {
                    throw fail("unpaired surrogate")
                }
                guard let u = Unicode.Scalar(scalar) else { throw fail("invalid code point") }
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default: throw fail("invalid escape")
            }
        }
        guard let s = String(validating: out, as: UTF8.self) else { throw fail("invalid UTF-8 in a string") }
        return s
    }
}

extension JSON {
    /// Compact serialisation (no spaces), keys in stored order.
    public var compact: String { String(decoding: bytes, as: UTF8.self) }

    /// Pretty serialisation with two-space indentation, keys in stored order.
    public var pretty: String {
        var out: [UInt8] = []
        write(into: &out, pretty: true, level: 0)
        return String(decoding: out, as: UTF8.self)
    }

    /// Compact UTF-8 bytes.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(into: &out, pretty: false, level: 0)
        return out
    }

    private static func newline(_ out: inout [UInt8], _ level: Int) {
        out.append(0x0A)
        out.append(contentsOf: repeatElement(0x20, count: 2 * level))
    }

    func write(into out: inout [UInt8], pretty: Bool, level: Int) {
        switch self {
        case .null: out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
        case let .bool(b): out.append(contentsOf: b ? Array("true".utf8) : Array("false".utf8))
        case let .number(n): out.appendUTF8(n)
        case let .string(s): JSON.writeString(s, into: &out)
        case let .array(items):
            if items.isEmpty { out.append(contentsOf: [0x5B, 0x5D]); return }
            out.append(0x5B)
            for (n, item) in items.enumerated() {
                if n > 0 { out.append(0x2C) }
                if pretty { JSON.newline(&out, level + 1) }
                item.write(into: &out, pretty: pretty, level: level + 1)
            }
            if pretty { JSON.newline(&out, level) }
            out.append(0x5D)
        case let .object(members):
            if members.isEmpty { out.append(contentsOf: [0x7B, 0x7D]); return }
            out.append(0x7B)
            for (n, (key, value)) in members.enumerated() {
                if n > 0 { out.append(0x2C) }
                if pretty { JSON.newline(&out, level + 1) }
                JSON.writeString(key, into: &out)
                out.append(0x3A)
                if pretty { out.append(0x20) }
                value.write(into: &out, pretty: pretty, level: level + 1)
            }
            if pretty { JSON.newline(&out, level) }
            out.append(0x7D)
        }
    }

    /// Appends `s` as a JSON string literal (quoted and escaped) to `out`, for writers that build JSON text
    /// without a tree; bytes that need no escape are copied in runs.
    public static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(0x22)
        var s = s
        s.withUTF8 { u in
            var runStart = 0
            var i = 0
            // The bytes to escape are found eight at a time (`ByteScan.jsonStringStop` also stops at non-ASCII bytes,
            // which are written as they are): header pairs and messages are mostly plain text.
            while true {
                i = ByteScan.jsonStringStop(u, from: i)
                guard i < u.count else { break }
                let c = u[i]
                guard c < 0x20 || c == 0x22 || c == 0x5C else { i += 1; continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: u[runStart..<i]))
                switch c {
                case 0x22: out.append(contentsOf: [0x5C, 0x22])
                case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: out.append(contentsOf: [0x5C, 0x6E])
                case 0x0D: out.append(contentsOf: [0x5C, 0x72])
                case 0x09: out.append(contentsOf: [0x5C, 0x74])
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, hex[Int(c >> 4)], hex[Int(c & 0xF)]])
                }
                i += 1
                runStart = i
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: u[runStart..<u.count]))
        }
        out.append(0x22)
    }
}

extension JSON {
    /// The object with each member `change` returns a replacement for replaced (nil from `change` keeps the member), or
    /// nil when nothing changed or this is not an object. The members are copied only once one changes: most objects a
    /// masking walk visits change nothing, and building a new array for each of them was most of the walk's cost.
    public func changingMembers(_ change: (_ key: String, _ value: JSON) -> (String, JSON)?) -> JSON? {
        guard case let .object(members) = self else { return nil }
        var out: [(String, JSON)]?
        for (i, (key, value)) in members.enumerated() {
            guard let replaced = change(key, value) else { continue }
            if out == nil { out = members }
            out?[i] = replaced
        }
        return out.map(JSON.object)
    }

    /// `changingMembers` for an array's items.
    public func changingItems(_ change: (JSON) -> JSON?) -> JSON? {
        guard case let .array(items) = self else { return nil }
        var out: [JSON]?
        for (i, item) in items.enumerated() {
            guard let replaced = change(item) else { continue }
            if out == nil { out = items }
            out?[i] = replaced
        }
        return out.map(JSON.array)
    }
}
