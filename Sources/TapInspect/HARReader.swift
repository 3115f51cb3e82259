import TapCore

extension HAR {
    /// Reads a HAR document a piece at a time and gives each entry to `each` as soon as it is read and checked, so that
    /// memory holds one entry and what `source` last returned, never the whole file (a HAR is one JSON document, but
    /// its entries are what is large, and they come one after another). `source` returns the next bytes, empty at the
    /// end. Every byte is checked as `JSON.parse` checks it, nesting included (64 levels in all). An error, an
    /// `ImportError` naming the problem or whatever `source` or `each` threw, can come after earlier entries were given:
    /// a caller that writes them discards what it wrote. Returns the number of entries.
    public static func read(from source: () throws -> [UInt8], each: (Entry) throws -> Void) throws -> Int {
        try withoutActuallyEscaping(source) { source in
            var walk = HARWalk(input: ChunkedInput(source: source))
            return try walk.document(each)
        }
    }

    /// Parses and checks every entry of a document in memory before returning: a bad entry fails the whole file.
    public static func parse(_ bytes: [UInt8]) throws -> [Entry] {
        var entries: [Entry] = []
        var given = false
        _ = try read(from: {
            defer { given = true }
            return given ? [] : bytes
        }, each: { entries.append($0) })
        return entries
    }
}

/// The walk behind `HAR.read`: the document's structure down to `log.entries` is followed byte by byte; each value
/// within it (an entry, `log.version`, `log.creator`, anything else) is cut out whole and parsed by `JSON.parse`.
struct HARWalk {
    var input: ChunkedInput
    /// The deepest nesting accepted in the document, as `HAR.parse` always allowed.
    static let maxDepth = 64

    /// The whole document: `{"log": {"version": …, "entries": […], …}, …}`.
    mutating func document(_ each: (HAR.Entry) throws -> Void) throws -> Int {
        // A UTF-8 byte order mark, as Windows tools write one, is not part of the JSON (RFC 8259 §8.1 lets a parser
        // ignore it): skipped, where it was refused as "unexpected character 'ï'" (hostile-file helper).
        if try input.has(input.position + 2), input.buffer[input.position] == 0xEF, input.buffer[input.position + 1] == 0xBB,
           input.buffer[input.position + 2] == 0xBF {
            input.position += 3
        }
        try input.skipWhitespace()
        guard try input.peek() == UInt8(ascii: "{") else {
            _ = try parsedValue(depth: 0) // not JSON, or JSON that is not an object
            try documentEnd()
            throw HAR.ImportError("not a HAR file: no \"log\" object")
        }
        input.position += 1
        var entries: Int?
        var first = true
        while let key = try nextKey(&first) {
            if key == "log" {
                guard entries == nil else { throw HAR.ImportError("not a HAR file: \"log\" appears twice") }
                entries = try log(each)
            } else {
                _ = try parsedValue(depth: 1)
            }
        }
        try documentEnd()
        guard let entries else { throw HAR.ImportError("not a HAR file: no \"log\" object") }
        return entries
    }

    /// The `log` object: its version checked, its entries given one by one, anything else checked and let go.
    mutating func log(_ each: (HAR.Entry) throws -> Void) throws -> Int {
        guard try input.peek() == UInt8(ascii: "{") else {
            _ = try parsedValue(depth: 1)
            throw HAR.ImportError("not a HAR file: no \"log\" object")
        }
        input.position += 1
        var version: String?
        var entries: Int?
        var first = true
        while let key = try nextKey(&first) {
            switch key {
            case "version":
                guard version == nil else { throw HAR.ImportError("log.version appears twice") }
                guard let v = try parsedValue(depth: 2).stringValue else { throw HAR.ImportError("log.version is missing") }
                guard ["1.1", "1.2"].contains(v) else { throw HAR.ImportError("HAR version \(v) is not supported (1.1 and 1.2 are)") }
                version = v
            case "entries":
                guard entries == nil else { throw HAR.ImportError("log.entries appears twice") }
                guard try input.peek() == UInt8(ascii: "[") else {
                    _ = try parsedValue(depth: 2)
                    throw HAR.ImportError("log.entries is missing or not an array")
                }
                entries = try entryList(each)
            default:
                _ = try parsedValue(depth: 2)
            }
        }
        guard version != nil else { throw HAR.ImportError("log.version is missing") }
        guard let entries else { throw HAR.ImportError("log.entries is missing or not an array") }
        return entries
    }

    /// `log.entries`: each entry parsed, checked and given before the next is read.
    mutating func entryList(_ each: (HAR.Entry) throws -> Void) throws -> Int {
        input.position += 1
        var count = 0
        var first = true
        while try nextElement(&first) {
            let json = try parsedValue(depth: 3)
            let entry: HAR.Entry
            do { entry = try HAR.entry(json) } catch let error as HAR.ImportError { throw HAR.ImportError("entry \(count + 1): \(error.description)") }
            try each(entry)
            count += 1
        }
        return count
    }

    /// The next member's key in an object whose `{` is behind the cursor, the cursor then on its value; nil once the
    /// object's `}` has been passed.
    mutating func nextKey(_ first: inout Bool) throws -> String? {
        try input.skipWhitespace()
        if first {
            first = false
            if try input.peek() == UInt8(ascii: "}") { input.position += 1; return nil }
        } else {
            switch try input.peek() {
            case UInt8(ascii: "}"): input.position += 1; return nil
            case UInt8(ascii: ","): input.position += 1; try input.skipWhitespace()
            case nil: throw syntax("unterminated object", at: input.offset)
            default: throw syntax("expected ',' or '}' in an object", at: input.offset)
            }
        }
        guard try input.peek() == UInt8(ascii: "\"") else { throw syntax("expected a string key", at: input.offset) }
        let key = try parsedValue(depth: 0).stringValue ?? ""
        try input.skipWhitespace()
        guard try input.peek() == UInt8(ascii: ":") else { throw syntax("expected ':' after a key", at: input.offset) }
        input.position += 1
        try input.skipWhitespace()
        return key
    }

