#if canImport(Glibc)
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#endif
import TapCore

/// Why a message could not be parsed: what went wrong, and a detail for whoever reads it. It carries no HTTP status:
/// the side that reads the message decides what that means (a server answers its client through `HTTPErrorAnswer`, a
/// proxy answers an upstream's unreadable response with 502).
/// `kind` (also read as `problem`) is what went wrong; `message` the detail, as a person reads it ("bare LF in the header
/// section", "body exceeds 16777216 bytes" …).
public typealias HTTPParseError = KindedError<HTTPParseProblem>

/// What went wrong in an `HTTPParseError`.
public enum HTTPParseProblem: Sendable, Equatable {
    /// The bytes break HTTP/1.1's syntax (RFC 9112): start line, header section, framing, chunk sizes.
    case malformed
    /// The header or trailer section, or its number of fields, exceeds the limits.
    case headTooLarge
    /// A request line alone longer than the header section's limit (its target, as a server answers with 414).
    case requestLineTooLong
    /// A request whose method alone is longer than the header section's limit: no method anyone implements (a server
    /// answers 501, as RFC 9112 §3 says, where a long target gets 414).
    case methodTooLong
    /// The body exceeds the limit.
    case bodyTooLarge
    /// A transfer coding this parser does not implement.
    case unsupportedCoding
    /// The connection closed in the middle of a message.
    case truncated
}

extension HTTPParseError {
    public typealias Problem = HTTPParseProblem
    /// What went wrong (`kind`).
    public var problem: HTTPParseProblem { kind }
}

/// Limits a parser enforces.
public struct HTTPLimits: Sendable {
    public var maxHeadBytes = 64 * 1024
    public var maxBodyBytes = 16 * 1024 * 1024
    public var maxHeaderCount = 200
    public init() {}
}

/// An incremental HTTP/1.1 parser (sans-IO): append bytes as they arrive, take complete messages.
/// Handles Content-Length, chunked bodies (with trailers), close-delimited responses, HEAD/1xx/204/304,
/// and pipelined messages (bytes after one message stay buffered for the next).
public struct HTTPParser: Sendable {
    public enum Mode: Sendable { case request, response }

    enum Framing: Equatable { case none, length(Int), chunked, untilClose }

    /// A start line split at its first two spaces: a request's method, target and version; a response's version,
    /// status and reason phrase (nil without a second space; it may hold spaces itself).
    struct StartLine {
        var first: String
        var second: String
        var third: String?
    }

    struct ParsedHead {
        var startLine: StartLine
        var headers: HTTPHeaders
        var headLength: Int
    }

    public let mode: Mode
    public let limits: HTTPLimits
    var buffer: [UInt8] = []
    var scanFrom = 0
    var head: ParsedHead?
    var framing: Framing = .none
    // Chunked decoding state.
    var chunkOffset = 0
    var decoded: [UInt8] = []
    /// Where the next trailer line starts once the last chunk has been read (nil before it), so trailers
    /// arriving in pieces are scanned once, not from the start on every read.
    var trailerOffset: Int?
    /// Trailer fields read so far in the current message: capped by `maxHeaderCount`, as header fields are.
    var trailerCount = 0

    /// The method of the request a response answers (HEAD responses have no body).
    public var requestMethod = "GET"

    public init(mode: Mode, limits: HTTPLimits = HTTPLimits()) {
        self.mode = mode
        self.limits = limits
    }

    /// Bytes buffered and not yet part of a returned message.
    public var bufferedCount: Int { buffer.count }
    /// True when a head has been parsed and its body is still arriving.
    public var isInBody: Bool { head != nil }
    /// True when nothing at all is buffered (between messages).
    public var isIdle: Bool { buffer.isEmpty && head == nil }

    /// Adds bytes read from the connection; an empty buffer takes the array itself instead of a copy.
    public mutating func append(_ bytes: [UInt8]) {
        if buffer.isEmpty { buffer = bytes } else { buffer += bytes }
    }

