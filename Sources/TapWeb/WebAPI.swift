import Foundation
import TapCore
import TapEMV
import TapHTTP
import TapHTTPService
import TapInspect
import TapRecording
import TapSQLite
import TapStore

/// The inspector's JSON API under `/api`, read-only, over the sessions of a `SessionCatalog`. Each call opens the
/// session it needs (so a session being recorded is read as it grows); the page and scripts use the same routes:
///
///     GET /api/sessions                                   the sessions, with `ls`'s columns
///     GET /api/sessions/NAME                              metadata, exchange count, newest id
///     GET /api/sessions/NAME/facets                       message types, transStatus values and hosts present
///     GET /api/sessions/NAME/exchanges?offset&limit&type&status&errors=1&host&q    timeline rows, paged
///     GET /api/sessions/NAME/exchanges/ID                 one exchange in full, 3DS messages decoded
///     GET /api/sessions/NAME/transactions?offset&limit    3DS transactions
///     GET /api/sessions/NAME/transactions/N               one transaction: its sequence diagram as data
///     GET /api/sessions/NAME/transactions/N/diagram.svg   … drawn as SVG
///     GET /api/sessions/NAME/validation                   `validate`'s findings
///     GET /api/sessions/NAME/session.har, session.mmd     the session as HAR 1.2 or a Mermaid diagram (downloads)
///     GET /api/diff?a=NAME&b=NAME[&pair_by=match|shape]   `diff`'s changes (a replay of A: paired by its matches)
///     GET /api/glossary                                   what 3DS elements and values mean
public final class WebAPI: @unchecked Sendable {
    // Safe: `WebInspector` calls `handle` only on its one serial query queue; the summary cache is touched nowhere else.
    let catalog: SessionCatalog
    /// Where a failure's whole text goes (paths and SQL included) while the page gets `publicMessage`'s; nil: nowhere.
    let log: (@Sendable (String) -> Void)?
    /// `ls` rows by file, kept while the file's size and modification time stay the same.
    private var summaries: [String: (stamp: String, row: JSON)] = [:]

    /// The most steps `/api/diff` may spend pairing two sessions (`SessionDiff.Options.maxPairingSteps`).
    let maxPairingSteps: Int

    public init(catalog: SessionCatalog, maxPairingSteps: Int = SessionDiff.defaultMaxPairingSteps,
                log: (@Sendable (String) -> Void)? = nil) {
        self.catalog = catalog
        self.maxPairingSteps = maxPairingSteps
        self.log = log
    }

    /// A reply: status, content type and body.
    public struct Reply: Sendable {
        public var status: Int
        public var contentType: String
        public var body: [UInt8]
        /// A file name: the browser saves the answer instead of showing it.
        public var attachment: String? = nil
        static func json(_ j: JSON, status: Int = 200) -> Reply { Reply(status: status, contentType: "application/json", body: j.bytes) }
        /// An error, in the one shape every 3dstape server answers errors with (`HTTPErrorAnswer`).
        static func error(_ message: String, status: Int) -> Reply {
            Reply(status: status, contentType: "application/json", body: HTTPErrorAnswer.body(message))
        }
    }

    /// Answers a GET of `path` (percent-encoded, without the query) with `query`'s parameters.
    public func handle(path: String, query: [String: String]) -> Reply {
        do {
            return try route(path, query)
        } catch let e as WebError {
            return .error(e.message, status: e.status)
        } catch {
            log?("\(path): \(error)")
            return .error(publicMessage(error), status: 500)
        }
    }

    /// What failed, for the page, without saying where: the session's name instead of its file's path, and a SQLite
    /// failure's code and message without its SQL. The page is served to a browser (and, with --allow-remote, to other
    /// machines), so it learns nothing of the server's directories or queries from an error.
    func publicMessage(_ error: any Error) -> String {
        var text: String
        if let e = error as? SQLiteError {
            text = e.isBusy ? "the session file is locked by another program; try again"
                : "SQLite error \(e.primaryCode): \(e.message)"
        } else {
            text = "\(error)"
        }
        let entries = catalog.entries()
        // Longest paths first, so that a file is named before its directory is cut out.
        for e in entries.sorted(by: { $0.path.count > $1.path.count }) { text = text.replacingOccurrences(of: e.path, with: e.name) }
        let folders = Set(entries.map { ($0.path as NSString).deletingLastPathComponent } + catalog.directories)
        for d in folders.sorted(by: { $0.count > $1.count }) where d.count > 1 { text = text.replacingOccurrences(of: d + "/", with: "") }
        return text
    }

