import Testing
import TapHTTP

/// The router the sandbox and the client's listener route by: exact paths, parameter segments, prefixes, a path with the
/// wrong method, and one nobody serves.
@Suite struct HTTPRouterTests {
    enum Route: Equatable, Sendable { case areq, submit, session, exchange, rreq, any }

    var router: HTTPRouter<Route> {
        var r = HTTPRouter<Route>()
        r.add("POST", "/ds/areq", .areq)
        r.add("POST", "/acs/challenge/submit", .submit)
        r.add("GET", "/api/sessions/:name", .session)
        r.add("GET", "/api/sessions/:name/exchanges/:id", .exchange)
        r.add(nil, "/3ds/rreq*", .rreq)
        return r
    }

    func found(_ m: HTTPRouter<Route>.Match) -> (Route, [String: String])? {
        if case let .found(route, parameters) = m { return (route, parameters) }
        return nil
    }

    @Test func exactPathsMatchWholly() {
        #expect(found(router.route(method: "POST", path: "/ds/areq"))?.0 == .areq)
        #expect(found(router.route(method: "POST", path: "/acs/challenge/submit"))?.0 == .submit)
        // Neither a longer nor a shorter path is the exact one.
        if case .notFound = router.route(method: "POST", path: "/ds/areq/x") {} else { Issue.record("/ds/areq/x matched") }
        if case .notFound = router.route(method: "POST", path: "/acs/challenge") {} else { Issue.record("/acs/challenge matched") }
        if case .notFound = router.route(method: "POST", path: "/ds/areqx") {} else { Issue.record("/ds/areqx matched") }
    }

    @Test func parameterSegmentsAreNamed() {
        let s = found(router.route(method: "GET", path: "/api/sessions/run1.3dstape"))
        #expect(s?.0 == .session && s?.1 == ["name": "run1.3dstape"])
        let x = found(router.route(method: "GET", path: "/api/sessions/a/exchanges/42"))
        #expect(x?.0 == .exchange && x?.1 == ["name": "a", "id": "42"])
        // A parameter is one non-empty segment.
        if case .notFound = router.route(method: "GET", path: "/api/sessions/") {} else { Issue.record("an empty segment matched") }
        if case .notFound = router.route(method: "GET", path: "/api/sessions/a/b") {} else { Issue.record("two segments matched one") }
    }

    /// `:name?` takes an empty segment too (the web API answers `/api/sessions/` itself), and is named without its `?`.
    @Test func aParameterMarkedEmptyAllowedMatchesAnEmptySegment() {
        var r = HTTPRouter<Route>()
        r.add("GET", "/api/sessions/:name?", .session)
        r.add("GET", "/api/sessions/:name?/exchanges/:id?", .exchange)
        #expect(found(r.route(method: "GET", path: "/api/sessions/"))?.1 == ["name": ""])
        #expect(found(r.route(method: "GET", path: "/api/sessions/a"))?.1 == ["name": "a"])
        let x = found(r.route(method: "GET", path: "/api/sessions//exchanges/"))
        #expect(x?.0 == .exchange && x?.1 == ["name": "", "id": ""])
        // Still one segment each: no more, no fewer.
        if case .notFound = r.route(method: "GET", path: "/api/sessions") {} else { Issue.record("a missing segment matched") }
        if case .notFound = r.route(method: "GET", path: "/api/sessions/a/b") {} else { Issue.record("two segments matched one") }
    }

    @Test func prefixesTakeAnyMethodAndAnyTail() {
        for (method, path) in [("POST", "/3ds/rreq"), ("GET", "/3ds/rreq?x=1"), ("PUT", "/3ds/rreq/abc")] {
            #expect(found(router.route(method: method, path: path))?.0 == .rreq, "\(method) \(path)")
        }
        if case .notFound = router.route(method: "POST", path: "/3ds/rre") {} else { Issue.record("a shorter path matched a prefix") }
    }

    @Test func aKnownPathWithAnotherMethodIsNotAllowed() {
        guard case let .methodNotAllowed(allowed) = router.route(method: "GET", path: "/ds/areq") else {
            Issue.record("GET /ds/areq was not refused as a method not allowed")
            return
        }
        #expect(allowed == ["POST"])
    }

    @Test func anUnknownPathIsNotFound() {
        for path in ["/", "/nothing", "", "ds/areq"] {
            if case .notFound = router.route(method: "POST", path: path) {} else { Issue.record("\(path) matched") }
        }
    }

    @Test func routesAreTriedInOrder() {
        var r = HTTPRouter<Route>()
        r.add(nil, "/a*", .any)
        r.add("POST", "/a/b", .areq)
        #expect(found(r.route(method: "POST", path: "/a/b"))?.0 == .any)
    }
}
