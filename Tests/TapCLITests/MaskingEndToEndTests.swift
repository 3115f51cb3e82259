import Foundation
import Testing
import TapCore
import TapJOSE

/// Issue 23, item 3, end to end: the real `3dstape record --reverse` in front of an echo server (tools/testing/upstream.py
/// answers with what it was sent), the bodies and URLs of the issue sent with curl, and the session file searched, every
/// column of every row, decoded as far as anyone could decode it, for the card number, the code and the OTP.
@Suite(.serialized) struct MaskingEndToEndTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
    static let pan = "4000000000001000"
    /// The issue's JWT: HS256 over `{"pan":"4000000000001000","securitycode":"123"}`.
    static let jwt = try! JWS.signHS256(payload: Array(#"{"pan":"4000000000001000","securitycode":"123"}"#.utf8), secret: Array("k".utf8)).compact

    /// A text and what it hides: percent escapes, base64url runs (a JWT's parts) and gzip layers (as hex), opened again
    /// and again, so that nested encodings are read too.
    static func revealed(_ text: String) -> String {
        var all = text, layer = [text]
        for _ in 0..<6 {
            var next: [String] = []
            for t in layer {
                if let p = t.removingPercentEncoding, p != t { next.append(p) }
                for run in t.split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) where run.count >= 8 {
                    if let d = Base64URL.decode(String(run)), let s = String(validating: d, as: UTF8.self) { next.append(s) }
                    // A gzip member as hex (sqlite3's hex() of a body): 1F8B08…
                    if run.hasPrefix("1F8B08"), let bytes = Hex.decode(String(run)), let s = gunzip(bytes) { next.append(s) }
                }
            }
            guard !next.isEmpty else { break }
            all += "\n" + next.joined(separator: "\n")
            layer = next
        }
        return all
    }

    /// Python's gzip, every layer, so the test does not lean on the code it tests.
    static func gunzip(_ bytes: [UInt8]) -> String? {
        let script = "import gzip,sys\nd=bytes.fromhex(sys.stdin.read())\nwhile d[:2]==b'\\x1f\\x8b': d=gzip.decompress(d)\nsys.stdout.buffer.write(d)"
        guard let r = try? run(["python3", "-c", script], stdin: Hex.encode(bytes)), r.status == 0 else { return nil }
        return r.out
    }

    /// A tool run to its end, its whole output read (tens of kilobytes of rows here).
    static func run(_ args: [String], stdin: String? = nil) throws -> (status: Int32, out: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = args
        let out = Pipe(), inp = Pipe()
        p.standardOutput = out
        p.standardInput = inp
        p.standardError = FileHandle.nullDevice
        try ProcessLaunch.run(p)
        if let stdin { inp.fileHandleForWriting.write(Data(stdin.utf8)) }
        try inp.fileHandleForWriting.close()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    static func sqlite(_ session: String, _ sql: String) throws -> String { try run(["sqlite3", "-separator", " | ", session, sql]).out }

    static let forbidden = [pan, "4000 0000 0000 1000", "4000-0000-0000-1000", #""123""#, ":123,", ":123}", "hunter2", ":1234", "=1234",
                            #"securitycode":"1"#]

    static func expectNothingInClear(_ text: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let all = revealed(text)
        for secret in forbidden {
            #expect(!all.contains(secret), "\(what): \(secret) stored in clear: \(text.prefix(600))", sourceLocation: sourceLocation)
        }
    }

    @Test func everyContainerOfTheIssueIsStoredMasked() throws {
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

        let gzip2 = dir.appendingPathComponent("gzip2.bin").path
        let made = try sh(["python3", "-c", "import gzip,sys;open(sys.argv[1],'wb').write(gzip.compress(gzip.compress(sys.argv[2].encode())))",
                           gzip2, #"{"messageType":"AReq","acctNumber":"4000000000001000","cvv":"123"}"#])
        #expect(made.status == 0)
        let requests: [(String, [String])] = [
            ("a JWT as the body", ["-H", "Content-Type: application/jwt", "--data-binary", Self.jwt, "\(base)/jwt-body"]),
            ("a JWT in a form field", ["-H", "Content-Type: application/x-www-form-urlencoded", "--data-binary", "jwt=\(Self.jwt)", "\(base)/jwt-form"]),
            ("a JWT in a query", ["\(base)/jwt-query?jwt=\(Self.jwt)"]),
            ("numbers and arrays under secret keys", ["-H", "Content-Type: application/json", "--data-binary",
                                                      #"{"cvv":123,"otp":1234,"challengeDataEntry":1234,"password":["hunter2"]}"#, "\(base)/numbers"]),
            ("a card number with spaces", ["-H", "Content-Type: application/json", "--data-binary", #"{"card":"4000 0000 0000 1000"}"#, "\(base)/spaces"]),
            ("a card number with dashes", ["-H", "Content-Type: text/plain", "--data-binary", "card 4000-0000-0000-1000", "\(base)/dashes"]),
            ("percent-encoded quotes in a query", ["\(base)/pct?q=%224000000000001000%22"]),
            ("a percent-encoded space in a form", ["-H", "Content-Type: application/x-www-form-urlencoded", "--data-binary",
                                                   "note=card%204000000000001000", "\(base)/pct-form"]),
            ("gzip inside gzip, request", ["-H", "Content-Type: application/json", "-H", "Content-Encoding: gzip, gzip", "--data-binary", "@" + gzip2,
                                           "\(base)/gzip2-request"]),
            ("gzip inside gzip, response", ["\(base)/gzip2"]),
        ]
        for (what, args) in requests {
            let r = try sh(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}"] + args)
            #expect(r.status == 0 && r.out == "200", "\(what): \(r.out) \(r.err)")
        }
        rec.interrupt()
        #expect(try rec.wait() == 0, "\(rec.stderr)")

        // Every column of every row, bodies as hex (gzip layers left in them are opened by `revealed`) and as text.
        let columns = "id, method, url, host, path, request_headers, hex(request_body), CAST(request_body AS TEXT), request_content_encoding, "
            + "response_headers, hex(response_body), CAST(response_body AS TEXT), response_content_encoding, error"
        let rows = try Self.sqlite(session, "SELECT \(columns) FROM exchanges ORDER BY id").split(separator: "\n").map(String.init)
        #expect(rows.count == requests.count, "\(rows.count) rows")
        for (row, (what, _)) in zip(rows, requests) { Self.expectNothingInClear(row, what) }
        for table in ["SELECT json FROM messages", "SELECT detail FROM events", "SELECT * FROM v_messages"] {
            Self.expectNothingInClear(try Self.sqlite(session, table), table)
        }
        // What was masked is still there to read: the JWT re-encoded without its signature, the decoded body of the
        // gzip layers with the RReq found in it, the codes as ***.
        let jwtBody = try Self.sqlite(session, "SELECT CAST(request_body AS TEXT) FROM exchanges WHERE path = '/jwt-body'")
        let parts = jwtBody.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3 && parts[2].isEmpty, "\(jwtBody)")
        #expect(try JSON.parse(Base64URL.decode(parts[1]) ?? []) == .object([("pan", .string("400000******1000")), ("securitycode", .string("***"))]))
        let gz = try Self.sqlite(session, "SELECT response_content_encoding, CAST(response_body AS TEXT) FROM exchanges WHERE path = '/gzip2'")
        #expect(gz.contains(#"gzip, gzip | {"messageType": "RReq", "acctNumber": "400000******1000", "cvv": "***"}"#), "\(gz)")
        #expect(try Self.sqlite(session, "SELECT message_type FROM messages").contains("RReq"))
        // And nothing the inspection commands print or export holds them either.
        for args in [["show", session, "--json"], ["export", session, "--format", "har"], ["export", session, "--format", "jsonl"]] {
            let r = try CLIRunner.run(args)
            #expect(r.status == 0, "\(args): \(r.stderr)")
            Self.expectNothingInClear(r.stdout, args.joined(separator: " "))
        }
    }

    /// `import` writes through the recorder's writer: a HAR from another tool with the issue's shapes (a JWT in the
    /// query and as the body, numbers under secret keys, a card number with spaces in `_error`) is stored masked, and a
    /// HAR refused for a bad URL does not print the card number in it.
    @Test func aHARImportIsMaskedAsARecordingIs() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        func entry(_ url: String, _ body: String, error: String? = nil) -> JSON {
            var e: [(String, JSON)] = [
                ("startedDateTime", .string("2026-11-30T16:00:00.000Z")),
                ("request", .object([("method", .string("POST")), ("url", .string(url)), ("headers", .array([])),
                                     ("postData", .object([("mimeType", .string("application/jwt")), ("text", .string(body))]))])),
                ("response", .object([("status", .number("200")), ("headers", .array([])),
                                      ("content", .object([("mimeType", .string("application/json")),
                                                           ("text", .string(#"{"otp":1234,"card":"4000 0000 0000 1000"}"#))]))])),
                ("timings", .object([("send", .number("1")), ("wait", .number("2")), ("receive", .number("1"))])),
            ]
            if let error { e.append(("_error", .string(error))) }
            return .object(e)
        }
        let har = JSON.object([("log", .object([("version", .string("1.2")), ("entries", .array([
            entry("https://gw.example/pay?jwt=\(Self.jwt)", Self.jwt, error: "upstream said: card 4000-0000-0000-1000 declined"),
            entry("https://gw.example/form", "jwt=\(Self.jwt)&cvv=123"),
        ]))]))])
        let file = dir.appendingPathComponent("other-tool.har").path
        try Data(har.bytes).write(to: URL(fileURLWithPath: file))
        let session = dir.appendingPathComponent("imported.3dstape").path
        let r = try CLIRunner.run(["import", file, "--session", session])
        #expect(r.status == 0, "\(r.stderr)")
        let columns = "url, path, request_headers, CAST(request_body AS TEXT), response_headers, CAST(response_body AS TEXT), error"
        let rows = try Self.sqlite(session, "SELECT \(columns) FROM exchanges ORDER BY id")
        #expect(rows.split(separator: "\n").count == 2)
        Self.expectNothingInClear(rows, "imported rows")
        Self.expectNothingInClear(try Self.sqlite(session, "SELECT json FROM messages"), "imported messages")

        let bad = JSON.object([("log", .object([("version", .string("1.2")), ("entries", .array([
            entry("not a url 4000000000001000", "x"),
        ]))]))])
        let badFile = dir.appendingPathComponent("bad.har").path
        try Data(bad.bytes).write(to: URL(fileURLWithPath: badFile))
        let refused = try CLIRunner.run(["import", badFile, "--session", dir.appendingPathComponent("bad.3dstape").path])
        #expect(refused.status == 1 && refused.stderr.contains("400000******1000") && !refused.stderr.contains(Self.pan), "\(refused.stderr)")
    }

    /// The sandbox and the client printed `test card 4000000000001166 always answers Erro 305`; the card is printed masked
    /// with its last four kept, so the test card stays recognisable.
    @Test func theSandboxAndTheClientPrintTheTestCardMasked() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let env = ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path]
        let certs = dir.appendingPathComponent("certs").path
        #expect(try CLIRunner.run(["sandbox", "certs", "--out", certs], environment: env).status == 0)
        let sandbox = try Spawned(CLIRunner.binary.path, ["sandbox", "--listen", "127.0.0.1:0"], environment: env)
        defer { sandbox.stop() }
        let port = try sandbox.port(after: "sandbox DS + ACS on http://127.0.0.1:")
        let text = try CLIRunner.run(["client", "--ds", "http://127.0.0.1:\(port)", "--card", "4000000000001166", "--certs", certs], environment: env)
        let json = try CLIRunner.run(["client", "--ds", "http://127.0.0.1:\(port)", "--card", "4000000000001166", "--certs", certs, "--json"],
                                     environment: env)
        try sandbox.waitFor("the sandbox's Erro lines") { o, _ in o.components(separatedBy: "always answers Erro 305").count > 2 }
        #expect(text.status == 1 && json.status == 1)
        #expect(text.stderr.contains("Erro 305 from D: Transaction data not valid (test card 400000******1166 always answers Erro 305)"), "\(text.stderr)")
        #expect(text.stdout.contains("test card 400000******1166 always answers Erro 305"), "\(text.stdout)")
        #expect(try JSON.parse(json.stdout)["error"]?["errorDetail"] == .string("test card 400000******1166 always answers Erro 305"))
        #expect(sandbox.stdout.contains("sandbox: Erro 305 Transaction data not valid: test card 400000******1166 always answers Erro 305"),
                "\(sandbox.stdout)")
        for (what, output) in [("client", text.stdout + text.stderr), ("client --json", json.stdout + json.stderr), ("sandbox", sandbox.stdout + sandbox.stderr)] {
            #expect(!output.contains("4000000000001166"), "\(what) printed the card number: \(output)")
        }
    }
}
