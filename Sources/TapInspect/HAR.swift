import Foundation
import TapCore
import TapEMV
import TapHTTP
import TapRecording
import TapStore

/// HAR 1.2 (the HTTP Archive format every browser, Charles, Proxyman and mitmproxy read and write): a session's exchanges
/// out, with real timings and the 3DS messages in the `_3dstape` custom field, and HAR files in, as session records.
public enum HAR {
    // MARK: export

    /// The session as a HAR 1.2 document.
    public static func export(_ exchanges: [StoredExchange], meta: [String: String], creatorVersion: String) -> JSON {
        .object([("log", .object([
            ("version", .string("1.2")),
            ("creator", .object([("name", .string("3dstape")), ("version", .string(creatorVersion))])),
            ("pages", .array([])),
            ("entries", .array(exchanges.map(entry))),
            ("comment", .string(meta["label"].map { "3dstape session: \($0)" } ?? "3dstape session")),
        ]))])
    }

    static func entry(_ x: StoredExchange) -> JSON {
        let t = Timings(x)
        var members: [(String, JSON)] = [
            ("startedDateTime", .string(isoDate(x.requestStart))),
            ("time", ms(t.total)),
            ("request", request(x)),
            ("response", response(x)),
            ("cache", .object([])),
            ("timings", .object([("blocked", .number("-1")), ("dns", .number("-1")), ("connect", ms(t.connect)), ("ssl", ms(t.ssl)),
                                 ("send", ms(t.send)), ("wait", ms(t.wait)), ("receive", ms(t.receive))])),
            ("connection", .string(String(x.connectionID))),
        ]
        if let e = x.error { members.append(("_error", .string(e))) }
        if let tunnel = x.tunnel {
            // Tunnelled untouched (`record --pass-through`): the CONNECT is the entry, what was seen of the tunnel its custom field.
            members.append(("comment", .string("CONNECT tunnelled without interception (--pass-through): " + ExchangeJSON.describe(tunnel))))
            members.append(("_tunnel", ExchangeJSON.tunnel(tunnel)))
        }
        members.append(("_3dstape", custom(x)))
        return .object(members)
    }

    /// The recorded phases as HAR writes them (milliseconds; -1 where a phase did not happen, as on a reused
    /// connection; HAR's `connect` includes `ssl`).
    struct Timings {
        var connect: Double, ssl: Double, send: Double, wait: Double, receive: Double

        init(_ x: StoredExchange) {
            let p = ExchangePhases(x)
            connect = p.connect.map { $0 + (p.tls ?? 0) } ?? -1
            ssl = p.tls ?? -1
            send = p.send
            wait = p.wait
            receive = p.receive
        }

        var total: Double { max(connect, 0) + send + wait + receive }
    }

    static func request(_ x: StoredExchange) -> JSON {
        var members: [(String, JSON)] = [
            ("method", .string(x.method)), ("url", .string(x.url)), ("httpVersion", .string("HTTP/1.1")),
            ("cookies", .array([])), ("headers", headers(x.requestHeaders)), ("queryString", queryString(x.url)),
        ]
        if !x.requestBody.isEmpty {
            let mime = header("content-type", x.requestHeaders) ?? "application/octet-stream"
            if let text = String(validating: x.requestBody, as: UTF8.self) {
                members.append(("postData", .object([("mimeType", .string(mime)), ("text", .string(text))])))
            } else {
                members.append(("postData", .object([("mimeType", .string(mime)), ("text", .string(Data(x.requestBody).base64EncodedString())),
                                                     ("_encoding", .string("base64"))])))
            }
        }
        members += [("headersSize", .number("-1")), ("bodySize", .number(String(x.requestBody.count)))]
        return .object(members)
    }

    static func response(_ x: StoredExchange) -> JSON {
        let mime = header("content-type", x.responseHeaders) ?? (x.responseBody.isEmpty ? "x-unknown" : "application/octet-stream")
        var content: [(String, JSON)] = [("size", .number(String(x.responseBody.count))), ("mimeType", .string(mime))]
        if let text = String(validating: x.responseBody, as: UTF8.self) {
            content.append(("text", .string(text)))
        } else {
            content += [("text", .string(Data(x.responseBody).base64EncodedString())), ("encoding", .string("base64"))]
        }
        return .object([
            ("status", .number(String(x.status ?? 0))), ("statusText", .string(x.status.map(reason) ?? "")),
            ("httpVersion", .string("HTTP/1.1")), ("cookies", .array([])), ("headers", headers(x.responseHeaders)),
            ("content", .object(content)), ("redirectURL", .string(header("location", x.responseHeaders) ?? "")),
            ("headersSize", .number("-1")), ("bodySize", .number(x.status == nil ? "-1" : String(x.responseBody.count))),
        ])
    }

