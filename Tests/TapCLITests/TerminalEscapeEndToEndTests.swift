import Foundation
import Testing
import TapCore

/// Terminal escapes in recorded and wire data (issue 23, item 9): a deviceChannel of `ESC ] 0 ; PWNED BEL ESC [ 2 J`
/// sent to `replay`, a messageType with ESC recorded by `record` or imported from a HAR file, used to reach the
/// operator's terminal raw (window title, screen clear, OSC 52 clipboard write). Every output here is checked for
/// characters a terminal acts on; the data itself must still be there, escaped.
@Suite(.serialized) struct TerminalEscapeEndToEndTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
    /// A title change and a screen clear, an 8-bit CSI, a right-to-left override and a clipboard write.
    static let payload = "\u{1B}]0;PWNED\u{07}\u{1B}[2J\u{9B}2J\u{202E}\u{1B}]52;c;cHduZWQ=\u{07}"
    /// How the payload's start is shown.
    static let shown = "\\x1B]0;PWNED\\x07\\x1B[2J"

    /// The characters of `text` a terminal would act on or that reorder it (line feeds and tabs aside), by code point.
    static func controls(_ text: String) -> [String] {
        text.unicodeScalars.filter { c in
            let v = c.value
            return (v < 0x20 && v != 0x0A && v != 0x09) || (0x7F...0x9F).contains(v) || (0x202A...0x202E).contains(v)
                || (0x2066...0x2069).contains(v) || [0x061C, 0x200E, 0x200F, 0x2028, 0x2029].contains(v)
        }.map { String($0.value, radix: 16) }
    }

    func withDir(_ body: (URL, [String: String]) throws -> Void) throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        try body(dir, ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path])
    }

    static func harEntry(url: String) -> JSON {
        let id = "8a880dc0-d2d2-4067-bcb1-b08d1690b26e"
        let areq = JSON.object([("messageType", .string("AReq" + payload)), ("messageVersion", .string("2.2.0")),
                                ("threeDSServerTransID", .string(id)), ("deviceChannel", .string(payload)), ("messageCategory", .string("01"))])
        let ares = JSON.object([("messageType", .string("ARes")), ("messageVersion", .string("2.2.0")), ("threeDSServerTransID", .string(id)),
                                ("transStatus", .string("Y" + payload))])
        let json = JSON.array([.object([("name", .string("Content-Type")), ("value", .string("application/json"))])])
        return .object([
            ("startedDateTime", .string("2026-01-01T00:00:00.000Z")), ("time", .number("5")),
            ("request", .object([("method", .string("POST")), ("url", .string(url)), ("httpVersion", .string("HTTP/1.1")),
                                 ("headers", .array(json.arrayValue! + [.object([("name", .string("X-Note")), ("value", .string(payload))])])),
                                 ("postData", .object([("mimeType", .string("application/json")), ("text", .string(areq.compact))]))])),
            ("response", .object([("status", .number("200")), ("headers", json),
                                  ("content", .object([("mimeType", .string("application/json")), ("text", .string(ares.compact))]))])),
            ("timings", .object([("send", .number("1")), ("wait", .number("3")), ("receive", .number("1"))])),
            ("_error", .string("upstream said " + payload)),
        ])
    }

    static func har(_ entries: [JSON]) -> String {
        JSON.object([("log", .object([("version", .string("1.2")), ("entries", .array(entries))]))]).compact
    }

    @Test func aHARImportedAndEveryInspectionOfIt() throws {
        try withDir { dir, env in
            let harFile = dir.appendingPathComponent("evil.har")
            try Data(Self.har([Self.harEntry(url: "https://ds.example/areq")]).utf8).write(to: harFile)
            let session = dir.appendingPathComponent("evil.3dstape").path
            let imported = try CLIRunner.run(["import", harFile.path, "--session", session, "--name", "label " + Self.payload], environment: env)
            #expect(imported.status == 0, "\(imported.stderr)")
            let other = dir.appendingPathComponent("browser.3dstape").path
            try FileManager.default.copyItem(atPath: Self.root.appendingPathComponent("sessions/demo-browser.3dstape").path, toPath: other)
            let runs: [[String]] = [
                ["show", session], ["show", session, "--exchange", "1"], ["show", session, "--json"], ["show", session, "--exchange", "1", "--json"],
                ["show", session, "--profile", "pxp"], ["show", session, "--profile", "trustpayments"],
                ["ls", dir.path], ["ls", dir.path, "--json"], ["validate", session], ["validate", session, "--json"],
                ["diff", session, other], ["diff", session, other, "--json"],
                ["export", session, "--format", "har"], ["export", session, "--format", "jsonl"],
                ["export", session, "--format", "mermaid"], ["export", session, "--format", "svg"],
            ]
            for args in runs {
                let r = try CLIRunner.run(args, environment: env)
                #expect(r.status == 0 || (r.status == 1 && ["validate", "diff"].contains(args[0])), "\(args): \(r.status)")
                #expect(Self.controls(r.stdout + r.stderr).isEmpty, "\(args): \(Self.controls(r.stdout + r.stderr))")
            }
            let show = try CLIRunner.run(["show", session], environment: env).stdout
            #expect(show.contains("label: label " + Self.shown) && show.contains("AReq" + Self.shown), "the values are shown, escaped")
            #expect(try CLIRunner.run(["show", session, "--exchange", "1"], environment: env).stdout.contains("X-Note: " + Self.shown))
            #expect(try CLIRunner.run(["ls", dir.path], environment: env).stdout.contains("label " + Self.shown))
            let json = try CLIRunner.run(["show", session, "--json"], environment: env).stdout
            #expect(try JSON.parse(json)["meta"]?["label"]?.stringValue == "label " + Self.payload, "--json carries the same value")

            // An import refused for a value it names: the error line is escaped too.
            try Data(Self.har([Self.harEntry(url: "nowhere" + Self.payload)]).utf8).write(to: harFile)
            let refused = try CLIRunner.run(["import", harFile.path, "--session", dir.appendingPathComponent("no.3dstape").path], environment: env)
            #expect(refused.status == 1 && refused.stderr.contains("is not an absolute URL"), "\(refused.stderr)")
            #expect(Self.controls(refused.stderr).isEmpty)
        }
    }

    /// The replayer's live lines: the miss names the live deviceChannel.
    @Test func replayLiveLines() throws {
        try withDir { dir, env in
            let session = dir.appendingPathComponent("browser.3dstape").path
            try FileManager.default.copyItem(atPath: Self.root.appendingPathComponent("sessions/demo-browser.3dstape").path, toPath: session)
            let body = dir.appendingPathComponent("areq.json")
            try Data(JSON.object([("messageType", .string("AReq")), ("messageVersion", .string("2.2.0")),
                                  ("threeDSServerTransID", .string("8a880dc0-d2d2-4067-bcb1-b08d1690b26e")),
                                  ("deviceChannel", .string(Self.payload)), ("messageCategory", .string("01"))]).compact.utf8).write(to: body)
            for (n, mode) in [[], ["--json-lines"]].enumerated() {
                let replay = try Spawned(CLIRunner.binary.path, ["replay", session, "--listen", "127.0.0.1:0", "--timing", "none",
                                                                 "--session", dir.appendingPathComponent("r\(n).3dstape").path] + mode, environment: env)
                defer { replay.stop() }
                let port = try replay.port(after: "on http://127.0.0.1:")
                let r = try sh(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Content-Type: application/json",
                                "--data-binary", "@" + body.path, "http://127.0.0.1:\(port)/ds/areq"])
                #expect(r.out == "404", "a miss: \(r.out) \(r.err)")
                try replay.waitFor("the live line") { o, _ in o.contains("deviceChannel") }
                replay.interrupt()
                #expect(try replay.wait() == 0)
                #expect(Self.controls(replay.stdout + replay.stderr).isEmpty, "\(mode): \(Self.controls(replay.stdout + replay.stderr))")
                if mode.isEmpty {
                    #expect(replay.stdout.contains("differs in deviceChannel: live " + Self.shown), "\(replay.stdout)")
                } else {
                    let line = try JSON.parse(String(replay.stdout.split(separator: "\n").first ?? ""))
                    #expect(line["miss"]?.stringValue?.contains("live " + Self.payload) == true, "the JSON line keeps the value")
                }
            }
        }
    }

    /// The recorder's live line and its summary: the messageType as recorded.
    @Test func recordLiveLineAndSummary() throws {
        try withDir { dir, env in
            let up = try Spawned("/usr/bin/env", ["python3", Self.root.appendingPathComponent("tools/testing/upstream.py").path])
            defer { up.stop() }
            let upPort = try up.port(after: "listening ")
            let body = dir.appendingPathComponent("areq.json")
            try Data(JSON.object([("messageType", .string("AReq" + Self.payload)), ("messageVersion", .string("2.2.0")),
                                  ("threeDSServerTransID", .string("8a880dc0-d2d2-4067-bcb1-b08d1690b26e")),
                                  ("deviceChannel", .string("02"))]).compact.utf8).write(to: body)
            for (n, mode) in [[], ["--json-lines"]].enumerated() {
                let rec = try Spawned(CLIRunner.binary.path, ["record", "--listen", "127.0.0.1:0", "--reverse", "http://127.0.0.1:\(upPort)",
                                                              "--session", dir.appendingPathComponent("s\(n).3dstape").path] + mode, environment: env)
                defer { rec.stop() }
                let port = try rec.port(after: "recording on http://127.0.0.1:")
                let r = try sh(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Content-Type: application/json",
                                "--data-binary", "@" + body.path, "http://127.0.0.1:\(port)/ds/areq"])
                #expect(r.out == "200", "\(r.err)")
                try rec.waitFor("the live line") { o, _ in o.contains("AReq") }
                rec.interrupt()
                #expect(try rec.wait() == 0)
                #expect(Self.controls(rec.stdout + rec.stderr).isEmpty, "\(mode): \(Self.controls(rec.stdout + rec.stderr))")
                #expect(rec.stderr.contains("3DS messages: AReq" + Self.shown), "the summary: \(rec.stderr)")
                if mode.isEmpty {
                    #expect(rec.stdout.contains("200  AReq" + Self.shown) && rec.stdout.contains("→ ARes"), "\(rec.stdout)")
                } else {
                    let line = try JSON.parse(String(rec.stdout.split(separator: "\n").first ?? ""))
                    #expect(line["request"]?.arrayValue?.first?.stringValue == "AReq" + Self.payload, "the JSON line keeps the value")
                }
            }
        }
    }
}
