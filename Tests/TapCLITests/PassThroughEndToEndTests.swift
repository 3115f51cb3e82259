import Foundation
import Testing
import TapCore

/// `record --pass-through` / `--intercept` end to end: the real recorder, a TLS upstream (tools/testing/upstream.py) and
/// curl pinning the upstream's public key, as an app with certificate pinning does.
@Suite(.serialized) struct PassThroughEndToEndTests {
    let record = RecordEndToEndTests()

    /// `sha256//BASE64` of the upstream leaf's public key, as curl's --pinnedpubkey takes it (computed by openssl, not 3dstape).
    func pin(_ f: RecordEndToEndTests.Fixture) throws -> String {
        let r = try sh(["sh", "-c", "openssl x509 -in '\(f.path("server.pem"))' -pubkey -noout | openssl pkey -pubin -outform der "
                        + "| openssl dgst -sha256 -binary | base64"])
        #expect(r.status == 0, "\(r.err)")
        return "sha256//" + r.out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func pinnedClientFailsInterceptedAndSucceedsPassedThrough() throws {
        try record.withFixture { f in
            try record.makeCertificates(f)
            let pinned = try pin(f)
            let (up, upPort) = try record.upstream(["--tls", f.path("server.pem"), f.path("server-key.pem")])
            defer { up.stop() }
            #expect(try CLIRunner.run(["ca", "export", "--out", f.path("3dstape-ca.pem")], environment: ["THREEDSTAPE_HOME": f.home]).status == 0)
            let trustBoth = f.path("both.pem")
            try (try String(contentsOfFile: f.path("root.pem"), encoding: .utf8) + (try String(contentsOfFile: f.path("3dstape-ca.pem"), encoding: .utf8)))
                .write(toFile: trustBoth, atomically: true, encoding: .utf8)
            // localhost is passed through (pattern with its port), 127.0.0.1 is intercepted.
            let (rec, port) = try record.recorder(f, ["--upstream-ca", f.path("root.pem"), "--pass-through", "LOCALHOST:\(upPort)", "*.pinned.test"])
            defer { rec.stop() }
            try rec.waitFor("the start lines") { _, e in e.contains("Ctrl-C to stop") }
            #expect(rec.stderr.contains("(forward proxy; CONNECT intercepted except 2 pass-through patterns (LOCALHOST:\(upPort), *.pinned.test))"),
                    "the start line says what is passed through: \(rec.stderr)")
            func curl(_ host: String) throws -> (status: Int32, out: String, err: String) {
                try sh(["curl", "-sS", "-x", "http://127.0.0.1:\(port)", "--cacert", trustBoth, "--pinnedpubkey", pinned,
                        "--data", "ping", "https://\(host):\(upPort)/pinned/echo"])
            }
            let intercepted = try curl("127.0.0.1")
            #expect(intercepted.status == 90, "curl's pinning refuses 3dstape's leaf (exit 90): \(intercepted.status) \(intercepted.err)")
            let passed = try curl("localhost")
            #expect(passed.status == 0, "\(passed.err) \(rec.stderr)")
            #expect(try JSON.parse(passed.out)["path"]?.stringValue == "/pinned/echo", "\(passed.out)")
            try record.stopRecorder(rec)
            // Which side closes first is the client's and the server's race: either is a clean end.
            let row = try record.sqlite(f.session, """
                SELECT e.method, e.url, e.status, t.host, t.port, t.sni, t.alpn_offered LIKE '%http/1.1%', t.bytes_up > 200, t.bytes_down > 500,
                       e.request_wire_size = t.bytes_up, t.ended IN ('client closed', 'upstream closed', 'both sides finished sending'), t.decided_by
                FROM exchanges e JOIN tunnels t ON t.exchange_id = e.id
                """)
            #expect(row == "CONNECT|localhost:\(upPort)|200|localhost|\(upPort)|localhost|1|1|1|1|1|--pass-through LOCALHOST:\(upPort)", "\(row)")
            #expect(try record.sqlite(f.session, "SELECT count(*) FROM exchanges WHERE method != 'CONNECT'") == "0")
            #expect(try record.sqlite(f.session, "SELECT value FROM meta WHERE key = 'schema_version'") == "4")

            let show = try CLIRunner.run(["show", f.session])
            #expect(show.status == 0)
            #expect(show.stdout.contains("tunnel localhost:\(upPort)") && show.stdout.contains("SNI localhost"), "\(show.stdout)")
            let har = try CLIRunner.run(["export", f.session, "--format", "har"])
            let entry = try JSON.parse(har.stdout)["log"]?["entries"]?.arrayValue?.first
            #expect(entry?["request"]?["method"]?.stringValue == "CONNECT", "\(har.stdout)")
            #expect(entry?["_tunnel"]?["sni"]?.stringValue == "localhost", "\(har.stdout)")

            // Tester's finds: a 15,000-byte SNI with a zero-width space in it, and an ALPN offer of 60 names of 255 bytes
            // plus one holding a comma, as a client can send them. The table and its lines stay short, the invisible
            // character is shown escaped, the comma stays inside its name; `--exchange N` and HAR keep the full values.
            let names = (0..<60).map { String(repeating: String(UnicodeScalar(UInt8(65 + $0 % 26))), count: 255) } + ["a,b"]
            let offer = "[" + names.map { "\"\($0)\"" }.joined(separator: ",") + "]"
            let huge = try sh(["sqlite3", f.session, "UPDATE tunnels SET sni = 'pay' || char(8203) || 'pal' || replace(hex(zeroblob(7500)), '0', 'a'), "
                               + "alpn_offered = '\(offer)'"])
            #expect(huge.status == 0, "\(huge.err)")
            let table = try CLIRunner.run(["show", f.session])
            #expect(table.status == 0 && !table.stdout.contains("\u{200B}") && table.stdout.contains("pay\\u{200B}pal"), "\(table.stdout.prefix(600))")
            let widest = table.stdout.components(separatedBy: "\n").map(\.count).max() ?? 0
            #expect(widest < 600, "the widest line of the table: \(widest) characters")
            #expect(table.stdout.contains("… (15009 bytes)") && table.stdout.contains("… 57 more"), "\(table.stdout.prefix(800))")
            let full = try CLIRunner.run(["show", f.session, "--exchange", "1"])
            #expect(full.stdout.contains(String(repeating: "a", count: 15000)) && full.stdout.contains(#""a,b"]"#), "\(full.stdout.prefix(300))")
            let harFull = try JSON.parse(try CLIRunner.run(["export", f.session, "--format", "har"]).stdout)["log"]?["entries"]?.arrayValue?.first
            #expect(harFull?["_tunnel"]?["alpn_offered"]?.arrayValue?.compactMap(\.stringValue) == names)
            #expect(harFull?["_tunnel"]?["sni"]?.stringValue?.utf8.count == 15009)
        }
    }