    /// The API's endpoints. A session's name and the segments after it are matched even when empty, as the API has
    /// always answered them: an empty name is a session it does not serve, an empty id an exchange it does not have.
    enum Route: Sendable {
        case sessions, glossary, diff
        case session, facets, exchanges, transactions, validation, har, mermaid
        /// `/api/sessions/NAME/ANYTHING-ELSE`: not found, once the session has opened.
        case unknownOfSession
        case exchange, transaction, diagramSVG
    }

    static let router: HTTPRouter<Route> = {
        var r = HTTPRouter<Route>()
        r.add("GET", "/api/sessions", .sessions)
        r.add("GET", "/api/glossary", .glossary)
        r.add("GET", "/api/diff", .diff)
        r.add("GET", "/api/sessions/:name?", .session)
        r.add("GET", "/api/sessions/:name?/facets", .facets)
        r.add("GET", "/api/sessions/:name?/exchanges", .exchanges)
        r.add("GET", "/api/sessions/:name?/transactions", .transactions)
        r.add("GET", "/api/sessions/:name?/validation", .validation)
        r.add("GET", "/api/sessions/:name?/session.har", .har) // `export --format har`, for Chrome DevTools, Charles or mitmproxy
        r.add("GET", "/api/sessions/:name?/session.mmd", .mermaid)
        r.add("GET", "/api/sessions/:name?/:tail?", .unknownOfSession)
        r.add("GET", "/api/sessions/:name?/exchanges/:id?", .exchange)
        r.add("GET", "/api/sessions/:name?/transactions/:n?", .transaction)
        r.add("GET", "/api/sessions/:name?/transactions/:n?/diagram.svg", .diagramSVG)
        return r
    }()

    func route(_ path: String, _ q: [String: String]) throws -> Reply {
        // Every route is a GET (`WebInspector` refuses the other methods before it asks here).
        guard case let .found(route, parameters) = Self.router.route(method: "GET", path: path) else { throw WebError("not found", status: 404) }
        switch route {
        case .sessions: return .json(sessions())
        case .glossary: return .json(Glossary.json)
        case .diff: return .json(try diff(q))
        default: break
        }
        let name = try decoded(parameters["name"] ?? "")
        let reader = try open(name)
        switch route {
        case .sessions, .glossary, .diff, .unknownOfSession: throw WebError("not found", status: 404)
        case .session: return .json(try head(reader, name: name))
        case .facets:
            let f = try reader.facets()
            return .json(.object([("types", .array(f.types.map(JSON.string))), ("statuses", .array(f.statuses.map(JSON.string))),
                                  ("hosts", .array(f.hosts.map(JSON.string)))]))
        case .exchanges: return .json(try exchanges(reader, q))
        case .transactions: return .json(try transactions(reader, q))
        case .validation: return .json(try validation(reader))
        case .har:
            let har = HAR.export(try reader.exchanges(), meta: reader.meta, creatorVersion: "3dstape web")
            return Reply(status: 200, contentType: "application/json", body: har.bytes,
                         attachment: (name as NSString).deletingPathExtension + ".har")
        case .mermaid:
            return Reply(status: 200, contentType: "text/plain; charset=utf-8", body: Array(Mermaid.sequenceDiagram(try reader.exchanges()).utf8),
                         attachment: (name as NSString).deletingPathExtension + ".mmd")
        case .exchange:
            let segment = parameters["id"] ?? ""
            guard let id = Int64(segment), let x = try reader.exchange(id: id) else { throw WebError("no exchange \(segment)", status: 404) }
            let c = try reader.connections()[x.connectionID]
            return .json(WebJSON.exchange(x).setting("connection", to: c.map { c in
                .object([("id", .number(String(x.connectionID))), ("client", .string(c.client)), ("tls", c.tls.map(JSON.string) ?? .null),
                         ("sni", c.sni.map(JSON.string) ?? .null), ("alpn", c.alpn.map(JSON.string) ?? .null)])
            } ?? .null))
        case .transaction: return .json(WebJSON.diagram(try diagram(reader, parameters["n"] ?? "")))
        case .diagramSVG:
            return Reply(status: 200, contentType: "image/svg+xml", body: Array(SequenceSVG.render(try diagram(reader, parameters["n"] ?? "")).utf8))
        }
    }

    func decoded(_ segment: String) throws -> String {
        guard let s = segment.removingPercentEncoding else { throw WebError("bad percent-encoding in the path") }
        return s
    }