    /// Whether an array whose `[` is behind the cursor has another element (the cursor then on it); false once its `]`
    /// has been passed.
    mutating func nextElement(_ first: inout Bool) throws -> Bool {
        try input.skipWhitespace()
        if first {
            first = false
            if try input.peek() == UInt8(ascii: "]") { input.position += 1; return false }
        } else {
            switch try input.peek() {
            case UInt8(ascii: "]"): input.position += 1; return false
            case UInt8(ascii: ","): input.position += 1
            case nil: throw syntax("unterminated array", at: input.offset)
            default: throw syntax("expected ',' or ']' in an array", at: input.offset)
            }
        }
        try input.skipWhitespace()
        return true
    }

    /// The value at the cursor, `depth` levels down in the document, parsed (the cursor then after it).
    mutating func parsedValue(depth: Int) throws -> JSON {
        let (bytes, at) = try input.value()
        do { return try JSON.parse(bytes, maxDepth: HARWalk.maxDepth - depth) } catch { throw syntax(error.message, at: at + error.offset) }
    }

    /// Only white space may follow the document.
    mutating func documentEnd() throws {
        try input.skipWhitespace()
        if try input.peek() != nil { throw syntax("unexpected data after the JSON value", at: input.offset) }
    }

    func syntax(_ message: String, at offset: Int) -> HAR.ImportError {
        HAR.ImportError("not JSON: invalid JSON at byte \(offset): \(message)")
    }
}

/// Bytes handed over a piece at a time by a source, with a cursor; what is behind the cursor is let go before a value
/// is read, so the buffer holds the value being read and at most one piece beyond it.
struct ChunkedInput {
    let source: () throws -> [UInt8]
    private(set) var buffer: [UInt8] = []
    /// The cursor, an index into `buffer`.
    var position = 0
    /// The input offset of `buffer[0]`.
    private(set) var base = 0
    private var ended = false

    init(source: @escaping () throws -> [UInt8]) { self.source = source }

    /// The cursor's offset in the input.
    var offset: Int { base + position }

    /// Reads pieces until `buffer` has an index `index`; false when the input ends first.
    mutating func has(_ index: Int) throws -> Bool {
        while index >= buffer.count {
            guard !ended else { return false }
            let more = try source()
            if more.isEmpty { ended = true } else { buffer.append(contentsOf: more) }
        }
        return true
    }

    /// The byte at the cursor; nil at the end of the input.
    mutating func peek() throws -> UInt8? { try has(position) ? buffer[position] : nil }

    mutating func skipWhitespace() throws {
        while let c = try peek(), c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { position += 1 }
    }

    /// The bytes of the value at the cursor, found by its structure only (strings, escapes, brackets; JSON.parse checks
    /// the rest), with its input offset; the cursor moves past it.
    mutating func value() throws -> (bytes: [UInt8], offset: Int) {
        if position >= 1 << 16, position * 2 >= buffer.count {
            buffer.removeSubrange(0..<position)
            base += position
            position = 0
        }
        guard let first = try peek() else {
            throw HAR.ImportError("not JSON: invalid JSON at byte \(offset): unexpected end of input")
        }
        let start = position
        var scan = ValueScan(first: first)
        var next = start + 1 // the first byte is the scan's start
        while true {
            let end = buffer.withUnsafeBufferPointer { scan.advance($0, from: next) }
            if let end {
                position = end
                return (Array(buffer[start..<end]), base + start)
            }
            next = buffer.count
            if try !has(next) {
                // A number or a literal ends with the input; JSON.parse reports anything else cut short.
                position = next
                return (Array(buffer[start..<next]), base + start)
            }
        }
    }
}

/// Where one JSON value ends, found by its structure: outside strings, the brackets' depth; inside them, the closing
/// quote that no backslash escapes. A number or a literal ends at the first byte that cannot be in one.
struct ValueScan {
    private let container: Bool, string: Bool
    private var depth: Int
    private var inString: Bool
    private var escaped = false

    /// Starts with the value's first byte (behind the cursor when `advance` is first called).
    init(first: UInt8) {
        container = first == UInt8(ascii: "{") || first == UInt8(ascii: "[")
        string = first == UInt8(ascii: "\"")
        depth = container ? 1 : 0
        inString = string
    }

    /// Scans `u` from `i`: the index just after the value when it ends there, nil when it goes on past `u`.
    mutating func advance(_ u: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        var i = start
        if !container, !string {
            while i < u.count {
                switch u[i] {
                case 0x20, 0x0A, 0x0D, 0x09, UInt8(ascii: ","), UInt8(ascii: "]"), UInt8(ascii: "}"), UInt8(ascii: ":"): return i
                default: i += 1
                }
            }
            return nil
        }
        while i < u.count {
            if inString {
                if escaped {
                    escaped = false
                    i += 1
                    continue
                }
                i = ByteScan.jsonStringStop(u, from: i)
                guard i < u.count else { return nil }
                switch u[i] {
                case UInt8(ascii: "\""):
                    inString = false
                    if string { return i + 1 }
                case UInt8(ascii: "\\"): escaped = true
                default: break // a control or non-ASCII byte: JSON.parse judges it
                }
                i += 1
                continue
            }
            switch u[i] {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                if depth == 0 { return i + 1 }
            default: break
            }
            i += 1
        }
        return nil
    }
}