    /// Tester's finds: `--pass-through '*.'` was taken as `*` (every host); the start line said "CONNECT intercepted"
    /// whatever was passed through.
    @Test func anEmptyWildcardDomainIsRefusedAndTheStartLineSaysWhatIsTunnelled() throws {
        try record.withFixture { f in
            for args in [["--pass-through", "*."], ["--intercept", "*.:443"], ["--pass-through", "ok.test", "*."]] {
                let r = try CLIRunner.run(["record", "--listen", "127.0.0.1:0", "--session", f.session] + args, environment: ["THREEDSTAPE_HOME": f.home])
                #expect(r.status == 2 && r.stderr.contains("has no domain after '*.'"), "\(args): \(r.stderr)")
            }
            #expect(!FileManager.default.fileExists(atPath: f.session))
            let (rec, _) = try record.recorder(f, ["--pass-through", "*"])
            defer { rec.stop() }
            try rec.waitFor("the start lines") { _, e in e.contains("Ctrl-C to stop") }
            #expect(rec.stderr.contains("(forward proxy; CONNECT tunnelled (pass-through *))"), "\(rec.stderr)")
        }
    }

    @Test func interceptListTunnelsEveryOtherHostAndAnUnreachableOneIs502() throws {
        try record.withFixture { f in
            try record.makeCertificates(f)
            let (up, upPort) = try record.upstream(["--tls", f.path("server.pem"), f.path("server-key.pem")])
            defer { up.stop() }
            let (rec, port) = try record.recorder(f, ["--upstream-ca", f.path("root.pem"), "--intercept", "*.acs.test,ds.test"])
            defer { rec.stop() }
            // Not in --intercept: tunnelled, so curl sees the upstream's own certificate.
            let r = try sh(["curl", "-sS", "-x", "http://127.0.0.1:\(port)", "--cacert", f.path("root.pem"), "https://localhost:\(upPort)/x"])
            #expect(r.status == 0, "\(r.err)")
            // A closed port: 502 to the CONNECT, recorded with the reason.
            let closed = try sh(["curl", "-sS", "-x", "http://127.0.0.1:\(port)", "https://127.0.0.1:1/x"])
            #expect(closed.status != 0 && closed.err.contains("502"), "\(closed.err)")
            try record.stopRecorder(rec)
            let rows = try record.sqlite(f.session, "SELECT e.status, t.decided_by, e.error IS NOT NULL FROM exchanges e JOIN tunnels t ON t.exchange_id = e.id ORDER BY e.id")
            #expect(rows == "200|matches no --intercept pattern|0\n502|matches no --intercept pattern|1", "\(rows)")
        }
    }

