/// Why a message could not be parsed, with the status a proxy should answer.
public struct HTTPParseError: Error, Equatable, CustomStringConvertible {
    /// The status to answer with: 400 malformed, 413 body too large, 431 head too large, 501 unsupported.
    public let status: Int
    public let message: String
    public init(status: Int, _ message: String) {
        self.status = status
        self.message = message
    }
    public var description: String { message }
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

    struct ParsedHead {
        var startLine: [Substring]
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

    public mutating func append(_ bytes: [UInt8]) { buffer += bytes }

    /// The next complete request, or nil if more bytes are needed.
    public mutating func nextRequest() throws(HTTPParseError) -> HTTPRequest? {
        guard let (h, raw, body, rawHead) = try nextMessage() else { return nil }
        let line = h.startLine
        return HTTPRequest(head: HTTPRequestHead(method: String(line[0]), target: String(line[1]), version: String(line[2]),
                                                 headers: h.headers),
                           rawHead: rawHead, rawBody: raw, body: body)
    }

    /// The request head as soon as it is complete (for `Expect: 100-continue`), without consuming it.
    public mutating func peekRequestHead() throws(HTTPParseError) -> HTTPRequestHead? {
        if head == nil { try parseHead() }
        guard let h = head else { return nil }
        return HTTPRequestHead(method: String(h.startLine[0]), target: String(h.startLine[1]), version: String(h.startLine[2]),
                               headers: h.headers)
    }

    /// The next complete response; 1xx interim responses (other than 101) are skipped.
    public mutating func nextResponse() throws(HTTPParseError) -> HTTPResponse? {
        while true {
            guard let (h, raw, body, rawHead) = try nextMessage() else { return nil }
            guard let status = Int(h.startLine[1]) else { throw HTTPParseError(status: 502, "invalid status code") }
            let reason = h.startLine.count > 2 ? String(h.startLine[2]) : ""
            if (100...199).contains(status), status != 101 { continue }
            return HTTPResponse(head: HTTPResponseHead(status: status, reason: reason, version: String(h.startLine[0]), headers: h.headers),
                                rawHead: rawHead, rawBody: raw, body: body)
        }
    }

    /// At end of stream: the close-delimited response if one was in progress. Throws if a message was cut short.
    public mutating func finish() throws(HTTPParseError) -> HTTPResponse? {
        if head == nil, buffer.isEmpty { return nil }
        guard let h = head, framing == .untilClose else {
            throw HTTPParseError(status: 502, "connection closed in the middle of a message")
        }
        let rawHead = Array(buffer[0..<h.headLength])
        let body = Array(buffer[h.headLength...])
        buffer.removeAll()
        head = nil
        scanFrom = 0
        guard let status = Int(h.startLine[1]) else { throw HTTPParseError(status: 502, "invalid status code") }
        return HTTPResponse(head: HTTPResponseHead(status: status, reason: h.startLine.count > 2 ? String(h.startLine[2]) : "",
                                                   version: String(h.startLine[0]), headers: h.headers),
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
            if buffer.count - start > limits.maxBodyBytes { throw HTTPParseError(status: 413, "body exceeds \(limits.maxBodyBytes) bytes") }
            return nil
        case .chunked:
            guard let e = try parseChunks(from: start) else { return nil }
            end = e
            body = decoded
        }
        let rawHead = Array(buffer[0..<start])
        let raw = Array(buffer[start..<end])
        if case .length = framing { body = raw }
        buffer.removeFirst(end)
        head = nil
        scanFrom = 0
        chunkOffset = 0
        decoded = []
        return (h, raw, body, rawHead)
    }

    mutating func parseHead() throws(HTTPParseError) {
        // Tolerate blank lines between pipelined messages (RFC 9112 §2.2).
        while buffer.count >= 2, buffer[0] == 0x0D, buffer[1] == 0x0A { buffer.removeFirst(2); scanFrom = 0 }
        guard let end = findHeadEnd() else {
            scanFrom = buffer.count
            if buffer.count > limits.maxHeadBytes {
                throw HTTPParseError(status: 431, "header section exceeds \(limits.maxHeadBytes) bytes")
            }
            return
        }
        if end > limits.maxHeadBytes { throw HTTPParseError(status: 431, "header section exceeds \(limits.maxHeadBytes) bytes") }
        // Parse on bytes; Strings are made only for the pieces kept.
        let headEnd = end - 4 // where the final CRLFCRLF starts
        var lines: [Range<Int>] = []
        var lineStart = 0
        var k = 0
        while k + 1 < headEnd {
            if buffer[k] == 0x0D, buffer[k + 1] == 0x0A {
                lines.append(lineStart..<k)
                lineStart = k + 2
                k += 2
            } else {
                k += 1
            }
        }
        lines.append(lineStart..<headEnd)
        let firstRange = lines.removeFirst()
        guard let first = String(validating: buffer[firstRange], as: UTF8.self) else {
            throw HTTPParseError(status: 400, "start line is not valid UTF-8")
        }
        let parts = first.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        switch mode {
        case .request:
            guard parts.count == 3, !parts[0].isEmpty, parts[0].utf8.allSatisfy(HTTPParser.isToken), !parts[1].isEmpty,
                  parts[2] == "HTTP/1.1" || parts[2] == "HTTP/1.0" else {
                throw HTTPParseError(status: 400, "malformed request line")
            }
        case .response:
            guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].utf8.count == 3, Int(parts[1]) != nil else {
                throw HTTPParseError(status: 502, "malformed status line")
            }
        }
        var headers = HTTPHeaders()
        headers.fields.reserveCapacity(lines.count)
        for line in lines {
            guard !line.isEmpty else { throw HTTPParseError(status: 400, "empty header line") }
            if buffer[line.lowerBound] == 0x20 || buffer[line.lowerBound] == 0x09 {
                throw HTTPParseError(status: 400, "obsolete header line folding")
            }
            var colon = line.lowerBound
            while colon < line.upperBound, buffer[colon] != 0x3A { colon += 1 }
            guard colon < line.upperBound else { throw HTTPParseError(status: 400, "header line without ':'") }
            guard colon > line.lowerBound, buffer[line.lowerBound..<colon].allSatisfy(HTTPParser.isToken) else {
                throw HTTPParseError(status: 400, "invalid header name")
            }
            var vs = colon + 1, ve = line.upperBound
            while vs < ve, buffer[vs] == 0x20 || buffer[vs] == 0x09 { vs += 1 }
            while ve > vs, buffer[ve - 1] == 0x20 || buffer[ve - 1] == 0x09 { ve -= 1 }
            guard let value = String(validating: buffer[vs..<ve], as: UTF8.self) else {
                throw HTTPParseError(status: 400, "header value is not valid UTF-8")
            }
            headers.fields.append((name: String(decoding: buffer[line.lowerBound..<colon], as: UTF8.self), value: value))
            if headers.fields.count > limits.maxHeaderCount { throw HTTPParseError(status: 431, "more than \(limits.maxHeaderCount) header fields") }
        }
        head = ParsedHead(startLine: parts, headers: headers, headLength: end)
        framing = try decideFraming(parts, headers)
    }

