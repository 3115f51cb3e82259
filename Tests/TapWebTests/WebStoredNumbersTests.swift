import Foundation
import Testing
import TapCore
import TapCrypto
import TapHTTP
import TapHTTPService
import TapNet
import TapStore
@testable import TapWeb

/// Hardening, round two, defect 2: a session whose `t_request_start` is 1e300 killed the whole `web` server on
/// `GET …/session.har` (`Int` of the time in `HAR.isoDate`). Stored times are clamped when read, so every route answers,
/// with valid JSON (an Inf would have been written as `inf`).
@Suite struct WebStoredNumbersTests {
    func sqlite(_ path: String, _ sql: String) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        p.arguments = [path, sql]
        try p.run()
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "\(sql)")
    }

    @Test func aSessionWithHugeAndInfiniteTimesIsServedWhole() throws {
        let f = try WebFixture()
        defer { f.remove() }
        let session = f.dir.appendingPathComponent("demo-app.3dstape").path
        try sqlite(session, "UPDATE exchanges SET t_request_start = 1e300 WHERE id = 2; "
                   + " UPDATE exchanges SET t_done = 1e999, client_abort_at = -1e999 WHERE id = 3;")
        let thread = try LoopThread(name: "3dstape-web-num")
        let inspector = WebInspector(catalog: try SessionCatalog(paths: [f.dir.path]), loop: thread.loop)
        let bound = try inspector.start(on: HostPort(host: "127.0.0.1", port: 0))
        thread.start()
        defer { thread.stop { inspector.stop() } }
        let client = BlockingHTTPClient(tls: try TLSContext(clientRoots: []), timeout: 20)
        let base = "http://127.0.0.1:\(bound.port)/api/sessions/demo-app.3dstape"
        let har = try client.send("GET", try #require(HTTPURL(base + "/session.har")))
        #expect(har.head.status == 200)
        let entries = try JSON.parse(har.body)["log"]?["entries"]?.arrayValue ?? []
        #expect(entries.count == 41 && entries.contains { $0["startedDateTime"]?.stringValue == "9999-12-31T23:59:59.000000Z" })
        for route in ["", "/exchanges?limit=100", "/exchanges/2", "/exchanges/3", "/transactions", "/transactions/1", "/validation"] {
            let r = try client.send("GET", try #require(HTTPURL(base + route)))
            #expect(r.head.status == 200 && (try? JSON.parse(r.body)) != nil, "\(route): \(r.head.status) \(String(decoding: r.body.prefix(200), as: UTF8.self))")
        }
        let svg = try client.send("GET", try #require(HTTPURL(base + "/transactions/1/diagram.svg")))
        #expect(svg.head.status == 200 && svg.body.starts(with: Array("<svg".utf8)))
        #expect(try client.send("GET", try #require(HTTPURL("http://127.0.0.1:\(bound.port)/api/sessions"))).head.status == 200, "still serving")
    }
}