    @Test func badPatternsAreRefusedNamingThem() throws {
        try record.withFixture { f in
            for bad in ["exa*mple.com", "https://acs.test", "host:99999", "", "a..b", "[zz]:443"] {
                let r = try CLIRunner.run(["record", "--session", f.session, "--listen", "127.0.0.1:0", "--pass-through", bad],
                                          environment: ["THREEDSTAPE_HOME": f.home])
                #expect(r.status == 2, "\(bad): \(r.status) \(r.stderr)")
                #expect(r.stderr.contains("host pattern '\(bad)'"), "\(r.stderr)")
            }
            let reverse = try CLIRunner.run(["record", "--session", f.session, "--reverse", "http://127.0.0.1:9", "--intercept", "x.test"],
                                            environment: ["THREEDSTAPE_HOME": f.home])
            #expect(reverse.status == 2 && reverse.stderr.contains("forward mode"), "\(reverse.stderr)")
            #expect(!FileManager.default.fileExists(atPath: f.session))
        }
    }
}

/// ALPN at the intercepting end: the client's offer is recorded, http/1.1 is chosen, and an h2-only client gets a clear
/// handshake failure (no_application_protocol) and a session event, instead of HTTP/1.1 bytes it would not read.
@Suite(.serialized) struct ALPNEndToEndTests {
    let record = RecordEndToEndTests()

