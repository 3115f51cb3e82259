internal import CSQLite

/// A SQLite failure: the result code and SQLite's own message (`sqlite3_errmsg`), plus the SQL at fault.
/// Bound values are never included, so card data cannot leak into logs.
public struct SQLiteError: Error, Equatable, CustomStringConvertible {
    /// The extended result code.
    public let code: Int32
    public let message: String
    public let sql: String?

    public init(code: Int32, message: String, sql: String? = nil) {
        self.code = code
        self.message = message
        self.sql = sql
    }

    /// The primary result code (SQLITE_BUSY, SQLITE_CORRUPT, SQLITE_NOTADB, ...).
    public var primaryCode: Int32 { code & 0xFF }

    /// True when another connection holds the lock (SQLITE_BUSY, SQLITE_LOCKED), after the busy timeout.
    public var isBusy: Bool { primaryCode == SQLITE_BUSY || primaryCode == SQLITE_LOCKED }

    /// True when the disk, or the file's size limit (`max_page_count`), is full (SQLITE_FULL).
    public var isFull: Bool { primaryCode == SQLITE_FULL }

    /// True when the file is not a database or is corrupt.
    public var isNotADatabase: Bool { primaryCode == SQLITE_NOTADB || primaryCode == SQLITE_CORRUPT }

    public var description: String {
        "SQLite error \(code): \(message)" + (sql.map { " (in: \($0.prefix(120)))" } ?? "")
    }
}

/// A value bound to or read from a statement.
public enum SQLiteValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    /// The integer, or nil.
    public var integer: Int64? { if case let .integer(v) = self { return v }; return nil }
    /// The text, or nil.
    public var text: String? { if case let .text(v) = self { return v }; return nil }
    /// The blob (or text bytes), or nil.
    public var blob: [UInt8]? {
        switch self {
        case let .blob(b): return b
        case let .text(t): return Array(t.utf8)
        default: return nil
        }
    }
    /// Whether SQLite is handed a pointer to this value's bytes (text, a blob).
    var isTextOrBlob: Bool {
        switch self {
        case .text, .blob: return true
        case .null, .integer, .real: return false
        }
    }
    /// The real (or integer as a real), or nil.
    public var real: Double? {
        switch self {
        case let .real(d): return d
        case let .integer(i): return Double(i)
        default: return nil
        }
    }
}

/// How to open a database file.
public enum OpenMode: Sendable {
    case readOnly, readWrite, readWriteCreate
}

/// One SQLite connection. Owned by one thread at a time; not Sendable.
public final class Database {
    let handle: OpaquePointer
    /// The file path.
    public let path: String

    /// SQLite's memory statistics turned off, once, before the library's first use (`sqlite3_config` must come before
    /// `sqlite3_initialize`, which the first open runs; later it is refused, harmlessly). 3dstape reads none of them
    /// (`sqlite3_memory_used`, a soft heap limit), and with them every SQLite allocation and free took a mutex and
    /// updated counters: the session writer paid ~2,000 instructions an exchange for that.
    private static let libraryConfigured: Void = { _ = tap_sqlite_config_no_memstatus() }()

