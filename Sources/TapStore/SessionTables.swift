import TapCore
import TapSQLite

/// One column of a session table as the file declares it: its table, name, SQLite type and constraints. The schema
/// (`CREATE TABLE`), the writer's inserts and the reader's selects are all made from these, so a column is named once.
/// A class, each column one shared instance: the writer names 26 of them per exchange, and a reference is cheaper to pass
/// and to compare (by identity) than four strings.
final class Column: Sendable, Hashable {
    static func == (a: Column, b: Column) -> Bool { a === b }
    func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    let table: String
    let name: String
    let type: String
    let constraints: String

    init(_ table: String, _ name: String, _ type: String, _ constraints: String = "") {
        self.table = table
        self.name = name
        self.type = type
        self.constraints = constraints
    }

    /// The column as `CREATE TABLE` and `ALTER TABLE … ADD COLUMN` declare it.
    var definition: String { constraints.isEmpty ? "\(name) \(type)" : "\(name) \(type) \(constraints)" }
}

/// A session table: its name and its columns in the order of the file (new columns only ever go at the end).
struct Table: Sendable {
    let name: String
    let columns: [Column]
    /// `CREATE TABLE` on one line (the small `meta` and `events`, as the first files wrote them) or one column a line.
    let oneLine: Bool

    init(_ name: String, _ columns: [Column], oneLine: Bool = false) {
        self.name = name
        self.columns = columns
        self.oneLine = oneLine
    }

    /// The `CREATE TABLE` statement, with the same text as the files written before the columns were declared here.
    var create: String {
        let defs = columns.map(\.definition)
        if oneLine { return "CREATE TABLE \(name) (\(defs.joined(separator: ", ")));" }
        return "CREATE TABLE \(name) (\n" + defs.map { "    " + $0 }.joined(separator: ",\n") + "\n);"
    }
}

extension Database {
    /// Whether the file has a table (not a view) of this name.
    func hasTable(_ name: String) throws(SQLiteError) -> Bool {
        try !query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [.text(name)]).isEmpty
    }

    /// Whether the table `table` has a column of this name.
    func hasColumn(_ table: String, _ column: String) throws(SQLiteError) -> Bool {
        try !query("SELECT 1 FROM pragma_table_info(?) WHERE name = ?", [.text(table), .text(column)]).isEmpty
    }
}

extension Row {
    func text(_ c: Column) throws(RowError) -> String? { try text(c.name) }
    func integer(_ c: Column) throws(RowError) -> Int64? { try integer(c.name) }
    func real(_ c: Column) throws(RowError) -> Double? { try real(c.name) }
    func value(_ c: Column) throws(RowError) -> SQLiteValue { try value(c.name) }

    /// A stored time, clamped to the calendar (`SQLiteValue.time`).
    func time(_ c: Column) throws(RowError) -> Double? { try real(c.name).map(Checked.storedTime) }
    /// An exchange's timeline from the `ExchangesTable.timeline` columns (a missing request start reads as 0).
    func timeline() throws(RowError) -> ExchangeTimeline {
        typealias E = ExchangesTable
        return ExchangeTimeline(requestStart: try time(E.tRequestStart) ?? 0, upstreamConnect: try time(E.tUpstreamConnect),
                                tlsDone: try time(E.tTLSDone), requestSent: try time(E.tRequestSent), firstByte: try time(E.tFirstByte),
                                done: try time(E.tDone), error: try text(E.error), clientAbortAt: try time(E.clientAbortAt))
    }
    /// A stored replay delay in milliseconds, clamped (`SQLiteValue.delayMs`).
    func delayMs(_ c: Column) throws(RowError) -> Double? { try real(c.name).flatMap { SQLiteValue.real($0).delayMs } }
}

/// A query's select list and the decoder of its rows, made from one list of columns: the decoder reads each row by the
/// columns' names, so a column the select lacks fails with a `RowError` naming it (`SessionTablesTests` drops each
/// column of every reader in turn and expects exactly that error).
struct RowReader<Value>: Sendable {
    let columns: [Column]
    let decode: @Sendable (Row) throws -> Value

