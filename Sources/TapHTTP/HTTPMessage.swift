import TapCore

/// HTTP header fields in order, with case-insensitive lookup.
public struct HTTPHeaders: Sendable, Equatable, Sequence {
    public var fields: [(name: String, value: String)]

    public init(_ fields: [(String, String)] = []) { self.fields = fields.map { (name: $0.0, value: $0.1) } }

    public static func == (a: HTTPHeaders, b: HTTPHeaders) -> Bool {
        a.fields.count == b.fields.count && zip(a.fields, b.fields).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }

    /// The first value of `name`.
    public subscript(name: String) -> String? {
        fields.first { $0.name.caseInsensitiveEquals(name) }?.value
    }

    /// Every value of `name`, comma-joined lists split and trimmed, lowercased.
    public func tokens(_ name: String) -> [String] {
        var out: [String] = []
        // Each piece lies between ASCII separators of a valid UTF-8 value, so it is valid UTF-8 itself.
        forEachToken(name) { out.append(String(decoding: $0, as: UTF8.self).lowercased()); return false }
        return out
    }

    /// Whether any value of `name` lists `token` (ASCII, compared case-insensitively; `tokens` without the copies).
    public func containsToken(_ name: String, _ token: String) -> Bool {
        var wanted = token
        return wanted.withUTF8 { t in forEachToken(name) { HTTPHeaders.token($0, is: t) } }
    }