    /// Takes the bytes buffered after the last complete message (a client's first tunnel bytes sent right behind its
    /// CONNECT) and leaves the parser empty. Only between messages: in the middle of one, nothing is taken.
    public mutating func takeBuffered() -> [UInt8] {
        guard head == nil else { return [] }
        defer {
            buffer = []
            scanFrom = 0
        }
        return buffer
    }

    /// The next complete request, or nil if more bytes are needed.
    public mutating func nextRequest() throws(HTTPParseError) -> HTTPRequest? {
        guard let (h, raw, body, rawHead) = try nextMessage() else { return nil }
        let line = h.startLine
        return HTTPRequest(head: HTTPRequestHead(method: line.first, target: line.second, version: line.third ?? "",
                                                 headers: h.headers),
                           rawHead: rawHead, rawBody: raw, body: body)
    }

    /// The next message's header fields as soon as its head is complete (for `Expect: 100-continue`), without
    /// consuming it.
    public mutating func peekHeaders() throws(HTTPParseError) -> HTTPHeaders? {
        if head == nil { try parseHead() }
        return head?.headers
    }

    /// The next complete response; 1xx interim responses (other than 101) are skipped.
    public mutating func nextResponse() throws(HTTPParseError) -> HTTPResponse? {
        while true {
            guard let (h, raw, body, rawHead) = try nextMessage() else { return nil }
            guard let status = Int(h.startLine.second) else { throw HTTPParseError(.malformed, "invalid status code") }
            let reason = h.startLine.third ?? ""
            if (100...199).contains(status), status != 101 { continue }
            return HTTPResponse(head: HTTPResponseHead(status: status, reason: reason, version: h.startLine.first, headers: h.headers),
                                rawHead: rawHead, rawBody: raw, body: body)
        }
    }

    /// At end of stream: the close-delimited response if one was in progress. Throws if a message was cut short.
    public mutating func finish() throws(HTTPParseError) -> HTTPResponse? {
        if head == nil, buffer.isEmpty { return nil }
        guard let h = head, framing == .untilClose else {
            throw HTTPParseError(.truncated, "connection closed in the middle of a message")
        }
        let rawHead = Array(buffer[0..<h.headLength])
        let body = Array(buffer[h.headLength...])
        buffer.removeAll()
        head = nil
        scanFrom = 0
        guard let status = Int(h.startLine.second) else { throw HTTPParseError(.malformed, "invalid status code") }
        return HTTPResponse(head: HTTPResponseHead(status: status, reason: h.startLine.third ?? "",
                                                   version: h.startLine.first, headers: h.headers),
                            rawHead: rawHead, rawBody: body, body: body)
    }

    mutating func nextMessage() throws(HTTPParseError) -> (ParsedHead, [UInt8], [UInt8], [UInt8])? {
        if head == nil { try parseHead() }
        guard let h = head else { return nil }
        let start = h.headLength
        var end: Int
        var body: [UInt8]
        switch framing {
        case .none:
            end = start
            body = []
        case let .length(n):
            guard buffer.count - start >= n else { return nil }
            end = start + n
            body = [] // the raw body is the body: filled in below without a second copy
        case .untilClose:
            if buffer.count - start > limits.maxBodyBytes { throw HTTPParseError(.bodyTooLarge, "body exceeds \(limits.maxBodyBytes) bytes") }
            return nil
        case .chunked:
            guard let e = try parseChunks(from: start) else { return nil }
            end = e
            body = decoded
        }
        let rawHead = Array(buffer[0..<start])
        let raw: [UInt8]
        if end == buffer.count, end - start > 256 {
            // The message fills the buffer (the common case, one read per message): its body keeps the buffer's
            // storage, moved up over the head, instead of being copied into a new array.
            buffer.removeFirst(start)
            raw = buffer
            buffer = []
        } else {
            raw = Array(buffer[start..<end])
            buffer.removeFirst(end)
        }
        if case .length = framing { body = raw }
        head = nil
        scanFrom = 0
        chunkOffset = 0
        trailerOffset = nil
        trailerCount = 0
        decoded = []
        return (h, raw, body, rawHead)
    }

