/// A JSON object's top-level members, found in its bytes in one pass that checks the whole document as `JSON.parse`
/// does; a member's value is parsed only when asked for. For a handler that reads a few fields of a large message
/// (the replayer's AReq: a dozen of its forty members) without building and freeing the whole tree.
public struct JSONMembers: Sendable {
    /// The document.
    public let bytes: [UInt8]
    /// Each member's key (between its quotes, as written) and value, in document order.
    private var spans: [(key: Range<Int>, value: Range<Int>)] = []
    /// Keys written with escapes, decoded, by member index (rare).
    private var escapedKeys: [Int: String] = [:]
    private let maxDepth: Int

    /// Fails as `JSON.parse` would on the same bytes, and when the document is not an object.
    public init(_ bytes: [UInt8], maxDepth: Int = 256) throws(JSONError) {
        self.bytes = bytes
        self.maxDepth = maxDepth
        var spans: [(key: Range<Int>, value: Range<Int>)] = []
        var escaped: [Int: String] = [:]
        try bytes.withUnsafeBufferPointer { (buffer) throws(JSONError) in
            var p = JSONParser(bytes: buffer, maxDepth: maxDepth)
            p.skipWhitespace()
            guard p.i < buffer.count, buffer[p.i] == UInt8(ascii: "{") else {
                // Not an object: the parser's own error for what is there, or this one for a valid non-object.
                try p.skipValue()
                throw JSONError(message: "not a JSON object", offset: 0)
            }
            try p.enter()
            p.i += 1
            p.skipWhitespace()
            if p.i < buffer.count, buffer[p.i] == UInt8(ascii: "}") {
                p.i += 1
            } else {
                spans.reserveCapacity(48)
                while true {
                    p.skipWhitespace()
                    guard p.i < buffer.count, buffer[p.i] == UInt8(ascii: "\"") else { throw p.fail("expected a string key") }
                    let keyStart = p.i + 1
                    let (end, ascii) = p.plainRun()
                    if end < buffer.count, buffer[end] == UInt8(ascii: "\""), ascii {
                        p.i = end + 1
                    } else {
                        escaped[spans.count] = try p.parseString()
                    }
                    let key = keyStart..<max(keyStart, p.i - 1)
                    p.skipWhitespace()
                    guard p.i < buffer.count, buffer[p.i] == UInt8(ascii: ":") else { throw p.fail("expected ':' after a key") }
                    p.i += 1
                    p.skipWhitespace()
                    let valueStart = p.i
                    try p.skipValue()
                    spans.append((key, valueStart..<p.i))
                    p.skipWhitespace()
                    guard p.i < buffer.count else { throw p.fail("unterminated object") }
                    if buffer[p.i] == UInt8(ascii: ",") { p.i += 1; continue }
                    if buffer[p.i] == UInt8(ascii: "}") { p.i += 1; break }
                    throw p.fail("expected ',' or '}' in an object")
                }
            }
            p.skipWhitespace()
            if p.i != buffer.count { throw p.fail("unexpected data after the JSON value") }
        }
        self.spans = spans
        self.escapedKeys = escaped
    }

    /// The number of members.
    public var count: Int { spans.count }

    /// The value of the first member named `key` (as `JSON`'s subscript answers), parsed now.
    public subscript(key: String) -> JSON? {
        guard let k = index(of: key) else { return nil }
        let range = spans[k].value
        return bytes.withUnsafeBufferPointer { buffer in
            var p = JSONParser(bytes: UnsafeBufferPointer(rebasing: buffer[..<range.upperBound]), maxDepth: maxDepth - 1)
            p.i = range.lowerBound
            return try? p.parseValue()
        }
    }

    /// The whole object as a tree (for the rare path that needs all of it).
    public var tree: JSON { (try? JSON.parse(bytes, maxDepth: maxDepth)) ?? .object([]) }

    private func index(of key: String) -> Int? {
        var key = key
        return key.withUTF8 { want in
            bytes.withUnsafeBufferPointer { buffer in
                let anyEscaped = !escapedKeys.isEmpty
                for (k, span) in spans.enumerated() {
                    if anyEscaped, let decoded = escapedKeys[k] {
                        if decoded.utf8.elementsEqual(want) { return k }
                        continue
                    }
                    guard span.key.count == want.count else { continue }
                    var n = 0
                    let at = span.key.lowerBound
                    while n < want.count, buffer[at + n] == want[n] { n += 1 }
                    if n == want.count { return k }
                }
                return nil
            }
        }
    }
}
