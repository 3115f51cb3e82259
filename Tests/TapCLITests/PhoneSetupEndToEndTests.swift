import Foundation
import Testing
import TapCore

/// Issue 27 §2, setting up phones and simulators, end to end with the real binary: the configuration profile read by
/// Python's plistlib, the fingerprint `record` prints compared with openssl's, and the hint when curl or openssl
/// refuse the intercepted certificate.
@Suite(.serialized) struct PhoneSetupEndToEndTests {
    struct Fixture {
        let dir: URL
        var home: String { dir.appendingPathComponent("home").path }
        var env: [String: String] { ["THREEDSTAPE_HOME": home] }
        var session: String { dir.appendingPathComponent("s.3dstape").path }
        func path(_ name: String) -> String { dir.appendingPathComponent(name).path }
    }

    func withFixture(_ body: (Fixture) throws -> Void) throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        try body(Fixture(dir: dir))
    }

    @Test func mobileconfigHoldsTheSameCertificateAsTheDERExport() throws {
        try withFixture { f in
            let profile = f.path("3dstape.mobileconfig"), der = f.path("ca.der")
            let export = try CLIRunner.run(["ca", "export", "--format", "mobileconfig", "--out", profile], environment: f.env)
            #expect(export.status == 0, "\(export.stderr)")
            #expect(try CLIRunner.run(["ca", "export", "--format", "der", "--out", der], environment: f.env).status == 0)
            let read = try sh(["python3", "-c", """
                import plistlib, sys
                with open(sys.argv[1], 'rb') as fh: p = plistlib.load(fh)
                (root,) = p['PayloadContent']
                assert p['PayloadType'] == 'Configuration' and p['PayloadVersion'] == 1, p
                assert root['PayloadType'] == 'com.apple.security.root' and root['PayloadVersion'] == 1, root
                assert isinstance(root['PayloadContent'], bytes)
                with open(sys.argv[2], 'wb') as out: out.write(root['PayloadContent'])
                print(p['PayloadDisplayName']); print(p['PayloadUUID']); print(root['PayloadUUID']); print(p['PayloadIdentifier'])
                """, profile, f.path("from-profile.der")])
            #expect(read.status == 0, "\(read.err)")
            let inside = try #require(FileManager.default.contents(atPath: f.path("from-profile.der")))
            #expect(inside == FileManager.default.contents(atPath: der), "the certificate in the profile is the DER export, byte for byte")
            let fields = read.out.split(separator: "\n").map(String.init)
            #expect(fields.first == "3dstape interception CA (testing only)")
            // An existing file is kept unless --force; the same CA gives the same profile (same UUIDs).
            let again = try CLIRunner.run(["ca", "export", "--format", "mobileconfig", "--out", profile], environment: f.env)
            #expect(again.status != 0 && again.stderr.contains("exists"), "\(again.stderr)")
            let before = FileManager.default.contents(atPath: profile)
            #expect(try CLIRunner.run(["ca", "export", "--format", "mobileconfig", "--out", profile, "--force"], environment: f.env).status == 0)
            #expect(FileManager.default.contents(atPath: profile) == before)
            // On standard output too.
            let stdout = try CLIRunner.run(["ca", "export", "--format", "mobileconfig"], environment: f.env)
            #expect(stdout.stdout.utf8.elementsEqual(before ?? Data()))
        }
    }

    /// Tester's finds on `ca export`: `--out FILE --force` deleted whatever FILE was (a FIFO here; /dev/null as root) and
    /// wrote a regular file there; an ESC in the --out path went raw to the terminal in "wrote …"; `--ds DIR` silently
    /// ignored `--format` and `--out`.
    @Test func caExportReplacesOnlyFilesAndSaysSoSafely() throws {
        try withFixture { f in
            let fifo = f.path("fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            let refused = try CLIRunner.run(["ca", "export", "--format", "mobileconfig", "--out", fifo, "--force"], environment: f.env)
            #expect(refused.status == 1 && refused.stderr.contains("is a FIFO, not a regular file"), "\(refused.stderr)")
            var st = stat()
            #expect(lstat(fifo, &st) == 0 && (st.st_mode & S_IFMT) == S_IFIFO, "the FIFO is still there")
            // A regular file is replaced by a new one renamed over it: a hard link to the old one keeps the old bytes.
            let pem = f.path("ca.pem"), old = f.path("old.pem")
            try Data("old".utf8).write(to: URL(fileURLWithPath: pem))
            #expect(link(pem, old) == 0)
            #expect(try CLIRunner.run(["ca", "export", "--out", pem, "--force"], environment: f.env).status == 0)
            #expect(FileManager.default.contents(atPath: old) == Data("old".utf8), "replaced by rename, not written in place")
            #expect(String(decoding: FileManager.default.contents(atPath: pem) ?? Data(), as: UTF8.self).hasPrefix("-----BEGIN CERTIFICATE-----"))
            #expect(try FileManager.default.contentsOfDirectory(atPath: f.dir.path).allSatisfy { !$0.contains(".tmp-") }, "no temporary file is left")
            let hostile = f.path("x\u{1B}[31m.mc")
            let wrote = try CLIRunner.run(["ca", "export", "--format", "mobileconfig", "--out", hostile], environment: f.env)
            #expect(wrote.status == 0 && !wrote.stderr.contains("\u{1B}") && wrote.stderr.contains("wrote \(f.path("x"))\\x1B[31m.mc"), "\(wrote.stderr)")
            for other in [["--out", f.path("a.pem")], ["--format", "der"]] {
                let both = try CLIRunner.run(["ca", "export", "--ds", f.path("ds")] + other, environment: f.env)
                #expect(both.status == 2 && both.stderr.contains("give one or the other"), "\(both.stderr)")
            }
            #expect(!FileManager.default.fileExists(atPath: f.path("ds")) && !FileManager.default.fileExists(atPath: f.path("a.pem")))
        }
    }

    func recorder(_ f: Fixture) throws -> (Spawned, UInt16) {
        let s = try Spawned(CLIRunner.binary.path, ["record", "--listen", "127.0.0.1:0", "--session", f.session], environment: f.env)
        return (s, try s.port(after: "recording on http://127.0.0.1:"))
    }

    @Test func recordPrintsTheProxyAddressAndTheCAFingerprintAsOpenSSLDoes() throws {
        try withFixture { f in
            let (rec, port) = try recorder(f)
            defer { rec.stop() }
            try rec.waitFor("the proxy line") { _, e in e.contains("CA SHA-256 ") }
            let line = try #require(rec.stderr.split(separator: "\n").first { $0.hasPrefix("proxy ") })
            #expect(line.hasPrefix("proxy 127.0.0.1:\(port)   CA SHA-256 "), "\(line)")
            let printed = String(line.split(separator: " ").last ?? "")
            #expect(try CLIRunner.run(["ca", "export", "--out", f.path("ca.pem")], environment: f.env).status == 0)
            let openssl = try sh(["openssl", "x509", "-noout", "-fingerprint", "-sha256", "-in", f.path("ca.pem")])
            let theirs = try #require(openssl.out.split(separator: "=").last).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(printed == theirs && theirs.count == 95, "record: \(printed), openssl: \(openssl.out)")
            rec.interrupt()
            #expect(try rec.wait() == 0)
        }
    }

    /// The reproduction: a client without the CA (curl, twice to one host; openssl s_client -verify_return_error to
    /// another) aborts the intercepted handshake with unknown_ca. The hint is printed once per host, and stored once per
    /// host as a session event beside each connection's failure.
    @Test func aClientThatRefusesTheCertificateGetsTheHintOncePerHost() throws {
        try withFixture { f in
            let (rec, port) = try recorder(f)
            defer { rec.stop() }
            // The same host twice, the second time in other case (the hint was printed for each spelling).
            for host in ["acs.example.test", "ACS.Example.Test"] {
                let curl = try sh(["curl", "-sS", "--max-time", "10", "-x", "http://127.0.0.1:\(port)", "https://\(host)/challenge"])
                #expect(curl.status == 60, "curl refuses the certificate: \(curl.err)")
            }
            let s = try sh(["openssl", "s_client", "-proxy", "127.0.0.1:\(port)", "-connect", "ds.example.test:443",
                            "-servername", "ds.example.test", "-verify_return_error"], stdin: "")
            #expect(s.status != 0)
            try rec.waitFor("three refused handshakes and the two hints") { _, e in
                e.components(separatedBy: "alert unknown ca").count - 1 >= 3 && e.contains("ds.example.test refused")
            }
            rec.interrupt()
            #expect(try rec.wait() == 0)
            let hint = "acs.example.test refused 3dstape's certificate: the client does not trust the CA, or pins its certificate (see --pass-through)"
            #expect(rec.stderr.components(separatedBy: hint).count - 1 == 1, "once per host: \(rec.stderr)")
            #expect(rec.stderr.lowercased().components(separatedBy: hint.lowercased()).count - 1 == 1, "host names compare case-folded: \(rec.stderr)")
            #expect(rec.stderr.contains("\(hint); the client sent TLS alert unknown_ca (48)"))
            #expect(rec.stderr.components(separatedBy: "ds.example.test refused 3dstape's certificate").count - 1 == 1)
            let events = try sh(["sqlite3", f.session, "SELECT kind, count(*) FROM events WHERE kind IN ('certificate-refused', 'client-tls-failed') GROUP BY kind ORDER BY kind"])
            #expect(events.out == "certificate-refused|2\nclient-tls-failed|3\n", "\(events.out) \(events.err)")
            let stored = try sh(["sqlite3", f.session, "SELECT detail FROM events WHERE kind = 'certificate-refused' ORDER BY id LIMIT 1"])
            #expect(stored.out.hasPrefix(hint + "; TLS alert unknown_ca (48) from 127.0.0.1:"), "\(stored.out)")
        }
    }
}
