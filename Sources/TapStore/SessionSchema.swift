import TapSQLite

/// The session file schema, versioned. Documented in Sources/TapStore/SCHEMA.md; bump `version`
/// and add a migration step for any change.
public enum SessionSchema {
    /// The schema version this build writes and the newest it reads.
    public static let version = 4
    /// The `meta.format` value that marks a 3dstape session.
    public static let format = "3dstape-session"

    /// v3: what a replayed exchange matched, its scheduled and actual delay (replay sessions only).
    static let replayTable = ReplayMatchesTable.table.create + "\n"

    /// v4: a CONNECT tunnelled without interception (`record --pass-through`), one row per tunnel exchange.
    static let tunnelTable = TunnelsTable.table.create + "\n"

    /// The tables (declared in SessionTables.swift), indexes and views of a new file.
    static let statements = """
    \(MetaTable.table.create)
    \(ConnectionsTable.table.create)
    \(ExchangesTable.table.create)
    \(MessagesTable.table.create)
    CREATE INDEX messages_by_exchange ON messages(exchange_id);
    \(EventsTable.table.create)
    \(replayTable)
    \(tunnelTable)

    CREATE VIEW v_exchanges AS
        SELECT e.id, strftime('%Y-%m-%d %H:%M:%f', e.t_request_start, 'unixepoch') AS started, e.method, e.url, e.status,
               round((e.t_done - e.t_request_start) * 1000, 3) AS duration_ms,
               (SELECT group_concat(message_type, ',') FROM messages m WHERE m.exchange_id = e.id AND m.direction = 'request') AS request_type,
               (SELECT group_concat(message_type, ',') FROM messages m WHERE m.exchange_id = e.id AND m.direction = 'response') AS response_type,
               e.error, e.client_abort_at IS NOT NULL AS client_aborted
        FROM exchanges e ORDER BY e.t_request_start;
    CREATE VIEW v_messages AS
        SELECT m.id, m.exchange_id, m.direction, m.location, m.message_type, m.message_version,
               m.three_ds_server_trans_id, m.ds_trans_id, m.acs_trans_id, m.sdk_trans_id, m.trans_status, m.error_code,
               m.decryption, strftime('%Y-%m-%d %H:%M:%f', e.t_request_start, 'unixepoch') AS at, e.url,
               coalesce(m.json, CASE WHEN m.direction = 'request' AND e.request_body_compressed = 0 THEN CAST(e.request_body AS TEXT)
                                     WHEN m.direction = 'response' AND e.response_body_compressed = 0 THEN CAST(e.response_body AS TEXT) END) AS json
        FROM messages m JOIN exchanges e ON e.id = m.exchange_id ORDER BY e.t_request_start, m.id;
    CREATE VIEW v_transactions AS
    \(transactionsQuery);
    """

    /// Each 3DS transaction (by threeDSServerTransID): its messages, its flow, its final transStatus and its Erro code.
    /// `v_transactions` in a new file, and what `ls` counts, by this query rather than by a file's view (which a file can
    /// define as anything, one that never ends among them).
    static let transactionsQuery = """
        SELECT three_ds_server_trans_id, count(*) AS messages,
               group_concat(message_type, ' ') AS flow,
               (SELECT trans_status FROM messages x WHERE x.three_ds_server_trans_id = m.three_ds_server_trans_id
                    AND x.trans_status IS NOT NULL ORDER BY x.exchange_id DESC, x.id DESC LIMIT 1) AS final_trans_status,
               max(error_code) AS error_code
        FROM messages m WHERE three_ds_server_trans_id IS NOT NULL GROUP BY three_ds_server_trans_id
    """

    /// Indexes built when recording ends rather than kept up while it runs. Transaction IDs are random, so each
    /// message of a busy recording would land on a different page of this index and the writer would rewrite a page
    /// per message; built at the end it costs one sort. A session cut short by `kill -9` lacks it: every query still
    /// answers, by a scan of the (small) messages table, and `decrypt` adds it.
    /// (Files before this one also have `exchanges_by_connection`: no query used it, and connections interleave, so
    /// it cost page writes all over it per batch; it is no longer made.)
    static let closingIndexes = "CREATE INDEX IF NOT EXISTS messages_by_transaction ON messages(three_ds_server_trans_id);"

    /// Brings an older session up to this version in place (v1 → v2: `messages.decryption`; v2 → v3: `replay_matches`;
    /// v3 → v4: `tunnels`, `connections.alpn_offered`).
    /// Each step adds only what the file lacks: a file whose schema_version says less than it holds (edited by hand, or
    /// made to fail) migrates too, where it failed with SQLite's "duplicate column name" (hostile-file helper).
    static func migrate(_ db: Database, from version: Int) throws(SQLiteError) {
        if version < 2 {
            try addColumnIfMissing(MessagesTable.decryption, db)
        }
        if version < 3, try !db.hasTable(ReplayMatchesTable.table.name) {
            try db.execute(replayTable)
        }
        if version < 4 {
            if try !db.hasTable(TunnelsTable.table.name) { try db.execute(tunnelTable) }
            try addColumnIfMissing(ConnectionsTable.alpnOffered, db)
        }
        try db.run("UPDATE meta SET value = ? WHERE key = 'schema_version'", [.text(String(SessionSchema.version))])
    }

    static func addColumnIfMissing(_ column: Column, _ db: Database) throws(SQLiteError) {
        if try !db.hasColumn(column.table, column.name) { try db.execute("ALTER TABLE \(column.table) ADD COLUMN \(column.definition)") }
    }

    /// Creates the schema in an empty database and writes the metadata.
    static func create(in db: Database, meta: [(String, String)]) throws(SQLiteError) {
        try db.execute(statements)
        for (k, v) in [("format", format), ("schema_version", String(version))] + meta {
            try db.run("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", [.text(k), .text(v)])
        }
    }
}

/// Why a file cannot be used as a session.
public struct SessionFileError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
