import Foundation
import TapCompression
import TapCore
import TapSQLite

/// A recorded exchange as read back.
public struct StoredExchange: Sendable {
    public var id: Int64
    public var connectionID: Int64
    public var method: String
    public var url: String
    public var status: Int?
    public var requestHeaders: [(String, String)]
    public var requestBody: [UInt8]
    public var requestContentEncoding: String?
    public var responseHeaders: [(String, String)]
    public var responseBody: [UInt8]
    public var responseContentEncoding: String?
    public var upstream: String?
    public var requestStart: Double
    public var upstreamConnect: Double?
    public var tlsDone: Double?
    public var requestSent: Double?
    public var firstByte: Double?
    public var done: Double?
    public var error: String?
    public var clientAbortAt: Double?
    /// (direction, location, messageType, JSON)
    public var messages: [RecordedMessage]
    /// In a replay session: what the live request matched and its delays.
    public var replay: ReplayAnnotation? = nil
    /// A CONNECT tunnelled without interception (`record --pass-through`): what was seen of it.
    public var tunnel: TunnelAnnotation? = nil

    /// Milliseconds from request start to done.
    public var durationMs: Double? { done.map { ($0 - requestStart) * 1000 } }
}

/// A 3DS message found in a recorded exchange.
public struct RecordedMessage: Sendable {
    /// `request` or `response`.
    public var direction: String
    /// `body`, `form:creq` …, or `jwe` for an app-channel message.
    public var location: String
    public var type: String?
    public var json: JSON?
    /// For app-channel JWE: `decrypted: key log`, or why it is still encrypted.
    public var decryption: String?

    /// True when an app-channel message is shown in clear.
    public var isDecrypted: Bool { decryption?.hasPrefix("decrypted") == true }

    /// An app-channel JWE that was not decrypted (shown encrypted).
    public var isEncrypted: Bool { RecordedMessage.isEncrypted(location: location, decryption: decryption) }

    /// Whether a message stored at `location`, with this note on its decryption, is an app-channel JWE still encrypted.
    public static func isEncrypted(location: String, decryption: String?) -> Bool {
        location == "jwe" && decryption?.hasPrefix("decrypted") != true
    }
}

/// One line of `3dstape ls`.
public struct SessionSummary: Sendable {
    /// The line as `ls --json` prints it (and `web` lists it).
    public var json: JSON {
        .object([("file", .string(path)), ("label", .string(label)), ("created", .string(created)),
                 ("exchanges", .number(String(exchanges))), ("transactions", .number(String(transactions))),
                 ("outcome", .string(outcome)), ("duration_s", durationSeconds.map { .number(String(format: "%.3f", $0)) } ?? .null)])
    }

    public var path: String
    public var label: String
    public var created: String
    public var exchanges: Int
    public var transactions: Int
    /// The final transStatus of each 3DS transaction, e.g. "Y×3 N×1", or errors.
    public var outcome: String
    public var durationSeconds: Double?
}

/// Reads a session file. Refuses files that are not sessions or have a newer schema.
public final class SessionReader {
    let db: Database
    public let path: String
    public let meta: [String: String]

    public init(path: String) throws {
        guard FileManager.default.fileExists(atPath: path) else { throw SessionFileError("\(path): no such file") }
        self.path = path
        do {
            // Read-write so that a WAL left by a killed recorder is recovered on open.
            let writable = FileManager.default.isWritableFile(atPath: path)
            db = try Database(path: path, mode: writable ? .readWrite : .readOnly)
            let hasMeta = try db.query("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'")
            guard !hasMeta.isEmpty else { throw SessionFileError("\(path) is not a 3dstape session (no meta table)") }
            var m: [String: String] = [:]
            for row in try db.query("SELECT key, value FROM meta") {
                if let k = row[0].text, let v = row[1].text { m[k] = v }
            }
            meta = m
        } catch let e as SQLiteError {
            if e.isNotADatabase { throw SessionFileError("\(path) is not a 3dstape session: \(e.message)") }
            throw SessionFileError("\(path): \(e.message)")
        }
        guard meta["format"] == SessionSchema.format else { throw SessionFileError("\(path) is not a 3dstape session (format is \(meta["format"] ?? "missing"))") }
        guard let v = meta["schema_version"].flatMap(Int.init) else { throw SessionFileError("\(path): session has no schema_version") }
        guard v <= SessionSchema.version else {
            throw SessionFileError("\(path) has session schema v\(v), newer than this 3dstape reads (v\(SessionSchema.version)); upgrade 3dstape")
        }
    }

    /// `PRAGMA integrity_check` result.
    public func integrityCheck() throws -> [String] { try db.integrityCheck() }

    public var exchangeCount: Int {
        get throws { Int(try db.query("SELECT count(*) FROM exchanges")[0][0].integer ?? 0) }
    }

