import Foundation
import Testing
import TapCore

/// `3dstape demo`, `sandbox`, `client` and `record` as processes on loopback.
@Suite(.serialized) struct SandboxEndToEndTests {
    @Test func demoRecordsEveryFlowAndShowsThem() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("demo.3dstape").path
        let r = try CLIRunner.run(["demo", "--out", out], environment: ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path])
        #expect(r.status == 0, "\(r.stdout.suffix(2000)) \(r.stderr)")
        let lines = r.stdout.split(separator: "\n").filter { $0.contains("→") && ($0.hasPrefix("ok") || $0.contains("FAIL")) }
        #expect(lines.count == 20 && lines.allSatisfy { $0.contains("ok") }, "\(lines)")
        #expect(r.stdout.contains("CReq 2.2.0 (decrypted) → CRes 2.2.0 Y (decrypted)"), "the demo records with the sandbox's key log")
        #expect(!r.stdout.contains("(JWE)"))
        let clear = r.stdout.components(separatedBy: "app-channel CReq/CRes in clear").last ?? ""
        #expect(clear.contains(#""challengeDataEntry":"***""#) && clear.contains(#""acsUiType":"07""#), "every UI type's CRes is shown in clear")
        let clearLines = (clear.components(separatedBy: "\n\n").first ?? "").split(separator: "\n").dropFirst()
        #expect(clearLines.count == 32 && // 8 app-channel challenges, two round trips each
                clearLines.allSatisfy { !$0.contains("TransID") && ($0.contains(" CReq 2.") || $0.contains(" CRes 2.")) },
                "each message on one line, its type and version first, the IDs left out: \(clearLines.prefix(3))")
        #expect(r.stdout.contains("RReq 2.2.0 Y → RRes"))
        #expect(r.stdout.contains("session written to \(out)"))
        // The hint counts the scenarios as `replay --scenario` takes them: on a session without gateway calls, every
        // scenario that needs none (the demo records every message kind), none of the PXP or Trust Payments ones.
        guard case let .array(all) = try JSON.parse(try CLIRunner.run(["scenarios", "--json"]).stdout) else { Issue.record("no scenarios"); return }
        let gatewayFree = all.filter { $0["gateway"] == .null }.count
        #expect(gatewayFree > 0 && r.stdout.contains("(\(gatewayFree) of the \(all.count) scenarios apply to this session"), "\(r.stdout.suffix(600))")
        #expect(r.stdout.contains("replay: 20 of 20 outcomes matched the recording"), "the demo replays its session with the sandbox stopped")
        // Every flow that ends in an RReq (8 app challenges, 3 browser ones, the decoupled card) has it in both sessions,
        // answered: the demo stops its recorder and its replayer once no RReq is due, not after a fixed sleep.
        #expect(r.stdout.contains(", 12 RReqs delivered;"), "\(r.stdout.suffix(800))")
        let rreqs = "SELECT count(*) FROM exchanges e WHERE e.status = 200 AND e.id IN (SELECT exchange_id FROM messages WHERE message_type = 'RReq')"
        for session in [out, dir.appendingPathComponent("demo-replay.3dstape").path] {
            #expect(try sh(["sqlite3", session, rreqs]).out.trimmingCharacters(in: .whitespacesAndNewlines) == "12", "\(session)")
        }
        #expect(r.stdout.contains("validate: 0 errors, 0 warnings"), "the sandbox's messages follow the specification's rules")
        #expect(r.stdout.contains("diff: 20 transactions paired, no differences"), "the replay answers what the recording holds")
        let show = try CLIRunner.run(["show", out, "--json"])
        guard case let .array(xs)? = try JSON.parse(show.stdout)["exchanges"] else { Issue.record("no exchanges"); return }
        #expect(xs.count >= 50)
        // Hardening defect 4: no key material in the file (it held every CEK of key substitution), and 0600.
        let mode = (try FileManager.default.attributesOfItem(atPath: out)[.posixPermissions] as? NSNumber)?.intValue
        #expect(mode == 0o600, "session file mode \(String(mode ?? 0, radix: 8))")
        let dump = try sh(["sqlite3", out, "SELECT detail FROM events UNION ALL SELECT json FROM messages WHERE json IS NOT NULL"]).out
        let keyShaped = try NSRegularExpression(pattern: "[0-9a-fA-F]{64}")
        let found = keyShaped.matches(in: dump, range: NSRange(dump.startIndex..., in: dump)).count
        #expect(found == 0, "no 32-byte hex value (a CEK) is stored in the session file")
        #expect(dump.contains("fingerprints only"), "the substitution event names the channel keys by fingerprint")
        try Self.expectNoSecrets(in: out, demoOutput: r.stdout + r.stderr, count: xs.count)
    }

    /// Hardening deliverable 6: no command prints a card number, an OTP or a key of the demo run. Every inspection
    /// command is run over the demo's session and its replay, and each output is searched.
    static func expectNoSecrets(in session: String, demoOutput: String, count: Int) throws {
        let replay = (session as NSString).deletingPathExtension + "-replay.3dstape"
        var runs: [[String]] = [["show", session], ["show", session, "--json"], ["ls", (session as NSString).deletingLastPathComponent, "--json"],
                                ["export", session, "--format", "har"], ["export", session, "--format", "jsonl"],
                                ["export", session, "--format", "mermaid"], ["validate", session, "--json"], ["diff", session, replay, "--json"],
                                ["show", replay, "--json"], ["export", replay, "--format", "har"]]
        runs += (1...count).map { ["show", session, "--exchange", String($0)] }
        var outputs = [("demo", demoOutput)]
        for args in runs {
            let r = try CLIRunner.run(args)
            outputs.append((args.joined(separator: " "), r.stdout + r.stderr))
        }
        let secrets = [
            ("a full test card number", "4000000000001[0-9]{3}"),
            ("an OTP typed into a challenge form", "answer=(1234|9999)"),
            ("a challenge entry in clear", #""challenge(HTML)?DataEntry(Two)?"\s*:\s*"(?!\*\*\*)"#),
            ("a CAVV in clear", #""authenticationValue"\s*:\s*"(?!\*\*\*)"#),
            ("a 32-byte hex key", "(?<![0-9a-fA-F])[0-9a-fA-F]{64}(?![0-9a-fA-F])"),
        ]
        for (what, pattern) in secrets {
            let re = try NSRegularExpression(pattern: pattern)
            for (command, text) in outputs {
                let hits = re.matches(in: text, range: NSRange(text.startIndex..., in: text))
                #expect(hits.isEmpty, "\(command) printed \(what): \(hits.first.map { String(text[Range($0.range, in: text)!]) } ?? "")")
            }
        }
        #expect(outputs.count == runs.count + 1)
    }

    @Test func sandboxAndClientProcessesThroughTheRecorder() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let env = ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path]
        let certs = dir.appendingPathComponent("certs").path
        #expect(try CLIRunner.run(["sandbox", "certs", "--out", certs, "--ds-key", "ec"], environment: env).status == 0)
        for f in ["ds-root.pem", "ds-root.der", "ds-cert.pem", "ds.json"] {
            #expect(FileManager.default.fileExists(atPath: (certs as NSString).appendingPathComponent(f)), "\(f)")
        }
        let ds = try JSON.parse([UInt8](try Data(contentsOf: URL(fileURLWithPath: (certs as NSString).appendingPathComponent("ds.json")))))
        #expect(ds["directoryServerID"]?.stringValue == "A999999999" && ds["certificateString"]?.stringValue?.isEmpty == false)

        let session = dir.appendingPathComponent("s.3dstape").path
        let recorder = try Spawned(CLIRunner.binary.path, ["record", "--listen", "127.0.0.1:0", "--session", session, "--quiet"], environment: env)
        defer { recorder.stop() }
        let proxyPort = try recorder.port(after: "recording on http://127.0.0.1:")
        // The sandbox sends its RReq through the recorder too.
        let keylog = dir.appendingPathComponent("keys.log").path
        let sandbox = try Spawned(CLIRunner.binary.path, ["sandbox", "--listen", "127.0.0.1:0", "--ds-key", "ec", "--sign", "ES256", "--quiet",
                                                          "--proxy", "http://127.0.0.1:\(proxyPort)", "--keylog", keylog], environment: env)
        defer { sandbox.stop() }
        let port = try sandbox.port(after: "sandbox DS + ACS on http://127.0.0.1:")

        let ok = try CLIRunner.run(["client", "--ds", "http://127.0.0.1:\(port)", "--card", "4000000000001083", "--certs", certs,
                                    "--select", "1", "3", "--message-version", "2.3.1", "--enc", "A128GCM",
                                    "--proxy", "http://127.0.0.1:\(proxyPort)", "--json"], environment: env)
        #expect(ok.status == 0, "\(ok.stderr)")
        let result = try JSON.parse(ok.stdout)
        #expect(result["transStatus"] == .string("Y") && result["challenge"] == .bool(true) && result["acsUiType"] == .string("03"))
        #expect(result["authenticationValue"] == .string("***"))
        let browser = try CLIRunner.run(["client", "--ds", "http://127.0.0.1:\(port)", "--card", "4000000000001067", "--certs", certs,
                                         "--channel", "browser", "--answer", "1234", "--proxy", "http://127.0.0.1:\(proxyPort)"], environment: env)
        #expect(browser.status == 0 && browser.stdout.hasPrefix("transStatus Y"), "\(browser.stdout) \(browser.stderr)")

        let started = Date()
        let timeout = try CLIRunner.run(["client", "--ds", "http://127.0.0.1:\(port)", "--card", "4000000000001158", "--certs", certs,
                                         "--timeout", "1"], environment: env)
        #expect(timeout.status == 1 && timeout.stderr.contains("challengeCancel 08"), "\(timeout.stderr)")
        #expect(Date().timeIntervalSince(started) < 6)
        let erro = try CLIRunner.run(["client", "--ds", "http://127.0.0.1:\(port)", "--card", "4000000000001166", "--certs", certs], environment: env)
        #expect(erro.status == 1 && erro.stderr.contains("Erro 305"))

        recorder.interrupt()
        #expect(try recorder.wait() == 0)
        let show = try CLIRunner.run(["show", session])
        #expect(show.stdout.contains("AReq 2.3.1 → ARes 2.3.1 C") && show.stdout.contains("CReq (JWE) → CRes (JWE)"), "\(show.stdout)")
        #expect(show.stdout.contains("RReq 2.3.1 Y → RRes"))

        // Decrypt afterwards with the sandbox's key log; a wrong key is reported, not shown as clear text.
        let lines = try String(contentsOfFile: keylog, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2, "two app-channel challenges were set up (one of them the ACS never answered)")
        let bad = dir.appendingPathComponent("bad.log").path
        try (String(lines[0].split(separator: " ").dropLast().joined(separator: " ")) + " " + String(repeating: "ab", count: 32) + "\n")
            .write(toFile: bad, atomically: true, encoding: .utf8)
        let wrong = try CLIRunner.run(["decrypt", session, "--keylog", bad])
        #expect(wrong.status == 1 && wrong.stdout.contains("0 app-channel messages decrypted") && wrong.stdout.contains("4 whose key did not open them"),
                "\(wrong.stdout)")
        let right = try CLIRunner.run(["decrypt", session, "--keylog", keylog])
        #expect(right.status == 0 && right.stdout.contains("4 app-channel messages decrypted"), "\(right.stdout)")
        let after = try CLIRunner.run(["show", session])
        #expect(after.stdout.contains("CReq 2.3.1 (decrypted) → CRes 2.3.1 Y (decrypted)"), "\(after.stdout)")
        let full = try CLIRunner.run(["show", session, "--exchange", "2", "--json"])
        let messages = try JSON.parse(full.stdout)["messages"]
        #expect(messages?.compact.contains("decrypted: key log") == true)
        #expect(!full.stdout.contains("\"challengeDataEntry\": \"1"), "entries stay masked in the plaintext")
        let garbage = try CLIRunner.run(["decrypt", session, "--keylog", session])
        #expect(garbage.status == 1 && garbage.stderr.contains("line 1"))
    }

    @Test func recordWithKeySubstitution() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let env = ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path]
        let identity = dir.appendingPathComponent("identity").path, real = dir.appendingPathComponent("real").path
        let export = try CLIRunner.run(["ca", "export", "--ds", identity], environment: env)
        #expect(export.status == 0, "\(export.stderr)")
        #expect(try CLIRunner.run(["sandbox", "certs", "--out", real], environment: env).status == 0)
        let session = dir.appendingPathComponent("sub.3dstape").path
        let recorder = try Spawned(CLIRunner.binary.path, ["record", "--listen", "127.0.0.1:0", "--session", session, "--quiet",
                                                           "--decrypt", "substitute", "--ds-cert", real + "/ds-cert.pem",
                                                           "--ds-root", real + "/ds-root.pem"], environment: env)
        defer { recorder.stop() }
        let proxyPort = try recorder.port(after: "recording on http://127.0.0.1:")
        let sandbox = try Spawned(CLIRunner.binary.path, ["sandbox", "--listen", "127.0.0.1:0", "--quiet"], environment: env)
        defer { sandbox.stop() }
        let port = try sandbox.port(after: "sandbox DS + ACS on http://127.0.0.1:")
        let r = try CLIRunner.run(["client", "--ds", "http://127.0.0.1:\(port)", "--card", "4000000000001109", "--certs", identity,
                                   "--answer", "1234", "--proxy", "http://127.0.0.1:\(proxyPort)", "--json"], environment: env)
        let outcome = try? JSON.parse(r.stdout)
        #expect(r.status == 0 && outcome?["transStatus"] == .string("Y"), "\(r.stdout) \(r.stderr)")
        // The same client straight to the sandbox fails: it trusts 3dstape's test DS, not the sandbox's.
        let direct = try CLIRunner.run(["client", "--ds", "http://127.0.0.1:\(port)", "--card", "4000000000001109", "--certs", identity,
                                        "--answer", "1234"], environment: env)
        #expect(direct.status == 1 && direct.stderr.contains("Erro 302"), "\(direct.stderr)")
        recorder.interrupt()
        #expect(try recorder.wait() == 0)
        let show = try CLIRunner.run(["show", session])
        #expect(show.stdout.contains("CReq 2.2.0 (decrypted) → CRes 2.2.0 Y (decrypted)"), "\(show.stdout)")
    }

    @Test func aVersionOneSessionStillOpens() throws {
        let sample = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../sessions/sample-reverse.3dstape").path
        let show = try CLIRunner.run(["show", sample])
        #expect(show.status == 0 && show.stdout.contains("AReq 2.3.1 → ARes 2.3.1 Y"), "\(show.stderr)")
    }

    /// The client command the sandbox prints at start-up runs as printed: over TLS it names the DS root as the TLS trust
    /// (`--ca DIR/ds-root.pem`), without which the client cannot verify the sandbox's certificate (newcomer helper).
    @Test func theClientCommandTheTLSSandboxPrintsWorksAsPrinted() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let env = ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path]
        let certs = dir.appendingPathComponent("certs").path
        #expect(try CLIRunner.run(["sandbox", "certs", "--out", certs], environment: env).status == 0)
        let sandbox = try Spawned(CLIRunner.binary.path, ["sandbox", "--listen", "127.0.0.1:0", "--tls", "--quiet"], environment: env)
        defer { sandbox.stop() }
        _ = try sandbox.port(after: "on https://127.0.0.1:")
        try sandbox.waitFor("clients:") { _, err in err.contains("--card PAN'") }
        let hint = try #require(sandbox.stderr.split(separator: "\n").first { $0.hasPrefix("clients:") })
        let printed = try #require(hint.components(separatedBy: "then '3dstape ").last?.dropLast()) // up to the closing quote
        #expect(printed.contains("--ca DIR/ds-root.pem"), "\(hint)")
        let args = printed.split(separator: " ").map { $0.replacingOccurrences(of: "DIR", with: certs).replacingOccurrences(of: "PAN", with: "4000000000001000") }
        let r = try CLIRunner.run(args, environment: env)
        #expect(r.status == 0 && r.stdout.contains("transStatus Y"), "\(args) \(r.stdout) \(r.stderr)")
    }
}