    /// The error for a head over the limit: a request line that alone exceeds it is told apart (414, not 431), and of
    /// those one whose method does (501).
    func headTooLarge() -> HTTPParseError {
        let firstLineEnd = buffer.withUnsafeBufferPointer { ByteScan.lineBreak($0, from: 0, end: $0.count) }
        if mode == .request, firstLineEnd > limits.maxHeadBytes {
            let methodEnd = buffer.prefix(firstLineEnd).firstIndex(of: 0x20) ?? firstLineEnd
            if methodEnd > limits.maxHeadBytes {
                return HTTPParseError(.methodTooLong, "request method exceeds \(limits.maxHeadBytes) bytes: not one this server implements")
            }
            return HTTPParseError(.requestLineTooLong, "request line exceeds \(limits.maxHeadBytes) bytes")
        }
        return HTTPParseError(.headTooLarge, "header section exceeds \(limits.maxHeadBytes) bytes")
    }

    mutating func parseHead() throws(HTTPParseError) {
        // Tolerate blank lines between pipelined messages (RFC 9112 §2.2).
        while buffer.count >= 2, buffer[0] == 0x0D, buffer[1] == 0x0A { buffer.removeFirst(2); scanFrom = 0 }
        guard let end = try findHeadEnd() else {
            scanFrom = buffer.count
            if buffer.count > limits.maxHeadBytes { throw headTooLarge() }
            return
        }
        if end > limits.maxHeadBytes { throw headTooLarge() }
        let (mode, limits) = (mode, limits)
        let parsed = try buffer.withUnsafeBufferPointer { b throws(HTTPParseError) in try HTTPParser.parseHead(b, end: end, mode: mode, limits: limits) }
        head = parsed
        framing = try decideFraming(parsed.startLine, parsed.headers)
    }

    /// The head in `b[0..<end]` (`end` just after its CRLFCRLF), parsed on bytes: Strings are made only for the
    /// pieces kept (the start line's three parts, each field's name and value).
    static func parseHead(_ b: UnsafeBufferPointer<UInt8>, end: Int, mode: Mode, limits: HTTPLimits) throws(HTTPParseError) -> ParsedHead {
        let headEnd = end - 4 // where the final CRLFCRLF starts
        var startLine: StartLine?
        var headers = HTTPHeaders()
        headers.fields.reserveCapacity(12)
        var lineStart = 0
        while true {
            // RFC 9112 §2.2: a CR is only ever the first half of a line ending; a bare CR or LF is refused.
            let brk = ByteScan.lineBreak(b, from: lineStart, end: headEnd)
            if brk < headEnd {
                if b[brk] == 0x0A { throw HTTPParseError(.malformed, "bare LF in the header section") }
                guard brk + 1 < headEnd, b[brk + 1] == 0x0A else { throw HTTPParseError(.malformed, "bare CR in the header section") }
            }
            if startLine == nil {
                startLine = try parseStartLine(b, lineStart..<brk, mode: mode)
            } else {
                headers.fields.append(try parseField(b, lineStart..<brk))
                if headers.fields.count > limits.maxHeaderCount { throw HTTPParseError(.headTooLarge, "more than \(limits.maxHeaderCount) header fields") }
            }
            if brk >= headEnd { break }
            lineStart = brk + 2
        }
        // The first line is always read first (the loop runs at least once).
        guard let startLine else { throw HTTPParseError(.malformed, "no start line") }
        return ParsedHead(startLine: startLine, headers: headers, headLength: end)
    }

