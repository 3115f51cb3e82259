import Foundation
import Testing
import TapCore
@testable import TapWeb

/// Issue 26: the API routes through `HTTPRouter`, with the answers it gave from its own path switch: every route's status,
/// type and download name, and for every wrong path (empty segments, unknown tails, bad percent-encoding, ids that are no
/// number) the same status and the same error text, in the same order of checks (the session is opened before its tail
/// is refused).
@Suite struct WebRoutingTests {
    static let app = "/api/sessions/demo-app.3dstape"

    /// Wrong paths and what they have always been answered with.
    static let refusals: [(target: String, status: Int, error: String)] = [
        ("", 404, "not found"),
        ("/api", 404, "not found"),
        ("/api/", 404, "not found"),
        ("/apix/sessions", 404, "not found"),
        ("/api/GLOSSARY", 404, "not found"),
        ("/api/glossary/x", 404, "not found"),
        ("/api/diff/", 404, "not found"),
        ("/api/diff", 400, "give two sessions: /api/diff?a=NAME&b=NAME"),
        ("/api/sessions/", 404, "no session called  is served here"),
        ("/api/sessions//facets", 404, "no session called  is served here"),
        ("/api/sessions//exchanges/1", 404, "no session called  is served here"),
        ("/api/sessions/nosuch", 404, "no session called nosuch is served here"),
        ("/api/sessions/nosuch/bogus", 404, "no session called nosuch is served here"),
        ("/api/sessions/nosuch/exchanges/1", 404, "no session called nosuch is served here"),
        ("/api/sessions/nosuch/transactions/0", 404, "no session called nosuch is served here"),
        ("/api/sessions/no%20such/", 404, "no session called no such is served here"),
        ("/api/sessions/%zz", 400, "bad percent-encoding in the path"),
        ("/api/sessions/%zz/bogus", 400, "bad percent-encoding in the path"),
        ("/api/sessions/%zz/exchanges/1", 400, "bad percent-encoding in the path"),
        ("/api/sessions/%zz/transactions/1/diagram.svg", 400, "bad percent-encoding in the path"),
        ("/api/sessions/%zz/transactions/1/diagram.png", 404, "not found"),
        ("/api/sessions/%zz/facets/x", 404, "not found"),
        ("\(app)/", 404, "not found"),
        ("\(app)/bogus", 404, "not found"),
        ("\(app)/facets/x", 404, "not found"),
        ("\(app)/session.har/x", 404, "not found"),
        ("\(app)/exchanges/", 404, "no exchange "),
        ("\(app)/exchanges/abc", 404, "no exchange abc"),
        ("\(app)/exchanges/-1", 404, "no exchange -1"),
        ("\(app)/exchanges/99999", 404, "no exchange 99999"),
        ("\(app)/exchanges/1/diagram.svg", 404, "not found"),
        ("\(app)/transactions/", 404, "no transaction "),
        ("\(app)/transactions/0", 404, "no transaction 0"),
        ("\(app)/transactions/abc/diagram.svg", 404, "no transaction abc"),
        ("\(app)/transactions/1/diagram.png", 404, "not found"),
        ("\(app)/transactions/1/diagram.svg/x", 404, "not found"),
        ("\(app)/exchanges?offset=x", 400, "offset=x: expected a number"),
        ("\(app)/transactions?exchange=x", 400, "exchange=x: expected a number"),
        ("/api/diff?a=demo-app.3dstape&b=demo-browser.3dstape&pair_by=x", 400, "pair_by x: expected match or shape"),
    ]

    @Test func wrongPathsGetTheirOldAnswers() throws {
        let f = try WebFixture()
        defer { f.remove() }
        let api = WebAPI(catalog: try SessionCatalog(paths: [f.dir.path]))
        for (target, status, error) in Self.refusals {
            let (path, query) = WebInspector.split(target)
            let r = api.handle(path: path, query: query)
            let body = try JSON.parse(r.body)
            #expect(r.status == status && body["error"]?.stringValue == error && r.contentType == "application/json" && r.attachment == nil,
                    "\(target): \(r.status) \(body.compact)")
        }
    }

    @Test func everyRouteAnswersWithItsTypeAndDownloadName() throws {
        let f = try WebFixture()
        defer { f.remove() }
        let api = WebAPI(catalog: try SessionCatalog(paths: [f.dir.path]))
        let routes: [(target: String, type: String, attachment: String?)] = [
            ("/api/sessions", "application/json", nil),
            ("/api/glossary", "application/json", nil),
            ("/api/diff?a=demo-app.3dstape&b=demo-app.3dstape", "application/json", nil),
            (Self.app, "application/json", nil),
            ("/api/sessions/demo%2Dapp.3dstape", "application/json", nil),
            ("\(Self.app)/facets", "application/json", nil),
            ("\(Self.app)/exchanges?limit=2", "application/json", nil),
            ("\(Self.app)/exchanges/1", "application/json", nil),
            ("\(Self.app)/transactions", "application/json", nil),
            ("\(Self.app)/transactions/1", "application/json", nil),
            ("\(Self.app)/transactions/1/diagram.svg", "image/svg+xml", nil),
            ("\(Self.app)/validation", "application/json", nil),
            ("\(Self.app)/session.har", "application/json", "demo-app.har"),
            ("\(Self.app)/session.mmd", "text/plain; charset=utf-8", "demo-app.mmd"),
        ]
        for (target, type, attachment) in routes {
            let (path, query) = WebInspector.split(target)
            let r = api.handle(path: path, query: query)
            #expect(r.status == 200 && r.contentType == type && r.attachment == attachment && !r.body.isEmpty,
                    "\(target): \(r.status) \(String(decoding: r.body.prefix(200), as: UTF8.self))")
        }
        // The name is the decoded segment: the head names the session as the catalog does.
        let (_, head) = WebFixture.get(api, "/api/sessions/demo%2Dapp.3dstape")
        #expect(head["name"]?.stringValue == "demo-app.3dstape")
    }
}