    /// Whether a token's bytes spell `token`'s (ASCII, letters in either case).
    private static func token(_ part: UnsafeBufferPointer<UInt8>, is token: UnsafeBufferPointer<UInt8>) -> Bool {
        part.count == token.count
            && zip(part, token).allSatisfy { $0 | 0x20 == $1 | 0x20 && ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A || $0 == $1) }
    }

    /// Whether `name` is one of `hopByHop` (ASCII case-insensitive).
    private static func isHopByHop(_ name: String) -> Bool { hopByHop.contains { name.caseInsensitiveEquals($0) } }

    /// Whether a forwarder has more to remove than a `Connection` field of `close` or `keep-alive` alone: another hop-by-hop
    /// field (`hopByHop`), or a `Connection` option naming anything else (a field to remove with it). Looked at once,
    /// without a list made: most responses carry only `Connection: keep-alive`.
    public var hasHopByHopBeyondConnectionOptions: Bool {
        let lengths = HTTPHeaders.hopByHopLengths
        return fields.withUnsafeBufferPointer { all in
            for i in all.indices {
                // Only names as long as one of `hopByHop`'s are compared (a response's usual fields are not); the fields
                // are read in place, not copied out one by one.
                let length = all[i].name.utf8.count
                guard length < 64, lengths & 1 << length != 0 else { continue }
                if all[i].name.caseInsensitiveEquals("Connection") {
                    var value = all[i].value // withUTF8 reads a small (inline) string in place too, without an array made
                    if value.withUTF8({ HTTPHeaders.forEachToken(in: $0, HTTPHeaders.isNotAnOption) }) { return true }
                } else if HTTPHeaders.isHopByHop(all[i].name) {
                    return true
                }
            }
            return false
        }
    }

    /// A `Connection` token other than `close` and `keep-alive` (ASCII case-insensitive).
    private static func isNotAnOption(_ part: UnsafeBufferPointer<UInt8>) -> Bool {
        func bytes(_ s: StaticString) -> UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount) }
        return !token(part, is: bytes("close")) && !token(part, is: bytes("keep-alive"))
    }

    /// Calls `body` with the bytes of each comma-separated, space-trimmed token of `name`'s values until it returns
    /// true (pieces empty before trimming are skipped), read where the value's bytes lie: no list of pieces is made.
    @discardableResult
    private func forEachToken(_ name: String, _ body: (UnsafeBufferPointer<UInt8>) -> Bool) -> Bool {
        for f in fields where f.name.caseInsensitiveEquals(name) {
            // withUTF8 reads a value of up to 15 bytes (stored inline: `keep-alive`, `close`, `chunked`) in place as well;
            // `utf8.withContiguousStorageIfAvailable` has no storage to give for those, and an array was made each time.
            var value = f.value
            if value.withUTF8({ HTTPHeaders.forEachToken(in: $0, body) }) { return true }
        }
        return false
    }

    /// `forEachToken` over one value's bytes. Every index read is checked against the piece's bounds first, and those
    /// lie within `0..<value.count`.
    private static func forEachToken(in value: UnsafeBufferPointer<UInt8>, _ body: (UnsafeBufferPointer<UInt8>) -> Bool) -> Bool {
        var pieceStart = 0
        while pieceStart < value.count {
            var pieceEnd = pieceStart
            while pieceEnd < value.count, value[pieceEnd] != 0x2C { pieceEnd += 1 } // ","
            var (s, e) = (pieceStart, pieceEnd)
            if s < e {
                while s < e, value[s] == 0x20 || value[s] == 0x09 { s += 1 }
                while e > s, value[e - 1] == 0x20 || value[e - 1] == 0x09 { e -= 1 }
                if body(UnsafeBufferPointer(rebasing: value[s..<e])) { return true }
            }
            pieceStart = pieceEnd + 1
        }
        return false
    }

    public mutating func remove(_ name: String) { fields.removeAll { $0.name.caseInsensitiveEquals(name) } }

    /// Removes every field named in `names`, in one pass; fields shared with another copy are not copied when none matches.
    public mutating func remove(anyOf names: [String]) {
        guard fields.contains(where: { f in names.contains { f.name.caseInsensitiveEquals($0) } }) else { return }
        fields.removeAll { f in names.contains { f.name.caseInsensitiveEquals($0) } }
    }

    /// Fields that concern one connection only (RFC 9110 §7.6.1) and are never forwarded, the proxy's own among them:
    /// `Proxy-Authorization` carries the credentials of the hop it was sent to, and `Expect` is answered by that hop.
    /// The one list of every forwarder (the recorder, the replayer's forwards).
    public static let hopByHop = ["Connection", "Proxy-Connection", "Proxy-Authorization", "Keep-Alive", "Expect", "TE", "Upgrade"]
    /// The lengths of `hopByHop`'s names, a bit each (all under 64).
    static let hopByHopLengths: UInt64 = hopByHop.reduce(0) { $0 | 1 << $1.utf8.count }

    /// Fields a forwarder sets itself (the target's Host, the message's framing), which a `Connection` option never removes.
    static let neverNominated = ["Host", "Content-Length", "Transfer-Encoding"]

    /// Removes what a forwarder must not pass on: the hop-by-hop fields, the fields the `Connection` field names
    /// (`Connection: close, X-Session`; never Host or the framing), and `extra` (credentials that were the forwarder's own).
    public mutating func removeHopByHop(also extra: [String] = []) {
        // Nothing to remove unless a field is hop-by-hop or in `extra` (the fields `Connection` names go only with it,
        // itself hop-by-hop): most requests have none, and are looked at once, without a list of names made.
        guard fields.contains(where: { f in HTTPHeaders.isHopByHop(f.name) || extra.contains { f.name.caseInsensitiveEquals($0) } }) else { return }
        var names = HTTPHeaders.hopByHop + extra
        if self["Connection"] != nil {
            names += tokens("Connection").filter { t in !HTTPHeaders.neverNominated.contains { $0.caseInsensitiveEquals(t) } }
        }
        remove(anyOf: names)
    }

    public mutating func replaceOrAdd(_ name: String, _ value: String) {
        if let i = fields.firstIndex(where: { $0.name.caseInsensitiveEquals(name) }) {
            fields[i].value = value
            fields.removeAll { $0.name.caseInsensitiveEquals(name) && $0.value != value }
        } else {
            fields.append((name: name, value: value))
        }
    }

    public mutating func add(_ name: String, _ value: String) { fields.append((name: name, value: value)) }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

    /// A head's bytes: the start line `a b c`, these fields one per line, and the empty line; written straight
    /// into one buffer sized for it.
    func serialised(after a: String, _ b: String, _ c: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(fields.reduce(a.utf8.count + b.utf8.count + c.utf8.count + 6) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 })
        out.appendUTF8(a)
        out.append(0x20)
        out.appendUTF8(b)
        out.append(0x20)
        out.appendUTF8(c)
        out.append(0x0D) // the separators a byte at a time: no array literal made for each
        out.append(0x0A)
        for f in fields {
            out.appendUTF8(f.name)
            out.append(0x3A)
            out.append(0x20)
            out.appendUTF8(f.value)
            out.append(0x0D)
            out.append(0x0A)
        }
        out.append(0x0D)
        out.append(0x0A)
        return out
    }
}