    init(_ columns: [Column], decode: @Sendable @escaping (Row) throws -> Value) {
        self.columns = columns
        self.decode = decode
    }

    /// `alias.name AS name, …` for `SELECT`: `aliases` maps a table to its alias in the query (none: the bare name);
    /// a column in `absent` (one an older file lacks) is selected as `NULL AS name`.
    func selectList(_ aliases: [String: String] = [:], absent: Set<String> = []) -> String {
        columns.map { c in
            if absent.contains(c.name) { return "NULL AS \(c.name)" }
            return aliases[c.table].map { "\($0).\(c.name) AS \(c.name)" } ?? c.name
        }.joined(separator: ", ")
    }
}

/// The values of one row being written, each set beside its column (`RowWrite.insert { row in row.set(column, value) }`).
/// Checks, as it goes, that the columns come in the order of the statement already prepared; any other order (or the
/// first row) has the statement made again from the columns given. Allocates nothing per row in the writer's steady state.
struct RowValues {
    fileprivate let prepared: [Column]
    fileprivate var matches: Bool
    fileprivate var values: [SQLiteValue]
    /// The columns given, kept only once they differ from `prepared`.
    fileprivate var columns: [Column] = []

    @inline(__always)
    mutating func set(_ column: Column, _ value: SQLiteValue) {
        if matches, !(values.count < prepared.count && prepared[values.count] === column) {
            matches = false
            columns = Array(prepared[0..<values.count])
        }
        if !matches { columns.append(column) }
        values.append(value)
    }
}

/// An insert (or an update by key) whose SQL is made from the columns its caller names beside each value, so the column
/// list and the bound values cannot drift apart. Prepared on first use; a call naming other columns (or another order)
/// prepares again.
final class RowWrite {
    enum Kind {
        case insert
        /// `UPDATE … SET … WHERE key = ?`, the key's value bound last.
        case update(key: Column)
    }

    let table: Table
    let kind: Kind
    let db: Database
    private var statement: Statement?
    private var columns: [Column] = []
    /// The value buffer, kept between rows for its capacity.
    private var buffer: [SQLiteValue] = []

    init(_ kind: Kind, into table: Table, _ db: Database) {
        self.kind = kind
        self.table = table
        self.db = db
    }

    /// Inserts one row, each value beside its column.
    func insert(_ row: [(Column, SQLiteValue)]) throws {
        try run(extra: nil) { for (c, v) in row { $0.set(c, v) } }
    }

    /// Inserts the row `build` sets (the writer's per-exchange rows: no array of pairs made).
    func insert(_ build: (inout RowValues) -> Void) throws {
        try run(extra: nil, build)
    }

    /// Sets these columns in the row whose key is `key`.
    func update(_ row: [(Column, SQLiteValue)], key: SQLiteValue) throws {
        try run(extra: key) { for (c, v) in row { $0.set(c, v) } }
    }

    private func run(extra: SQLiteValue?, _ build: (inout RowValues) -> Void) throws {
        var row = RowValues(prepared: columns, matches: statement != nil, values: buffer)
        buffer = []
        row.values.removeAll(keepingCapacity: true)
        build(&row)
        if !row.matches || row.values.count != columns.count {
            columns = row.matches ? Array(columns[0..<row.values.count]) : row.columns
            let names = columns.map(\.name)
            switch kind {
            case .insert:
                statement = try db.prepare("INSERT INTO \(table.name)(\(names.joined(separator: ", "))) VALUES (\(names.map { _ in "?" }.joined(separator: ",")))")
            case let .update(key):
                statement = try db.prepare("UPDATE \(table.name) SET \(names.map { "\($0) = ?" }.joined(separator: ", ")) WHERE \(key.name) = ?")
            }
        }
        if let extra { row.values.append(extra) }
        defer {
            row.values.removeAll(keepingCapacity: true) // no body stays referenced between rows
            buffer = row.values
        }
        try statement!.execute(row.values) // bodies read in place, not copied into SQLite first
    }
}

