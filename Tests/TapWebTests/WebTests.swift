import Foundation
import Synchronization
import Testing
import TapCore
import TapCrypto
import TapHTTP
import TapHTTPService
import TapInspect
import TapNet
import TapRecording
import TapSQLite
import TapStore
import TapTestSupport
@testable import TapWeb

/// A temporary directory with copies of the checked-in demo sessions (the originals are never opened).
struct WebFixture {
    static let sessions = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../sessions").standardized
    let dir: URL
    let outside: URL

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-web-\(UUID().uuidString)")
        outside = FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-web-outside-\(UUID().uuidString)")
        for d in [dir, outside] { try FileManager.default.createDirectory(at: d, withIntermediateDirectories: true) }
        for name in ["demo-app.3dstape", "demo-browser.3dstape"] {
            try FileManager.default.copyItem(at: Self.sessions.appendingPathComponent(name), to: dir.appendingPathComponent(name))
        }
        try FileManager.default.copyItem(at: Self.sessions.appendingPathComponent("demo-browser.3dstape"),
                                         to: outside.appendingPathComponent("secret.3dstape"))
        try FileManager.default.createSymbolicLink(atPath: dir.appendingPathComponent("out.3dstape").path,
                                                   withDestinationPath: outside.appendingPathComponent("secret.3dstape").path)
        try FileManager.default.createSymbolicLink(atPath: dir.appendingPathComponent("in.3dstape").path,
                                                   withDestinationPath: dir.appendingPathComponent("demo-browser.3dstape").path)
        try Data("not a session".utf8).write(to: dir.appendingPathComponent("notes.txt"))
    }

    func remove() {
        try? FileManager.default.removeItem(at: dir)
        try? FileManager.default.removeItem(at: outside)
    }

    /// The API's JSON answer to a GET.
    static func get(_ api: WebAPI, _ target: String) -> (Int, JSON) {
        let (path, query) = WebInspector.split(target)
        let r = api.handle(path: path, query: query)
        return (r.status, (try? JSON.parse(r.body)) ?? .string(String(decoding: r.body, as: UTF8.self)))
    }
}

@Suite struct SessionCatalogTests {
    @Test func servesTheDirectorysSessionsAndNoLinkOutOfIt() throws {
        let f = try WebFixture()
        defer { f.remove() }
        let catalog = try SessionCatalog(paths: [f.dir.path])
        #expect(catalog.entries().map(\.name) == ["demo-app.3dstape", "demo-browser.3dstape", "in.3dstape"])
        #expect(catalog.path(named: "out.3dstape") == nil)
        let attempts: [String] = ["../\(f.outside.lastPathComponent)/secret.3dstape", f.outside.appendingPathComponent("secret.3dstape").path,
                                  "notes.txt", ".."]
        for name in attempts {
            #expect(catalog.path(named: name) == nil, "\(name)")
        }
        #expect(catalog.path(named: "in.3dstape")?.hasSuffix("/demo-browser.3dstape") == true)
    }

    @Test func sessionsGivenByNameAndMissingPaths() throws {
        let f = try WebFixture()
        defer { f.remove() }
        let catalog = try SessionCatalog(paths: [f.dir.appendingPathComponent("demo-app.3dstape").path, f.outside.appendingPathComponent("secret.3dstape").path])
        #expect(catalog.entries().map(\.name) == ["demo-app.3dstape", "secret.3dstape"])
        #expect(throws: WebError.self) { try SessionCatalog(paths: [f.dir.appendingPathComponent("missing.3dstape").path]) }
    }
}