    /// The start line split at its first two spaces (a response's reason phrase may hold more, or be absent), checked.
    /// The parts are ranges within `line` (each space found lies in it), made Strings only once checked.
    static func parseStartLine(_ b: UnsafeBufferPointer<UInt8>, _ line: Range<Int>, mode: Mode) throws(HTTPParseError) -> StartLine {
        let bytes = UnsafeBufferPointer(rebasing: b[line])
        guard ByteScan.isASCII(b, line) || String(validating: bytes, as: UTF8.self) != nil else {
            throw HTTPParseError(.malformed, "start line is not valid UTF-8")
        }
        let firstSpace = bytes.firstIndex(of: 0x20)
        let secondSpace = firstSpace.flatMap { s in bytes[(s + 1)...].firstIndex(of: 0x20) }
        let first = 0..<(firstSpace ?? bytes.count)
        let second = firstSpace.map { s in (s + 1)..<(secondSpace ?? bytes.count) }
        let third = secondSpace.map { s in (s + 1)..<bytes.count }
        func text(_ r: Range<Int>) -> String { String(decoding: UnsafeBufferPointer(rebasing: bytes[r]), as: UTF8.self) }
        func equals(_ r: Range<Int>, _ s: StaticString) -> Bool {
            r.count == s.utf8CodeUnitCount && memcmp(bytes.baseAddress! + r.lowerBound, s.utf8Start, r.count) == 0
        }
        switch mode {
        case .request:
            guard let target = second, let version = third, !first.isEmpty, first.allSatisfy({ isToken(bytes[$0]) }), !target.isEmpty,
                  equals(version, "HTTP/1.1") || equals(version, "HTTP/1.0") else {
                throw HTTPParseError(.malformed, "malformed request line")
            }
            // The request target is visible ASCII only (RFC 9112 §3.2, RFC 3986): no controls, spaces or raw non-ASCII.
            guard target.allSatisfy({ bytes[$0] > 0x20 && bytes[$0] < 0x7F }) else {
                throw HTTPParseError(.malformed, "request target contains a control, space or non-ASCII byte")
            }
        case .response:
            // status-code = 3DIGIT (RFC 9112 §4), and "values outside the range 100..599 are invalid" (RFC 9110 §15): a
            // proxy answers such a response as the upstream's failure rather than pass on `HTTP/1.1 0`.
            guard let status = second, first.count >= 7, memcmp(bytes.baseAddress! + first.lowerBound, "HTTP/1.", 7) == 0,
                  status.count == 3, status.allSatisfy({ bytes[$0] &- 0x30 <= 9 }) else {
                throw HTTPParseError(.malformed, "malformed status line")
            }
            guard (0x31...0x35).contains(bytes[status.lowerBound]) else {
                throw HTTPParseError(.malformed, "status code \(text(status)) is outside 100-599")
            }
        }
        guard let second else { throw HTTPParseError(.malformed, "malformed start line") } // checked above for either mode
        return StartLine(first: text(first), second: text(second), third: third.map(text))
    }

    /// One `name: value` line of a header or trailer section (CRLF already removed), checked as RFC 9110 §5.5 asks:
    /// a token name, no folding, and a value of visible characters, spaces and tabs only (no CR, LF, NUL or other controls).
    static func parseField(_ b: UnsafeBufferPointer<UInt8>, _ line: Range<Int>) throws(HTTPParseError) -> (name: String, value: String) {
        guard !line.isEmpty else { throw HTTPParseError(.malformed, "empty header line") }
        if b[line.lowerBound] == 0x20 || b[line.lowerBound] == 0x09 {
            throw HTTPParseError(.malformed, "obsolete header line folding")
        }
        var colon = line.lowerBound
        while colon < line.upperBound, b[colon] != 0x3A { colon += 1 }
        guard colon < line.upperBound else { throw HTTPParseError(.malformed, "header line without ':'") }
        guard colon > line.lowerBound, (line.lowerBound..<colon).allSatisfy({ isToken(b[$0]) }) else {
            throw HTTPParseError(.malformed, "invalid header name")
        }
        var vs = colon + 1, ve = line.upperBound
        while vs < ve, b[vs] == 0x20 || b[vs] == 0x09 { vs += 1 }
        while ve > vs, b[ve - 1] == 0x20 || b[ve - 1] == 0x09 { ve -= 1 }
        var ascii = true
        for k in vs..<ve {
            let c = b[k]
            guard c >= 0x20 && c != 0x7F || c == 0x09 else { throw HTTPParseError(.malformed, "control character in a header value") }
            if c >= 0x80 { ascii = false }
        }
        // ASCII (nearly every value) needs no UTF-8 validation; anything else must be valid UTF-8.
        let valueBytes = UnsafeBufferPointer(rebasing: b[vs..<ve])
        guard let value = ascii ? String(decoding: valueBytes, as: UTF8.self) : String(validating: valueBytes, as: UTF8.self) else {
            throw HTTPParseError(.malformed, "header value is not valid UTF-8")
        }
        return (name: String(decoding: UnsafeBufferPointer(rebasing: b[line.lowerBound..<colon]), as: UTF8.self), value: value)
    }

