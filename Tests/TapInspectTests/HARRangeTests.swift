import Foundation
import Testing
import TapCore
import TapStore
@testable import TapInspect

/// Hardening, round two, defect 2: a HAR entry with `"status": 1e20` trapped `import` in `Int(status * 1000)`, and a
/// stored `t_request_start` of 1e300 trapped `export --format har` (and the web server) in `isoDate`. Imported numbers
/// are refused with the entry and the field; stored times are clamped to what ISO 8601 can write.
@Suite struct HARRangeTests {
    static func entry(status: String = "200", wait: String = "5") -> String {
        #"{"log":{"version":"1.2","entries":[{"startedDateTime":"2026-01-01T00:00:00Z","request":{"method":"GET","url":"http://a/"},"response":{"status":200},"timings":{"send":1,"wait":5,"receive":1}},"#
            + #"{"startedDateTime":"2026-01-01T00:00:01Z","request":{"method":"GET","url":"http://a/"},"response":{"status":\#(status)},"timings":{"send":1,"wait":\#(wait),"receive":1}}]}}"#
    }

    @Test(arguments: [
        (entry(status: "1e20"), "entry 2: response.status 1e20 is out of range: an HTTP status is from 100 to 999 (0 for no response)"),
        (entry(status: "1e400"), "entry 2: response.status 1e400 is out of range"),
        (entry(status: "1000"), "entry 2: response.status 1000 is out of range"),
        (entry(status: "\"200\""), "entry 2: response.status is not a number"),
        (entry(wait: "1e300"), "entry 2: timings.wait 1e300 is out of range: a timing must be from 0 to 86400000 ms (24h)"),
        (entry(wait: "1e400"), "entry 2: timings.wait 1e400 is out of range"),
        (entry(wait: "86400001"), "entry 2: timings.wait 86400001 is out of range"),
    ])
    func numbersOutOfRangeAreRefusedNamingTheEntryAndField(_ text: String, _ expected: String) {
        do {
            _ = try HAR.parse(Array(text.utf8))
            Issue.record("accepted: \(expected)")
        } catch {
            #expect("\(error)".hasPrefix(expected), "\(error)")
        }
    }

    @Test func numbersInRangeAreKept() throws {
        let entries = try HAR.parse(Array(Self.entry(status: "0", wait: "86400000").utf8))
        #expect(entries[1].status == nil && entries[1].error == "no response in the HAR entry", "0: no response")
        let negative = try HAR.parse(Array(Self.entry(status: "-1", wait: "-1").utf8))
        #expect(negative[1].status == nil && negative[1].requestSent == negative[1].start + 0.001, "-1: the phase did not happen")
        #expect(try HAR.parse(Array(Self.entry(status: "599", wait: "86400000").utf8))[1].firstByte == 1_767_225_601.001 + 86_400)
    }

    @Test func storedTimesOutsideTheCalendarAreClamped() {
        #expect(HAR.isoDate(1e300) == "9999-12-31T23:59:59.000000Z")
        #expect(HAR.isoDate(.infinity) == "9999-12-31T23:59:59.000000Z")
        #expect(HAR.isoDate(-1e300) == "0001-01-01T00:00:00.000000Z")
        #expect(HAR.isoDate(.nan) == "1970-01-01T00:00:00.000000Z")
        #expect(HAR.isoDate(1795986109.693359) == "2026-11-29T21:01:49.693359Z")
    }

    @Test func aSessionWithAHugeStartExportsAndImportsBack() throws {
        var xs = Array(Fixtures.app.prefix(3))
        try #require(xs.count == 3)
        xs[1].requestStart = 1e300
        xs[2].clientAbortAt = .infinity
        xs[2].done = -.infinity
        let doc = HAR.export(xs, meta: [:], creatorVersion: "test")
        #expect(doc["log"]?["entries"]?.arrayValue?[1]["startedDateTime"]?.stringValue == "9999-12-31T23:59:59.000000Z")
        #expect(try HAR.parse(doc.bytes).count == 3, "what export writes, import reads")
    }
}