/// A request line and headers.
public struct HTTPRequestHead: Sendable, Equatable {
    public var method: String
    /// The request target as sent: origin-form (`/path`), absolute-form (`http://h/p`), or authority (CONNECT).
    public var target: String
    public var version: String
    public var headers: HTTPHeaders

    public init(method: String, target: String, version: String = "HTTP/1.1", headers: HTTPHeaders = HTTPHeaders()) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
    }

    /// Whether the connection may carry another request after this one. Not after an HTTP/1.0 request that came with a
    /// Transfer-Encoding, whose framing RFC 9112 §6.1 says to treat as faulty (close after answering it).
    public var keepAlive: Bool {
        if version == "HTTP/1.0" {
            // `close` wins over a keep-alive beside it (RFC 9112 §9.3).
            guard headers["Transfer-Encoding"] == nil, !headers.containsToken("Connection", "close"),
                  !headers.containsToken("Proxy-Connection", "close") else { return false }
            return headers.containsToken("Connection", "keep-alive") || headers.containsToken("Proxy-Connection", "keep-alive")
        }
        return !headers.containsToken("Connection", "close") && !headers.containsToken("Proxy-Connection", "close")
    }

    /// The serialised head.
    public var bytes: [UInt8] { headers.serialised(after: method, target, version) }
}

/// A status line and headers.
public struct HTTPResponseHead: Sendable, Equatable {
    public var version: String
    public var status: Int
    public var reason: String
    public var headers: HTTPHeaders

    public init(status: Int, reason: String? = nil, version: String = "HTTP/1.1", headers: HTTPHeaders = HTTPHeaders()) {
        self.version = version
        self.status = status
        self.reason = reason ?? HTTPResponseHead.reasonPhrase(status)
        self.headers = headers
    }

    public var keepAlive: Bool {
        if version == "HTTP/1.0" { return headers.containsToken("Connection", "keep-alive") }
        return !headers.containsToken("Connection", "close")
    }

    public var bytes: [UInt8] { headers.serialised(after: version, String(status), reason) }

    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 200: return "OK"
        case 204: return "No Content"
        case 302: return "Found"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 407: return "Proxy Authentication Required"
        case 408: return "Request Timeout"
        case 413: return "Content Too Large"
        case 414: return "URI Too Long"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        default: return "Status \(status)"
        }
    }
}

/// A complete request: head, the body bytes exactly as framed on the wire, and the decoded body.
public struct HTTPRequest: Sendable {
    public var head: HTTPRequestHead
    /// The head bytes exactly as received.
    public var rawHead: [UInt8]
    /// The body as framed on the wire (chunk framing included).
    public var rawBody: [UInt8]
    /// The body with chunked framing removed (still content-encoded, e.g. gzip).
    public var body: [UInt8]
}

/// A complete response.
public struct HTTPResponse: Sendable {
    public var head: HTTPResponseHead
    public var rawHead: [UInt8]
    public var rawBody: [UInt8]
    public var body: [UInt8]
}
