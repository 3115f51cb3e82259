internal import CSQLite

/// A result row read by column name (as GRDB's `row["name"]`): `Database.rows` gives these, so a query's select list and
/// the code that reads its rows meet on names, not on positions that must be counted alike in two places.
/// Each typed read throws a `RowError` naming the column when the row has no such column or holds a value of another type.
public struct Row {
    /// The row's values in select order.
    public let values: [SQLiteValue]
    let names: ColumnNames

    init(values: [SQLiteValue], names: ColumnNames) {
        self.values = values
        self.names = names
    }

    /// The value of column `name` (NULL included); throws when the row has no column of that name.
    public func value(_ name: String) throws(RowError) -> SQLiteValue {
        guard let i = names.index[name] else { throw RowError(column: name, problem: .missing(available: names.ordered)) }
        return values[i]
    }

    /// TEXT or NULL.
    public func text(_ name: String) throws(RowError) -> String? {
        switch try value(name) {
        case .null: return nil
        case let .text(t): return t
        case let other: throw RowError(column: name, problem: .wrongType(expected: "TEXT", found: other.typeName))
        }
    }

    /// INTEGER or NULL.
    public func integer(_ name: String) throws(RowError) -> Int64? {
        switch try value(name) {
        case .null: return nil
        case let .integer(n): return n
        case let other: throw RowError(column: name, problem: .wrongType(expected: "INTEGER", found: other.typeName))
        }
    }

    /// REAL (or an INTEGER, as a real) or NULL.
    public func real(_ name: String) throws(RowError) -> Double? {
        switch try value(name) {
        case .null: return nil
        case let .real(d): return d
        case let .integer(n): return Double(n)
        case let other: throw RowError(column: name, problem: .wrongType(expected: "REAL", found: other.typeName))
        }
    }

    /// BLOB (or TEXT, as its UTF-8 bytes) or NULL.
    public func blob(_ name: String) throws(RowError) -> [UInt8]? {
        switch try value(name) {
        case .null: return nil
        case let .blob(b): return b
        case let .text(t): return Array(t.utf8)
        case let other: throw RowError(column: name, problem: .wrongType(expected: "BLOB", found: other.typeName))
        }
    }

    /// The column names of this row, in select order.
    public var columnNames: [String] { names.ordered }
}

/// A statement's result column names, shared by all of its rows.
final class ColumnNames: Sendable {
    let ordered: [String]
    let index: [String: Int]

    init(_ ordered: [String]) {
        self.ordered = ordered
        var index: [String: Int] = [:]
        for (i, n) in ordered.enumerated() where index[n] == nil { index[n] = i } // the first of two alike, as SQLite's own lookup
        self.index = index
    }
}

/// A row that lacks a column its reader asked for, or holds a value of another type there.
public struct RowError: Error, Equatable, CustomStringConvertible {
    public enum Problem: Equatable, Sendable {
        /// The row has no column of that name; `available` lists those it has.
        case missing(available: [String])
        case wrongType(expected: String, found: String)
    }

    public let column: String
    public let problem: Problem

    public init(column: String, problem: Problem) {
        self.column = column
        self.problem = problem
    }

    public var description: String {
        switch problem {
        case let .missing(available): "no column \(column) in the row (it has \(available.joined(separator: ", ")))"
        case let .wrongType(expected, found): "column \(column) holds \(found) where \(expected) was expected"
        }
    }
}

extension SQLiteValue {
    /// The SQLite storage class's name: NULL, INTEGER, REAL, TEXT or BLOB.
    public var typeName: String {
        switch self {
        case .null: "NULL"
        case .integer: "INTEGER"
        case .real: "REAL"
        case .text: "TEXT"
        case .blob: "BLOB"
        }
    }
}

extension Statement {
    /// The result column names (`AS` names where given), in order.
    public var columnNames: [String] {
        (0..<sqlite3_column_count(handle)).map { sqlite3_column_name(handle, $0).map { String(cString: $0) } ?? "" }
    }
}

extension Database {
    /// Runs `sql` with `bindings` and returns every row, each read by column name.
    public func rows(_ sql: String, _ bindings: [SQLiteValue] = []) throws(SQLiteError) -> [Row] {
        let s = try prepare(sql)
        try s.bind(bindings)
        let names = ColumnNames(s.columnNames)
        var rows: [Row] = []
        while try s.step() { rows.append(Row(values: s.row, names: names)) }
        return rows
    }
}
