import Foundation
import Synchronization
import Testing
import TapCore
import TapCrypto
import TapHTTPService
import TapNet
import TapSandbox

/// Issue 26: the ACS's RReq goes out on the sandbox's loop through one sender (the replayer's), not on a blocked thread
/// each: a 3DS Server whose results endpoint answers slowly holds up nothing but its own RReqs.
@Suite(.serialized) struct SandboxRReqTests {
    /// A decoupled browser AReq (its RReq follows `decoupledDelay` after the ARes) whose results go to `rreqURL`.
    static func decoupledAReq(rreqURL: String) -> JSON {
        .object([("threeDSServerTransID", .string(UUID().uuidString.lowercased())), ("messageType", .string("AReq")),
                 ("messageVersion", .string("2.2.0")), ("deviceChannel", .string("02")), ("messageCategory", .string("02")),
                 ("acctNumber", .string("4000000000001133")), ("threeDSServerRefNumber", .string("R")), ("threeDSServerURL", .string(rreqURL)),
                 ("threeDSRequestorID", .string("r")), ("threeDSRequestorName", .string("n")), ("acquirerBIN", .string("412345")),
                 ("acquirerMerchantID", .string("m")), ("mcc", .string("5999")), ("merchantCountryCode", .string("826")),
                 ("merchantName", .string("shop")), ("notificationURL", .string("http://127.0.0.1:9/notify")),
                 ("browserAcceptHeader", .string("text/html")), ("browserUserAgent", .string("t")), ("browserLanguage", .string("en"))])
    }

    @Test func aSlowResultsEndpointDoesNotHoldUpOtherTransactions() throws {
        // The 3DS Server: /slow answers an RReq after 8 s, /fast at once; on a loop of its own.
        let server = try ServiceStack.background("3dstape-test-rreq-server")
        let slowSeen = Locked(0)
        let results = HTTPServer(loop: server.loop) { req, _, respond in
            let rres = HTTPReply.json(Array(#"{"messageType":"RRes","resultsStatus":"01"}"#.utf8))
            if req.head.target.hasPrefix("/slow") {
                slowSeen.withLock { $0 += 1 }
                server.loop.schedule(after: 8) { respond(rres) }
            } else {
                respond(rres)
            }
        }
        let serverAddress = try results.start(on: HostPort(host: "127.0.0.1", port: 0))
        server.onStop { results.stop() }
        server.start()
        defer { server.stop() }

        let lines = Locked<[(Date, String)]>([])
        let stack = try ServiceStack.background("3dstape-test-rreq-sandbox")
        var options = SandboxOptions()
        options.decoupledDelay = 0.05
        let sandbox = Sandbox(keys: SandboxHarness.keys, options: options, loop: stack.loop) { line in lines.withLock { $0.append((Date(), line)) } }
        try sandbox.start(on: HostPort(host: "127.0.0.1", port: 0), tls: false)
        stack.onStop { sandbox.stop() }
        stack.start()
        defer { stack.stop() }

        let client = BlockingHTTPClient(tls: try TLSContext(clientRoots: []), timeout: 5)
        func areq(_ rreqURL: String) throws {
            let r = try client.send("POST", HTTPURL(sandbox.baseURL + "/ds/areq")!, headers: [("Content-Type", "application/json")],
                                    body: Self.decoupledAReq(rreqURL: rreqURL).bytes)
            #expect(try JSON.parse(r.body)["transStatus"]?.stringValue == "D", "\(String(decoding: r.body, as: UTF8.self))")
        }
        // More slow RReqs than the machine has cores: a thread blocked on each leaves none for the next RReq.
        let slowCount = max(8, 2 * ProcessInfo.processInfo.activeProcessorCount)
        for _ in 0..<slowCount { try areq("http://\(serverAddress)/slow") }
        let slowDeadline = Date().addingTimeInterval(3)
        while slowSeen.withLock({ $0 }) < slowCount, Date() < slowDeadline { usleep(10_000) }
        #expect(slowSeen.withLock { $0 } == slowCount, "every slow RReq reached the server")

        let fastURL = "http://\(serverAddress)/fast"
        let sent = Date()
        try areq(fastURL)
        let deadline = Date().addingTimeInterval(3)
        var answered: Date?
        while answered == nil, Date() < deadline {
            answered = lines.withLock { $0.first { $0.1.contains("→ \(fastURL): RRes 01") }?.0 }
            if answered == nil { usleep(10_000) }
        }
        let waited = answered.map { $0.timeIntervalSince(sent) }
        #expect(waited != nil && waited! < 1.5, "the fast RReq's RRes came \(waited.map { String(format: "%.2f s", $0) } ?? "never") after its AReq")
        // The slow ones are still outstanding: the fast one did not wait for them.
        #expect(!lines.withLock { $0.contains { $0.1.contains("/slow: RRes") } })
    }

    /// An RReq is due (`Sandbox.rreqsDue`) from the moment the ACS schedules it until its RRes is in: what `demo` waits on
    /// before it stops its recorder.
    @Test func anRReqIsDueFromItsSchedulingUntilItsRRes() throws {
        let server = try ServiceStack.background("3dstape-test-rreq-due-server")
        let results = HTTPServer(loop: server.loop) { _, _, respond in
            server.loop.schedule(after: 0.4) { respond(HTTPReply.json(Array(#"{"messageType":"RRes","resultsStatus":"01"}"#.utf8))) }
        }
        let serverAddress = try results.start(on: HostPort(host: "127.0.0.1", port: 0))
        server.onStop { results.stop() }
        server.start()
        defer { server.stop() }

        let lines = Locked<[String]>([])
        let stack = try ServiceStack.background("3dstape-test-rreq-due-sandbox")
        var options = SandboxOptions()
        options.decoupledDelay = 0.3
        let sandbox = Sandbox(keys: SandboxHarness.keys, options: options, loop: stack.loop) { line in lines.withLock { $0.append(line) } }
        try sandbox.start(on: HostPort(host: "127.0.0.1", port: 0), tls: false)
        stack.onStop { sandbox.stop() }
        stack.start()
        defer { stack.stop() }

        #expect(sandbox.rreqsDue.value == 0)
        let client = BlockingHTTPClient(tls: try TLSContext(clientRoots: []), timeout: 5)
        let r = try client.send("POST", HTTPURL(sandbox.baseURL + "/ds/areq")!, headers: [("Content-Type", "application/json")],
                                body: Self.decoupledAReq(rreqURL: "http://\(serverAddress)/results").bytes)
        #expect(try JSON.parse(r.body)["transStatus"]?.stringValue == "D")
        #expect(sandbox.rreqsDue.value == 1, "due as soon as the ARes says D, before the RReq is sent")
        #expect(!sandbox.rreqsDue.waitForNone(within: 0.2), "still due: not sent yet, or sent and unanswered")
        #expect(sandbox.rreqsDue.waitForNone(within: 5))
        #expect(lines.withLock { $0.contains { $0.contains("/results: RRes 01") } }, "no longer due once the RRes is in")
    }
}
