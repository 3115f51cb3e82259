import Foundation
import TapSQLite

/// Which exchanges a timeline shows: every condition given must hold.
public struct ExchangeFilter: Sendable, Equatable {
    /// Exchanges carrying a 3DS message of this type (`AReq`, `CRes`, `Erro` …).
    public var messageType: String?
    /// Exchanges carrying a message with this transStatus.
    public var transStatus: String?
    /// Only exchanges that went wrong: a transport error, HTTP 4xx/5xx, a client abort, an Erro message or an
    /// errorCode, a replay miss or an injected fault.
    public var errorsOnly = false
    /// Exchanges to this host (`host:port` as recorded).
    public var host: String?
    /// Text in the URL, a transaction ID (threeDSServerTransID, dsTransID, acsTransID, sdkTransID), a message type,
    /// or an exchange number.
    public var search: String?

    public init(messageType: String? = nil, transStatus: String? = nil, errorsOnly: Bool = false, host: String? = nil, search: String? = nil) {
        self.messageType = messageType
        self.transStatus = transStatus
        self.errorsOnly = errorsOnly
        self.host = host
        self.search = search
    }
}

/// A 3DS message's type and outcome, without its body: what a timeline row shows.
public struct MessageTag: Sendable {
    public var direction: String
    public var type: String?
    public var location: String
    public var transStatus: String?
    public var errorCode: String?
    /// How an app-channel message was decrypted, or why not.
    public var decryption: String?
    public var threeDSServerTransID: String?
    public var acsTransID: String?
    /// Present in app-channel messages only.
    public var sdkTransID: String?
    public var version: String?
}

/// One exchange as a timeline row: addresses, status, timestamps and message tags, without headers or bodies.
public struct ExchangeRow: Sendable, HasExchangeTimeline {
    public var id: Int64
    public var method: String
    public var url: String
    public var host: String?
    public var status: Int?
    public var timeline: ExchangeTimeline
    public var messages: [MessageTag]
    public var replay: ReplayAnnotation?
    /// A CONNECT passed through without interception.
    public var tunnel: TunnelAnnotation? = nil
}

extension SessionReader {
    /// The rows of exchanges that pass `filter`, in storage order, `limit` from `offset`, and how many pass in all.
    /// Reads only the page's rows (and the small messages table for filters), so that a 100,000-exchange session
    /// pages as fast as a small one.
    public func rows(matching filter: ExchangeFilter, offset: Int, limit: Int) throws -> (total: Int, rows: [ExchangeRow]) {
        let (clause, args) = try whereClause(filter)
        let total = Int(try db.query("SELECT count(*) FROM exchanges e \(clause)", args)[0][0].integer ?? 0)
        let ids = try db.query("SELECT e.id FROM exchanges e \(clause) ORDER BY e.id LIMIT ? OFFSET ?",
                               args + [.integer(Int64(max(0, min(limit, 1000)))), .integer(Int64(max(0, offset)))]).compactMap { $0[0].integer }
        return (total, try rows(ids: ids))
    }

    /// Timeline rows for these exchange ids, in id order.
    public func rows(ids: [Int64]) throws -> [ExchangeRow] {
        guard !ids.isEmpty else { return [] }
        let list = ids.map { String($0) }.joined(separator: ",")
        var tags: [Int64: [MessageTag]] = [:]
        for (id, tag) in try messageTags(where: "exchange_id IN (\(list))") { tags[id, default: []].append(tag) }
        let replays = try replayAnnotations("WHERE exchange_id IN (\(list))")
        let tunnels = try tunnelAnnotations("WHERE exchange_id IN (\(list))")
        let read = SessionReader.exchangeRowReader
        return try db.rows("SELECT \(read.selectList()) FROM exchanges WHERE id IN (\(list)) ORDER BY id").map { r in
            var row = try read.decode(r)
            row.messages = tags[row.id] ?? []
            row.replay = replays[row.id]
            row.tunnel = tunnels[row.id]
            return row
        }
    }

    /// A timeline row without its message tags, replay or tunnel annotations (filled in by `rows(ids:)`).
    static let exchangeRowReader: RowReader<ExchangeRow> = {
        typealias E = ExchangesTable
        return RowReader([E.id, E.method, E.url, E.host, E.status] + E.timeline) { r in
            ExchangeRow(id: try r.integer(E.id) ?? 0, method: try r.text(E.method) ?? "", url: try r.text(E.url) ?? "", host: try r.text(E.host),
                        status: try r.integer(E.status).map(Int.init), timeline: try r.timeline(), messages: [], replay: nil, tunnel: nil)
        }
    }()

    /// Every 3DS message's tag with its exchange id, in storage order (for grouping transactions without bodies).
    public func messageTags() throws -> [(exchangeID: Int64, tag: MessageTag)] {
        try messageTags(where: "message_type IS NOT NULL")
    }