// MARK: - The tables

/// `meta`: key and value.
enum MetaTable {
    static let key = Column("meta", "key", "TEXT", "PRIMARY KEY")
    static let value = Column("meta", "value", "TEXT", "NOT NULL")
    static let table = Table("meta", [key, value], oneLine: true)
}

/// `connections`: one row per client connection.
enum ConnectionsTable {
    static func c(_ n: String, _ t: String, _ k: String = "") -> Column { Column("connections", n, t, k) }
    static let id = c("id", "INTEGER", "PRIMARY KEY")
    static let clientAddr = c("client_addr", "TEXT", "NOT NULL")
    static let acceptedAt = c("accepted_at", "REAL", "NOT NULL")
    static let mode = c("mode", "TEXT", "NOT NULL")
    static let upstream = c("upstream", "TEXT")
    static let tlsVersion = c("tls_version", "TEXT")
    static let tlsCipher = c("tls_cipher", "TEXT")
    static let sni = c("sni", "TEXT")
    static let alpn = c("alpn", "TEXT")
    static let closedAt = c("closed_at", "REAL")
    /// v4.
    static let alpnOffered = c("alpn_offered", "TEXT")
    static let table = Table("connections", [id, clientAddr, acceptedAt, mode, upstream, tlsVersion, tlsCipher, sni, alpn, closedAt, alpnOffered])
}

/// `exchanges`: one row per request and its response.
enum ExchangesTable {
    static func c(_ n: String, _ t: String, _ k: String = "") -> Column { Column("exchanges", n, t, k) }
    static let id = c("id", "INTEGER", "PRIMARY KEY")
    static let connectionID = c("connection_id", "INTEGER", "NOT NULL REFERENCES connections(id)")
    static let seq = c("seq", "INTEGER", "NOT NULL")
    static let method = c("method", "TEXT", "NOT NULL")
    static let url = c("url", "TEXT", "NOT NULL")
    static let host = c("host", "TEXT")
    static let path = c("path", "TEXT")
    static let requestHeaders = c("request_headers", "TEXT", "NOT NULL")
    static let requestBody = c("request_body", "BLOB")
    static let requestBodyCompressed = c("request_body_compressed", "INTEGER", "NOT NULL DEFAULT 0")
    static let requestContentEncoding = c("request_content_encoding", "TEXT")
    static let requestWireSize = c("request_wire_size", "INTEGER", "NOT NULL DEFAULT 0")
    static let status = c("status", "INTEGER")
    static let responseHeaders = c("response_headers", "TEXT")
    static let responseBody = c("response_body", "BLOB")
    static let responseBodyCompressed = c("response_body_compressed", "INTEGER", "NOT NULL DEFAULT 0")
    static let responseContentEncoding = c("response_content_encoding", "TEXT")
    static let responseWireSize = c("response_wire_size", "INTEGER", "NOT NULL DEFAULT 0")
    static let upstream = c("upstream", "TEXT")
    static let tRequestStart = c("t_request_start", "REAL", "NOT NULL")
    static let tUpstreamConnect = c("t_upstream_connect", "REAL")
    static let tTLSDone = c("t_tls_done", "REAL")
    static let tRequestSent = c("t_request_sent", "REAL")
    static let tFirstByte = c("t_first_byte", "REAL")
    static let tDone = c("t_done", "REAL")
    static let error = c("error", "TEXT")
    static let clientAbortAt = c("client_abort_at", "REAL")
    /// The columns of an `ExchangeTimeline`, as `Row.timeline()` reads them.
    static let timeline = [tRequestStart, tUpstreamConnect, tTLSDone, tRequestSent, tFirstByte, tDone, error, clientAbortAt]
    static let table = Table("exchanges", [
        id, connectionID, seq, method, url, host, path, requestHeaders, requestBody, requestBodyCompressed, requestContentEncoding,
        requestWireSize, status, responseHeaders, responseBody, responseBodyCompressed, responseContentEncoding, responseWireSize, upstream,
        tRequestStart, tUpstreamConnect, tTLSDone, tRequestSent, tFirstByte, tDone, error, clientAbortAt,
    ])
}