    @Test func h2OnlyClientIsRefusedAndOffersAreRecorded() throws {
        try record.withFixture { f in
            try record.makeCertificates(f)
            let (up, upPort) = try record.upstream(["--tls", f.path("server.pem"), f.path("server-key.pem")])
            defer { up.stop() }
            #expect(try CLIRunner.run(["ca", "export", "--out", f.path("3dstape-ca.pem")], environment: ["THREEDSTAPE_HOME": f.home]).status == 0)
            let (rec, port) = try record.recorder(f, ["--upstream-ca", f.path("root.pem")])
            defer { rec.stop() }
            // An h2-only client (openssl s_client -alpn h2, through the proxy's CONNECT).
            let h2 = try sh(["openssl", "s_client", "-proxy", "127.0.0.1:\(port)", "-connect", "localhost:\(upPort)", "-servername", "localhost",
                             "-alpn", "h2", "-CAfile", f.path("3dstape-ca.pem")], stdin: "")
            #expect(h2.status != 0, "\(h2.out)")
            #expect((h2.out + h2.err).contains("no application protocol"), "\(h2.err)")
            // curl offers h2 and http/1.1 (or http/1.1 alone without HTTP/2 support): http/1.1 is chosen.
            let ok = try sh(["curl", "-sS", "-x", "http://127.0.0.1:\(port)", "--cacert", f.path("3dstape-ca.pem"), "https://localhost:\(upPort)/alpn"])
            #expect(ok.status == 0, "\(ok.err)")
            try record.stopRecorder(rec)
            let offered = try record.sqlite(f.session, "SELECT alpn, alpn_offered FROM connections WHERE tls_version IS NOT NULL")
            #expect(offered == #"http/1.1|["h2","http/1.1"]"# || offered == #"http/1.1|["http/1.1"]"#, "\(offered)")
            let event = try record.sqlite(f.session, "SELECT detail FROM events WHERE kind = 'client-alpn-refused'")
            #expect(event.contains(#"offered ALPN ["h2"] only"#) && event.contains("SNI localhost"), "\(event)")
            #expect(rec.stderr.contains("no_application_protocol"), "\(rec.stderr)")
        }
    }
}

/// `replay --pass-through`: hosts the session never recorded are reached live through the replayer, a CONNECT tunnelled
/// untouched (the upstream's own certificate reaches the client) and a plain-HTTP request forwarded; both recorded.
@Suite(.serialized) struct ReplayPassThroughEndToEndTests {
    let record = RecordEndToEndTests()

    @Test func passedThroughHostsAreReachedLive() throws {
        try record.withFixture { f in
            try record.makeCertificates(f)
            let (plain, plainPort) = try record.upstream()
            defer { plain.stop() }
            let (secure, securePort) = try record.upstream(["--tls", f.path("server.pem"), f.path("server-key.pem")])
            defer { secure.stop() }
            // A one-exchange recording to replay.
            let (rec, recPort) = try record.recorder(f, ["--reverse", "http://127.0.0.1:\(plainPort)"])
            #expect(try sh(["curl", "-sS", "http://127.0.0.1:\(recPort)/recorded"]).status == 0)
            try record.stopRecorder(rec)

            let out = f.path("replay.3dstape")
            let rep = try Spawned(CLIRunner.binary.path, ["replay", f.session, "--listen", "127.0.0.1:0", "--session", out, "--timing", "none",
                                                          "--pass-through", "localhost:\(securePort)", "127.0.0.1:\(plainPort)"],
                                  environment: ["THREEDSTAPE_HOME": f.home])
            defer { rep.stop() }
            let port = try rep.port(after: "on http://127.0.0.1:")
            let proxy = "http://127.0.0.1:\(port)"
            let tunnelled = try sh(["curl", "-sS", "-x", proxy, "--cacert", f.path("root.pem"), "https://localhost:\(securePort)/live-tls"])
            #expect(tunnelled.status == 0, "\(tunnelled.err) \(rep.stderr)")
            #expect(try JSON.parse(tunnelled.out)["path"]?.stringValue == "/live-tls", "\(tunnelled.out)")
            let forwarded = try sh(["curl", "-sS", "-x", proxy, "http://127.0.0.1:\(plainPort)/live-plain"])
            #expect(try JSON.parse(forwarded.out)["path"]?.stringValue == "/live-plain", "\(forwarded.out)")
            // Not passed through: replayed (a miss here, 404), never reached live.
            let missed = try sh(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-x", proxy, "http://127.0.0.1:9/elsewhere"])
            #expect(missed.out == "404", "\(missed.out)")
            rep.interrupt()
            #expect(try rep.wait() == 0, "\(rep.stderr)")
            let rows = try record.sqlite(out, """
                SELECT e.method, e.status, coalesce(t.sni, '-'), coalesce(t.bytes_down > 500, '-'), r.matched_by IS NOT NULL, coalesce(r.outcome, '-')
                FROM exchanges e LEFT JOIN tunnels t ON t.exchange_id = e.id LEFT JOIN replay_matches r ON r.exchange_id = e.id ORDER BY e.id
                """)
            #expect(rows == "CONNECT|200|localhost|1|1|tunnelled\nGET|200|-|-|1|forwarded\nGET|404|-|-|0|answered", "\(rows)")
        }
    }
}

/// Tester's find: a client's FIN was not passed on in a tunnel. 10 tunnels whose clients shut down writing to an upstream
/// that answers only at the end of its input held `--max-connections 10` full (503 for the 11th) until the idle timeout;
/// and an upstream that finished sending first closed the whole tunnel (the client's later bytes got EPIPE). Each side's
/// FIN is now passed on, the tunnel ending when both have finished: in `record --pass-through` and `replay --pass-through`.
@Suite(.serialized) struct TunnelHalfCloseEndToEndTests {
    let record = RecordEndToEndTests()
    var script: String { RecordEndToEndTests.root.appendingPathComponent("tools/testing/halfclose.py").path }

