import Foundation
import TapCompression
import TapCore
import TapSQLite

/// A recorded exchange as read back.
public struct StoredExchange: Sendable, HasExchangeTimeline {
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
    public var timeline: ExchangeTimeline
    /// (direction, location, messageType, JSON)
    public var messages: [RecordedMessage]
    /// In a replay session: what the live request matched and its delays.
    public var replay: ReplayAnnotation? = nil
    /// A CONNECT tunnelled without interception (`record --pass-through`): what was seen of it.
    public var tunnel: TunnelAnnotation? = nil

    /// Milliseconds from request start to done.
    public var durationMs: Double? { timeline.done.map { ($0 - timeline.requestStart) * 1000 } }
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
    /// The file's `schema_version`, checked: at most `SessionSchema.version`.
    public let schemaVersion: Int

    public init(path: String) throws {
        // The path and what the file says are quoted with their line breaks and controls escaped: a message the CLI
        // prints keeps its own line breaks, and a crafted `format` or file name could otherwise forge lines of it.
        let shown = TerminalText.escaped(path)
        guard FileManager.default.fileExists(atPath: path) else { throw SessionFileError("\(shown): no such file") }
        self.path = path
        do {
            // Read-write so that a WAL left by a killed recorder is recovered on open.
            let writable = FileManager.default.isWritableFile(atPath: path)
            db = try Database(path: path, mode: writable ? .readWrite : .readOnly)
            guard try db.hasTable(MetaTable.table.name) else { throw SessionFileError("\(shown) is not a 3dstape session (no meta table)") }
            // The reader queries these by name: a file that made one a view (which can run without end) is refused.
            let names = SessionReader.tableNames.map { "'\($0)'" }.joined(separator: ", ")
            if let view = try db.query("SELECT name FROM sqlite_master WHERE type = 'view' AND name IN (\(names))").first?.first?.text {
                throw SessionFileError("\(shown) is not a 3dstape session: its \(view) is a view, not a table")
            }
            var m: [String: String] = [:]
            for row in try db.rows("SELECT key, value FROM meta") {
                if let k = try? row.text(MetaTable.key), let v = try? row.text(MetaTable.value) { m[k] = v }
            }
            meta = m
        } catch let e as SQLiteError {
            if e.isNotADatabase { throw SessionFileError("\(shown) is not a 3dstape session: \(e.message)") }
            throw SessionFileError("\(shown): \(e.message)")
        }
        guard meta["format"] == SessionSchema.format else {
            throw SessionFileError("\(shown) is not a 3dstape session (format is \(meta["format"].map { TerminalText.abbreviated($0) } ?? "missing"))")
        }
        guard let versionText = meta["schema_version"] else { throw SessionFileError("\(shown): session has no schema_version") }
        // A version past Int's range is still a newer one.
        guard let v = Int(versionText) ?? (!versionText.isEmpty && versionText.utf8.allSatisfy { $0 &- 0x30 <= 9 } ? Int.max : nil) else {
            throw SessionFileError("\(shown): schema_version \(TerminalText.abbreviated(versionText)) is not a version number")
        }
        guard v <= SessionSchema.version else {
            let said = v == Int.max ? TerminalText.abbreviated(versionText) : String(v)
            throw SessionFileError("\(shown) has session schema v\(said), newer than this 3dstape reads (v\(SessionSchema.version)); upgrade 3dstape")
        }
        schemaVersion = v
    }

