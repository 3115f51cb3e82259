import Foundation
import Testing
import TapCore
import TapCrypto

/// The recording proxy end to end on loopback: the real `3dstape record` binary, an independent
/// upstream (Python's http.server, tools/testing/upstream.py), and curl as the client.
@Suite(.serialized) struct RecordEndToEndTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
    let pan = "4000000000001091"

    struct Fixture {
        let dir: URL
        var home: String { dir.appendingPathComponent("home").path }
        var session: String { dir.appendingPathComponent("s.3dstape").path }
        func path(_ name: String) -> String { dir.appendingPathComponent(name).path }
    }

    func withFixture(_ body: (Fixture) throws -> Void) throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        try body(Fixture(dir: dir))
    }

    func upstream(_ args: [String] = []) throws -> (Spawned, UInt16) {
        let s = try Spawned("/usr/bin/env", ["python3", Self.root.appendingPathComponent("tools/testing/upstream.py").path] + args)
        return (s, try s.port(after: "listening "))
    }

    func recorder(_ f: Fixture, _ args: [String]) throws -> (Spawned, UInt16) {
        let s = try Spawned(CLIRunner.binary.path, ["record", "--listen", "127.0.0.1:0", "--session", f.session] + args,
                            environment: ["THREEDSTAPE_HOME": f.home])
        return (s, try s.port(after: "recording on http://127.0.0.1:"))
    }

    /// Polls `condition` every 20 ms until it holds or `seconds` pass; whether it held.
    func waitUntil(_ seconds: Double, _ condition: () throws -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return true }
            usleep(20_000)
        }
        return try condition()
    }

    func sqlite(_ file: String, _ sql: String) throws -> String {
        try sh(["sqlite3", file, sql]).out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func stopRecorder(_ r: Spawned) throws {
        r.interrupt()
        #expect(try r.wait() == 0, "recorder exit status; stderr: \(r.stderr)")
    }

    /// Writes a CA, a server leaf for 127.0.0.1/localhost and a client leaf as PEM files.
    func makeCertificates(_ f: Fixture) throws {
        let ca = try CertificateAuthority.selfSigned(commonName: "Upstream Test Root", key: try PrivateKey.generateP256())
        let serverKey = try PrivateKey.generateP256()
        let server = try ca.issue(commonName: "localhost", subjectKey: serverKey.publicKey, profile: .tlsServer(names: ["localhost", "127.0.0.1"]))
        let clientKey = try PrivateKey.generateP256()
        let client = try ca.issue(commonName: "3ds-server-client", subjectKey: clientKey.publicKey, profile: .signing)
        for (name, text) in [("root.pem", ca.certificate.pem), ("server.pem", server.pem), ("server-key.pem", try serverKey.pem()),
                             ("client.pem", client.pem), ("client-key.pem", try clientKey.pem())] {
            try text.write(toFile: f.path(name), atomically: true, encoding: .utf8)
        }
    }

    @Test func reverseModeToHTTPRecordsEveryKindOfBody() throws {
        try withFixture { f in
            let (up, upPort) = try upstream()
            defer { up.stop() }
            let (rec, port) = try recorder(f, ["--reverse", "http://127.0.0.1:\(upPort)", "--name", "reverse-http"])
            defer { rec.stop() }
            let base = "http://127.0.0.1:\(port)"
            let areq = #"{"messageType":"AReq","messageVersion":"2.2.0","threeDSServerTransID":"8a880dc0-d2d2-4067-bcb1-b08d1690b26e","acctNumber":"\#(pan)"}"#
            let a = try sh(["curl", "-sS", "-H", "Content-Type: application/json", "--data", areq, "\(base)/ds/areq"])
            #expect(a.status == 0)
            #expect(try JSON.parse(a.out)["messageType"]?.stringValue == "ARes")
            let chunked = try sh(["curl", "-sS", "\(base)/chunked"])
            #expect(chunked.out.hasPrefix(#"{"messageType":"Erro""#) && chunked.out.count > 5000)
            // A chunked request body, forwarded with its framing.
            let chunkedUp = try sh(["curl", "-sS", "-H", "Transfer-Encoding: chunked", "--data", "hello chunks", "\(base)/echo"])
            #expect(try JSON.parse(chunkedUp.out)["body"]?.stringValue == "hello chunks")
            let gz = try sh(["curl", "-sS", "--compressed", "\(base)/gzip"])
            #expect(gz.out.contains("RReq"))
            // Keep-alive: 20 requests on one connection.
            let urls = (1...20).flatMap { ["-o", "/dev/null", "\(base)/keepalive/\($0)"] }
            let k = try sh(["curl", "-sS", "-v"] + urls)
            #expect(k.err.components(separatedBy: "Re-using existing connection").count - 1 == 19)
            // One long URL: `show` cuts it in the middle instead of padding every row to its length.
            let longPath = "/long/" + String(repeating: "a", count: 300) + "/end"
            _ = try sh(["curl", "-sS", "-o", "/dev/null", "\(base)\(longPath)"])
            try stopRecorder(rec)
            #expect(rec.stdout.contains("AReq → ARes"), "live line: \(rec.stdout)")

            #expect(try sqlite(f.session, "PRAGMA integrity_check") == "ok")
            #expect(try sqlite(f.session, "SELECT count(*) FROM exchanges") == "25")
            #expect(try sqlite(f.session, "SELECT count(DISTINCT connection_id) FROM exchanges WHERE path LIKE '/keepalive/%'") == "1")
            // The 20th keep-alive exchange reused the upstream connection the first made: show says so, not "+-12.3 ms".
            let last = try sqlite(f.session, "SELECT id FROM exchanges WHERE path = '/keepalive/20'")
            let shown = try CLIRunner.run(["show", f.session, "--exchange", last])
            #expect(shown.stdout.contains("ms before (a kept-alive connection)") && !shown.stdout.contains("+-"), "\(shown.stdout.prefix(600))")
            #expect(try sqlite(f.session, "SELECT group_concat(message_type, ',') FROM v_messages") == "AReq,ARes,Erro,RReq")
            #expect(try sqlite(f.session, "SELECT final_trans_status FROM v_transactions") == "Y")
            #expect(try sqlite(f.session, "SELECT response_content_encoding FROM exchanges WHERE path = '/gzip'") == "gzip")
            #expect(try sqlite(f.session, "SELECT count(*) FROM exchanges WHERE t_done >= t_first_byte AND t_first_byte >= t_request_sent") == "25")
            // The PAN is masked everywhere in the file, the gzip body (decoded for storage) included.
            let bytes = try Data(contentsOf: URL(fileURLWithPath: f.session))
            #expect(bytes.range(of: Data(pan.utf8)) == nil)
            #expect(bytes.range(of: Data("400000******1091".utf8)) != nil)

            let show = try CLIRunner.run(["show", f.session])
            #expect(show.status == 0 && show.stdout.contains("AReq 2.2.0 → ARes 2.2.0 Y"))
            let rows = show.stdout.split(separator: "\n").filter { $0.first?.isNumber == true && $0.contains("http://") }
            #expect(rows.count == 25 && show.stdout.contains("/long/a") && show.stdout.contains("a…aaaaaaaa") && show.stdout.contains("aaaa/end") && !show.stdout.contains(String(repeating: "a", count: 40)),
                    "the long URL cut to 64 characters: \(rows.count) \(rows.suffix(2))")
            #expect(rows.allSatisfy { $0.count < 170 }, "no row padded to the long URL: \(rows.map(\.count))")
            let one = try CLIRunner.run(["show", f.session, "--exchange", "1", "--json"])
            #expect(try JSON.parse(one.stdout)["request"]?["body"]?["acctNumber"]?.stringValue == "400000******1091")
            let ls = try CLIRunner.run(["ls", f.dir.path])
            #expect(ls.stdout.contains("reverse-http") && ls.stdout.contains("Y×1"))
        }
    }

    @Test func reverseModeToHTTPSWithMutualTLS() throws {
        try withFixture { f in
            try makeCertificates(f)
            let (up, upPort) = try upstream(["--tls", f.path("server.pem"), f.path("server-key.pem"), "--client-ca", f.path("root.pem")])
            defer { up.stop() }
            let (rec, port) = try recorder(f, ["--reverse", "https://localhost:\(upPort)", "--upstream-ca", f.path("root.pem"),
                                               "--client-cert", f.path("client.pem"), "--client-key", f.path("client-key.pem")])
            defer { rec.stop() }
            let r = try sh(["curl", "-sS", "-w", "\n%{http_code}", "http://127.0.0.1:\(port)/hello"])
            #expect(r.out.hasSuffix("\n200"), "\(r.out) \(rec.stderr)")
            try stopRecorder(rec)
            #expect(try sqlite(f.session, "SELECT status, upstream, t_tls_done IS NOT NULL FROM exchanges") == "200|localhost:\(upPort)|1")
        }
    }

    @Test func upstreamTLSFailuresAre502WithAReason() throws {
        try withFixture { f in
            try makeCertificates(f)
            let (up, upPort) = try upstream(["--tls", f.path("server.pem"), f.path("server-key.pem")])
            defer { up.stop() }
            // The system roots do not trust the test root.
            let (rec, port) = try recorder(f, ["--reverse", "https://localhost:\(upPort)"])
            defer { rec.stop() }
            let r = try sh(["curl", "-sS", "-w", "\n%{http_code}", "http://127.0.0.1:\(port)/x"])
            #expect(r.out.hasSuffix("\n502"))
            let body = try JSON.parse(String(r.out.split(separator: "\n").first!))
            #expect(body["error"]?.stringValue?.contains("TLS to upstream") == true, "\(body.compact)")
            #expect(body["error"]?.stringValue?.contains("certificate") == true, "\(body.compact)")
            try stopRecorder(rec)
            #expect(try sqlite(f.session, "SELECT status, error LIKE '%TLS%' FROM exchanges") == "502|1")
        }
    }

    @Test func forwardModeInterceptsCurlsHTTPS() throws {
        try withFixture { f in
            try makeCertificates(f)
            let (up, upPort) = try upstream(["--tls", f.path("server.pem"), f.path("server-key.pem")])
            defer { up.stop() }
            let ca = try CLIRunner.run(["ca", "export", "--out", f.path("3dstape-ca.pem")], environment: ["THREEDSTAPE_HOME": f.home])
            #expect(ca.status == 0)
            let keyMode = try FileManager.default.attributesOfItem(atPath: f.dir.appendingPathComponent("home/ca/ca-key.pem").path)[.posixPermissions] as? Int
            #expect(keyMode == 0o600)
            let (rec, port) = try recorder(f, ["--upstream-ca", f.path("root.pem")])
            defer { rec.stop() }
            let areq = #"{"messageType":"AReq","messageVersion":"2.3.1","threeDSServerTransID":"t-1"}"#
            let r = try sh(["curl", "-sS", "-x", "http://127.0.0.1:\(port)", "--cacert", f.path("3dstape-ca.pem"),
                            "--data", areq, "https://localhost:\(upPort)/ds/areq"])
            #expect(r.status == 0, "\(r.err) \(rec.stderr)")
            #expect(try JSON.parse(r.out)["messageVersion"]?.stringValue == "2.3.1")
            // Without trusting 3dstape's CA, curl refuses the intercepted certificate.
            let untrusted = try sh(["curl", "-sS", "-x", "http://127.0.0.1:\(port)", "https://localhost:\(upPort)/ds/areq"])
            #expect(untrusted.status != 0)
            // Plain HTTP through the forward proxy (absolute-form).
            let (plain, plainPort) = try upstream()
            defer { plain.stop() }
            let p = try sh(["curl", "-sS", "-x", "http://127.0.0.1:\(port)", "http://127.0.0.1:\(plainPort)/plain"])
            #expect(try JSON.parse(p.out)["path"]?.stringValue == "/plain")
            try stopRecorder(rec)
            #expect(try sqlite(f.session, "SELECT url FROM exchanges ORDER BY id") ==
                    "https://localhost:\(upPort)/ds/areq\nhttp://127.0.0.1:\(plainPort)/plain")
            #expect(try sqlite(f.session, "SELECT tls_version, sni, alpn FROM connections WHERE tls_version IS NOT NULL LIMIT 1") == "TLSv1.3|localhost|http/1.1")
            let show = try CLIRunner.run(["show", f.session])
            #expect(show.stdout.contains("AReq 2.3.1 → ARes 2.3.1 Y"))
        }
    }

    @Test func upstreamDownMalformedAndOversized() throws {
        try withFixture { f in
            // A port with nothing listening.
            let probe = try Spawned("/usr/bin/env", ["python3", "-c", "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print('port',s.getsockname()[1])"])
            let dead = try probe.port(after: "port ")
            try probe.wait()
            let (rec, port) = try recorder(f, ["--reverse", "http://127.0.0.1:\(dead)"])
            defer { rec.stop() }
            let down = try sh(["curl", "-sS", "-w", "\n%{http_code}", "http://127.0.0.1:\(port)/ds/areq"])
            #expect(down.out.hasSuffix("\n502"))
            #expect(down.out.contains("refused"), "\(down.out)")
            // Malformed request line: 400, and the proxy keeps serving.
            let bad = try sh(["python3", "-c", """
                import socket; s = socket.create_connection(('127.0.0.1', \(port))); s.sendall(b'GARBAGE\\r\\n\\r\\n'); print(s.recv(4096).decode())
                """])
            #expect(bad.out.hasPrefix("HTTP/1.1 400"), "\(bad.out)")
            #expect(bad.out.contains("malformed request line"))
            let huge = try sh(["curl", "-sS", "-w", "\n%{http_code}", "-H", "X-Big: " + String(repeating: "a", count: 70_000), "http://127.0.0.1:\(port)/"])
            #expect(huge.out.hasSuffix("\n431"))
            let again = try sh(["curl", "-sS", "-w", "\n%{http_code}", "http://127.0.0.1:\(port)/still-alive"])
            #expect(again.out.hasSuffix("\n502"))
            try stopRecorder(rec)
            #expect(try sqlite(f.session, "SELECT count(*) FROM exchanges WHERE status = 502 AND error LIKE '%refused%'") == "2")
            #expect(try sqlite(f.session, "SELECT count(*) FROM events WHERE kind = 'rejected'") == "2")
        }
    }

    /// Hardening defect 1: a 60-byte request with a signed chunk size killed the recorder (exit 132), and an
    /// upstream answering `-2` did too. Both now get a 400/502 and the recorder keeps serving.
    @Test func signedChunkSizeDoesNotKillTheRecorder() throws {
        try withFixture { f in
            let (up, upPort) = try upstream()
            defer { up.stop() }
            let (rec, port) = try recorder(f, ["--reverse", "http://127.0.0.1:\(upPort)"])
            defer { rec.stop() }
            let bad = try sh(["python3", "-c", """
                import socket; s = socket.create_connection(('127.0.0.1', \(port)))
                s.sendall(b'POST /t5 HTTP/1.1\\r\\nHost: a\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n-2\\r\\nxx\\r\\n0\\r\\n\\r\\n')
                print(s.recv(4096).decode())
                """])
            #expect(bad.out.hasPrefix("HTTP/1.1 400"), "\(bad.out) \(bad.err)")
            let hostile = try sh(["curl", "-sS", "-w", "\n%{http_code}", "http://127.0.0.1:\(port)/bad-chunk"])
            #expect(hostile.out.hasSuffix("\n502"), "\(hostile.out)")
            let alive = try sh(["curl", "-sS", "-w", "\n%{http_code}", "http://127.0.0.1:\(port)/echo"])
            #expect(alive.out.hasSuffix("\n200"), "the recorder still serves: \(alive.out) \(rec.stderr)")
            try stopRecorder(rec)
        }
    }

    /// Hardening defect 4b: credentials and card numbers in headers, security codes in bodies and card numbers in
    /// rejected targets are masked in the session file and in the log.
    @Test func headersBodiesAndRejectedTargetsAreStoredMasked() throws {
        try withFixture { f in
            let (up, upPort) = try upstream()
            defer { up.stop() }
            let (rec, port) = try recorder(f, ["--reverse", "http://127.0.0.1:\(upPort)"])
            let r = try sh(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Authorization: Bearer sekret-token",
                            "-H", "Cookie: sid=sekret-cookie", "-H", "X-Card: 4000000000001091", "-H", "Content-Type: application/json",
                            "--data-binary", #"{"pan":"4000000000001091","cvv":"123","password":"hunter2"}"#, "http://127.0.0.1:\(port)/pay"])
            #expect(r.out == "200")
            try stopRecorder(rec)
            let (fwd, fport) = try recorder(Fixture(dir: f.dir.appendingPathComponent("fwd")), [])
            let bad = try sh(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(fport)/pay?pan=4000000000001091"])
            #expect(bad.out == "400")
            try stopRecorder(fwd)
            let fwdSession = f.dir.appendingPathComponent("fwd/s.3dstape").path
            for file in [f.session, fwdSession] {
                let dump = try sh(["sqlite3", file, ".dump"]).out
                for secret in ["4000000000001091", "sekret-token", "sekret-cookie", "hunter2", "\"123\""] {
                    #expect(!dump.contains(secret), "\(secret) is not in \((file as NSString).lastPathComponent)")
                }
            }
            #expect(try sqlite(fwdSession, "SELECT detail FROM events WHERE kind = 'rejected'").contains("400000******1091"))
            #expect(!fwd.stderr.contains("4000000000001091") && fwd.stderr.contains("400000******1091"), "\(fwd.stderr)")
            #expect(try sqlite(f.session, "SELECT request_headers FROM exchanges").contains("Bearer ***"))
        }
    }

    /// Hardening defect 8: a forward proxy replaces Host with the absolute URL's authority (what is recorded is what
    /// the upstream sees); credentials in URLs and a CONNECT without a host are refused.
    @Test func forwardModeHostUserinfoAndConnectTargets() throws {
        try withFixture { f in
            let (up, upPort) = try upstream()
            defer { up.stop() }
            let (rec, port) = try recorder(f, [])
            let r = try sh(["curl", "-sS", "-x", "http://127.0.0.1:\(port)", "-H", "Host: elsewhere.test", "http://127.0.0.1:\(upPort)/echo"])
            let echoed = try JSON.parse(r.out)
            #expect(echoed["headers"]?["Host"]?.stringValue == "127.0.0.1:\(upPort)", "the upstream saw the URL's host: \(r.out)")
            let raw = try sh(["python3", "-c", """
                import socket
                for req in [b'GET http://user:secret@127.0.0.1:\(upPort)/x HTTP/1.1\\r\\nHost: a\\r\\n\\r\\n', b'CONNECT :\(upPort) HTTP/1.1\\r\\nHost: a\\r\\n\\r\\n']:
                    s = socket.create_connection(('127.0.0.1', \(port))); s.sendall(req); print(s.recv(4096).split(b'\\r\\n')[0].decode()); s.close()
                """])
            #expect(raw.out.split(separator: "\n").map(String.init) == ["HTTP/1.1 400 Bad Request", "HTTP/1.1 400 Bad Request"], "\(raw.out) \(raw.err)")
            try stopRecorder(rec)
            #expect(try sqlite(f.session, "SELECT url FROM exchanges") == "http://127.0.0.1:\(upPort)/echo")
            #expect(!(try sh(["sqlite3", f.session, ".dump"]).out.contains("secret")), "the credentials are not stored")
        }
    }

    @Test func timeoutsAnswer504And408() throws {
        try withFixture { f in
            let (up, upPort) = try upstream()
            defer { up.stop() }
            let (rec, port) = try recorder(f, ["--reverse", "http://127.0.0.1:\(upPort)", "--upstream-timeout", "0.5",
                                               "--header-timeout", "0.5", "--max-body", "1000"])
            defer { rec.stop() }
            // curl's own clock (from its connect to the last byte), not the process's start: under load a spawn alone
            // took most of a second. The upstream answers at 3 s; the 504 comes at the 0.5 s timeout.
            let slow = try sh(["curl", "-sS", "-w", "\n%{http_code} %{time_total}", "http://127.0.0.1:\(port)/slow?ms=3000"])
            let tail = slow.out.split(separator: "\n").last.map { $0.split(separator: " ").map(String.init) } ?? []
            #expect(tail.first == "504", "\(slow.out)")
            #expect((tail.last.flatMap(Double.init) ?? 99) < 2.5, "\(slow.out)")
            let partial = try sh(["python3", "-c", """
                import socket; s = socket.create_connection(('127.0.0.1', \(port))); s.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\n'); s.settimeout(5); print(s.recv(4096).decode())
                """])
            #expect(partial.out.hasPrefix("HTTP/1.1 408"), "\(partial.out)")
            let big = try sh(["curl", "-sS", "-w", "\n%{http_code}", "--data", String(repeating: "b", count: 5000), "http://127.0.0.1:\(port)/x"])
            #expect(big.out.hasSuffix("\n413"))
            try stopRecorder(rec)
            #expect(try sqlite(f.session, "SELECT status, error LIKE '%did not answer%' FROM exchanges") == "504|1")
        }
    }

    @Test func expectContinuePipeliningClientAbortAndSIGTERM() throws {
        try withFixture { f in
            let (up, upPort) = try upstream()
            defer { up.stop() }
            let (rec, port) = try recorder(f, ["--reverse", "http://127.0.0.1:\(upPort)", "--listen", "127.0.0.1:0"])
            defer { rec.stop() }
            // Expect: 100-continue with a body sent only after the interim response.
            let bodyFile = f.path("body.json")
            try (#"{"messageType":"AReq","padding":""# + String(repeating: "p", count: 20_000) + #""}"#).write(toFile: bodyFile, atomically: true, encoding: .utf8)
            let expect = try sh(["curl", "-sS", "-H", "Expect: 100-continue", "--data-binary", "@\(bodyFile)", "http://127.0.0.1:\(port)/echo"])
            let size = try FileManager.default.attributesOfItem(atPath: bodyFile)[.size] as? Int ?? 0
            #expect(try JSON.parse(expect.out)["body_length"] == .number(String(size)), "\(expect.out.prefix(200))")
            // Three pipelined requests in one write: three responses, in order.
            let pipelined = try sh(["python3", "-c", """
                import socket, time
                s = socket.create_connection(('127.0.0.1', \(port)))
                s.sendall(b''.join(b'GET /p%d HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' % i for i in range(3)))
                data = b''
                deadline = time.time() + 5
                while data.count(b'HTTP/1.1 200') < 3 and time.time() < deadline:
                    data += s.recv(65536)
                print(data.decode())
                """])
            let order = ["/p0", "/p1", "/p2"].map { pipelined.out.range(of: "\"path\": \"\($0)\"")?.lowerBound }
            #expect(order.allSatisfy { $0 != nil } && order[0]! < order[1]! && order[1]! < order[2]!, "\(pipelined.out.prefix(300))")
            // A client that gives up before the answer.
            _ = try? sh(["curl", "-sS", "--max-time", "0.3", "http://127.0.0.1:\(port)/slow?ms=1500"])
            // Wait for the recorder to log that exchange (the upstream answers after 1.5 s), not a fixed time.
            #expect(try waitUntil(8) { (try? sqlite(f.session, "SELECT count(*) FROM exchanges WHERE path LIKE '/slow%'")) == "1" })
            // One still in flight when the recorder stops: recorded as cut short by the recorder, not as the client's abort.
            let inFlight = try Spawned("/usr/bin/env", ["curl", "-sS", "--max-time", "10", "http://127.0.0.1:\(port)/slow?ms=6000"])
            defer { inFlight.stop() }
            #expect(try waitUntil(8) { up.stdout.contains("slow 6000 started") })
            rec.process.terminate() // SIGTERM: flush and close like SIGINT
            #expect(try rec.wait() == 0)
            #expect(try sqlite(f.session, "SELECT client_abort_at IS NULL, error LIKE 'the recorder stopped%' FROM exchanges WHERE path = '/slow?ms=6000'")
                    == "1|1")
            #expect(try sqlite(f.session, "SELECT count(*) FROM exchanges WHERE path LIKE '/p%'") == "3")
            #expect(try sqlite(f.session, "SELECT client_abort_at IS NOT NULL, error LIKE 'client closed%' FROM exchanges WHERE path = '/slow?ms=1500'") == "1|1")
            #expect(try sqlite(f.session, "PRAGMA journal_mode") == "delete", "back to a single file after a clean stop")
        }
    }

    @Test func killDashNineLeavesAValidFile() throws {
        try withFixture { f in
            let (up, upPort) = try upstream()
            defer { up.stop() }
            let (rec, port) = try recorder(f, ["--reverse", "http://127.0.0.1:\(upPort)"])
            for i in 1...5 { try sh(["curl", "-sS", "-o", "/dev/null", "http://127.0.0.1:\(port)/before-kill/\(i)"]) }
            // The writer commits in batches at least every 100 ms: kill once all five are committed.
            #expect(try waitUntil(5) { (try? sqlite(f.session, "SELECT count(*) FROM exchanges WHERE path LIKE '/before-kill/%'")) == "5" })
            rec.kill9()
            _ = try? rec.wait()
            #expect(try sqlite(f.session, "PRAGMA integrity_check") == "ok")
            let show = try CLIRunner.run(["show", f.session, "--json"])
            #expect(show.status == 0, "\(show.stderr)")
            guard case let .array(xs)? = try JSON.parse(show.stdout)["exchanges"] else { Issue.record("no exchanges"); return }
            #expect(xs.count == 5)
        }
    }

    @Test func notASessionAndNewerSchemaAreClearErrors() throws {
        try withFixture { f in
            try "hello".write(toFile: f.path("text.3dstape"), atomically: true, encoding: .utf8)
            let r = try CLIRunner.run(["show", f.path("text.3dstape")])
            #expect(r.status == 1 && r.stderr.contains("is not a 3dstape session"))
            let (up, upPort) = try upstream()
            defer { up.stop() }
            let (rec, port) = try recorder(f, ["--reverse", "http://127.0.0.1:\(upPort)"])
            try sh(["curl", "-sS", "-o", "/dev/null", "http://127.0.0.1:\(port)/x"])
            try stopRecorder(rec)
            _ = try sqlite(f.session, "UPDATE meta SET value = '99' WHERE key = 'schema_version'")
            let newer = try CLIRunner.run(["show", f.session])
            #expect(newer.status == 1 && newer.stderr.contains("newer than this 3dstape"))
            let exists = try CLIRunner.run(["record", "--session", f.session, "--listen", "127.0.0.1:0"], environment: ["THREEDSTAPE_HOME": f.home])
            #expect(exists.status == 2 && exists.stderr.contains("already exists")) // an existing output file is usage (issue 26)
        }
    }
}
