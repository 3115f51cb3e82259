import Foundation
import Testing
import TapCore
import TapStore
@testable import TapInspect

@Suite struct HARTests {
    static func har(_ xs: [StoredExchange]) -> [UInt8] { HAR.export(xs, meta: ["label": "t"], creatorVersion: "test").bytes }

    @Test func exportHasTheHAR12Shape() throws {
        let doc = try JSON.parse(Self.har(Fixtures.app))
        #expect(doc["log"]?["version"]?.stringValue == "1.2")
        guard case let .array(entries)? = doc["log"]?["entries"] else { Issue.record("no entries"); return }
        #expect(entries.count == Fixtures.app.count)
        for e in entries {
            for k in ["startedDateTime", "time", "request", "response", "cache", "timings"] { #expect(e[k] != nil, "\(k)") }
            for k in ["send", "wait", "receive"] {
                guard case let .number(n)? = e["timings"]?[k], let v = Double(n) else { Issue.record("timings.\(k)"); continue }
                #expect(v >= 0)
            }
        }
        // The 3DS view: message type, status and decrypted plaintext in the custom field.
        let challenge = try #require(entries.first { $0["request"]?["url"]?.stringValue?.hasSuffix("/acs/challenge") == true })
        guard case let .array(messages)? = challenge["_3dstape"]?["messages"] else { Issue.record("no _3dstape.messages"); return }
        #expect(messages.contains { $0["type"]?.stringValue == "CReq" && $0["json"]?["sdkCounterStoA"] != nil })
    }

    @Test func exportThenParseGivesTheSameExchanges() throws {
        let entries = try HAR.parse(Self.har(Fixtures.app + Fixtures.browser))
        let originals = Fixtures.app + Fixtures.browser
        #expect(entries.count == originals.count)
        for (e, x) in zip(entries, originals) {
            #expect(e.method == x.method && e.url == x.url && e.status == x.status)
            #expect(e.requestBody == x.requestBody && e.responseBody == x.responseBody)
            #expect(e.requestHeaders.map { "\($0.0): \($0.1)" } == x.requestHeaders.map { "\($0.0): \($0.1)" })
            #expect(abs(e.start - x.requestStart) < 0.000_002)
            #expect(abs((e.done ?? 0) - (x.done ?? 0)) < 0.000_01, "exchange \(x.id) done")
            #expect(abs((e.firstByte ?? 0) - (x.firstByte ?? 0)) < 0.000_01, "exchange \(x.id) first byte")
        }
    }

    /// Newcomer (issue 27): a pass-through session's HAR could not be imported back: its CONNECT entry's request.url is the
    /// authority form `host:port`, refused as "not an absolute URL". A CONNECT's target is read as the https origin; any
    /// other method still needs an absolute URL.
    @Test func aCONNECTEntryInAuthorityFormIsImported() throws {
        func har(_ method: String, _ url: String) -> [UInt8] {
            Array(("{\"log\":{\"version\":\"1.2\",\"entries\":[{\"startedDateTime\":\"2026-01-01T00:00:00Z\",\"request\":{\"method\":\"\(method)\","
                   + "\"url\":\"\(url)\",\"headers\":[]},\"response\":{\"status\":200,\"headers\":[]},\"_tunnel\":{}}]}}").utf8)
        }
        let entries = try HAR.parse(har("CONNECT", "localhost:19104"))
        #expect(entries.count == 1 && entries[0].method == "CONNECT" && entries[0].url == "https://localhost:19104")
        #expect(throws: (any Error).self) { try HAR.parse(har("GET", "localhost:19104")) }
    }

    @Test(arguments: [
        ("{", "not JSON"),
        ("{\"x\":1}", "no \"log\" object"),
        ("{\"log\":{\"version\":\"2.0\",\"entries\":[]}}", "HAR version 2.0 is not supported"),
        ("{\"log\":{\"version\":\"1.2\"}}", "log.entries is missing"),
        ("{\"log\":{\"version\":\"1.2\",\"entries\":[{\"startedDateTime\":\"2026-01-01T00:00:00Z\",\"request\":{\"url\":\"http://a/\"},\"response\":{}}]}}",
         "entry 1: request.method is missing"),
        ("{\"log\":{\"version\":\"1.2\",\"entries\":[{\"startedDateTime\":\"yesterday\",\"request\":{},\"response\":{}}]}}",
         "entry 1: startedDateTime 'yesterday' is not an ISO 8601 date"),
        ("{\"log\":{\"version\":\"1.2\",\"entries\":[{\"startedDateTime\":\"2026-01-01T00:00:00Z\",\"request\":{\"method\":\"GET\",\"url\":\"http://a/\"},"
         + "\"response\":{\"status\":200,\"content\":{\"text\":\"%%%not base64%%%\",\"encoding\":\"base64\"}}}]}}",
         "entry 1: response.content.text is marked base64 but does not decode"),
    ])
    func badHARIsRefusedWithOneClearLine(_ text: String, _ expected: String) {
        do {
            _ = try HAR.parse(Array(text.utf8))
            Issue.record("accepted: \(text)")
        } catch {
            #expect("\(error)".contains(expected), "\(error)")
            #expect(!"\(error)".contains("\n"))
        }
    }

    @Test func datesWithAnyFractionAndOffset() {
        #expect(HAR.parseDate("2026-11-29T21:01:49Z") == 1795986109)
        #expect(HAR.parseDate("2026-11-29T21:01:49.5Z") == 1795986109.5)
        #expect(HAR.parseDate("2026-11-29T22:01:49.250+01:00") == 1795986109.25)
        #expect(HAR.parseDate("2026-13-29T21:01:49Z") == nil)
        #expect(HAR.isoDate(1795986109.693359) == "2026-11-29T21:01:49.693359Z")
    }

    @Test func mermaidHasTheRolesAndOneNotePerTransaction() {
        let text = Mermaid.sequenceDiagram(Fixtures.app)
        #expect(text.hasPrefix("sequenceDiagram\n"))
        for p in ["participant SDK as SDK", "participant Server as 3DS Server", "participant DS as DS", "participant ACS as ACS"] {
            #expect(text.contains(p), "\(p)")
        }
        #expect(text.components(separatedBy: "Note over").count - 1 == 16)
        #expect(text.contains("SDK->>ACS: CReq"))
        #expect(text.contains("DS->>Server: RReq Y"))
        let browser = Mermaid.sequenceDiagram(Fixtures.browser)
        #expect(browser.contains("Browser->>ACS: CReq (form)") && browser.contains("Browser->>Server: CRes Y (form)"))
    }
}