@Suite struct WebAPITests {
    @Test func sessionsTimelinePagesAndFilters() throws {
        let f = try WebFixture()
        defer { f.remove() }
        let api = WebAPI(catalog: try SessionCatalog(paths: [f.dir.path]))
        let (status, list) = WebFixture.get(api, "/api/sessions")
        #expect(status == 200)
        let names = list["sessions"]?.arrayValue?.compactMap { $0["name"]?.stringValue }
        #expect(names == ["demo-app.3dstape", "demo-browser.3dstape", "in.3dstape"])

        let (_, page) = WebFixture.get(api, "/api/sessions/demo-app.3dstape/exchanges?offset=10&limit=5")
        #expect(page["total"]?.numberValue == "41")
        #expect(page["rows"]?.arrayValue?.compactMap { $0["id"]?.numberValue } == ["11", "12", "13", "14", "15"])
        let first = WebFixture.get(api, "/api/sessions/demo-app.3dstape/exchanges?limit=1").1["rows"]?.arrayValue?.first
        #expect(first?["phases"]?["wait"]?.numberValue != nil)
        #expect(first?["messages"]?.arrayValue?.map { $0["type"]?.stringValue } == ["AReq", "ARes"])

        // Filters agree with what the session file says when sqlite3 reads it.
        for (query, sql) in [("type=CRes", "SELECT count(DISTINCT exchange_id) FROM messages WHERE message_type = 'CRes'"),
                             ("status=N", "SELECT count(DISTINCT exchange_id) FROM messages WHERE trans_status = 'N'"),
                             ("q=%2Fds%2Fareq", "SELECT count(*) FROM exchanges WHERE url LIKE '%/ds/areq%'"),
                             ("type=CRes&status=Y", "SELECT count(DISTINCT exchange_id) FROM messages WHERE message_type = 'CRes' AND trans_status = 'Y'")] {
            let (_, j) = WebFixture.get(api, "/api/sessions/demo-app.3dstape/exchanges?\(query)")
            let expected = try sqliteCount(f.dir.appendingPathComponent("demo-app.3dstape").path, sql)
            #expect(j["total"]?.numberValue == String(expected), "\(query)")
            #expect(expected > 0)
        }
        // The search box: a transaction ID finds its exchanges, a number also finds that exchange.
        let db = f.dir.appendingPathComponent("demo-app.3dstape").path
        let tx = try #require(try sqliteText(db, "SELECT three_ds_server_trans_id FROM messages WHERE message_type = 'RReq' LIMIT 1"))
        let byID = WebFixture.get(api, "/api/sessions/demo-app.3dstape/exchanges?q=\(tx)").1
        #expect(byID["total"]?.numberValue == String(try sqliteCount(db, "SELECT count(DISTINCT exchange_id) FROM messages WHERE three_ds_server_trans_id = '\(tx)'")))
        let byNumber = WebFixture.get(api, "/api/sessions/demo-app.3dstape/exchanges?q=7").1["rows"]?.arrayValue ?? []
        #expect(byNumber.contains { $0["id"]?.numberValue == "7" })
        let (_, errors) = WebFixture.get(api, "/api/sessions/demo-app.3dstape/exchanges?errors=1")
        let errorRows: [JSON] = errors["rows"]?.arrayValue ?? []
        let types: [[String]] = errorRows.map { row in (row["messages"]?.arrayValue ?? []).compactMap { $0["type"]?.stringValue } }
        #expect(!types.isEmpty && types.allSatisfy { $0.contains("Erro") })
        #expect(errors["total"]?.numberValue == "1")
        let (bad, _) = WebFixture.get(api, "/api/sessions/demo-app.3dstape/exchanges?offset=-3")
        #expect(bad == 400)
    }

