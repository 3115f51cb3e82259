import Foundation
import Testing
import TapSQLite
@testable import TapStore

/// Session files made to hurt a reader (hostile-file helper): each is refused with one clear line, or read without
/// trusting what the file defines.
@Suite struct HostileSessionFileTests {
    /// A copy of a checked-in session, changed by `sql`.
    static func altered(_ sql: String) throws -> String {
        let path = try SessionWriterTests.tempPath()
        let sample = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../sessions/demo-app.3dstape").standardized
        try FileManager.default.copyItem(atPath: sample.path, toPath: path)
        try Database(path: path, mode: .readWrite).execute(sql)
        return path
    }

    static func refusal(_ sql: String) throws -> String {
        let path = try altered(sql)
        defer { SessionWriterTests.removeTemp(path) }
        do {
            _ = try SessionReader(path: path)
            return "read"
        } catch {
            return "\(error)".replacingOccurrences(of: path, with: "FILE")
        }
    }

    /// `ls` read the file's `v_transactions`, which a file can define as a query that never ends: the summary runs its
    /// own query. (The view here answers at once, with what the messages do not say, so that the old reading fails the
    /// test instead of hanging it.)
    @Test func lsDoesNotRunTheFilesOwnView() throws {
        let path = try Self.altered("""
            DROP VIEW v_transactions;
            CREATE VIEW v_transactions AS SELECT 'Z' AS final_trans_status, NULL AS error_code;
            """)
        defer { SessionWriterTests.removeTemp(path) }
        let summary = try SessionReader(path: path).summary()
        #expect(summary.transactions == 16 && summary.outcome.hasPrefix("A×1 Erro 305×1") && !summary.outcome.contains("Z"), "\(summary.outcome)")
    }

    @Test func aTableTheReaderQueriesThatIsAViewIsRefused() throws {
        let why = try Self.refusal("""
            DROP VIEW v_messages; DROP VIEW v_exchanges; DROP VIEW v_transactions; ALTER TABLE messages RENAME TO m2;
            CREATE VIEW messages AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT * FROM m2, c WHERE x < 0;
            """)
        #expect(why == "FILE is not a 3dstape session: its messages is a view, not a table")
    }

    @Test func whatTheFileSaysIsQuotedOnOneLine() throws {
        #expect(try Self.refusal("UPDATE meta SET value = 'x' || char(10) || '3dstape: show: fine' WHERE key = 'format'")
                == #"FILE is not a 3dstape session (format is x\x0A3dstape: show: fine)"#)
        #expect(try Self.refusal("UPDATE meta SET value = 'four' WHERE key = 'schema_version'") == "FILE: schema_version four is not a version number")
        #expect(try Self.refusal("UPDATE meta SET value = '99999999999999999999999' WHERE key = 'schema_version'")
                == "FILE has session schema v99999999999999999999999, newer than this 3dstape reads (v\(SessionSchema.version)); upgrade 3dstape")
        #expect(try Self.refusal("DELETE FROM meta WHERE key = 'schema_version'") == "FILE: session has no schema_version")
    }

    /// A file whose schema_version says less than it holds migrates without failing (it failed with SQLite's "duplicate
    /// column name: decryption"): each step adds only what is missing.
    @Test func aVersionLowerThanTheFileHoldsMigrates() throws {
        for claimed in ["1", "2", "3"] {
            let path = try Self.altered("UPDATE meta SET value = '\(claimed)' WHERE key = 'schema_version'")
            defer { SessionWriterTests.removeTemp(path) }
            try SessionReader.rewriteMessages(path: path, location: "jwe") { _, _ in nil }
            #expect(try SessionReader(path: path).meta["schema_version"] == String(SessionSchema.version), "from \(claimed)")
            #expect(try SessionReader(path: path).exchanges().count == 41)
        }
    }
}
