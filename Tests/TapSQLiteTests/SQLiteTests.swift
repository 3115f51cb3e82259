import Foundation
import Testing
@testable import TapSQLite

@Suite struct SQLiteTests {
    func tempPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-sqlite-\(UUID().uuidString).db").path
    }

    @Test func writesAndReadsEveryType() throws {
        let path = tempPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let db = try Database(path: path)
        try db.execute("PRAGMA journal_mode=WAL; CREATE TABLE t(i INTEGER, r REAL, s TEXT, b BLOB, n)")
        let blob = (0..<100_000).map { UInt8($0 % 251) }
        try db.transaction {
            for i in 0..<10 {
                try db.run("INSERT INTO t VALUES(?,?,?,?,?)", [.integer(Int64(i)), .real(1.5), .text("é\(i)"), .blob(blob), .null])
            }
        }
        let rows = try db.query("SELECT i, r, s, b, n FROM t ORDER BY i")
        #expect(rows.count == 10)
        #expect(rows[3] == [.integer(3), .real(1.5), .text("é3"), .blob(blob), .null])
        #expect(try db.integrityCheck() == ["ok"])
    }

    /// Text is read back by its length: one holding a NUL byte (a URL in an imported HAR) comes back whole, where it was
    /// cut at the NUL; empty text stays empty.
    @Test func textWithANulByteIsReadWhole() throws {
        let path = tempPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let db = try Database(path: path)
        try db.execute("CREATE TABLE t(s TEXT)")
        try db.run("INSERT INTO t VALUES(?)", [.text("http://h/a\u{0}b?c=é")])
        try db.run("INSERT INTO t VALUES(?)", [.text("")])
        #expect(try db.query("SELECT s FROM t ORDER BY rowid") == [[.text("http://h/a\u{0}b?c=é")], [.text("")]])
        #expect(try db.query("SELECT length(CAST(s AS BLOB)) FROM t ORDER BY rowid") == [[.integer(17)], [.integer(0)]])
    }

    /// `execute` binds in place (no copy): what it stores is what `bind` stores, empty text and blobs stay empty (not
    /// NULL), text keeps an embedded NUL byte, and the values can go as soon as it returns.
    @Test func executeInPlaceStoresWhatBindStores() throws {
        let path = tempPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let db = try Database(path: path)
        try db.execute("PRAGMA journal_mode=WAL; CREATE TABLE t(i INTEGER, r REAL, s TEXT, b BLOB, n)")
        let insert = try db.prepare("INSERT INTO t VALUES(?,?,?,?,?)")
        var rows: [[SQLiteValue]] = []
        try db.transaction {
            for i in 0..<200 {
                // Fresh values each time, dropped right after: SQLite must have copied them into the page by then.
                let text = i % 3 == 0 ? "" : String(repeating: "é€\(i)", count: i)
                let blob = i % 5 == 0 ? [] : (0..<(i * 97)).map { UInt8(($0 &* 31 &+ i) % 256) }
                let row: [SQLiteValue] = [.integer(Int64(i)), .real(Double(i) / 4), .text(text), .blob(blob), i % 2 == 0 ? .null : .integer(7)]
                try insert.execute(row)
                rows.append(row)
            }
        }
        let stored = try db.query("SELECT i, r, s, b, n FROM t ORDER BY i")
        #expect(stored == rows)
        #expect(try db.query("SELECT count(*) FROM t WHERE s IS NULL OR b IS NULL") == [[.integer(0)]])
        try insert.execute([.integer(1000), .null, .text("a\u{0}b"), .null, .null])
        #expect(try db.query("SELECT length(CAST(s AS BLOB)) FROM t WHERE i = 1000") == [[.integer(3)]])
        try db.execute("CREATE TABLE u(x NOT NULL)")
        let refused = try db.prepare("INSERT INTO u VALUES(?)")
        let error = #expect(throws: SQLiteError.self) { try refused.execute([.null]) }
        #expect(error?.message.contains("NOT NULL") == true, "SQLite's own message")
        try refused.execute([.text("ok")]) // the statement is usable again
        #expect(try db.integrityCheck() == ["ok"])
    }

    /// A NULL given to `execute` is stored as NULL whatever the statement held before: after a `bind` of other values,
    /// and after an `execute` that bound them (`execute` binds no NULLs itself: it relies on the parameters being clear).
    @Test func executeStoresNullsAfterBindAndAfterExecute() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t(k INTEGER, a, b, c)")
        let insert = try db.prepare("INSERT INTO t VALUES(?,?,?,?)")
        try insert.bind([.integer(0), .text("bound"), .integer(5), .real(0.5)])
        while try insert.step() {}
        try insert.execute([.integer(1), .null, .null, .null])
        try insert.execute([.integer(2), .blob([1, 2]), .text("x"), .integer(9)])
        try insert.execute([.integer(3), .null, .null, .null])
        #expect(try db.query("SELECT k, a, b, c FROM t ORDER BY k") == [
            [.integer(0), .text("bound"), .integer(5), .real(0.5)], [.integer(1), .null, .null, .null],
            [.integer(2), .blob([1, 2]), .text("x"), .integer(9)], [.integer(3), .null, .null, .null],
        ])
    }

    @Test func errorsCarrySQLiteMessages() throws {
        let db = try Database(path: ":memory:")
        #expect { try db.execute("SELEC 1") } throws: { error in
            let e = error as! SQLiteError
            return e.message.contains("syntax error") && e.sql == "SELEC 1"
        }
        try db.execute("CREATE TABLE u(x UNIQUE)")
        try db.run("INSERT INTO u VALUES(1)")
        #expect { try db.run("INSERT INTO u VALUES(?)", [.integer(1)]) } throws: { error in
            (error as! SQLiteError).message.contains("UNIQUE constraint failed") && !"\(error)".contains("VALUES(1)")
        }
    }

    @Test func rollsBackOnError() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t(x)")
        struct Boom: Error {}
        #expect(throws: Boom.self) { try db.transaction { try db.run("INSERT INTO t VALUES(1)"); throw Boom() } }
        #expect(try db.query("SELECT count(*) FROM t") == [[.integer(0)]])
    }

    /// `transaction` keeps its BEGIN IMMEDIATE, COMMIT and ROLLBACK compiled between uses: many transactions in a row
    /// commit, a rollback after them undoes only its own, a lock held by another connection fails BEGIN IMMEDIATE as
    /// busy (naming the statement, as `execute` did), and the kept statements let the file leave WAL mode and close.
    @Test func keptTransactionStatementsCommitRollBackAndReportBusy() throws {
        let path = tempPath()
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        do {
            let db = try Database(path: path)
            try db.execute("PRAGMA journal_mode=WAL; CREATE TABLE t(x)")
            for i in 0..<50 { try db.transaction { try db.run("INSERT INTO t VALUES(?)", [.integer(Int64(i))]) } }
            struct Boom: Error {}
            #expect(throws: Boom.self) { try db.transaction { try db.run("INSERT INTO t VALUES(99)"); throw Boom() } }
            #expect(try db.query("SELECT count(*), sum(x) FROM t") == [[.integer(50), .integer(1225)]])

            do { // a second connection, closed (its kept statements finalized) before the file leaves WAL mode
                let other = try Database(path: path)
                try other.execute("PRAGMA busy_timeout=0")
                try db.execute("BEGIN IMMEDIATE") // this connection holds the write lock
                #expect { try other.transaction { try other.run("INSERT INTO t VALUES(1)") } } throws: { error in
                    let e = error as! SQLiteError
                    return e.isBusy && e.sql == "BEGIN IMMEDIATE"
                }
                try db.execute("COMMIT")
                try other.transaction { try other.run("INSERT INTO t VALUES(50)") } // the lock released, the kept BEGIN works
            }
            try db.transaction { try db.run("INSERT INTO t VALUES(51)") }
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE;")
            #expect(try db.query("PRAGMA journal_mode") == [[.text("delete")]])
        }
        let reopened = try Database(path: path, mode: .readOnly)
        #expect(try reopened.query("SELECT count(*) FROM t") == [[.integer(52)]])
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }

    @Test func aFileThatIsNotADatabase() throws {
        let path = tempPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(String(repeating: "not sqlite ", count: 100).utf8).write(to: URL(fileURLWithPath: path))
        let db = try Database(path: path, mode: .readOnly)
        #expect { try db.query("SELECT * FROM sqlite_master") } throws: { ($0 as! SQLiteError).isNotADatabase }
        #expect { try Database(path: "/nonexistent/dir/x.db", mode: .readOnly) } throws: {
            ($0 as! SQLiteError).message.contains("cannot open")
        }
    }

    /// The sqlite3 shell reads what we wrote.
    @Test func sqlite3ShellReadsOurFile() throws {
        let path = tempPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            let db = try Database(path: path)
            try db.execute("CREATE TABLE t(s TEXT)")
            try db.run("INSERT INTO t VALUES(?)", [.text("hello 3ds")])
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["sqlite3", path, "SELECT s FROM t"]
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(out == "hello 3ds\n")
    }
}