    @Test func anExchangeWithItsDecryptedCResAndTheGlossary() throws {
        let f = try WebFixture()
        defer { f.remove() }
        let api = WebAPI(catalog: try SessionCatalog(paths: [f.dir.path]))
        let cres = WebFixture.get(api, "/api/sessions/demo-app.3dstape/exchanges?type=CRes&limit=1").1["rows"]?.arrayValue?.first
        let id = try #require(cres?["id"]?.numberValue)
        let (status, x) = WebFixture.get(api, "/api/sessions/demo-app.3dstape/exchanges/\(id)")
        #expect(status == 200)
        let m = x["messages"]?.arrayValue?.first { $0["type"]?.stringValue == "CRes" }
        #expect(m?["decryption"]?.stringValue == "decrypted: key substitution")
        #expect(m?["json"]?["acsUiType"]?.stringValue == "01")
        #expect(m?["json"]?["acsCounterAtoS"]?.stringValue == "000")
        let (_, glossary) = WebFixture.get(api, "/api/glossary")
        #expect(glossary["values"]?["acsUiType"]?["01"]?.stringValue?.hasPrefix("Text") == true)
        #expect(glossary["elements"]?["acsCounterAtoS"]?.stringValue != nil)
        #expect(WebFixture.get(api, "/api/sessions/demo-app.3dstape/exchanges/99999").0 == 404)
        #expect(WebFixture.get(api, "/api/sessions/demo-app.3dstape/exchanges/abc").0 == 404)
    }

    @Test func transactionsAndTheirDiagrams() throws {
        let f = try WebFixture()
        defer { f.remove() }
        let api = WebAPI(catalog: try SessionCatalog(paths: [f.dir.path]))
        let (_, list) = WebFixture.get(api, "/api/sessions/demo-app.3dstape/transactions")
        #expect(list["total"]?.numberValue == "16")
        let txs = list["transactions"]?.arrayValue ?? []
        let challenge = try #require(txs.first { $0["shape"]?.stringValue == "AReq ARes CReq CRes CReq CRes RReq RRes" })
        #expect(challenge["channel"]?.stringValue == "app")
        let n = try #require(challenge["n"]?.numberValue)
        let (_, d) = WebFixture.get(api, "/api/sessions/demo-app.3dstape/transactions/\(n)")
        #expect(d["participants"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["SDK", "3DS Server", "DS", "ACS"])
        let items: [JSON] = d["items"]?.arrayValue ?? []
        let arrows: [(String, String)] = items.compactMap { i in
            guard i["kind"] != nil, let from = i["from"]?.stringValue, let to = i["to"]?.stringValue else { return nil }
            return (from, to)
        }
        #expect(arrows.count == 8)
        #expect(arrows.filter { $0 == ("SDK", "ACS") }.count == 2)
        #expect(d["items"]?.arrayValue?.first?["note"]?.stringValue?.hasPrefix("transaction \(n) ") == true)
        let svg = api.handle(path: "/api/sessions/demo-app.3dstape/transactions/\(n)/diagram.svg", query: [:])
        #expect(svg.contentType == "image/svg+xml")
        let text = String(decoding: svg.body, as: UTF8.self)
        #expect(text.hasPrefix("<svg") && text.contains(">3DS Server</text>") && text.contains("class=\"message request\""))
        let id = try #require(challenge["exchanges"]?.arrayValue?.last?.numberValue)
        let (_, mine) = WebFixture.get(api, "/api/sessions/demo-app.3dstape/transactions?exchange=\(id)")
        #expect(mine["transactions"]?.arrayValue?.map { $0["n"]?.numberValue } == [n])
        #expect(WebFixture.get(api, "/api/sessions/demo-app.3dstape/transactions/0").0 == 404)
        #expect(WebFixture.get(api, "/api/sessions/demo-app.3dstape/transactions/17").0 == 404)
    }

    @Test func validationAndDiff() throws {
        let f = try WebFixture()
        defer { f.remove() }
        let api = WebAPI(catalog: try SessionCatalog(paths: [f.dir.path]))
        let (_, v) = WebFixture.get(api, "/api/sessions/demo-app.3dstape/validation")
        #expect(v["errors"]?.numberValue == "0")
        let (_, same) = WebFixture.get(api, "/api/diff?a=demo-browser.3dstape&b=in.3dstape")
        #expect(same["paired"]?.numberValue == "4" && same["changes"]?.arrayValue?.isEmpty == true)
        let (_, other) = WebFixture.get(api, "/api/diff?a=demo-app.3dstape&b=demo-browser.3dstape")
        #expect(other["changes"]?.arrayValue?.isEmpty == false)
        #expect(WebFixture.get(api, "/api/diff?a=demo-app.3dstape").0 == 400)
    }