/// `messages`: the 3DS messages found in an exchange.
enum MessagesTable {
    static func c(_ n: String, _ t: String, _ k: String = "") -> Column { Column("messages", n, t, k) }
    static let id = c("id", "INTEGER", "PRIMARY KEY")
    static let exchangeID = c("exchange_id", "INTEGER", "NOT NULL REFERENCES exchanges(id)")
    static let direction = c("direction", "TEXT", "NOT NULL CHECK (direction IN ('request', 'response'))")
    static let location = c("location", "TEXT", "NOT NULL")
    static let messageType = c("message_type", "TEXT")
    static let messageVersion = c("message_version", "TEXT")
    static let threeDSServerTransID = c("three_ds_server_trans_id", "TEXT")
    static let dsTransID = c("ds_trans_id", "TEXT")
    static let acsTransID = c("acs_trans_id", "TEXT")
    static let sdkTransID = c("sdk_trans_id", "TEXT")
    static let transStatus = c("trans_status", "TEXT")
    static let errorCode = c("error_code", "TEXT")
    static let json = c("json", "TEXT")
    /// v2.
    static let decryption = c("decryption", "TEXT")
    static let table = Table("messages", [
        id, exchangeID, direction, location, messageType, messageVersion, threeDSServerTransID, dsTransID, acsTransID, sdkTransID,
        transStatus, errorCode, json, decryption,
    ])
}

/// `events`: what is not an exchange (refusals, key-substitution decisions, backpressure).
enum EventsTable {
    static let id = Column("events", "id", "INTEGER", "PRIMARY KEY")
    static let at = Column("events", "at", "REAL", "NOT NULL")
    static let kind = Column("events", "kind", "TEXT", "NOT NULL")
    static let detail = Column("events", "detail", "TEXT")
    static let table = Table("events", [id, at, kind, detail], oneLine: true)
}

/// `replay_matches` (v3): what a replayed exchange matched, its scheduled and actual delay.
enum ReplayMatchesTable {
    static func c(_ n: String, _ t: String, _ k: String = "") -> Column { Column("replay_matches", n, t, k) }
    static let exchangeID = c("exchange_id", "INTEGER", "PRIMARY KEY REFERENCES exchanges(id)")
    static let recordedExchangeID = c("recorded_exchange_id", "INTEGER")
    static let matchedBy = c("matched_by", "TEXT")
    static let miss = c("miss", "TEXT")
    static let scheduledDelayMs = c("scheduled_delay_ms", "REAL")
    static let actualDelayMs = c("actual_delay_ms", "REAL")
    static let faults = c("faults", "TEXT")
    static let outcome = c("outcome", "TEXT")
    static let table = Table("replay_matches", [exchangeID, recordedExchangeID, matchedBy, miss, scheduledDelayMs, actualDelayMs, faults, outcome])
}

/// `tunnels` (v4): a CONNECT tunnelled without interception.
enum TunnelsTable {
    static func c(_ n: String, _ t: String, _ k: String = "") -> Column { Column("tunnels", n, t, k) }
    static let exchangeID = c("exchange_id", "INTEGER", "PRIMARY KEY REFERENCES exchanges(id)")
    static let host = c("host", "TEXT", "NOT NULL")
    static let port = c("port", "INTEGER", "NOT NULL")
    static let sni = c("sni", "TEXT")
    static let alpnOffered = c("alpn_offered", "TEXT")
    static let bytesUp = c("bytes_up", "INTEGER", "NOT NULL DEFAULT 0")
    static let bytesDown = c("bytes_down", "INTEGER", "NOT NULL DEFAULT 0")
    static let ended = c("ended", "TEXT")
    static let decidedBy = c("decided_by", "TEXT")
    static let table = Table("tunnels", [exchangeID, host, port, sni, alpnOffered, bytesUp, bytesDown, ended, decidedBy])
}