    func upstream(_ mode: String) throws -> (Spawned, UInt16) {
        let s = try Spawned("/usr/bin/env", ["python3", script, "upstream", mode])
        return (s, try s.port(after: "listening "))
    }

    /// Runs both scenarios through the proxy listening on `port`.
    func bothWays(through port: UInt16, _ server: Spawned) throws {
        let (silent, silentPort) = try upstream("silent")
        defer { silent.stop() }
        let started = Date()
        let ten = try sh(["python3", script, "client", String(port), String(silentPort), "silent"])
        #expect(ten.status == 0 && ten.out.contains("11th: HTTP/1.1 200"), "\(ten.out) \(ten.err) \(server.stderr)")
        #expect(Date().timeIntervalSince(started) < 10, "well before the 60 s idle timeout")
        try silent.waitFor("the upstream read each client's end") { o, _ in o.components(separatedBy: "upstream got 100 bytes").count - 1 >= 10 }
        let (finishes, finishesPort) = try upstream("finishes")
        defer { finishes.stop() }
        let reverse = try sh(["python3", script, "client", String(port), String(finishesPort), "finishes"])
        #expect(reverse.status == 0, "\(reverse.err)")
        #expect(reverse.out.contains("client read: bye") && reverse.out.contains("client saw the end: True"), "\(reverse.out) \(reverse.err)")
        try finishes.waitFor("the upstream got the client's bytes") { o, _ in o.contains("upstream got 27 bytes: after the upstream finished") }
    }

    @Test func eachSidesFINIsPassedOnInRecordAndReplay() throws {
        try record.withFixture { f in
            let (rec, port) = try record.recorder(f, ["--pass-through", "127.0.0.1", "--max-connections", "10", "--idle-timeout", "60"])
            defer { rec.stop() }
            try bothWays(through: port, rec)
            try record.stopRecorder(rec)
            let ended = try record.sqlite(f.session, "SELECT count(*) FROM tunnels WHERE ended = 'both sides finished sending'")
            let all = try record.sqlite(f.session, "SELECT ended FROM tunnels")
            #expect((Int(ended) ?? 0) >= 11, "\(ended): \(all)")

            let out = f.path("replay.3dstape")
            let rep = try Spawned(CLIRunner.binary.path, ["replay", f.session, "--listen", "127.0.0.1:0", "--session", out, "--timing", "none",
                                                          "--pass-through", "127.0.0.1", "--max-connections", "10", "--idle-timeout", "60"],
                                  environment: ["THREEDSTAPE_HOME": f.home])
            defer { rep.stop() }
            try bothWays(through: try rep.port(after: "on http://127.0.0.1:"), rep)
        }
    }
}
