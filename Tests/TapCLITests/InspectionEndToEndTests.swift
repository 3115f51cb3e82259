import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing
import TapCore

/// validate, diff, export and import as a user runs them, on copies of the checked-in demo sessions.
@Suite struct InspectionEndToEndTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized

    /// A fresh directory holding copies of the sample sessions.
    static func workspace() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("inspect-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for name in ["demo-app", "demo-browser", "demo-pxp", "demo-trustpayments", "sample-reverse"] {
            try FileManager.default.copyItem(at: root.appendingPathComponent("sessions/\(name).3dstape"),
                                             to: dir.appendingPathComponent("\(name).3dstape"))
        }
        return dir
    }

    @Test func validateTheDemoSessionsCleanAndTheSyntheticSampleWithFindings() throws {
        let dir = try Self.workspace()
        defer { try? FileManager.default.removeItem(at: dir) }
        for name in ["demo-app", "demo-browser", "demo-pxp", "demo-trustpayments"] {
            let r = try CLIRunner.run(["validate", dir.appendingPathComponent("\(name).3dstape").path])
            #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
            #expect(r.stdout.contains("0 errors, 0 warnings"))
        }
        let bad = try CLIRunner.run(["validate", dir.appendingPathComponent("sample-reverse.3dstape").path, "--json"])
        #expect(bad.status == 1)
        guard case let .array(findings) = try JSON.parse(bad.stdout) else { Issue.record("not a JSON array"); return }
        #expect(findings.contains { $0["rule"]?.stringValue == "AReq.messageCategory.required" && $0["element"]?.stringValue == "/messageCategory" })
        #expect(findings.contains { $0["rule"]?.stringValue == "tx.challenge-status" })
        let rules = try CLIRunner.run(["validate", "--rules"])
        #expect(rules.status == 0 && rules.stdout.contains("AReq.sdkEphemPubKey") && rules.stdout.contains("tx.sdk-counter"))
        // The FORMAT column lists a value set sorted (it printed the Set in its own order, which changed from run to run),
        // in words (it printed Swift's description of the case: `values(Set(["2.1.0", …]), added: [:])`).
        #expect(rules.stdout.contains("AReq.messageVersion") && rules.stdout.contains("one of 2.1.0, 2.2.0, 2.3.1 "), "\(rules.stdout)")
        #expect(!rules.stdout.contains("values(Set(") && !rules.stdout.contains("added: ["))
        #expect(rules.stdout.contains("UUID (RFC 4122, 36 characters)"))
        let both = try CLIRunner.run(["validate", "--rules", "sessions/demo-app.3dstape"])
        #expect(both.status == 2 && both.stderr.contains("--rules lists the rules and reads no session"), "\(both.stderr)")
        // --json: the same rules, the formats whole.
        let listed = try CLIRunner.run(["validate", "--rules", "--json"])
        #expect(listed.status == 0)
        let object = try JSON.parse(listed.stdout)
        guard case let .array(elements)? = object["elements"], case let .array(messageRules)? = object["messageRules"] else {
            Issue.record("not the rules object: \(listed.stdout.prefix(200))"); return
        }
        #expect(elements.contains { $0["id"]?.stringValue == "AReq.messageVersion" && $0["format"]?.stringValue == "one of 2.1.0, 2.2.0, 2.3.1"
            && $0["required"]?.stringValue == "yes" && $0["since"]?.stringValue == "2.1.0" })
        #expect(messageRules.contains { $0["id"]?.stringValue == "tx.sdk-counter" })
        // The rules on a message as a whole are listed from the validator's own list (they were spelt out again here).
        let messageRuleIDs = Set(messageRules.compactMap { $0["id"]?.stringValue })
        #expect(messageRuleIDs.contains("CRes.final-elements") && messageRuleIDs.contains("ARes.3ri-status"))
        #expect(rules.stdout.contains("\(elements.count) element rules, \(messageRules.count) message and transaction rules"))
        #expect(messageRules.allSatisfy { !($0["id"]?.stringValue ?? "<").hasPrefix("<") }, "only rules, not how findings name them")
        #expect(rules.stdout.contains("  <rule>.required: ") && object["findingNames"] != nil)
        #expect(try CLIRunner.run(["validate", "--rules"]).stdout == rules.stdout)
    }

    /// `ls` cuts a long label short: one 5 MB label padded every line of the table to 5 MB (hostile-file helper).
    @Test func lsCutsALongLabelShort() throws {
        let dir = try Self.workspace()
        defer { try? FileManager.default.removeItem(at: dir) }
        _ = try sh(["sqlite3", dir.appendingPathComponent("sample-reverse.3dstape").path,
                    "UPDATE meta SET value = printf('%.*c', 5000000, 'L') WHERE key = 'label'"])
        let r = try CLIRunner.run(["ls", dir.path])
        #expect(r.status == 0 && r.stdout.contains("L… (5000000 bytes)"), "\(r.stdout.prefix(400))")
        #expect(r.stdout.utf8.count < 4096, "\(r.stdout.utf8.count) bytes")
    }

    /// `show` lists a session's events by kind and prints the writer's backpressure in full; `--json` carries them.
    @Test func showSaysWhatTheEventsAre() throws {
        let dir = try Self.workspace()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("sample-reverse.3dstape").path
        let before = try CLIRunner.run(["show", file])
        #expect(before.status == 0 && !before.stdout.contains("events:"), "the sample has no events")
        let line = "the session writer fell behind the traffic: 3 of 9 requests waited 0.500 ms on average (1.5 ms in all)"
        _ = try sh(["sqlite3", file, "INSERT INTO events(at, kind, detail) VALUES (1790000000.5, 'rejected', 'x: 400 bad'), "
                    + "(1790000001.5, 'rejected', 'y: 431 big'), (1790000002.5, 'backpressure', '\(line)')"])
        let after = try CLIRunner.run(["show", file])
        #expect(after.status == 0)
        #expect(after.stdout.contains("events: 1 backpressure, 2 rejected ('--json' lists them)"), "\(after.stdout)")
        #expect(after.stdout.contains("! " + line))
        let json = try JSON.parse(try CLIRunner.run(["show", file, "--json"]).stdout)
        guard case let .array(events)? = json["events"] else { Issue.record("no events in --json"); return }
        #expect(events.map { $0["kind"]?.stringValue ?? "" } == ["rejected", "rejected", "backpressure"])
        #expect(events.last?["detail"]?.stringValue == line)
    }

    /// A HAR entry whose URL holds a NUL byte: imported, shown (escaped) and exported whole. SQLite's text was read up to its
    /// first NUL, so `show`, `--json` and the exports printed `http://h.example/a`. One exchange is said as one.
    @Test func aURLWithANulByteComesBackWhole() throws {
        let dir = try Self.workspace()
        defer { try? FileManager.default.removeItem(at: dir) }
        let url = "http://h.example/a\u{0}b?x=1"
        let entry = JSON.object([
            ("startedDateTime", .string("2026-01-01T00:00:00.000Z")), ("time", .number("1")),
            ("request", .object([("method", .string("GET")), ("url", .string(url)), ("httpVersion", .string("HTTP/1.1")),
                                 ("headers", .array([])), ("queryString", .array([])), ("cookies", .array([])),
                                 ("headersSize", .number("-1")), ("bodySize", .number("0"))])),
            ("response", .object([("status", .number("200")), ("statusText", .string("OK")), ("httpVersion", .string("HTTP/1.1")),
                                  ("headers", .array([])), ("cookies", .array([])),
                                  ("content", .object([("size", .number("0")), ("mimeType", .string("text/plain"))])),
                                  ("redirectURL", .string("")), ("headersSize", .number("-1")), ("bodySize", .number("0"))])),
            ("cache", .object([])), ("timings", .object([("send", .number("0")), ("wait", .number("1")), ("receive", .number("0"))])),
        ])
        let har = dir.appendingPathComponent("nul.har").path
        let doc = JSON.object([("log", .object([("version", .string("1.2")),
                                                ("creator", .object([("name", .string("t")), ("version", .string("1"))])),
                                                ("entries", .array([entry]))]))])
        try Data(doc.compact.utf8).write(to: URL(fileURLWithPath: har))
        let session = dir.appendingPathComponent("nul.3dstape").path
        let imported = try CLIRunner.run(["import", har, "--session", session])
        #expect(imported.status == 0 && imported.stdout.contains("1 exchange imported"), "\(imported.stdout)\(imported.stderr)")
        let show = try CLIRunner.run(["show", session])
        #expect(show.stdout.contains("http://h.example/a\\x00b?x=1") && show.stdout.contains("1 exchange; "), "\(show.stdout)")
        let json = try JSON.parse(try CLIRunner.run(["show", session, "--json"]).stdout)
        guard case let .array(exchanges)? = json["exchanges"] else { Issue.record("no exchanges in --json"); return }
        #expect(exchanges.first?["url"]?.stringValue == url)
    }

    @Test func exportHARImportItAndDiffGivesNoDifferences() throws {
        let dir = try Self.workspace()
        defer { try? FileManager.default.removeItem(at: dir) }
        let session = dir.appendingPathComponent("demo-app.3dstape").path
        let har = dir.appendingPathComponent("demo-app.har").path
        let export = try CLIRunner.run(["export", session, "--format", "har", "--out", har])
        #expect(export.status == 0, "\(export.stderr)")
        let mode = (try FileManager.default.attributesOfItem(atPath: har)[.posixPermissions] as? Int) ?? 0
        #expect(mode == 0o600)
        #expect(try CLIRunner.run(["export", session, "--format", "har", "--out", har]).status == 2) // no overwrite without --force: usage (issue 26)
        let imported = dir.appendingPathComponent("imported.3dstape").path
        let r = try CLIRunner.run(["import", har, "--session", imported, "--name", "from HAR"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("41 exchanges imported"))
        let diff = try CLIRunner.run(["diff", session, imported, "--timing-tolerance", "1ms"])
        #expect(diff.status == 0, "\(diff.stdout)")
        #expect(diff.stdout.contains("16 paired; no differences"))
        let show = try CLIRunner.run(["show", imported])
        #expect(show.stdout.contains("label: from HAR") && show.stdout.contains("AReq 2.2.0 → ARes 2.2.0 C"))
        #expect(show.stdout.contains("CReq 2.2.0 (imported in clear) → CRes 2.2.0 Y (imported in clear)"), "the app channel's plaintext comes back from _3dstape, said to be imported: \(show.stdout)")
        let other = try CLIRunner.run(["diff", session, dir.appendingPathComponent("demo-browser.3dstape").path, "--json"])
        #expect(other.status == 1)
        #expect((try JSON.parse(other.stdout))["differences"] != nil)
    }

    /// Sessions too different to pair within `--max-pairing-steps`: one line that says so, exit 2 (not 1, "differences").
    @Test func diffPastThePairingLimitSaysSo() throws {
        let dir = try Self.workspace()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (app, browser) = (dir.appendingPathComponent("demo-app.3dstape").path, dir.appendingPathComponent("demo-browser.3dstape").path)
        let r = try CLIRunner.run(["diff", app, browser, "--max-pairing-steps", "100"])
        #expect(r.status == 2)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.hasPrefix("3dstape: diff: the sessions are too different to pair: 16 transactions in A and 4 in B, of which at least "), "\(r.stderr)")
        #expect(r.stderr.hasSuffix("more than the limit of 100 steps; compare parts of them, or raise --max-pairing-steps\n"))
        for bad in ["0", "-5", "lots"] {
            let b = try CLIRunner.run(["diff", app, browser, "--max-pairing-steps", bad])
            #expect(b.status == 2 && b.stderr.contains("--max-pairing-steps \(bad): expected a positive number"), "\(b.stderr)")
        }
        #expect(try CLIRunner.run(["diff", app, browser]).status == 1, "within the default limit")
    }

    @Test func badHARIsOneLineAndWritesNothing() throws {
        let dir = try Self.workspace()
        defer { try? FileManager.default.removeItem(at: dir) }
        let cases = [
            ("not json {", "not JSON"),
            (#"{"log":{"version":"1.2","entries":[{"startedDateTime":"2026-01-01T00:00:00Z","request":{"method":"GET","url":"http://a/"},"response":{"status":200,"content":{"text":"!!","encoding":"base64"}}}]}}"#,
             "entry 1: response.content.text is marked base64 but does not decode"),
            (#"{"log":{"version":"9","entries":[]}}"#, "HAR version 9 is not supported"),
        ]
        for (i, (text, message)) in cases.enumerated() {
            let har = dir.appendingPathComponent("bad\(i).har")
            try Data(text.utf8).write(to: har)
            let out = dir.appendingPathComponent("bad\(i).3dstape").path
            let r = try CLIRunner.run(["import", har.path, "--session", out])
            #expect(r.status == 1)
            #expect(r.stderr.contains(message), "\(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1)
            #expect(!FileManager.default.fileExists(atPath: out))
        }
    }

    @Test func mermaidAndJSONLines() throws {
        let dir = try Self.workspace()
        defer { try? FileManager.default.removeItem(at: dir) }
        let session = dir.appendingPathComponent("demo-app.3dstape").path
        let mermaid = try CLIRunner.run(["export", session, "--format", "mermaid"])
        #expect(mermaid.status == 0 && mermaid.stdout.hasPrefix("sequenceDiagram"))
        #expect(mermaid.stdout.contains("SDK->>ACS: CReq") && mermaid.stdout.contains("Server->>DS: AReq"))
        let lines = try CLIRunner.run(["export", session, "--format", "jsonl"])
        let rows = lines.stdout.split(separator: "\n")
        #expect(rows.count == 41)
        #expect(rows.allSatisfy { (try? JSON.parse(String($0)))?["method"]?.stringValue == "POST" })
        let svg = try CLIRunner.run(["export", session, "--format", "svg"])
        #expect(svg.status == 0 && svg.stdout.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\""))
        #expect(svg.stdout.components(separatedBy: "class=\"message request\"").count - 1 == 41)
        #expect(svg.stdout.contains(">ACS</text>") && svg.stdout.contains(">3DS Server</text>"))
        let xml = XMLParser(data: Data(svg.stdout.utf8))
        #expect(xml.parse(), "the SVG is well-formed XML: \(String(describing: xml.parserError))")
        let wrong = try CLIRunner.run(["export", session, "--format", "pdf"])
        #expect(wrong.status == 2 && wrong.stderr.contains("expected har, mermaid, svg or jsonl"))
    }

    @Test func profilesOfTheSeedGuides() throws {
        let dir = try Self.workspace()
        defer { try? FileManager.default.removeItem(at: dir) }
        let pxp = try CLIRunner.run(["show", dir.appendingPathComponent("demo-pxp.3dstape").path, "--profile", "pxp"])
        #expect(pxp.status == 0)
        #expect(pxp.stdout.contains("4 pre-initiation") && pxp.stdout.contains("onPreInitiateAuthentication → onPostInitiateAuthentication"))
        #expect(pxp.stdout.contains("5 fingerprinting (3DS Method)") && pxp.stdout.contains("RefusedSubmitResult"))
        let tp = dir.appendingPathComponent("demo-trustpayments.3dstape").path
        let good = try CLIRunner.run(["show", tp, "--profile", "trustpayments", "--jwt-secret", "3dstape-sandbox-gateway-secret"])
        #expect(good.status == 0, "\(good.stdout)")
        #expect(good.stdout.contains("AUTH 0 Ok; SUBSCRIPTION 30000 Invalid field") && !good.stdout.contains("DOES NOT VERIFY"))
        let bad = try CLIRunner.run(["show", tp, "--profile", "trustpayments", "--jwt-secret", "not-the-secret"])
        #expect(bad.status == 1)
        #expect(bad.stdout.contains("8 response JWTs DO NOT VERIFY"))
        let unknown = try CLIRunner.run(["show", tp, "--profile", "stripe"])
        #expect(unknown.status == 2 && unknown.stderr.contains("expected emv, pxp or trustpayments"))
    }
}