/// Rows read by column name: a missing column and a value of another type are errors naming the column.
@Suite struct RowTests {
    @Test func rowsAreReadByNameWithTypedErrors() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-rows-\(UUID().uuidString).db").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let db = try Database(path: path)
        try db.execute("CREATE TABLE t(i INTEGER, r REAL, s TEXT, b BLOB, n); INSERT INTO t VALUES (3, 1.5, 'x', x'0102', NULL)")
        let row = try #require(try db.rows("SELECT i, r, s AS label, b, n FROM t").first)
        #expect(row.columnNames == ["i", "r", "label", "b", "n"])
        #expect(try row.integer("i") == 3 && row.real("r") == 1.5 && row.real("i") == 3 && row.text("label") == "x")
        #expect(try row.blob("b") == [1, 2] && row.text("n") == nil && row.integer("n") == nil)
        #expect(throws: RowError(column: "s", problem: .missing(available: ["i", "r", "label", "b", "n"]))) { try row.text("s") }
        #expect(throws: RowError(column: "label", problem: .wrongType(expected: "INTEGER", found: "TEXT"))) { try row.integer("label") }
        #expect(throws: RowError(column: "r", problem: .wrongType(expected: "TEXT", found: "REAL"))) { try row.text("r") }
        #expect(RowError(column: "s", problem: .missing(available: ["i"])).description == "no column s in the row (it has i)")
    }
}