    /// Opens (or creates) the file. A file that is not SQLite fails on first use with `isNotADatabase`.
    public init(path: String, mode: OpenMode = .readWriteCreate) throws(SQLiteError) {
        _ = Database.libraryConfigured
        var db: OpaquePointer?
        let flags: Int32
        switch mode {
        case .readOnly: flags = SQLITE_OPEN_READONLY
        case .readWrite: flags = SQLITE_OPEN_READWRITE
        case .readWriteCreate: flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        }
        let rc = sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_close_v2(db)
            throw SQLiteError(code: rc, message: "cannot open \(path): \(message)")
        }
        handle = db
        self.path = path
        sqlite3_extended_result_codes(db, 1)
        sqlite3_busy_timeout(db, 5000)
    }

    /// BEGIN IMMEDIATE, COMMIT and ROLLBACK, each compiled on first use and kept: the session writer runs a transaction per
    /// batch (often one exchange), and `sqlite3_exec` parsed both texts every time.
    private var transactionSteps: [OpaquePointer?] = [nil, nil, nil]

    private enum TransactionStep: Int {
        case begin, commit, rollback
        var sql: String { ["BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"][rawValue] }
    }

    deinit {
        for stmt in transactionSteps { sqlite3_finalize(stmt) } // NULL is a no-op
        sqlite3_close_v2(handle)
    }

    func error(_ rc: Int32, sql: String?) -> SQLiteError {
        SQLiteError(code: rc, message: String(cString: sqlite3_errmsg(handle)), sql: sql)
    }

    /// Runs one or more statements that return no rows.
    public func execute(_ sql: String) throws(SQLiteError) {
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc, sql: sql) }
    }

    /// Compiles one statement.
    public func prepare(_ sql: String) throws(SQLiteError) -> Statement {
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw error(rc, sql: sql) }
        return Statement(handle: stmt, database: self, sql: sql)
    }

    /// Runs `sql` with `bindings` and returns every row.
    public func query(_ sql: String, _ bindings: [SQLiteValue] = []) throws(SQLiteError) -> [[SQLiteValue]] {
        let s = try prepare(sql)
        try s.bind(bindings)
        var rows: [[SQLiteValue]] = []
        while try s.step() { rows.append(s.row) }
        return rows
    }

    /// Runs `sql` with `bindings` for its effect.
    public func run(_ sql: String, _ bindings: [SQLiteValue] = []) throws(SQLiteError) {
        let s = try prepare(sql)
        try s.bind(bindings)
        while try s.step() {}
    }

    /// Runs `body` inside BEGIN IMMEDIATE … COMMIT, rolling back if it throws.
    public func transaction<R>(_ body: () throws -> R) throws -> R {
        try run(.begin)
        do {
            let r = try body()
            try run(.commit)
            return r
        } catch {
            try? run(.rollback)
            throw error
        }
    }

    /// Runs one of the kept transaction statements (as `execute` would run its text).
    private func run(_ step: TransactionStep) throws(SQLiteError) {
        let stmt: OpaquePointer
        if let kept = transactionSteps[step.rawValue] {
            stmt = kept
        } else {
            var made: OpaquePointer?
            let rc = sqlite3_prepare_v3(handle, step.sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &made, nil)
            guard rc == SQLITE_OK, let made else { throw error(rc, sql: step.sql) }
            transactionSteps[step.rawValue] = made
            stmt = made
        }
        let rc = sqlite3_step(stmt)
        let failure = rc == SQLITE_DONE ? nil : error(rc, sql: step.sql) // the message read before the reset
        sqlite3_reset(stmt)
        if let failure { throw failure }
    }

    /// The rowid of the last insert on this connection.
    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Rows changed by the last statement.
    public var changes: Int { Int(sqlite3_changes(handle)) }

    /// `PRAGMA integrity_check`: ["ok"] for a sound file.
    public func integrityCheck() throws(SQLiteError) -> [String] {
        try query("PRAGMA integrity_check").compactMap { $0.first?.text }
    }

    /// The linked SQLite library version.
    public static var libraryVersion: String { String(cString: sqlite3_libversion()) }
}

/// A compiled statement, finalized when released.
public final class Statement {
    let handle: OpaquePointer
    let database: Database
    /// The SQL text.
    public let sql: String

    /// Whether every parameter holds NULL (none bound since the statement was made or `execute` cleared them): `execute`
    /// then neither clears them again nor binds its NULLs (the session writer's rows carry a dozen, and the two calls cost
    /// 2,200 instructions an exchange).
    private var parametersNull = true

    init(handle: OpaquePointer, database: Database, sql: String) {
        self.handle = handle
        self.database = database
        self.sql = sql
    }

    deinit { sqlite3_finalize(handle) }

    /// Binds values to parameters 1…n, after resetting the statement.
    public func bind(_ values: [SQLiteValue]) throws(SQLiteError) {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        parametersNull = false
        for (i, v) in values.enumerated() {
            let idx = Int32(i + 1)
            let rc: Int32
            switch v {
            case .null: rc = sqlite3_bind_null(handle, idx)
            case let .integer(n): rc = sqlite3_bind_int64(handle, idx, n)
            case let .real(d): rc = sqlite3_bind_double(handle, idx, d)
            case var .text(t):
                // By its length, not up to its first NUL (as `bindInPlace` does): text holding a NUL is stored whole.
                rc = t.withUTF8 { p in
                    sqlite3_bind_text64(handle, idx, UnsafeRawPointer(p.baseAddress ?? UnsafePointer(bitPattern: 1)!)
                        .assumingMemoryBound(to: CChar.self), UInt64(p.count), tap_sqlite_transient(), UInt8(SQLITE_UTF8))
                }
            case let .blob(b):
                rc = b.withUnsafeBytes { p in
                    sqlite3_bind_blob64(handle, idx, p.baseAddress ?? UnsafeRawPointer(bitPattern: 1), UInt64(p.count),
                                        tap_sqlite_transient())
                }
            }
            guard rc == SQLITE_OK else { throw database.error(rc, sql: sql) }
        }
    }

