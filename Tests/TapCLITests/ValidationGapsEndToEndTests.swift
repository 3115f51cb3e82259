import Foundation
import Testing
import TapCore

/// Issue 29, end to end: the issue's messages recorded by the real `3dstape record --reverse` (in front of
/// tools/testing/upstream.py) and imported from a HAR, then `3dstape validate --json` on each session. Before, both
/// validated clean: the browser CRes lacked nothing the rules asked for, the masked values were not looked at, and the
/// placeholder UUID had the right shape.
@Suite(.serialized) struct ValidationGapsEndToEndTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
    static let placeholder = "12341234-1234-1234-1234-123412341234"
    static let acs = "d7c1ee99-9478-44a6-b1f2-391e29c6b340", ds = "0b2c7d54-ff21-4a4c-9f8a-3a0f3cb1e9a3"

    /// The issue's messages, as a client sends them: (path, content type, body).
    static let requests: [(String, String, String)] = {
        let browserCRes = #"{"threeDSServerTransID":"8a880dc0-d2d2-4067-bcb1-b08d1690b26e","acsTransID":"\#(acs)","messageType":"CRes","messageVersion":"2.2.0","transStatus":"Y"}"#
        return [
            ("/ds/rreq", "application/json",
             #"{"threeDSServerTransID":"\#(placeholder)","dsTransID":"\#(ds)","acsTransID":"\#(acs)","messageType":"RReq","messageVersion":"2.2.0","messageCategory":"01","transStatus":"Y","eci":"05","authenticationValue":"dGVzdA==","interactionCounter":"01"}"#),
            ("/acs/creq", "application/json",
             #"{"threeDSServerTransID":"6f1c2a9e-3b7d-4e2a-9c1f-5d8e7a6b4c3d","acsTransID":"\#(acs)","sdkTransID":"b2d2b6b4-6f5e-4c1c-9d6e-0c6f3f0e9a11","messageType":"CReq","messageVersion":"2.2.0","sdkCounterStoA":"000","challengeDataEntry":"\#(String(repeating: "1", count: 50))"}"#),
            ("/3ds/notify", "application/x-www-form-urlencoded", "cres=" + Base64URL.encode(Array(browserCRes.utf8))),
        ]
    }()

    /// `validate --json` on a session: the findings as (rule, severity, detail).
    static func findings(_ session: String) throws -> [(rule: String, severity: String, detail: String)] {
        let r = try CLIRunner.run(["validate", session, "--json"])
        #expect(r.status == 1, "\(r.stdout)\(r.stderr)")
        guard case let .array(items) = try JSON.parse(r.stdout) else { Issue.record("not a JSON array: \(r.stdout)"); return [] }
        return items.map { ($0["rule"]?.stringValue ?? "", $0["severity"]?.stringValue ?? "", $0["detail"]?.stringValue ?? "") }
    }

    static func expectTheIssuesFindings(_ found: [(rule: String, severity: String, detail: String)], _ what: String) {
        let rules = found.map(\.rule)
        #expect(found.contains { $0.rule == "RReq.authenticationValue.format" && $0.severity == "error" && $0.detail.hasPrefix("expected 28 characters of base64") },
                "\(what): \(rules)")
        #expect(found.contains { $0.rule == "CReq.challengeDataEntry.format" && $0.detail.hasPrefix("more than 45 characters") }, "\(what): \(rules)")
        #expect(found.contains { $0.rule == "CRes.challengeCompletionInd.required" && $0.severity == "error" }, "\(what): \(rules)")
        #expect(found.contains { $0.rule == "RReq.threeDSServerTransID.rfc4122" && $0.severity == "warning" }, "\(what): \(rules)")
    }

    @Test func aRecordingOfTheIssuesMessagesFailsValidation() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let session = dir.appendingPathComponent("s.3dstape").path
        let up = try Spawned("/usr/bin/env", ["python3", Self.root.appendingPathComponent("tools/testing/upstream.py").path])
        defer { up.stop() }
        let upPort = try up.port(after: "listening ")
        let rec = try Spawned(CLIRunner.binary.path, ["record", "--listen", "127.0.0.1:0", "--session", session, "--quiet",
                                                      "--reverse", "http://127.0.0.1:\(upPort)"],
                              environment: ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path])
        defer { rec.stop() }
        let base = "http://127.0.0.1:\(try rec.port(after: "recording on http://127.0.0.1:"))"
        for (path, type, body) in Self.requests {
            let r = try sh(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Content-Type: \(type)", "--data-binary", body, base + path])
            #expect(r.status == 0 && r.out == "200", "\(path): \(r.out) \(r.err)")
        }
        rec.interrupt()
        #expect(try rec.wait() == 0, "\(rec.stderr)")
        // The values are gone from the file; their verdicts are what validate reads.
        let stored = try sh(["sqlite3", session, "SELECT CAST(request_body AS TEXT) FROM exchanges"]).out
        #expect(!stored.contains("dGVzdA==") && !stored.contains("1111111111") && stored.contains("*** (malformed: expected 28 characters of base64)"), "\(stored)")
        Self.expectTheIssuesFindings(try Self.findings(session), "recorded")
    }

    @Test func anImportOfTheIssuesMessagesFailsValidation() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let entries: [JSON] = Self.requests.map { path, type, body in
            .object([
                ("startedDateTime", .string("2026-11-30T16:00:00.000Z")),
                ("request", .object([("method", .string("POST")), ("url", .string("https://3ds.example" + path)), ("headers", .array([])),
                                     ("postData", .object([("mimeType", .string(type)), ("text", .string(body))]))])),
                ("response", .object([("status", .number("200")), ("headers", .array([])),
                                      ("content", .object([("mimeType", .string("application/json")), ("text", .string("{}"))]))])),
                ("timings", .object([("send", .number("1")), ("wait", .number("2")), ("receive", .number("1"))])),
            ])
        }
        let file = dir.appendingPathComponent("published.har").path
        try Data(JSON.object([("log", .object([("version", .string("1.2")), ("entries", .array(entries))]))]).bytes).write(to: URL(fileURLWithPath: file))
        let session = dir.appendingPathComponent("imported.3dstape").path
        let r = try CLIRunner.run(["import", file, "--session", session])
        #expect(r.status == 0, "\(r.stderr)")
        Self.expectTheIssuesFindings(try Self.findings(session), "imported")
        // Exported and imported again, the verdicts travel in the mask text.
        let har = dir.appendingPathComponent("again.har").path
        #expect(try CLIRunner.run(["export", session, "--format", "har", "--out", har]).status == 0)
        let again = dir.appendingPathComponent("again.3dstape").path
        #expect(try CLIRunner.run(["import", har, "--session", again]).status == 0)
        Self.expectTheIssuesFindings(try Self.findings(again), "exported and imported again")
    }
}