    func messageTags(where condition: String) throws -> [(exchangeID: Int64, tag: MessageTag)] {
        let read = SessionReader.messageTagReader
        return try db.rows("SELECT \(read.selectList(absent: try absentColumns(MessagesTable.table))) FROM messages WHERE \(condition) ORDER BY exchange_id, id")
            .map(read.decode)
    }

    static let messageTagReader: RowReader<(exchangeID: Int64, tag: MessageTag)> = {
        typealias M = MessagesTable
        return RowReader([M.exchangeID, M.direction, M.messageType, M.location, M.transStatus, M.errorCode, M.decryption, M.threeDSServerTransID,
                          M.acsTransID, M.messageVersion, M.sdkTransID]) { m in
            (try m.integer(M.exchangeID) ?? 0,
             MessageTag(direction: try m.text(M.direction) ?? "", type: try m.text(M.messageType), location: try m.text(M.location) ?? "",
                        transStatus: try m.text(M.transStatus), errorCode: try m.text(M.errorCode), decryption: try m.text(M.decryption),
                        threeDSServerTransID: try m.text(M.threeDSServerTransID), acsTransID: try m.text(M.acsTransID),
                        sdkTransID: try m.text(M.sdkTransID), version: try m.text(M.messageVersion)))
        }
    }()

    /// The values the timeline's filters offer: message types, transStatus values and hosts.
    public func facets() throws -> (types: [String], statuses: [String], hosts: [String]) {
        let types = try db.query("SELECT DISTINCT message_type FROM messages WHERE message_type IS NOT NULL ORDER BY 1").compactMap { $0[0].text }
        let statuses = try db.query("SELECT DISTINCT trans_status FROM messages WHERE trans_status IS NOT NULL ORDER BY 1").compactMap { $0[0].text }
        let hosts = try db.query("SELECT DISTINCT host FROM exchanges WHERE host IS NOT NULL ORDER BY 1").compactMap { $0[0].text }
        return (types, statuses, hosts)
    }

    /// How many exchanges are stored and the newest id (a live page polls this to see new ones).
    public func head() throws -> (count: Int, lastID: Int64) {
        let r = try db.query("SELECT count(*), coalesce(max(id), 0) FROM exchanges")[0]
        return (Int(r[0].integer ?? 0), r[1].integer ?? 0)
    }

    /// Whether this session was written by `replay` (it has replay annotations).
    public var isReplay: Bool {
        get throws { try db.hasTable(ReplayMatchesTable.table.name) && !(try db.query("SELECT 1 FROM replay_matches LIMIT 1").isEmpty) }
    }

    func whereClause(_ f: ExchangeFilter) throws -> (String, [SQLiteValue]) {
        var conditions: [String] = []
        var args: [SQLiteValue] = []
        if let t = f.messageType {
            conditions.append("e.id IN (SELECT exchange_id FROM messages WHERE message_type = ?)")
            args.append(.text(t))
        }
        if let s = f.transStatus {
            conditions.append("e.id IN (SELECT exchange_id FROM messages WHERE trans_status = ?)")
            args.append(.text(s))
        }
        if f.errorsOnly {
            var c = "e.error IS NOT NULL OR e.status >= 400 OR e.client_abort_at IS NOT NULL"
                + " OR e.id IN (SELECT exchange_id FROM messages WHERE message_type = 'Erro' OR error_code IS NOT NULL)"
            if try db.hasTable(ReplayMatchesTable.table.name) {
                c += " OR e.id IN (SELECT exchange_id FROM replay_matches WHERE miss IS NOT NULL"
                    + (try db.hasColumn(ReplayMatchesTable.table.name, ReplayMatchesTable.faults.name) ? " OR faults IS NOT NULL)" : ")")
            }
            conditions.append("(\(c))")
        }
        if let h = f.host {
            conditions.append("e.host = ?")
            args.append(.text(h))
        }
        if let q = f.search?.trimmingCharacters(in: .whitespaces), !q.isEmpty {
            let like = "%" + q.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
                .replacingOccurrences(of: "_", with: "\\_") + "%"
            var c = "e.url LIKE ? ESCAPE '\\' OR e.id IN (SELECT exchange_id FROM messages WHERE three_ds_server_trans_id = ? OR ds_trans_id = ?"
                + " OR acs_trans_id = ? OR sdk_trans_id = ? OR message_type = ?)"
            args += [.text(like)] + Array(repeating: .text(q), count: 5)
            if let n = Int64(q) {
                c += " OR e.id = ?"
                args.append(.integer(n))
            }
            conditions.append("(\(c))")
        }
        return (conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND "), args)
    }
}