    /// Past its pairing limit `/api/diff` answers 422 with the reason, instead of holding the query queue for minutes.
    @Test func aDiffPastThePairingLimitIsRefusedClearly() throws {
        let f = try WebFixture()
        defer { f.remove() }
        let api = WebAPI(catalog: try SessionCatalog(paths: [f.dir.path]), maxPairingSteps: 100)
        let (status, body) = WebFixture.get(api, "/api/diff?a=demo-app.3dstape&b=demo-browser.3dstape")
        #expect(status == 422)
        let message = body["error"]?.stringValue ?? ""
        #expect(message.hasPrefix("demo-app.3dstape and demo-browser.3dstape: the sessions are too different to pair: 16 transactions in A and 4 in B"),
                "\(message)")
        #expect(message.hasSuffix("more than the limit of 100 steps"))
        let (sameStatus, same) = WebFixture.get(api, "/api/diff?a=demo-browser.3dstape&b=in.3dstape")
        #expect(sameStatus == 200 && same["paired"]?.numberValue == "4", "equal sessions pair along their common start, within any limit")
    }

    @Test func nothingOutsideTheServedSessions() throws {
        let f = try WebFixture()
        defer { f.remove() }
        let api = WebAPI(catalog: try SessionCatalog(paths: [f.dir.path]))
        for target in ["/api/sessions/out.3dstape", "/api/sessions/..%2F\(f.outside.lastPathComponent)%2Fsecret.3dstape",
                       "/api/sessions/%2Fetc%2Fpasswd/exchanges", "/api/sessions/notes.txt", "/api/../etc/passwd", "/api/sessions/%zz",
                       "/api/diff?a=demo-app.3dstape&b=..%2F..%2Fetc%2Fpasswd", "/etc/passwd"] {
            let (status, body) = WebFixture.get(api, target)
            #expect(status == 404 || status == 400, "\(target): \(status)")
            #expect(!body.compact.contains("root:"))
        }
    }

    @Test func aBrokenSessionFileIsNamedNotFatal() throws {
        let f = try WebFixture()
        defer { f.remove() }
        try Data("SQLite format 3\u{0}truncated".utf8).write(to: f.dir.appendingPathComponent("broken.3dstape"))
        let whole = try Data(contentsOf: f.dir.appendingPathComponent("demo-app.3dstape"))
        try whole.prefix(8192).write(to: f.dir.appendingPathComponent("cut.3dstape"))
        let api = WebAPI(catalog: try SessionCatalog(paths: [f.dir.path]))
        let (status, list) = WebFixture.get(api, "/api/sessions")
        #expect(status == 200)
        let problems = (list["problems"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue }
        #expect(problems.contains("broken.3dstape") && problems.contains("cut.3dstape"))
        #expect((list["sessions"]?.arrayValue ?? []).count == 3)
        let (s, body) = WebFixture.get(api, "/api/sessions/broken.3dstape/exchanges")
        #expect(s == 422 && body["error"]?.stringValue?.hasPrefix("broken.3dstape is not a 3dstape session") == true, "\(body)")
        #expect(WebFixture.get(api, "/api/sessions/demo-app.3dstape").0 == 200) // the others are still served
    }

    /// Error bodies say what failed, not where: no server path, no SQL (the whole text goes to the log).
    @Test func errorBodiesNameNoPathAndNoSQL() throws {
        let f = try WebFixture()
        defer { f.remove() }
        try Data("SQLite format 3\u{0}truncated".utf8).write(to: f.dir.appendingPathComponent("broken.3dstape"))
        // A session file without an exchanges table: every query on it fails in SQLite.
        let odd = try Database(path: f.dir.appendingPathComponent("odd.3dstape").path)
        try odd.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
        try odd.run("INSERT INTO meta VALUES ('format', ?), ('schema_version', ?)", [.text(SessionSchema.format), .text(String(SessionSchema.version))])
        let logged = Mutex<[String]>([])
        let api = WebAPI(catalog: try SessionCatalog(paths: [f.dir.path])) { line in logged.withLock { $0.append(line) } }
        for target in ["/api/sessions", "/api/sessions/broken.3dstape/exchanges", "/api/sessions/odd.3dstape",
                       "/api/sessions/odd.3dstape/exchanges", "/api/sessions/odd.3dstape/validation", "/api/sessions/odd.3dstape/transactions"] {
            let (status, body) = WebFixture.get(api, target)
            let text = body.compact
            #expect(target == "/api/sessions" ? status == 200 : status >= 400, "\(target): \(status)")
            #expect(!text.contains(f.dir.path) && !text.contains("/tmp") && !text.contains("SELECT") && !text.contains("FROM "), "\(target): \(text)")
            #expect(text.contains("broken.3dstape is not a 3dstape session") || text.contains("no such table: exchanges"), "\(target): \(text)")
        }
        let lines = logged.withLock { $0 }
        #expect(lines.contains { $0.contains(f.dir.path) } && lines.contains { $0.contains("SELECT") }, "the log keeps the whole text: \(lines)")
    }

    func sqliteCount(_ path: String, _ sql: String) throws -> Int { Int(try sqliteText(path, sql) ?? "") ?? -1 }

    func sqliteText(_ path: String, _ sql: String) throws -> String? {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        p.arguments = ["-readonly", path, sql]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        p.waitUntilExit()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }
}