    /// Binds `values` to parameters 1…n and runs the statement to its end (an INSERT or UPDATE), SQLite reading the
    /// text and blobs where they are instead of copying them (SQLITE_STATIC): the bindings are cleared before this
    /// returns, while the values are still alive. For the session writer, whose rows carry kilobytes of bodies.
    public func execute(_ values: [SQLiteValue]) throws(SQLiteError) {
        sqlite3_reset(handle)
        if !parametersNull { sqlite3_clear_bindings(handle) }
        let rc = values.withUnsafeBufferPointer { v in
            // Numbers first, in one loop (SQLite copies them); a NULL is what each parameter holds already. Then the text
            // and blobs, each in its own scope.
            for (i, value) in v.enumerated() {
                let rc: Int32
                switch value {
                case let .integer(n): rc = sqlite3_bind_int64(handle, Int32(i + 1), n)
                case let .real(d): rc = sqlite3_bind_double(handle, Int32(i + 1), d)
                case .null, .text, .blob: continue
                }
                guard rc == SQLITE_OK else { return rc }
            }
            return bindInPlace(v, from: 0)
        }
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle) // no pointer into `values` stays with SQLite
        parametersNull = true
        guard rc == SQLITE_DONE || rc == SQLITE_ROW else { throw database.error(rc, sql: sql) }
    }

    /// Binds the text and blobs of `values[i...]` in place, one nested scope per value (each pointer is valid only inside
    /// its closure), and steps to the end inside the innermost; returns SQLite's last result code.
    private func bindInPlace(_ values: UnsafeBufferPointer<SQLiteValue>, from start: Int) -> Int32 {
        var i = start
        while i < values.count, !values[i].isTextOrBlob { i += 1 }
        guard i < values.count else {
            var rc = sqlite3_step(handle)
            while rc == SQLITE_ROW { rc = sqlite3_step(handle) }
            return rc
        }
        let idx = Int32(i + 1)
        func then(_ rc: Int32) -> Int32 { rc == SQLITE_OK ? bindInPlace(values, from: i + 1) : rc }
        switch values[i] {
        case .null, .integer, .real: preconditionFailure("only text and blobs are bound here")
        case var .text(t):
            return t.withUTF8 { p in
                then(sqlite3_bind_text64(handle, idx, UnsafeRawPointer(p.baseAddress ?? UnsafePointer(bitPattern: 1)!)
                    .assumingMemoryBound(to: CChar.self), UInt64(p.count), nil, UInt8(SQLITE_UTF8)))
            }
        case let .blob(b):
            return b.withUnsafeBytes { p in
                then(sqlite3_bind_blob64(handle, idx, p.baseAddress ?? UnsafeRawPointer(bitPattern: 1), UInt64(p.count), nil))
            }
        }
    }

    /// Advances; true when a row is available.
    public func step() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw database.error(rc, sql: sql)
        }
    }

    /// The current row's values.
    public var row: [SQLiteValue] {
        (0..<sqlite3_column_count(handle)).map { column(Int($0)) }
    }

    /// One column of the current row.
    public func column(_ i: Int) -> SQLiteValue {
        let c = Int32(i)
        switch sqlite3_column_type(handle, c) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, c))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, c))
        case SQLITE_TEXT:
            // By its length, not up to its first NUL: a text holding one (a URL from an imported HAR) comes back whole.
            guard let p = sqlite3_column_text(handle, c) else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: p, count: Int(sqlite3_column_bytes(handle, c))), as: UTF8.self))
        case SQLITE_BLOB:
            let n = Int(sqlite3_column_bytes(handle, c))
            guard n > 0, let p = sqlite3_column_blob(handle, c) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: p, count: n)))
        default: return .null
        }
    }
}