    /// `parseField` on the buffer (trailer lines).
    func parseField(_ line: Range<Int>) throws(HTTPParseError) -> (name: String, value: String) {
        try buffer.withUnsafeBufferPointer { b throws(HTTPParseError) in try HTTPParser.parseField(b, line) }
    }

    /// Just past the first CRLFCRLF at or after `scanFrom - 3`, if there is one (line breaks found a word at a time).
    /// A bare LF or CR is refused as soon as it arrives (RFC 9112 §2.2), not when the head's end would have come: a
    /// client that ends its lines with LF alone never sends a CRLFCRLF, and would otherwise wait for the header timeout.
    func findHeadEnd() throws(HTTPParseError) -> Int? {
        try buffer.withUnsafeBufferPointer { b throws(HTTPParseError) -> Int? in
            var i = max(0, scanFrom - 3)
            while true {
                i = ByteScan.lineBreak(b, from: i, end: b.count)
                if i >= b.count { return nil }
                if b[i] == 0x0A {
                    guard i > 0, b[i - 1] == 0x0D else { throw HTTPParseError(.malformed, "bare LF in the header section (lines must end with CRLF)") }
                    i += 1
                    continue
                }
                guard i + 1 < b.count else { return nil } // a CR last: its LF may come next
                guard b[i + 1] == 0x0A else { throw HTTPParseError(.malformed, "bare CR in the header section") }
                if i + 3 < b.count, b[i + 2] == 0x0D, b[i + 3] == 0x0A { return i + 4 }
                i += 2
            }
        }
    }

    /// Whether a response has no body whatever its fields say (RFC 9112 §6.3): one to a HEAD request, a 1xx, 204 or 304,
    /// a 2xx to a CONNECT.
    public static func responseHasNoBody(status: Int, requestMethod: String) -> Bool {
        requestMethod == "HEAD" || (100...199).contains(status) || status == 204 || status == 304
            || (requestMethod == "CONNECT" && (200...299).contains(status))
    }

