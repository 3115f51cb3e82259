import Foundation
import Testing
import TapCore
import TapCrypto
import TapHTTP
import TapHTTPService
import TapNet
@testable import TapSandbox

/// Issue 26: the sandbox and the client's RReq listener route through `HTTPRouter`, with the answers of before: a path
/// nobody serves, and a served path asked with another method, are both 404 `no such endpoint` at the sandbox.
@Suite(.serialized) struct SandboxRoutingTests {
    @Test func theSandboxAnswersUnknownPathsAndWrongMethodsAsBefore() throws {
        let h = try SandboxHarness()
        defer { h.stop() }
        let client = BlockingHTTPClient(tls: try TLSContext(clientRoots: []), timeout: 5)
        func send(_ method: String, _ path: String) throws -> HTTPResponse {
            try client.send(method, HTTPURL(h.sandbox.baseURL + path)!, headers: [("Content-Type", "application/json")],
                            body: method == "GET" ? [] : Array("{}".utf8))
        }
        for (method, path) in [("GET", "/ds/areq"), ("POST", "/nothing"), ("POST", "/ds/areq/x"), ("POST", "/"), ("PUT", "/acs/method")] {
            let r = try send(method, path)
            #expect(r.head.status == 404, "\(method) \(path)")
            #expect(String(decoding: r.body, as: UTF8.self) == #"{"error":"no such endpoint"}"#, "\(method) \(path)")
        }
        let index = try send("GET", "/?x=1")
        #expect(index.head.status == 200)
        // The index lists the endpoints a client calls, in the order of the routes (not the challenge page's form target,
        // nor itself), and each one it lists is served.
        let listed = try JSON.parse(index.body)["endpoints"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(listed == ["POST /ds/areq", "POST /ds/preq", "POST /acs/challenge", "POST /acs/method", "POST /pxp/tokens",
                           "POST /pxp/authentication/pre-initiate", "POST /pxp/transactions", "POST /tp/jwt/"])
        for endpoint in listed {
            let parts = endpoint.split(separator: " ").map(String.init)
            #expect(try send(parts[0], parts[1]).head.status != 404, "\(endpoint)")
        }
        // A routed endpoint gets its handler (an AReq that is not JSON is answered with the DS's Erro, not a 404).
        let areq = try send("POST", "/ds/areq?trace=1")
        #expect(areq.head.status == 200 && (try? JSON.parse(areq.body))?["messageType"]?.stringValue == "Erro")
    }

    @Test func theListenerTakesItsPathsWithAnyMethodAndTail() {
        func route(_ method: String, _ target: String) -> SDKClient.ListenerRoute? {
            if case let .found(r, _) = SDKClient.listenerRouter.route(method: method, path: target) { return r }
            return nil
        }
        #expect(route("POST", "/3ds/rreq") == .rreq)
        #expect(route("POST", "/3ds/rreq?tx=1") == .rreq)
        #expect(route("GET", "/3ds/method/abc") == .method)
        #expect(route("POST", "/3ds/notify") == .notify)
        #expect(route("POST", "/3ds/other") == nil)
        #expect(route("POST", "/") == nil)
    }
}