    /// Every exchange in time order, with bodies.
    public func exchanges() throws -> [StoredExchange] {
        try readExchanges(whereClause: "", [])
    }

    /// One exchange by its id.
    public func exchange(id: Int64) throws -> StoredExchange? {
        try readExchanges(whereClause: "WHERE e.id = ?", [.integer(id)]).first
    }

    /// The exchanges with these ids, in time order, with bodies.
    public func exchanges(ids: [Int64]) throws -> [StoredExchange] {
        guard !ids.isEmpty else { return [] }
        return try readExchanges(whereClause: "WHERE e.id IN (\(ids.map { String($0) }.joined(separator: ",")))", [])
    }

    /// The session's events (what is not an exchange: refusals, key-substitution decisions, backpressure), in order.
    public func events() throws -> [SessionNote] {
        try db.query("SELECT at, kind, detail FROM events ORDER BY at, id").map {
            SessionNote(at: $0[0].time ?? 0, kind: $0[1].text ?? "", detail: $0[2].text ?? "")
        }
    }

    /// Connection details by id.
    public func connections() throws -> [Int64: (client: String, tls: String?, sni: String?, alpn: String?)] {
        var out: [Int64: (String, String?, String?, String?)] = [:]
        for r in try db.query("SELECT id, client_addr, tls_version, sni, alpn FROM connections") {
            out[r[0].integer ?? 0] = (r[1].text ?? "", r[2].text, r[3].text, r[4].text)
        }
        return out
    }

    func readExchanges(whereClause: String, _ args: [SQLiteValue]) throws -> [StoredExchange] {
        let rows = try db.query("""
            SELECT e.id, e.connection_id, e.method, e.url, e.status, e.request_headers, e.request_body, e.request_body_compressed,
                   e.request_content_encoding, e.response_headers, e.response_body, e.response_body_compressed, e.response_content_encoding,
                   e.upstream, e.t_request_start, e.t_upstream_connect, e.t_tls_done, e.t_request_sent, e.t_first_byte, e.t_done,
                   e.error, e.client_abort_at
            FROM exchanges e \(whereClause) ORDER BY e.t_request_start, e.id
            """, args)
        var messagesByExchange: [Int64: [RecordedMessage]] = [:]
        let decryptionColumn = try hasColumn("messages", "decryption") ? "decryption" : "NULL"
        // Only the selected exchanges' messages (one exchange of a 100,000-exchange session reads a handful of rows).
        let only = whereClause.isEmpty ? "" : "WHERE exchange_id IN (SELECT e.id FROM exchanges e \(whereClause))"
        for m in try db.query("SELECT exchange_id, direction, location, message_type, json, \(decryptionColumn) FROM messages \(only) ORDER BY id", args) {
            messagesByExchange[m[0].integer ?? 0, default: []].append(
                RecordedMessage(direction: m[1].text ?? "", location: m[2].text ?? "", type: m[3].text,
                                json: m[4].text.flatMap { try? JSON.parse($0) }, decryption: m[5].text))
        }
        let replays = try replayAnnotations(only, args)
        let tunnels = try tunnelAnnotations(only, args)
        return rows.map { r -> StoredExchange in
            var x = makeExchange(r, messagesByExchange)
            x.replay = replays[x.id]
            x.tunnel = tunnels[x.id]
            // Messages stored as "the body" take their JSON from the body.
            x.messages = x.messages.map { m in
                guard m.json == nil, m.location == "body" else { return m }
                var filled = m
                filled.json = try? JSON.parse(m.direction == "request" ? x.requestBody : x.responseBody)
                return filled
            }
            return x
        }
    }

    /// What the replayer noted for each exchange (a replay session's `replay_matches`), for the rows `condition`
    /// (`WHERE …` or empty) selects; empty for a recording.
    func replayAnnotations(_ condition: String, _ args: [SQLiteValue] = []) throws -> [Int64: ReplayAnnotation] {
        guard try hasTable("replay_matches") else { return [:] }
        let faults = try hasColumn("replay_matches", "faults") ? "faults" : "NULL"
        let outcome = try hasColumn("replay_matches", "outcome") ? "outcome" : "NULL"
        var replays: [Int64: ReplayAnnotation] = [:]
        for m in try db.query("SELECT exchange_id, recorded_exchange_id, matched_by, miss, scheduled_delay_ms, actual_delay_ms, \(faults), \(outcome) "
                              + "FROM replay_matches \(condition)", args) {
            replays[m[0].integer ?? 0] = ReplayAnnotation(recordedExchangeID: m[1].integer, matchedBy: m[2].text, miss: m[3].text,
                                                          scheduledDelayMs: m[4].delayMs, actualDelayMs: m[5].delayMs, faults: m[6].text,
                                                          outcome: m[7].text)
        }
        return replays
    }