    func findHeadEnd() -> Int? {
        var i = max(0, scanFrom - 3)
        while i + 3 < buffer.count {
            if buffer[i] == 0x0D, buffer[i + 1] == 0x0A, buffer[i + 2] == 0x0D, buffer[i + 3] == 0x0A { return i + 4 }
            i += 1
        }
        return nil
    }

    func decideFraming(_ line: [Substring], _ headers: HTTPHeaders) throws(HTTPParseError) -> Framing {
        let te = headers.tokens("Transfer-Encoding")
        let lengths = headers.fields.filter { $0.name.caseInsensitiveEquals("Content-Length") }.map(\.value)
        if mode == .response {
            let status = Int(line[1]) ?? 0
            if requestMethod == "HEAD" || (100...199).contains(status) || status == 204 || status == 304 { return .none }
            if requestMethod == "CONNECT", (200...299).contains(status) { return .none }
        }
        if !te.isEmpty {
            guard te.last == "chunked" else {
                if mode == .response { return .untilClose }
                throw HTTPParseError(status: 501, "Transfer-Encoding \(te.joined(separator: ", ")) is not supported")
            }
            if !lengths.isEmpty { throw HTTPParseError(status: 400, "both Transfer-Encoding and Content-Length") }
            return .chunked
        }
        if let first = lengths.first {
            guard Set(lengths).count == 1, let n = Int(first), n >= 0, first.allSatisfy(\.isASCIIDigit) else {
                throw HTTPParseError(status: 400, "invalid Content-Length")
            }
            if n > limits.maxBodyBytes { throw HTTPParseError(status: 413, "body of \(n) bytes exceeds \(limits.maxBodyBytes)") }
            return n == 0 ? .none : .length(n)
        }
        return mode == .request ? .none : .untilClose
    }

    /// Parses chunks from `chunkOffset`; returns the end of the message (after trailers) when complete.
    mutating func parseChunks(from start: Int) throws(HTTPParseError) -> Int? {
        if chunkOffset == 0 { chunkOffset = start }
        while true {
            guard let lineEnd = crlf(from: chunkOffset) else {
                if buffer.count - chunkOffset > 1024 { throw HTTPParseError(status: 400, "chunk size line too long") }
                return nil
            }
            let sizeText = String(decoding: buffer[chunkOffset..<lineEnd], as: UTF8.self)
            let hex = sizeText.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: " \t") } ?? ""
            guard !hex.isEmpty, hex.count <= 8, let size = Int(hex, radix: 16) else {
                throw HTTPParseError(status: 400, "invalid chunk size '\(sizeText.prefix(20))'")
            }
            if size == 0 {
                // Trailers end with an empty line.
                var p = lineEnd + 2
                while true {
                    guard let e = crlf(from: p) else { return nil }
                    if e == p { return e + 2 }
                    p = e + 2
                }
            }
            if decoded.count + size > limits.maxBodyBytes { throw HTTPParseError(status: 413, "chunked body exceeds \(limits.maxBodyBytes) bytes") }
            let dataStart = lineEnd + 2
            guard buffer.count >= dataStart + size + 2 else { return nil }
            guard buffer[dataStart + size] == 0x0D, buffer[dataStart + size + 1] == 0x0A else {
                throw HTTPParseError(status: 400, "chunk data not followed by CRLF")
            }
            decoded += buffer[dataStart..<dataStart + size]
            chunkOffset = dataStart + size + 2
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
    /// RFC 9110 tchar, as a lookup over bytes.
    static let tokenTable: [Bool] = (0..<256).map { b in
        guard b > 32, b < 127 else { return false }
        return !Array("\"(),/:;<=>?@[\\]{}".utf8).contains(UInt8(b))
    }
    @inline(__always) static func isToken(_ b: UInt8) -> Bool { tokenTable[Int(b)] }
}

extension Character {
    var isASCIIDigit: Bool { asciiValue.map { $0 >= 48 && $0 <= 57 } ?? false }
}