@Suite struct WebInspectorServerTests {
    @Test func headersMethodsAndHostsOnARealSocket() throws {
        let f = try WebFixture()
        defer { f.remove() }
        let thread = try LoopThread(name: "3dstape-web-test")
        let inspector = WebInspector(catalog: try SessionCatalog(paths: [f.dir.path]), loop: thread.loop)
        let bound = try inspector.start(on: HostPort(host: "127.0.0.1", port: 0))
        thread.start()
        defer { thread.stop { inspector.stop() } }
        let client = BlockingHTTPClient(tls: try TLSContext(clientRoots: []), timeout: 10)
        let base = "http://127.0.0.1:\(bound.port)"

        let page = try client.send("GET", try #require(HTTPURL(base + "/")))
        #expect(page.head.status == 200)
        #expect(page.head.headers["Content-Security-Policy"]?.contains("script-src 'self'") == true)
        #expect(page.head.headers["X-Content-Type-Options"] == "nosniff")
        let html = String(decoding: page.body, as: UTF8.self)
        #expect(html.contains("<script src=\"/app.js\" defer></script>") && !html.contains("<script>"))
        let js = try client.send("GET", try #require(HTTPURL(base + "/app.js")))
        #expect(js.head.headers["Content-Type"]?.hasPrefix("text/javascript") == true && js.body.count > 1000)
        #expect(!String(decoding: js.body, as: UTF8.self).contains("innerHTML"))

        let sessions = try client.send("GET", try #require(HTTPURL(base + "/api/sessions")))
        #expect(sessions.head.status == 200)
        #expect((try JSON.parse(sessions.body))["sessions"]?.arrayValue?.count == 3)

        #expect(try client.send("POST", try #require(HTTPURL(base + "/api/sessions")), body: Array("{}".utf8)).head.status == 405)
        #expect(try client.send("DELETE", try #require(HTTPURL(base + "/api/sessions/demo-app.3dstape"))).head.status == 405)
        #expect(try client.send("GET", try #require(HTTPURL(base + "/api/sessions")), headers: [("Host", "attacker.example:\(bound.port)")]).head.status == 421)
        #expect(try client.send("GET", try #require(HTTPURL(base + "/../etc/passwd"))).head.status == 404)

        let har = try client.send("GET", try #require(HTTPURL(base + "/api/sessions/demo-app.3dstape/session.har")))
        #expect(har.head.headers["Content-Disposition"] == "attachment; filename=\"demo-app.har\"")
        #expect((try JSON.parse(har.body))["log"]?["entries"]?.arrayValue?.count == 41)
        let x = try client.send("GET", try #require(HTTPURL(base + "/api/sessions/demo-app.3dstape/exchanges/1")))
        #expect((try JSON.parse(x.body))["connection"]?["client"]?.stringValue?.hasPrefix("127.0.0.1:") == true)
    }

    /// Issue 23 item 8: the Host check follows the bound address. On any loopback address (127.0.0.2, or a name that
    /// resolves to loopback) requests must name it; before, only the texts 127.0.0.1, localhost and ::1 turned it on,
    /// and the inspector served any Host header elsewhere.
    @Test func everyLoopbackAddressRefusesForeignHostHeaders() throws {
        let f = try WebFixture()
        defer { f.remove() }
        let thread = try LoopThread(name: "3dstape-web-test")
        let inspector = WebInspector(catalog: try SessionCatalog(paths: [f.dir.path]), loop: thread.loop)
        let bound = try inspector.start(on: HostPort(host: "127.0.0.2", port: 0))
        let named = WebInspector(catalog: try SessionCatalog(paths: [f.dir.path]), loop: thread.loop)
        let boundByName = try named.start(on: HostPort(host: "localhost", port: 0))
        thread.start()
        defer { thread.stop { inspector.stop(); named.stop() } }
        #expect(bound.host == "127.0.0.2" && ListenAddress.isLoopback(numeric: boundByName.host), "a name is bound as the address it resolves to")
        let client = BlockingHTTPClient(tls: try TLSContext(clientRoots: []), timeout: 10)
        for b in [bound, boundByName] {
            let url = try #require(HTTPURL("http://\(b)/api/sessions"))
            #expect(try client.send("GET", url, headers: [("Host", "attacker.example:\(b.port)")]).head.status == 421)
            #expect(try client.send("GET", url, headers: [("Host", "127.attacker.example:\(b.port)")]).head.status == 421)
            #expect(try client.send("GET", url).head.status == 200, "its own address as Host")
            #expect(try client.send("GET", url, headers: [("Host", "localhost:\(b.port)")]).head.status == 200)
        }
    }
}

extension WebInspectorServerTests {
    /// A client that half-closes after its request (shutdown(SHUT_WR)) still gets the API's answer, which comes later
    /// from the query queue; it was dropped before.
    @Test func aHalfClosedClientGetsItsAnswer() throws {
        let f = try WebFixture()
        defer { f.remove() }
        let thread = try LoopThread(name: "3dstape-web-test")
        let inspector = WebInspector(catalog: try SessionCatalog(paths: [f.dir.path]), loop: thread.loop)
        let bound = try inspector.start(on: HostPort(host: "127.0.0.1", port: 0))
        thread.start()
        defer { thread.stop { inspector.stop() } }
        let client = try PipelineClient(port: bound.port)
        try client.send("GET /api/sessions HTTP/1.1\r\nHost: 127.0.0.1:\(bound.port)\r\n\r\n")
        client.shutdownWrite()
        let answer = try #require(try client.responses(1).first)
        #expect(answer.head.status == 200)
        #expect((try JSON.parse(answer.body))["sessions"]?.arrayValue?.count == 3)
        #expect(try client.serverClosed())
    }
}

@Suite struct SequenceSVGTests {
    @Test func everyTextIsEscaped() {
        var d = SequenceDiagram([])
        d.participants = [.init(alias: "A", name: "<b>A</b>"), .init(alias: "B", name: "B & \"C\"")]
        d.items = [.note(from: "A", to: "B", text: "<script>alert(1)</script>"),
                   .arrow(.init(from: "A", to: "B", label: "x\" onmouseover=\"alert(1)", kind: .request, exchangeID: 1, timing: "T+0 ms\u{1}", replay: "'q'"))]
        let svg = SequenceSVG.render(d)
        #expect(!svg.contains("<script") && !svg.contains("<b>") && !svg.contains("\" onmouseover"))
        #expect(svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && svg.contains("B &amp; &quot;C&quot;") && svg.contains("&#39;q&#39;"))
        #expect(svg.contains("T+0 ms\u{FFFD}"))
    }
}

@Suite struct ReplaySessionTests {
    /// A replay session written by the session writer: an answer with an injected fault and a miss.
    @Test func faultsAndMissesShowInRowsFiltersAndTheDiagram() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-web-replay-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("r.3dstape").path
        let writer = try SessionWriter(path: path, meta: [("mode", "replay"), ("label", "replay test")])
        writer.submit(.connectionOpened(ConnectionRecord(id: 1, clientAddress: "127.0.0.1:1", acceptedAt: 1000, mode: "replay", upstream: nil)))
        let areq = #"{"messageType":"AReq","messageVersion":"2.2.0","threeDSServerTransID":"8a880dc0-d2d2-4067-bcb1-b08d1690b26e","deviceChannel":"01"}"#
        let erro = #"{"messageType":"Erro","messageVersion":"2.2.0","threeDSServerTransID":"8a880dc0-d2d2-4067-bcb1-b08d1690b26e","errorCode":"402","errorComponent":"D"}"#
        for (i, (answer, annotation)) in [
            (erro, ReplayAnnotation(recordedExchangeID: 4, matchedBy: "AReq: version", miss: nil, scheduledDelayMs: 120, actualDelayMs: 121.5, faults: "erro:402")),
            (#"{"error":"no match"}"#, ReplayAnnotation(recordedExchangeID: nil, matchedBy: nil, miss: "path: live /x, recorded /y", scheduledDelayMs: nil, actualDelayMs: nil)),
        ].enumerated() {
            var x = ExchangeRecord(connectionID: 1, seq: i + 1, method: "POST", url: "http://ds.example/areq", host: "ds.example", path: "/areq",
                                   upstream: nil, request: CapturedMessage(headers: [("Content-Type", "application/json")], body: Array(areq.utf8), wireSize: areq.utf8.count),
                                   requestStart: 1000 + Double(i))
            x.status = i == 0 ? 200 : 404
            x.response = CapturedMessage(headers: [("Content-Type", "application/json")], body: Array(answer.utf8), wireSize: answer.utf8.count)
            x.done = 1000.2 + Double(i)
            x.replay = annotation
            writer.submit(.exchange(x))
        }
        writer.close()
        let api = WebAPI(catalog: try SessionCatalog(paths: [dir.path]))
        let (_, head) = WebFixture.get(api, "/api/sessions/r.3dstape")
        #expect(head["replay"] == .bool(true) && head["exchanges"]?.numberValue == "2")
        let rows = WebFixture.get(api, "/api/sessions/r.3dstape/exchanges").1["rows"]?.arrayValue ?? []
        #expect(rows.first?["replay"]?["faults"]?.stringValue == "erro:402")
        #expect(rows.first?["replay"]?["recorded_exchange"]?.numberValue == "4")
        #expect(rows.last?["replay"]?["miss"]?.stringValue == "path: live /x, recorded /y")
        #expect(WebFixture.get(api, "/api/sessions/r.3dstape/exchanges?errors=1").1["total"]?.numberValue == "2")
        let (_, d) = WebFixture.get(api, "/api/sessions/r.3dstape/transactions/1")
        let replays = (d["items"]?.arrayValue ?? []).compactMap { $0["replay"]?.stringValue }
        #expect(replays.first == "from #4 (AReq: version) · scheduled 120.0 ms · actual 121.5 ms · fault erro:402")
    }
}