    /// The tunnels among the rows `condition` selects (empty for files before v4, which had none).
    func tunnelAnnotations(_ condition: String, _ args: [SQLiteValue] = []) throws -> [Int64: TunnelAnnotation] {
        guard try hasTable("tunnels") else { return [:] }
        var tunnels: [Int64: TunnelAnnotation] = [:]
        for t in try db.query("SELECT exchange_id, host, port, sni, alpn_offered, bytes_up, bytes_down, ended, decided_by FROM tunnels \(condition)", args) {
            tunnels[t[0].integer ?? 0] = TunnelAnnotation(host: t[1].text ?? "", port: Int(clamping: min(max(t[2].integer ?? 0, 0), 65535)),
                                                          sni: t[3].text, alpnOffered: t[4].text.map(ALPNOffer.read),
                                                          bytesUp: Int(clamping: max(t[5].integer ?? 0, 0)),
                                                          bytesDown: Int(clamping: max(t[6].integer ?? 0, 0)),
                                                          ended: t[7].text, decidedBy: t[8].text)
        }
        return tunnels
    }

    func hasTable(_ name: String) throws -> Bool {
        !(try db.query("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", [.text(name)]).isEmpty)
    }

    func hasColumn(_ table: String, _ column: String) throws -> Bool {
        try db.query("PRAGMA table_info(\(table))").contains { $0.count > 1 && $0[1].text == column }
    }

    func makeExchange(_ r: [SQLiteValue], _ messagesByExchange: [Int64: [RecordedMessage]]) -> StoredExchange {
        StoredExchange(
                id: r[0].integer ?? 0, connectionID: r[1].integer ?? 0, method: r[2].text ?? "", url: r[3].text ?? "",
                status: r[4].integer.map(Int.init), requestHeaders: SessionReader.headers(r[5].text),
                requestBody: SessionReader.body(r[6], compressed: r[7].integer == 1), requestContentEncoding: r[8].text,
                responseHeaders: SessionReader.headers(r[9].text), responseBody: SessionReader.body(r[10], compressed: r[11].integer == 1),
                responseContentEncoding: r[12].text, upstream: r[13].text, requestStart: r[14].time ?? 0, upstreamConnect: r[15].time,
                tlsDone: r[16].time, requestSent: r[17].time, firstByte: r[18].time, done: r[19].time, error: r[20].text,
                clientAbortAt: r[21].time,
                messages: messagesByExchange[r[0].integer ?? 0] ?? [])
    }

    static func headers(_ text: String?) -> [(String, String)] {
        guard let text, case let .array(items)? = try? JSON.parse(text) else { return [] }
        return items.compactMap { item in
            guard case let .array(pair) = item, pair.count == 2, let n = pair[0].stringValue, let v = pair[1].stringValue else { return nil }
            return (n, v)
        }
    }

    /// A stored body, decompressed when it was stored compressed.
    static func body(_ v: SQLiteValue, compressed: Bool) -> [UInt8] {
        guard let b = v.blob else { return [] }
        if compressed { return (try? Compression.decompress(b, format: .zlib)) ?? b }
        return b
    }

    /// The row for `3dstape ls`.
    public func summary() throws -> SessionSummary {
        let count = try exchangeCount
        let span = try db.query("SELECT min(t_request_start), max(coalesce(t_done, t_request_start)) FROM exchanges")[0]
        let tx = try db.query("SELECT final_trans_status, error_code FROM v_transactions")
        var tally: [String: Int] = [:]
        for t in tx {
            let key = t[0].text ?? (t[1].text.map { "Erro \($0)" } ?? "no result")
            tally[key, default: 0] += 1
        }
        let errors = try db.query("SELECT count(*) FROM exchanges WHERE error IS NOT NULL")[0][0].integer ?? 0
        var outcome = tally.sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }.joined(separator: " ")
        if errors > 0 { outcome += (outcome.isEmpty ? "" : " ") + "errors×\(errors)" }
        let duration: Double? = {
            guard let a = span[0].time, let b = span[1].time else { return nil }
            return b - a
        }()
        return SessionSummary(path: path, label: meta["label"] ?? "", created: meta["created_at"] ?? "", exchanges: count,
                              transactions: tx.count, outcome: outcome.isEmpty ? "-" : outcome, durationSeconds: duration)
    }
}

/// One row of a session's `events` table.
public struct SessionNote: Sendable, Equatable {
    public var at: Double
    public var kind: String
    public var detail: String
}

extension SQLiteValue {
    /// A stored time, clamped to the calendar (`Checked.storedTime`): a corrupted or hand-edited file (1e300, Inf) reads
    /// as a time that every consumer (HAR dates, JSON, diagrams) can write without trapping or writing `inf`.
    var time: Double? { real.map(Checked.storedTime) }

    /// A stored replay delay in milliseconds, clamped to 0 to 24 hours.
    var delayMs: Double? { real.map { Checked.clamp($0, to: 0...(CheckedDuration.maximum * 1000)) } }
}