    /// The reader of the served session called `name` (decoded); anything else is 404.
    func open(_ name: String) throws -> SessionReader {
        guard let path = catalog.path(named: name) else { throw WebError("no session called \(name) is served here", status: 404) }
        do { return try SessionReader(path: path) } catch {
            log?("\(name): \(error)")
            throw WebError(publicMessage(error), status: 422)
        }
    }

    func sessions() -> JSON {
        var rows: [JSON] = []
        var problems: [JSON] = []
        var seen = Set<String>()
        for e in catalog.entries() {
            seen.insert(e.path)
            let attrs = try? FileManager.default.attributesOfItem(atPath: e.path)
            let size = (attrs?[.size] as? NSNumber)?.int64Value ?? 0
            let wal = (try? FileManager.default.attributesOfItem(atPath: e.path + "-wal"))?[.size] as? NSNumber
            let stamp = "\(size) \(wal?.int64Value ?? -1) \((attrs?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0)"
            if let cached = summaries[e.path], cached.stamp == stamp { rows.append(cached.row.setting("name", to: .string(e.name))); continue }
            do {
                let reader = try SessionReader(path: e.path)
                let s = try reader.summary()
                // `ls --json`'s line, named as the catalog names it (the page shows no server paths).
                let row = s.json.removing("file").setting("name", to: .string(e.name)).setting("bytes", to: .number(String(size)))
                    .setting("replay", to: .bool(try reader.isReplay)).setting("mode", to: .string(reader.meta["mode"] ?? ""))
                summaries[e.path] = (stamp, row)
                rows.append(row)
            } catch {
                problems.append(.object([("name", .string(e.name)), ("error", .string(publicMessage(error)))]))
            }
        }
        summaries = summaries.filter { seen.contains($0.key) }
        return .object([("sessions", .array(rows)), ("problems", .array(problems))])
    }