    /// The documented custom field: exchange and connection ids, upstream, error, and each 3DS message with its type,
    /// version, status and JSON (decrypted where the session holds it in clear).
    static func custom(_ x: StoredExchange) -> JSON {
        var members: [(String, JSON)] = [("exchange", .number(String(x.id))), ("connection", .number(String(x.connectionID)))]
        if let u = x.upstream { members.append(("upstream", .string(u))) }
        if let e = x.error { members.append(("error", .string(e))) }
        if let a = x.clientAbortAt { members.append(("clientAbortAt", .string(isoDate(a)))) }
        members.append(("messages", .array(x.messages.map { m in
            var o: [(String, JSON)] = [("direction", .string(m.direction)), ("location", .string(m.location)), ("type", m.type.map(JSON.string) ?? .null)]
            let encrypted = m.isEncrypted
            for field in [EMVField.messageVersion, .transStatus, .errorCode] {
                if !encrypted, let v = m.json?[field]?.stringValue { o.append((field.rawValue, .string(v))) }
            }
            if let d = m.decryption { o.append(("decryption", .string(d))) }
            o.append((encrypted ? "jweHeader" : "json", m.json ?? .null))
            return .object(o)
        })))
        if let r = x.replay { members.append(("replay", ExchangeJSON.replay(r))) }
        return .object(members)
    }

    static func headers(_ h: [(String, String)]) -> JSON {
        .array(h.map { .object([("name", .string($0.0)), ("value", .string($0.1))]) })
    }

    static func queryString(_ url: String) -> JSON {
        guard let q = URLComponents(string: url)?.queryItems else { return .array([]) }
        return .array(q.map { .object([("name", .string($0.name)), ("value", .string($0.value ?? ""))]) })
    }

    static func header(_ name: String, _ h: [(String, String)]) -> String? { h.first { $0.0.lowercased() == name }?.1 }

    /// A phase in milliseconds, -1 when it did not happen (or is NaN); at most a day, as `import` takes it back.
    static func ms(_ v: Double) -> JSON { .number(v >= 0 ? String(format: "%.3f", min(v, longestTimingMs)) : "-1") }

