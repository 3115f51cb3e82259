import Foundation
import Testing
import TapCore

/// `3dstape client-replay` of the gateway demos (issue 25): the PXP-style and Trust Payments-style calls, the 3DS
/// Method post and the 3DS messages re-sent to a sandbox in their places with the live IDs; the Trust Payments JWTs
/// signed again with `--jwt-secret` (a wrong one: the TP calls differ, exit 1); the DS given as `--ds-cert --ds-root`.
@Suite(.serialized) struct ClientReplayGatewayEndToEndTests {
    static let root = ScenarioEndToEndTests.root

    @Test func gatewaySessionsReplayAsRecordedAndAWrongJWTSecretDiffers() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let env = ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path]
        let certs = dir.appendingPathComponent("certs").path
        let w = try CLIRunner.run(["sandbox", "certs", "--out", certs], environment: env)
        #expect(w.status == 0, "\(w.stderr)")
        let sandbox = try Spawned(CLIRunner.binary.path, ["sandbox", "--listen", "127.0.0.1:0", "--quiet"], environment: env)
        defer { sandbox.stop() }
        let port = try sandbox.port(after: "on http://127.0.0.1:")
        func replay(_ gateway: String, _ extra: [String], out: String) throws -> (status: Int32, transactions: [JSON], stdout: String) {
            var args = ["client-replay", Self.root.appendingPathComponent("sessions/demo-\(gateway).3dstape").path, "--target", "http://127.0.0.1:\(port)",
                        "--json", "--session", dir.appendingPathComponent(out).path] + extra
            for c in ClientReplayEndToEndTests.cards { args += ["--card", c] }
            args += ["--secret", "1234"]
            let r = try CLIRunner.run(args, environment: env)
            let objects = try r.stdout.split(separator: "\n").map { try JSON.parse(String($0)) }
            return (r.status, objects.filter { $0["transaction"] != nil }, r.stdout + r.stderr)
        }

        // PXP: tokens, pre-initiate, the 3DS Method, the AReq and challenge, the authorisation: all as recorded.
        let pxp = try replay("pxp", ["--certs", certs], out: "pxp.3dstape")
        #expect(pxp.status == 0, "\(pxp.stdout.suffix(3000))")
        #expect(pxp.transactions.count == 4 && pxp.transactions.allSatisfy { $0["match"] == .bool(true) }, "\(pxp.stdout.suffix(3000))")
        let show = try CLIRunner.run(["show", dir.appendingPathComponent("pxp.3dstape").path], environment: env)
        #expect(show.stdout.components(separatedBy: "/pxp/transactions").count - 1 == 4, "four authorisations re-sent: \(show.stdout)")
        #expect(show.stdout.contains("/acs/method"), "the 3DS Method post re-sent: \(show.stdout)")

        // Trust Payments, the DS as two PEM files: with the sandbox's secret all as recorded; with another every
        // transaction differs in its TP calls (the gateway answers Invalid JWT), exit 1.
        let pems = ["--ds-cert", certs + "/ds-cert.pem", "--ds-root", certs + "/ds-root.pem"]
        let tp = try replay("trustpayments", pems + ["--jwt-secret", "3dstape-sandbox-gateway-secret"], out: "tp.3dstape")
        #expect(tp.status == 0, "\(tp.stdout.suffix(3000))")
        #expect(tp.transactions.count == 4 && tp.transactions.allSatisfy { $0["match"] == .bool(true) }, "\(tp.stdout.suffix(3000))")
        let wrong = try replay("trustpayments", pems + ["--jwt-secret", "not-the-secret"], out: "tp-wrong.3dstape")
        #expect(wrong.status == 1, "\(wrong.stdout.suffix(3000))")
        #expect(wrong.transactions.count == 4 && wrong.transactions.allSatisfy { $0["match"] == .bool(false) }, "\(wrong.stdout.suffix(3000))")
        for t in wrong.transactions {
            let differences = t["differences"]?.arrayValue ?? []
            #expect(differences.allSatisfy { $0["message"]?.stringValue?.hasPrefix("POST /tp/jwt/") == true }, "\(t.compact)")
            #expect(differences.contains { $0["element"]?.stringValue?.hasSuffix("/errorcode") == true && $0["live"]?.stringValue == "30006" }, "\(t.compact)")
            #expect(t["recorded"] == t["live"], "the 3DS outcome itself is as recorded: \(t.compact)")
        }
    }

    @Test func dsCertAndRootAreOneFormAndCertsTheOther() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let env = ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path]
        let ec = dir.appendingPathComponent("ec").path
        #expect(try CLIRunner.run(["sandbox", "certs", "--out", ec, "--ds-key", "ec"], environment: env).status == 0)
        let session = Self.root.appendingPathComponent("sessions/demo-pxp.3dstape").path
        for (args, message) in [(["--certs", ec, "--ds-cert", ec + "/ds-cert.pem", "--ds-root", ec + "/ds-root.pem"], "not both"),
                                (["--ds-cert", ec + "/ds-cert.pem"], "go together"),
                                (["--ds-root", ec + "/ds-root.pem"], "go together"),
                                (["--ds-cert", ec + "/ds-cert.pem", "--ds-root", ec + "/ds-root.pem"], "--ds-id"),
                                (["--ds-cert", ec + "/ds.json", "--ds-root", ec + "/ds-root.pem", "--ds-id", "A999999999"], "--ds-cert"),
                                (["--ds-cert", ec + "/missing.pem", "--ds-root", ec + "/ds-root.pem"], "missing.pem"),
                                (["--ds-cert", ec + "/ds-cert.pem", "--ds-root", ec + "/ds-root.pem", "--ds-id", "a b"], "--ds-id"),
                                (["--certs", ec, "--jwt-secret", ""], "--jwt-secret")] {
            let r = try CLIRunner.run(["client-replay", session] + args, environment: env)
            #expect(r.status == 2, "\(args): \(r.stderr)")
            #expect(r.stderr.contains(message), "\(args): \(r.stderr)")
        }
    }
}