    func decideFraming(_ line: StartLine, _ headers: HTTPHeaders) throws(HTTPParseError) -> Framing {
        // Most heads have one Content-Length and no Transfer-Encoding: looked for in one pass, lists made only if present.
        // Of the Content-Length values, the first and whether another differs from it (no list made).
        var hasTE = false, firstLength: String?, lengthsDiffer = false, hosts = 0
        for f in headers.fields {
            if f.name.caseInsensitiveEquals("Content-Length") {
                if let first = firstLength { lengthsDiffer = lengthsDiffer || f.value != first } else { firstLength = f.value }
            } else if f.name.caseInsensitiveEquals("Transfer-Encoding") { hasTE = true }
            else if f.name.caseInsensitiveEquals("Host") { hosts += 1 }
        }
        // RFC 9112 §3.2: a request with more than one Host line is answered 400 (which one names the target is ambiguous).
        if mode == .request, hosts > 1 { throw HTTPParseError(.malformed, "more than one Host header field") }
        let te = hasTE ? headers.tokens("Transfer-Encoding").filter { !$0.isEmpty } : []
        if mode == .request, hasTE, te.isEmpty {
            throw HTTPParseError(.malformed, "empty Transfer-Encoding")
        }
        // An empty item (`chunked ,`, a second, empty field) would be forwarded as it came, and a recipient stricter than
        // this parser frames the body otherwise (one read `chunked ,` as no body): refused rather than passed on.
        if !te.isEmpty, headers.fields.contains(where: { f in
            f.name.caseInsensitiveEquals("Transfer-Encoding")
                && f.value.split(separator: ",", omittingEmptySubsequences: false).contains { $0.allSatisfy { $0 == " " || $0 == "\t" } }
        }) {
            throw HTTPParseError(.malformed, "an empty item in Transfer-Encoding")
        }
        if mode == .response, HTTPParser.responseHasNoBody(status: Int(line.second) ?? 0, requestMethod: requestMethod) { return .none }
        if !te.isEmpty {
            // Only `chunked`, alone, is decoded. A body under another transfer coding (`gzip, chunked`, `chunked, chunked`,
            // or one read until the close) would be stored still coded, where masking cannot see a card number in it:
            // refused, a request's with 501 and a response's as the upstream's failure (502).
            guard te.count == 1, te[0].caseInsensitiveEquals("chunked") else {
                throw HTTPParseError(.unsupportedCoding, "Transfer-Encoding \(te.joined(separator: ", ")) is not supported (only chunked)")
            }
            if firstLength != nil { throw HTTPParseError(.malformed, "both Transfer-Encoding and Content-Length") }
            return .chunked
        }
        if let first = firstLength {
            guard !lengthsDiffer, first.utf8.allSatisfy({ $0 &- 0x30 <= 9 }), let n = Int(first) else {
                throw HTTPParseError(.malformed, "invalid Content-Length")
            }
            if n > limits.maxBodyBytes { throw HTTPParseError(.bodyTooLarge, "body of \(n) bytes exceeds \(limits.maxBodyBytes)") }
            return n == 0 ? .none : .length(n)
        }
        return mode == .request ? .none : .untilClose
    }

    /// Parses chunks from `chunkOffset`; returns the end of the message (after trailers) when complete.
    mutating func parseChunks(from start: Int) throws(HTTPParseError) -> Int? {
        if chunkOffset == 0 { chunkOffset = start }
        while trailerOffset == nil {
            guard let lineEnd = crlf(from: chunkOffset) else {
                if buffer[chunkOffset...].contains(0x0A) { throw HTTPParseError(.malformed, "bare LF after a chunk size (lines must end with CRLF)") }
                if buffer.count - chunkOffset > 1024 { throw HTTPParseError(.malformed, "chunk size line too long") }
                return nil
            }
            let size = try HTTPParser.chunkSize(buffer[chunkOffset..<lineEnd])
            if size == 0 {
                trailerOffset = lineEnd + 2
                break
            }
            if decoded.count + size > limits.maxBodyBytes { throw HTTPParseError(.bodyTooLarge, "chunked body exceeds \(limits.maxBodyBytes) bytes") }
            let dataStart = lineEnd + 2
            guard buffer.count >= dataStart + size + 2 else { return nil }
            guard buffer[dataStart + size] == 0x0D, buffer[dataStart + size + 1] == 0x0A else {
                throw HTTPParseError(.malformed, "chunk data not followed by CRLF")
            }
            decoded += buffer[dataStart..<dataStart + size]
            chunkOffset = dataStart + size + 2
        }
        // Trailer lines, each checked like a header line, end with an empty line; their total is capped like a head.
        while let p = trailerOffset {
            guard let e = crlf(from: p) else {
                if buffer[p...].contains(0x0A) { throw HTTPParseError(.malformed, "bare LF in a trailer") }
                if buffer.count - chunkOffset > limits.maxHeadBytes {
                    throw HTTPParseError(.headTooLarge, "trailer section exceeds \(limits.maxHeadBytes) bytes")
                }
                return nil
            }
            if e == p { return e + 2 }
            if e - chunkOffset > limits.maxHeadBytes { throw HTTPParseError(.headTooLarge, "trailer section exceeds \(limits.maxHeadBytes) bytes") }
            if let bare = buffer[p..<e].firstIndex(where: { $0 == 0x0D || $0 == 0x0A }) {
                throw HTTPParseError(.malformed, buffer[bare] == 0x0D ? "bare CR in a trailer" : "bare LF in a trailer")
            }
            _ = try parseField(p..<e)
            trailerCount += 1
            if trailerCount > limits.maxHeaderCount { throw HTTPParseError(.headTooLarge, "more than \(limits.maxHeaderCount) trailer fields") }
            trailerOffset = e + 2
        }
        return nil
    }