    /// The tables the reader queries by name (`SessionTables.swift`).
    static let tableNames = [MetaTable.table, ConnectionsTable.table, ExchangesTable.table, MessagesTable.table, EventsTable.table,
                             ReplayMatchesTable.table, TunnelsTable.table].map(\.name)

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
        let read = SessionReader.noteReader
        return try db.rows("SELECT \(read.selectList()) FROM events ORDER BY at, id").map(read.decode)
    }

    static let noteReader = RowReader([EventsTable.at, EventsTable.kind, EventsTable.detail]) { r in
        SessionNote(at: try r.time(EventsTable.at) ?? 0, kind: try r.text(EventsTable.kind) ?? "", detail: try r.text(EventsTable.detail) ?? "")
    }

    /// Connection details by id.
    public func connections() throws -> [Int64: (client: String, tls: String?, sni: String?, alpn: String?)] {
        var out: [Int64: (String, String?, String?, String?)] = [:]
        let read = SessionReader.connectionReader
        for r in try db.rows("SELECT \(read.selectList()) FROM connections") {
            let c = try read.decode(r)
            out[c.id] = (c.client, c.tls, c.sni, c.alpn)
        }
        return out
    }

    static let connectionReader = RowReader([ConnectionsTable.id, ConnectionsTable.clientAddr, ConnectionsTable.tlsVersion,
                                             ConnectionsTable.sni, ConnectionsTable.alpn]) { r in
        (id: try r.integer(ConnectionsTable.id) ?? 0, client: try r.text(ConnectionsTable.clientAddr) ?? "",
         tls: try r.text(ConnectionsTable.tlsVersion), sni: try r.text(ConnectionsTable.sni), alpn: try r.text(ConnectionsTable.alpn))
    }

    func readExchanges(whereClause: String, _ args: [SQLiteValue]) throws -> [StoredExchange] {
        let read = SessionReader.exchangeReader
        let rows = try db.rows("SELECT \(read.selectList(["exchanges": "e"])) FROM exchanges e \(whereClause) ORDER BY e.t_request_start, e.id", args)
        var messagesByExchange: [Int64: [RecordedMessage]] = [:]
        // Only the selected exchanges' messages (one exchange of a 100,000-exchange session reads a handful of rows).
        let only = whereClause.isEmpty ? "" : "WHERE exchange_id IN (SELECT e.id FROM exchanges e \(whereClause))"
        let readMessage = SessionReader.messageReader
        for m in try db.rows("SELECT \(readMessage.selectList(absent: try absentColumns(MessagesTable.table))) FROM messages \(only) ORDER BY id", args) {
            let (exchangeID, message) = try readMessage.decode(m)
            messagesByExchange[exchangeID, default: []].append(message)
        }
        let replays = try replayAnnotations(only, args)
        let tunnels = try tunnelAnnotations(only, args)
        return try rows.map { r -> StoredExchange in
            var x = try read.decode(r)
            x.messages = messagesByExchange[x.id] ?? []
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

    /// The columns of `table` that this file lacks (an older schema's), to be selected as NULL.
    func absentColumns(_ table: Table) throws -> Set<String> {
        let present = Set(try db.rows("PRAGMA table_info(\(table.name))").compactMap { try? $0.text("name") })
        return Set(table.columns.map(\.name).filter { !present.contains($0) })
    }

    static let messageReader = RowReader([MessagesTable.exchangeID, MessagesTable.direction, MessagesTable.location, MessagesTable.messageType,
                                          MessagesTable.json, MessagesTable.decryption]) { m in
        (try m.integer(MessagesTable.exchangeID) ?? 0,
         RecordedMessage(direction: try m.text(MessagesTable.direction) ?? "", location: try m.text(MessagesTable.location) ?? "",
                         type: try m.text(MessagesTable.messageType), json: try m.text(MessagesTable.json).flatMap { try? JSON.parse($0) },
                         decryption: try m.text(MessagesTable.decryption)))
    }

    /// What the replayer noted for each exchange (a replay session's `replay_matches`), for the rows `condition`
    /// (`WHERE …` or empty) selects; empty for a recording.
    func replayAnnotations(_ condition: String, _ args: [SQLiteValue] = []) throws -> [Int64: ReplayAnnotation] {
        guard try db.hasTable(ReplayMatchesTable.table.name) else { return [:] }
        let read = SessionReader.replayReader
        var replays: [Int64: ReplayAnnotation] = [:]
        for m in try db.rows("SELECT \(read.selectList(absent: try absentColumns(ReplayMatchesTable.table))) FROM replay_matches \(condition)", args) {
            let (id, annotation) = try read.decode(m)
            replays[id] = annotation
        }
        return replays
    }

    static let replayReader: RowReader<(Int64, ReplayAnnotation)> = {
        typealias R = ReplayMatchesTable
        return RowReader([R.exchangeID, R.recordedExchangeID, R.matchedBy, R.miss, R.scheduledDelayMs, R.actualDelayMs, R.faults, R.outcome]) { m in
            (try m.integer(R.exchangeID) ?? 0,
             ReplayAnnotation(recordedExchangeID: try m.integer(R.recordedExchangeID), matchedBy: try m.text(R.matchedBy), miss: try m.text(R.miss),
                              scheduledDelayMs: try m.delayMs(R.scheduledDelayMs), actualDelayMs: try m.delayMs(R.actualDelayMs),
                              faults: try m.text(R.faults), outcome: try m.text(R.outcome)))
        }
    }()

    /// The tunnels among the rows `condition` selects (empty for files before v4, which had none).
    func tunnelAnnotations(_ condition: String, _ args: [SQLiteValue] = []) throws -> [Int64: TunnelAnnotation] {
        guard try db.hasTable(TunnelsTable.table.name) else { return [:] }
        let read = SessionReader.tunnelReader
        var tunnels: [Int64: TunnelAnnotation] = [:]
        for t in try db.rows("SELECT \(read.selectList()) FROM tunnels \(condition)", args) {
            let (id, annotation) = try read.decode(t)
            tunnels[id] = annotation
        }
        return tunnels
    }

    static let tunnelReader: RowReader<(Int64, TunnelAnnotation)> = {
        typealias T = TunnelsTable
        return RowReader(T.table.columns) { t in
            (try t.integer(T.exchangeID) ?? 0,
             TunnelAnnotation(host: try t.text(T.host) ?? "", port: Int(clamping: min(max(try t.integer(T.port) ?? 0, 0), 65535)),
                              sni: try t.text(T.sni), alpnOffered: try t.text(T.alpnOffered).map(ALPNOffer.read),
                              bytesUp: Int(clamping: max(try t.integer(T.bytesUp) ?? 0, 0)),
                              bytesDown: Int(clamping: max(try t.integer(T.bytesDown) ?? 0, 0)),
                              ended: try t.text(T.ended), decidedBy: try t.text(T.decidedBy)))
        }
    }()

    /// An exchange row without its messages, replay or tunnel annotations (filled in by `readExchanges`).
    static let exchangeReader: RowReader<StoredExchange> = {
        typealias E = ExchangesTable
        return RowReader([E.id, E.connectionID, E.method, E.url, E.status, E.requestHeaders, E.requestBody, E.requestBodyCompressed,
                          E.requestContentEncoding, E.responseHeaders, E.responseBody, E.responseBodyCompressed, E.responseContentEncoding,
                          E.upstream] + E.timeline) { r in
            StoredExchange(
                id: try r.integer(E.id) ?? 0, connectionID: try r.integer(E.connectionID) ?? 0, method: try r.text(E.method) ?? "",
                url: try r.text(E.url) ?? "", status: try r.integer(E.status).map(Int.init),
                requestHeaders: SessionReader.headers(try r.text(E.requestHeaders)),
                requestBody: SessionReader.body(try r.value(E.requestBody), compressed: try r.integer(E.requestBodyCompressed) == 1),
                requestContentEncoding: try r.text(E.requestContentEncoding),
                responseHeaders: SessionReader.headers(try r.text(E.responseHeaders)),
                responseBody: SessionReader.body(try r.value(E.responseBody), compressed: try r.integer(E.responseBodyCompressed) == 1),
                responseContentEncoding: try r.text(E.responseContentEncoding), upstream: try r.text(E.upstream),
                timeline: try r.timeline(), messages: [])
        }
    }()

    static func headers(_ text: String?) -> [(String, String)] {
        guard let text, case let .array(items)? = try? JSON.parse(text) else { return [] }
        return items.compactMap { item in
            guard case let .array(pair) = item, pair.count == 2, let n = pair[0].stringValue, let v = pair[1].stringValue else { return nil }
            return (n, v)
        }
    }

    /// A stored body, decompressed when it was stored compressed: to at most `maxInflation` times its stored size (and
    /// 64 MiB), so that what a session's bodies take in memory is bounded by the file's size. A body that would inflate
    /// further (a zlib bomb: 64 KB stored as 63 MiB of zeros in every row took `show` to 5 GB and `web` down; hostile-file
    /// helper) reads as it is stored, as a body that does not decompress does.
    static func body(_ v: SQLiteValue, compressed: Bool) -> [UInt8] {
        guard let b = v.blob else { return [] }
        if compressed {
            let limit = Swift.min(64 << 20, Swift.max(b.count, 1).multipliedReportingOverflow(by: maxInflation).partialValue)
            return (try? Compression.decompress(b, format: .zlib, maxOutput: limit)) ?? b
        }
        return b
    }

    /// How many times its stored size a compressed body may decompress to. The writer compresses bodies over 8 KiB
    /// (JSON and HTML shrink 3 to 20 times); zlib reaches about 1,000 times only on runs of one byte.
    static let maxInflation = 100

    /// The row for `3dstape ls`.
    public func summary() throws -> SessionSummary {
        let count = try exchangeCount
        let span = try db.rows("SELECT min(t_request_start) AS first, max(coalesce(t_done, t_request_start)) AS last FROM exchanges")[0]
        // The view's query, not the file's view: a file can define `v_transactions` as anything (one that never ends hung
        // `ls` and `web`; hostile-file helper).
        let tx = try db.rows("SELECT final_trans_status, error_code FROM (\(SessionSchema.transactionsQuery))")
        var tally: [String: Int] = [:]
        for t in tx {
            let key = try t.text("final_trans_status") ?? (try t.text("error_code").map { "Erro \($0)" } ?? "no result")
            tally[key, default: 0] += 1
        }
        let errors = try db.query("SELECT count(*) FROM exchanges WHERE error IS NOT NULL")[0][0].integer ?? 0
        var outcome = tally.sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }.joined(separator: " ")
        if errors > 0 { outcome += (outcome.isEmpty ? "" : " ") + "errors×\(errors)" }
        let duration: Double? = try {
            guard let a = try span.real("first").map(Checked.storedTime), let b = try span.real("last").map(Checked.storedTime) else { return nil }
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
