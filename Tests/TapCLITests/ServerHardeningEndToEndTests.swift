import Foundation
import Testing
import TapCore

/// Issue 23 (hardening, round two), against the real processes on loopback: HTML injection into the replayer's
/// browser pages, the loopback check on the address that is bound, credentials a forward passes on, TLS clients that
/// send no SNI, half-closed clients, upgrades, and a replayer that forwards its misses to itself.
@Suite(.serialized) struct ServerHardeningEndToEndTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized

    struct Fixture {
        let dir: URL
        var env: [String: String] { ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path] }
        func path(_ name: String) -> String { dir.appendingPathComponent(name).path }
    }

    func withFixture(_ body: (Fixture) throws -> Void) throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        try body(Fixture(dir: dir))
    }

    /// A copy of a checked-in session (replay writes nothing into it, but a test never touches the original).
    func session(_ f: Fixture, _ name: String) throws -> String {
        let copy = f.path(name)
        try FileManager.default.copyItem(atPath: Self.root.appendingPathComponent("sessions/\(name)").path, toPath: copy)
        return copy
    }

    func replayer(_ f: Fixture, _ session: String, _ extra: [String], scheme: String = "http") throws -> (Spawned, UInt16) {
        let s = try Spawned(CLIRunner.binary.path, ["replay", session, "--listen", "127.0.0.1:0", "--timing", "none",
                                                    "--session", f.path("out-\(UUID().uuidString).3dstape")] + extra, environment: f.env)
        return (s, try s.port(after: "on \(scheme)://127.0.0.1:"))
    }

    func upstream() throws -> (Spawned, UInt16) {
        let s = try Spawned("/usr/bin/env", ["python3", Self.root.appendingPathComponent("tools/testing/upstream.py").path])
        return (s, try s.port(after: "listening "))
    }

    // MARK: item 7

    /// The issue's reproduction: a browser AReq whose notificationURL breaks out of the form's action, and a creq post
    /// whose threeDSSessionData breaks out of its input. The final CRes page, parsed as a browser would, has only the
    /// recorded page's own tags, and its action and hidden field carry the live values exactly.
    @Test func liveValuesInTheReplayedBrowserPagesAreEscaped() throws {
        try withFixture { f in
            let copy = try session(f, "demo-browser.3dstape")
            let (rep, port) = try replayer(f, copy, ["--quiet"])
            defer { rep.stop() }
            let notify = "http://127.0.0.1:1/n\"><script>alert(document.domain)</script>"
            let sessionData = "sess\"><i>x"
            let script = """
            import base64, json, subprocess, sys, urllib.parse, urllib.request
            from html.parser import HTMLParser
            base = "http://127.0.0.1:\(port)"
            areq = json.loads(subprocess.check_output(["sqlite3", sys.argv[1], "select request_body from exchanges where id = 2"]))
            areq["acctNumber"] = "4000000000001067"
            areq["notificationURL"] = sys.argv[2]
            def post(path, data, ctype):
                return urllib.request.urlopen(urllib.request.Request(base + path, data=data, headers={"Content-Type": ctype})).read().decode()
            ares = json.loads(post("/ds/areq", json.dumps(areq).encode(), "application/json"))
            creq = base64.urlsafe_b64encode(json.dumps({"threeDSServerTransID": areq["threeDSServerTransID"], "acsTransID": ares["acsTransID"],
                "messageType": "CReq", "messageVersion": "2.2.0", "challengeWindowSize": "05"}).encode()).decode().rstrip("=")
            form = "application/x-www-form-urlencoded"
            pages = [post("/acs/challenge", urllib.parse.urlencode({"creq": creq, "threeDSSessionData": sys.argv[3]}).encode(), form)]
            pages.append(post("/acs/challenge/submit", urllib.parse.urlencode({"acsTransID": ares["acsTransID"], "uiType": "01", "answer": "1234",
                "action": "submit"}).encode(), form))
            class Tags(HTMLParser):
                def __init__(self):
                    super().__init__(); self.tags = []; self.attrs = {}
                def handle_starttag(self, tag, attrs):
                    self.tags.append(tag)
                    for k, v in attrs: self.attrs.setdefault(tag + "." + k + ("." + dict(attrs).get("name", "") if tag == "input" else ""), v)
            out = []
            for page in pages:
                p = Tags(); p.feed(page); out.append({"tags": sorted(set(p.tags)), "attrs": p.attrs})
            print(json.dumps(out))
            """
            let r = try sh(["python3", "-c", script, copy, notify, sessionData])
            let pages = try JSON.parse(Array(r.out.utf8))
            guard case let .array(parsed) = pages, parsed.count == 2 else { Issue.record("no pages: \(r.out) \(r.err)"); return }
            let allowed: Set<String> = ["html", "head", "title", "body", "h1", "p", "form", "input", "button", "noscript"]
            for page in parsed {
                guard case let .array(tags)? = page["tags"] else { Issue.record("\(page.compact)"); continue }
                let names = Set(tags.compactMap(\.stringValue))
                #expect(names.isSubset(of: allowed), "only the recorded page's own tags: \(names.subtracting(allowed))")
            }
            let final = parsed[1]["attrs"]
            #expect(final?["form.action"]?.stringValue == notify, "the form posts to the live notificationURL, as text: \(final?.compact ?? "")")
            #expect(final?["input.value.threeDSSessionData"]?.stringValue == sessionData, "\(final?.compact ?? "")")
            #expect(final?["input.value.cres"]?.stringValue?.isEmpty == false)
        }
    }

    // MARK: item 8

    /// The real check, for all four listening commands: 0.0.0.0, however it is written, is refused without --auth
    /// (or, for web, --allow-remote), in one line, exit status 2, before anything starts. A name is bound as the
    /// address it resolves to (`web --listen localhost:0` serves on 127.0.0.1, and only to its own Host names).
    @Test func listeningBeyondLoopbackIsJudgedByTheAddressThatIsBound() throws {
        try withFixture { f in
            let replaySession = try session(f, "sample-reverse.3dstape")
            for listen in ["0.0.0.0:0", "0:0"] {
                for args in [["record", "--session", f.path("x.3dstape")], ["sandbox"], ["replay", replaySession], ["web", f.dir.path]] {
                    let r = try CLIRunner.run(args + ["--listen", listen], environment: f.env)
                    #expect(r.status == 2 && r.stderr.contains("is reachable from other machines")
                            && r.stderr.split(separator: "\n").count == 1, "\(args) --listen \(listen): \(r.status) \(r.stderr)")
                }
            }
            #expect(!FileManager.default.fileExists(atPath: f.path("x.3dstape")), "nothing was created")
            let web = try Spawned(CLIRunner.binary.path, ["web", f.dir.path, "--listen", "localhost:0"], environment: f.env)
            defer { web.stop() }
            let port = try web.port(after: "3dstape web: http://127.0.0.1:")
            #expect(try sh(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://localhost:\(port)/api/sessions"]).out == "200")
            #expect(try sh(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Host: 127.attacker.example:\(port)",
                            "http://127.0.0.1:\(port)/api/sessions"]).out == "421")
        }
    }

    // MARK: item 11

    /// `--on-miss forward:URL` passes on no hop-by-hop field: not the client's Proxy-Authorization (the issue's
    /// reproduction), not a field its Connection names, and with --auth not the replayer's own credentials; a proxy
    /// client's Authorization, meant for the origin, goes on. The recorder uses the same list.
    @Test func forwardsPassOnNoCredentialsOfTheHop() throws {
        try withFixture { f in
            let (up, upPort) = try upstream()
            defer { up.stop() }
            func seen(_ out: String) throws -> JSON { try #require(try JSON.parse(Array(out.utf8))["headers"]) }
            let copy = try session(f, "sample-reverse.3dstape")
            let (rep, port) = try replayer(f, copy, ["--quiet", "--on-miss", "forward:http://127.0.0.1:\(upPort)"])
            defer { rep.stop() }
            let plain = try seen(try sh(["curl", "-s", "-H", "Proxy-Authorization: Basic cWE6czNjcmV0", "-H", "Connection: close, X-Hop",
                                         "-H", "X-Hop: secret", "-H", "X-Keep: k", "http://127.0.0.1:\(port)/not/recorded"]).out)
            #expect(plain["Proxy-Authorization"] == nil && plain["X-Hop"] == nil && plain["X-Keep"]?.stringValue == "k", "\(plain.compact)")

            let (authed, aport) = try replayer(f, copy, ["--quiet", "--auth", "qa:s3cret", "--on-miss", "forward:http://127.0.0.1:\(upPort)"])
            defer { authed.stop() }
            let direct = try seen(try sh(["curl", "-s", "-u", "qa:s3cret", "http://127.0.0.1:\(aport)/not/recorded"]).out)
            #expect(direct["Authorization"] == nil, "the replayer's own credentials stay with it: \(direct.compact)")
            let proxied = try seen(try sh(["curl", "-s", "-x", "http://127.0.0.1:\(aport)", "-U", "qa:s3cret", "-H", "Authorization: Bearer client",
                                           "http://origin.example/not/recorded"]).out)
            #expect(proxied["Proxy-Authorization"] == nil && proxied["Authorization"]?.stringValue == "Bearer client", "\(proxied.compact)")

            let rec = try Spawned(CLIRunner.binary.path, ["record", "--listen", "127.0.0.1:0", "--reverse", "http://127.0.0.1:\(upPort)", "--quiet",
                                                          "--session", f.path("rec.3dstape")], environment: f.env)
            defer { rec.stop() }
            let rport = try rec.port(after: "recording on http://127.0.0.1:")
            let recorded = try seen(try sh(["curl", "-s", "-H", "Connection: X-Hop", "-H", "X-Hop: secret", "-H", "Proxy-Authorization: Basic eA==",
                                            "http://127.0.0.1:\(rport)/echo"]).out)
            #expect(recorded["X-Hop"] == nil && recorded["Proxy-Authorization"] == nil, "\(recorded.compact)")
        }
    }

    // MARK: item 14

    /// `replay --tls` reached by IP address (curl sends no SNI then): the handshake succeeds with a leaf for the listen
    /// address and localhost, which curl verifies against the CA; by name too. A handshake that fails is logged, in one
    /// line a second at most.
    @Test func replayOverTLSServesClientsThatSendNoSNI() throws {
        try withFixture { f in
            let copy = try session(f, "sample-reverse.3dstape")
            let (rep, port) = try replayer(f, copy, ["--tls"], scheme: "https")
            defer { rep.stop() }
            let ca = f.path("ca.pem")
            #expect(try CLIRunner.run(["ca", "export", "--out", ca], environment: f.env).status == 0)
            for url in ["https://127.0.0.1:\(port)/gzip", "https://localhost:\(port)/gzip"] {
                let r = try sh(["curl", "-sS", "--cacert", ca, "-o", "/dev/null", "-w", "%{http_code}", url])
                #expect(r.status == 0 && r.out == "200", "\(url): \(r.out) \(r.err)")
            }
            // Twenty clients that do not trust the CA, in a fraction of a second.
            let refused = try sh(["python3", "-c", """
                import socket, ssl, time
                ctx, n, t = ssl.create_default_context(), 0, time.time()
                for _ in range(20):
                    try: ctx.wrap_socket(socket.create_connection(("127.0.0.1", \(port))), server_hostname="127.0.0.1")
                    except ssl.SSLError: n += 1
                print(n, time.time() - t)
                """]).out.split(separator: " ")
            #expect(refused.first == "20", "\(refused)")
            let seconds = Double(refused.last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
            try rep.waitFor("the failed handshake's log line") { _, err in err.contains("TLS handshake failed") }
            usleep(100_000)
            let lines = rep.stderr.split(separator: "\n").filter { $0.contains("TLS handshake failed") }
            #expect(lines.first?.hasPrefix("3dstape: replay: client 127.0.0.1:") == true && lines.first?.contains("unknown ca") == true, "\(lines)")
            #expect(lines.count <= Int(seconds) + 1, "one line a second at most: \(lines.count) lines in \(seconds) s")
        }
    }

    // MARK: item 15

    /// A real half-closed client against `record --reverse`: the request, then shutdown(SHUT_WR). It gets its answer
    /// and then the end of the connection (before, nothing: the upstream was dropped and the exchange recorded as a
    /// client abort). The record keeps both: the answer, and when the client finished sending.
    @Test func theRecorderAnswersAHalfClosedClient() throws {
        try withFixture { f in
            let (up, upPort) = try upstream()
            defer { up.stop() }
            let session = f.path("half.3dstape")
            let rec = try Spawned(CLIRunner.binary.path, ["record", "--listen", "127.0.0.1:0", "--reverse", "http://127.0.0.1:\(upPort)", "--quiet",
                                                          "--session", session], environment: f.env)
            let port = try rec.port(after: "recording on http://127.0.0.1:")
            let r = try sh(["python3", "-c", """
                import socket, time
                s = socket.create_connection(("127.0.0.1", \(port)))
                s.sendall(b"GET /echo HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
                s.shutdown(socket.SHUT_WR)
                s.settimeout(10)
                t, data = time.time(), b""
                while True:
                    d = s.recv(65536)
                    if not d: break
                    data += d
                print(data.split(b"\\r\\n")[0].decode(), "closed after %.1f s" % (time.time() - t))
                """])
            #expect(r.out.hasPrefix("HTTP/1.1 200 OK closed after 0."), "answered, then closed (not at the idle timeout): \(r.out) \(r.err)")
            rec.interrupt()
            #expect(try rec.wait() == 0)
            let row = try sh(["sqlite3", session, "SELECT status, client_abort_at IS NOT NULL, error FROM exchanges"]).out
            #expect(row.hasPrefix("200|1|client closed its side of the connection (FIN) before the response; answered anyway"),
                    "the answer and the moment the client finished sending (a FIN is also how a client gives up): \(row)")
        }
    }

    /// An upstream that answers 101 Switching Protocols: the recorder (and a replayer forwarding to it) answer 502 with
    /// the reason, whether or not the client asked for an upgrade, instead of passing the 101 on as a final response.
    @Test func anUpstream101IsRefusedWithAReason() throws {
        try withFixture { f in
            let server = try Spawned("/usr/bin/env", ["python3", "-c", """
                import socket, threading
                srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(16)
                print("listening", srv.getsockname()[1], flush=True)
                def serve(c):
                    buf = b""
                    while b"\\r\\n\\r\\n" not in buf:
                        d = c.recv(4096)
                        if not d: return
                        buf += d
                    c.sendall(b"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n\\r\\n\\x81\\x05hello")
                    c.recv(4096); c.close()
                while True:
                    c, _ = srv.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
                """])
            defer { server.stop() }
            let upPort = try server.port(after: "listening ")
            let rec = try Spawned(CLIRunner.binary.path, ["record", "--listen", "127.0.0.1:0", "--reverse", "http://127.0.0.1:\(upPort)", "--quiet",
                                                          "--session", f.path("up.3dstape")], environment: f.env)
            defer { rec.stop() }
            let port = try rec.port(after: "recording on http://127.0.0.1:")
            let plain = try sh(["curl", "-sS", "-m", "10", "-w", " %{http_code}", "http://127.0.0.1:\(port)/plain"])
            #expect(plain.out.hasSuffix(" 502") && plain.out.contains("answered 101 Switching Protocols to a request that asked for no upgrade"),
                    "\(plain.out) \(plain.err)")
            let asked = try sh(["curl", "-sS", "-m", "10", "-w", " %{http_code}", "-H", "Upgrade: websocket", "-H", "Connection: Upgrade",
                                "http://127.0.0.1:\(port)/ws"])
            #expect(asked.out.hasSuffix(" 502") && asked.out.contains("Upgrade: websocket was not forwarded"), "\(asked.out) \(asked.err)")

            let copy = try session(f, "sample-reverse.3dstape")
            let (rep, rport) = try replayer(f, copy, ["--quiet", "--on-miss", "forward:http://127.0.0.1:\(upPort)"])
            defer { rep.stop() }
            let fwd = try sh(["curl", "-sS", "-m", "10", "-w", " %{http_code}", "http://127.0.0.1:\(rport)/not/recorded"])
            #expect(fwd.out.hasSuffix(" 502") && fwd.out.contains("101 Switching Protocols"), "\(fwd.out) \(fwd.err)")
        }
    }

    /// `--on-miss forward:` pointing at the replayer itself: the forward comes back naming the replayer in its Via
    /// field and is answered 508 with the reason, once; one exchange is recorded, and the summary says so (before: 1,024
    /// connections, 503s, and "0 answered, 0 missed").
    @Test func aForwardThatComesBackIsALoopAnswered508() throws {
        try withFixture { f in
            let probe = try sh(["python3", "-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"])
            let port = try #require(UInt16(probe.out.trimmingCharacters(in: .whitespacesAndNewlines)))
            let copy = try session(f, "sample-reverse.3dstape")
            let out = f.path("loop.3dstape")
            let rep = try Spawned(CLIRunner.binary.path, ["replay", copy, "--listen", "127.0.0.1:\(port)", "--quiet", "--session", out,
                                                          "--on-miss", "forward:http://127.0.0.1:\(port)"], environment: f.env)
            _ = try rep.port(after: "on http://127.0.0.1:")
            let r = try sh(["curl", "-sS", "-m", "20", "-w", " %{http_code}", "http://127.0.0.1:\(port)/loop"])
            #expect(r.out.hasSuffix(" 508") && r.out.contains("forwarding loop"), "\(r.out) \(r.err)")
            rep.interrupt()
            #expect(try rep.wait() == 0)
            #expect(rep.stderr.contains("0 answered, 1 missed") && rep.stderr.contains("1 forwarded request(s) came back to the replayer"),
                    "\(rep.stderr)")
            #expect(rep.stderr.components(separatedBy: "3dstape: replay: forwarding loop").count == 2, "one log line")
            let rows = try sh(["sqlite3", out, "SELECT count(*) || ' ' || max(status) FROM exchanges"]).out.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(rows == "1 508", "\(rows)")
        }
    }
    /// A replay or record whose listener cannot be bound (the port is taken) leaves no empty session behind: it used to,
    /// and the next run with the same --session was refused as "already exists".
    @Test func aListenerThatCannotBeBoundLeavesNoSession() throws {
        try withFixture { f in
            let taken = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(taken) }
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            var len = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &addr) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(taken, $0, len) == 0 && listen(taken, 1) == 0 && getsockname(taken, $0, &len) == 0 }
            }
            try #require(bound)
            let port = UInt16(bigEndian: addr.sin_port)
            let replay = try session(f, "sample-reverse.3dstape")
            for args in [["replay", replay], ["record", "--reverse", "http://127.0.0.1:1"]] {
                let out = f.path("bindfail-\(args[0]).3dstape")
                let r = try CLIRunner.run(args + ["--listen", "127.0.0.1:\(port)", "--session", out], environment: f.env)
                #expect(r.status == 1 && r.stderr.contains("Address already in use"), "\(args[0]): \(r.status) \(r.stderr)")
                for suffix in ["", "-wal", "-shm"] { #expect(!FileManager.default.fileExists(atPath: out + suffix), "\(args[0]) left \(out)\(suffix)") }
            }
        }
    }
}