    func head(_ r: SessionReader, name: String) throws -> JSON {
        let h = try r.head()
        // A replay names the session it replayed: when that file is served too, the page links each answer to its recording.
        let recording = r.meta["replayed_session"].flatMap(SessionCatalog.realPath).flatMap { real in catalog.entries().first { $0.path == real }?.name }
        return .object([("name", .string(name)), ("meta", .object(r.meta.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })),
                        ("exchanges", .number(String(h.count))), ("last_id", .number(String(h.lastID))), ("replay", .bool(try r.isReplay)),
                        ("recording", recording.map(JSON.string) ?? .null)])
    }

    func filter(_ q: [String: String]) -> ExchangeFilter {
        func v(_ k: String) -> String? { q[k].flatMap { $0.isEmpty ? nil : $0 } }
        return ExchangeFilter(messageType: v("type"), transStatus: v("status"), errorsOnly: q["errors"] == "1", host: v("host"), search: v("q"))
    }

    func int(_ q: [String: String], _ key: String, _ fallback: Int) throws -> Int {
        guard let s = q[key], !s.isEmpty else { return fallback }
        guard let n = Int(s), n >= 0 else { throw WebError("\(key)=\(s): expected a number") }
        return n
    }

    func exchanges(_ r: SessionReader, _ q: [String: String]) throws -> JSON {
        let offset = try int(q, "offset", 0), limit = min(try int(q, "limit", 100), 1000)
        let page = try r.rows(matching: filter(q), offset: offset, limit: limit)
        return .object([("total", .number(String(page.total))), ("offset", .number(String(offset))), ("rows", .array(page.rows.map(WebJSON.row)))])
    }

    /// The last grouping, kept while its session's exchange count and newest id stay the same (the transactions tab,
    /// then one transaction, of a 100,000-exchange session group once).
    private var grouped: (path: String, count: Int, lastID: Int64, list: [(tx: ThreeDSTransaction, channel: String)])?

    /// Transactions grouped from the messages table alone (no bodies are read), numbered from 1 in the order they began.
    func transactionList(_ r: SessionReader) throws -> [(tx: ThreeDSTransaction, channel: String)] {
        let head = try r.head()
        if let g = grouped, g.path == r.path, g.count == head.count, g.lastID == head.lastID { return g.list }
        let list = try groupTransactions(r)
        grouped = (r.path, head.count, head.lastID, list)
        return list
    }

    func groupTransactions(_ r: SessionReader) throws -> [(tx: ThreeDSTransaction, channel: String)] {
        let tags = try r.messageTags()
        let messages = tags.map { t -> InspectedMessage in
            var fields: [(String, JSON)] = []
            if let v = t.tag.threeDSServerTransID { fields.append(("threeDSServerTransID", .string(v))) }
            if let v = t.tag.acsTransID { fields.append(("acsTransID", .string(v))) }
            if let v = t.tag.transStatus { fields.append(("transStatus", .string(v))) }
            if let v = t.tag.errorCode { fields.append(("errorCode", .string(v))) }
            if let v = t.tag.version { fields.append(("messageVersion", .string(v))) }
            return InspectedMessage(exchangeID: t.exchangeID, direction: t.tag.direction, location: t.tag.location, type: t.tag.type ?? "?",
                                    json: .object(fields))
        }
        // The channel without reading the AReq's body: app-channel messages carry an sdkTransID (and CReq/CRes go as JWE),
        // browser challenges as forms; a frictionless browser or 3RI transaction has neither.
        let app = Set(tags.filter { $0.tag.sdkTransID != nil || $0.tag.messageLocation == .jwe }.map(\.exchangeID))
        return ThreeDSTransaction.group(messages).map { tx in
            let channel = tx.messages.contains { app.contains($0.exchangeID) } ? "app"
                : tx.messages.contains { $0.messageLocation.isForm } ? "browser" : "browser/3RI"
            return (tx, channel)
        }
    }

    func transactions(_ r: SessionReader, _ q: [String: String]) throws -> JSON {
        var all = Array(try transactionList(r).enumerated())
        if let x = q["exchange"] { // the transactions an exchange belongs to
            guard let id = Int64(x) else { throw WebError("exchange=\(x): expected a number") }
            all = all.filter { $0.element.tx.messages.contains { $0.exchangeID == id } }
        }
        let offset = try int(q, "offset", 0), limit = min(try int(q, "limit", 500), 5000)
        let page = all.dropFirst(offset).prefix(limit)
        return .object([("total", .number(String(all.count))), ("transactions", .array(page.map { i, t in // i: the transaction's index in the session
            .object([("n", .number(String(i + 1))), ("key", .string(t.tx.key)), ("channel", .string(t.channel)),
                     ("version", t.tx.version.map(JSON.string) ?? .null), ("outcome", .string(t.tx.outcome)),
                     ("shape", .string(t.tx.shape.joined(separator: " "))),
                     ("exchanges", .array(t.tx.exchangeIDs.map { .number(String($0)) }))])
        }))])
    }

    func diagram(_ r: SessionReader, _ segment: String) throws -> SequenceDiagram {
        let all = try transactionList(r)
        guard let n = Int(segment), n >= 1, n <= all.count else { throw WebError("no transaction \(segment)", status: 404) }
        return SequenceDiagram(try r.exchanges(ids: all[n - 1].tx.exchangeIDs), firstTransaction: n)
    }

    func validation(_ r: SessionReader) throws -> JSON {
        let findings = Validator.validate(try r.exchanges())
        let errors = findings.filter { $0.severity == .error }.count
        return .object([("errors", .number(String(errors))), ("warnings", .number(String(findings.count - errors))),
                        ("findings", .array(findings.map(\.json)))])
    }

    func diff(_ q: [String: String]) throws -> JSON {
        guard let a = q["a"], let b = q["b"] else { throw WebError("give two sessions: /api/diff?a=NAME&b=NAME") }
        let ra = try open(a), rb = try open(b) // query values arrive decoded
        var options = SessionDiff.Options()
        options.maxPairingSteps = maxPairingSteps
        switch q["pair_by"] {
        case nil, "": options.pairBy = SessionDiff.defaultPairing(a: ra.path, b: rb)
        case "shape": options.pairBy = .shape
        case "match":
            guard SessionDiff.isReplaySession(rb) else { throw WebError("pair_by=match: \(b) is not a replay") }
            options.pairBy = .match
        case let other?: throw WebError("pair_by \(other): expected match or shape")
        }
        let d: SessionDiff
        do { d = try SessionDiff.compare(try ra.exchanges(), try rb.exchanges(), options: options) } catch let e as SessionDiff.TooDifferent {
            throw WebError("\(a) and \(b): \(e.description)", status: 422)
        }
        return .object([("a", .string(a)), ("b", .string(b)), ("paired", .number(String(d.pairedTransactions))),
                        ("transactions_a", .number(String(d.transactionsA))), ("transactions_b", .number(String(d.transactionsB))),
                        ("pair_by", .string(d.pairedBy.rawValue)), ("not_replayed_a", .number(String(d.unreplayedTransactions))),
                        ("changes", .array(d.changes.map(\.json)))])
    }
}