    /// ISO 8601 in UTC with microseconds, e.g. `2026-11-29T21:01:49.693359Z`. A time outside the years 1 to 9999 (a
    /// corrupted or hand-edited session) is clamped to them, NaN to the epoch: the format cannot write more.
    public static func isoDate(_ t: Double) -> String {
        let clamped = Checked.storedTime(t)
        let whole = floor(clamped)
        var micros = Checked.clampedInt(rounding: (clamped - whole) * 1_000_000)
        var seconds = Checked.clampedInt(whole)
        if micros == 1_000_000 { micros = 0; seconds += 1 }
        var tmv = tm()
        var tt = time_t(seconds)
        gmtime_r(&tt, &tmv)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", Int(tmv.tm_year) + 1900, Int(tmv.tm_mon) + 1, Int(tmv.tm_mday),
                      Int(tmv.tm_hour), Int(tmv.tm_min), Int(tmv.tm_sec), micros)
    }

    static func reason(_ status: Int) -> String { HTTPResponseHead.reasonPhrase(status) }

    // MARK: import

    /// A HAR entry read back: what `import` writes to a new session.
    public struct Entry: Sendable {
        public var connection: String
        public var method: String
        public var url: String
        public var requestHeaders: [(String, String)]
        public var requestBody: [UInt8]
        public var status: Int?
        public var responseHeaders: [(String, String)]
        public var responseBody: [UInt8]
        public var start: Double
        public var upstreamConnect: Double?
        public var tlsDone: Double?
        public var requestSent: Double
        public var firstByte: Double?
        public var done: Double?
        public var error: String?
        /// App-channel plaintexts a 3dstape export carried in `_3dstape.messages` (request, response).
        public var requestPlaintext: JSON?
        public var responsePlaintext: JSON?
    }

    /// A HAR file that cannot be imported, with the reason in one line.
    public struct ImportError: Error, CustomStringConvertible {
        public let description: String
        init(_ d: String) { description = d }
    }

    // Reading a whole document: HARReader.swift (HAR.read, a piece at a time; HAR.parse, in memory).

    static func entry(_ e: JSON) throws -> Entry {
        func need(_ v: JSON?, _ path: String) throws -> JSON {
            guard let v, v != .null else { throw ImportError("\(path) is missing") }
            return v
        }
        func string(_ v: JSON?, _ path: String) throws -> String {
            guard let s = try need(v, path).stringValue else { throw ImportError("\(path) is not a string") }
            return s
        }
        // Milliseconds as seconds (negative: the phase did not happen); past a day, or too large for a Double, refused.
        func number(_ v: JSON?, _ path: String) throws -> Double? {
            guard let v, v != .null else { return nil }
            guard case let .number(n) = v, let d = Double(n) else { throw ImportError("\(path) is not a number") }
            guard d <= HAR.longestTimingMs else {
                throw ImportError("\(path) \(n) is out of range: a timing must be from 0 to \(Checked.clampedInt(HAR.longestTimingMs)) ms (24h)")
            }
            return d < 0 ? nil : d / 1000
        }
        let started = try string(e["startedDateTime"], "startedDateTime")
        guard let start = parseDate(started) else { throw ImportError("startedDateTime '\(started)' is not an ISO 8601 date") }
        let request = try need(e["request"], "request")
        let response = try need(e["response"], "response")
        let method = try string(request["method"], "request.method")
        var url = try string(request["url"], "request.url")
        // A CONNECT's target is in authority form (`host:port`), as 3dstape exports a tunnel: read it as the https origin.
        if method == "CONNECT", !url.contains("://") { url = "https://" + url }
        guard let u = URLComponents(string: url), u.scheme != nil, u.host != nil else { throw ImportError("request.url '\(url)' is not an absolute URL") }
        let requestHeaders = try headerList(request["headers"], "request.headers")
        var requestBody: [UInt8] = []
        if let post = request["postData"], post != .null {
            let text = post["text"]?.stringValue ?? ""
            let encoding = post["_encoding"]?.stringValue ?? post["encoding"]?.stringValue
            requestBody = try decode(text, encoding: encoding, path: "request.postData.text")
        }
        let statusValue = try httpStatus(response["status"])
        let responseHeaders = try headerList(response["headers"], "response.headers")
        var responseBody: [UInt8] = []
        if let content = response["content"], let text = content["text"]?.stringValue {
            responseBody = try decode(text, encoding: content["encoding"]?.stringValue, path: "response.content.text")
        }
        let timings = e["timings"] ?? .object([])
        let connect = try number(timings["connect"], "timings.connect")
        let ssl = try number(timings["ssl"], "timings.ssl")
        let send = try number(timings["send"], "timings.send") ?? 0
        let wait = try number(timings["wait"], "timings.wait")
        let receive = try number(timings["receive"], "timings.receive")
        var cursor = start
        var upstreamConnect: Double?, tlsDone: Double?
        if let connect {
            upstreamConnect = start + connect - (ssl ?? 0)
            if ssl != nil { tlsDone = start + connect }
            cursor = start + connect
        }
        let sent = cursor + send
        let status = (statusValue ?? 0) > 0 ? statusValue : nil
        let firstByte = status == nil ? nil : sent + (wait ?? 0)
        let done = firstByte.map { $0 + (receive ?? 0) }
        let error = e["_error"]?.stringValue ?? e["_3dstape"]?["error"]?.stringValue ?? (status == nil ? "no response in the HAR entry" : nil)
        var plaintexts: [String: JSON] = [:]
        if case let .array(messages)? = e["_3dstape"]?["messages"] {
            for m in messages where m["location"]?.stringValue == "jwe" {
                if let direction = m["direction"]?.stringValue, let json = m["json"], json.isObject { plaintexts[direction] = json }
            }
        }
        return Entry(connection: e["connection"]?.stringValue ?? "", method: method, url: url,
                     requestHeaders: requestHeaders.filter { $0.0.lowercased() != "content-encoding" }, requestBody: requestBody,
                     status: status, responseHeaders: responseHeaders.filter { $0.0.lowercased() != "content-encoding" },
                     responseBody: responseBody, start: start, upstreamConnect: upstreamConnect, tlsDone: tlsDone, requestSent: sent,
                     firstByte: firstByte, done: done, error: error, requestPlaintext: plaintexts["request"], responsePlaintext: plaintexts["response"])
    }

    /// The longest timing an imported entry may give, in milliseconds: a day.
    static let longestTimingMs = CheckedDuration.maximum * 1000

    /// `response.status`: nil when absent or negative (no response), else a whole number from 0 to 999.
    static func httpStatus(_ v: JSON?) throws -> Int? {
        guard let v, v != .null else { return nil }
        guard case let .number(n) = v, let d = Double(n) else { throw ImportError("response.status is not a number") }
        if d < 0 { return nil }
        guard let status = Checked.int(d), status <= 999 else {
            throw ImportError("response.status \(n) is out of range: an HTTP status is from 100 to 999 (0 for no response)")
        }
        return status
    }

    static func headerList(_ v: JSON?, _ path: String) throws -> [(String, String)] {
        guard let v, v != .null else { return [] }
        guard case let .array(items) = v else { throw ImportError("\(path) is not an array") }
        return try items.enumerated().map { i, h in
            if let n = h["name"]?.stringValue, let value = h["value"]?.stringValue { return (n, value) }
            if case let .array(pair) = h, pair.count == 2, let n = pair[0].stringValue, let value = pair[1].stringValue { return (n, value) }
            throw ImportError("\(path)[\(i)] has no name and value")
        }
    }

    static func decode(_ text: String, encoding: String?, path: String) throws -> [UInt8] {
        guard let encoding, encoding != "" else { return Array(text.utf8) }
        guard encoding == "base64" else { throw ImportError("\(path): encoding '\(encoding)' is not supported (only base64)") }
        guard let d = Data(base64Encoded: text, options: .ignoreUnknownCharacters), d.base64EncodedString().count >= text.filter({ !$0.isWhitespace }).count - 2 else {
            throw ImportError("\(path) is marked base64 but does not decode")
        }
        return [UInt8](d)
    }

    /// ISO 8601 with any number of fractional digits and a Z or ±hh:mm offset.
    static func parseDate(_ s: String) -> Double? {
        let u = Array(s.utf8)
        guard u.count >= 19 else { return nil }
        func int(_ r: Range<Int>) -> Int? {
            guard r.upperBound <= u.count else { return nil }
            var n = 0
            for c in u[r] { guard c >= 48, c <= 57 else { return nil }; n = n * 10 + Int(c - 48) }
            return n
        }
        guard let y = int(0..<4), u[4] == 45, let mo = int(5..<7), u[7] == 45, let d = int(8..<10), u[10] == 84 || u[10] == 32,
              let h = int(11..<13), u[13] == 58, let mi = int(14..<16), u[16] == 58, let sec = int(17..<19) else { return nil }
        var i = 19
        var fraction = 0.0
        if i < u.count, u[i] == 46 {
            i += 1
            var scale = 0.1
            while i < u.count, u[i] >= 48, u[i] <= 57 { fraction += Double(u[i] - 48) * scale; scale /= 10; i += 1 }
        }
        var offset = 0
        if i < u.count {
            if u[i] == 90, i == u.count - 1 { offset = 0 } else if u[i] == 43 || u[i] == 45, let oh = int(i + 1..<i + 3) {
                let om = (i + 5 < u.count + 1 && u.count >= i + 6 && u[i + 3] == 58) ? (int(i + 4..<i + 6) ?? 0) : (int(i + 3..<i + 5) ?? 0)
                offset = (oh * 3600 + om * 60) * (u[i] == 43 ? 1 : -1)
            } else { return nil }
        }
        var c = DateComponents()
        c.year = y; c.month = mo; c.day = d; c.hour = h; c.minute = mi; c.second = sec
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        guard (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, sec < 61, let date = calendar.date(from: c) else { return nil }
        return date.timeIntervalSince1970 + fraction - Double(offset)
    }
}