    /// The size of a chunk-size line (RFC 9112 §7.1): hex digits only (no sign, no spaces), then optional
    /// extensions `;name` or `;name=value` with a token or a quoted-string value.
    static func chunkSize(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> Int {
        // Quoted in the error with control characters as '?', cut at 40 characters (not bytes) with '…' past them.
        func shown() -> String {
            let scalars = String(decoding: line, as: UTF8.self).unicodeScalars
            return scalars.prefix(40).map { $0.value < 0x20 || $0.value == 0x7F ? "?" : String($0) }.joined() + (scalars.count > 40 ? "…" : "")
        }
        func bad() -> HTTPParseError { HTTPParseError(.malformed, "invalid chunk size line '\(shown())'") }
        var i = line.startIndex
        while i < line.endIndex, line[i] == 0x30 { i += 1 } // leading zeros (1*HEXDIG allows them) are not counted
        if i > line.startIndex, i == line.endIndex || hexValue(line[i]) == nil { i -= 1 } // a size of 0 keeps one digit
        let digitsStart = i
        var size = 0
        while i < line.endIndex, let digit = hexValue(line[i]) {
            guard i - digitsStart < 8 else {
                throw HTTPParseError(.malformed, "invalid chunk size line '\(shown())': more than 8 significant hex digits (this parser takes chunks under 4 GiB)")
            }
            size = size * 16 + digit
            i += 1
        }
        guard i > line.startIndex else { throw bad() }
        while i < line.endIndex {
            guard line[i] == 0x3B else { throw bad() } // ';'
            i += 1
            let nameStart = i
            while i < line.endIndex, isToken(line[i]) { i += 1 }
            guard i > nameStart else { throw bad() }
            guard i < line.endIndex, line[i] == 0x3D else { continue } // '='
            i += 1
            if i < line.endIndex, line[i] == 0x22 { // quoted-string
                i += 1
                var closed = false
                while i < line.endIndex {
                    let b = line[i]
                    if b == 0x22 { closed = true; i += 1; break }
                    if b == 0x5C { i += 1; guard i < line.endIndex else { throw bad() } }
                    else if b < 0x20 && b != 0x09 || b == 0x7F { throw bad() }
                    i += 1
                }
                guard closed else { throw bad() }
            } else {
                let valueStart = i
                while i < line.endIndex, isToken(line[i]) { i += 1 }
                guard i > valueStart else { throw bad() }
            }
        }
        return size
    }

    @inline(__always) static func hexValue(_ b: UInt8) -> Int? {
        switch b {
        case 0x30...0x39: return Int(b - 0x30)
        case 0x41...0x46: return Int(b - 0x41 + 10)
        case 0x61...0x66: return Int(b - 0x61 + 10)
        default: return nil
        }
    }

    func crlf(from p: Int) -> Int? {
        var i = p
        while i + 1 < buffer.count {
            if buffer[i] == 0x0D, buffer[i + 1] == 0x0A { return i }
            i += 1
        }
        return nil
    }
}

extension HTTPParser {
    /// RFC 9110 tchar: visible ASCII but for the delimiters `"(),/:;<=>?@[\]{}`, as two 64-bit masks (bytes 0-63 and
    /// 64-127; the test compares them with the definition byte by byte).
    static let tokenMaskLow: UInt64 = 0x03FF_6CFA_0000_0000
    static let tokenMaskHigh: UInt64 = 0x57FF_FFFF_C7FF_FFFE
    @inline(__always) static func isToken(_ b: UInt8) -> Bool {
        b < 64 ? tokenMaskLow >> b & 1 == 1 : (b < 128 && tokenMaskHigh >> (b - 64) & 1 == 1)
    }
}

extension Character {
    var isASCIIDigit: Bool { asciiValue.map { $0 >= 48 && $0 <= 57 } ?? false }
}
