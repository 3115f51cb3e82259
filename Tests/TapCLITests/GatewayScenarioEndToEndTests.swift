import Foundation
import Testing
import TapCore

/// The seed SDKs' error surfaces (issue 28): each gateway scenario replayed from the checked-in gateway sessions to
/// `3dstape client --gateway …`, which reports in its `3dstape-result` line the code the SDK would surface; and
/// `3dstape check` over every gateway scenario, for the conformant client and for one that trusts unverified JWTs.
@Suite(.serialized) struct GatewayScenarioEndToEndTests {
    static let root = ScenarioEndToEndTests.root

    /// What the client surfaces under each gateway scenario: the `3dstape-result` field and its value, and the outcome.
    static let expected: [(scenario: String, field: String, value: String, outcome: String)] = [
        ("pxp-token-vault-exception", "sdk.error", "TOKEN_VAULT_EXCEPTION", "failure"),
        ("pxp-validation-exception", "sdk.error", "VALIDATION_EXCEPTION", "failure"),
        ("pxp-unexpected-exception", "sdk.error", "UNEXPECTED_SDK_EXCEPTION", "failure"),
        ("pxp-network-exception", "sdk.error", "NETWORK_SDK_EXCEPTION", "failure"),
        ("pxp-pre-initiate-failed", "sdk.error", "PRE_INITIATE_AUTHENTICATION_FAILED", "failure"),
        ("pxp-transaction-authentication-rejected", "sdk.error", "TRANSACTION_AUTHENTICATION_REJECTED", "failure"),
        ("pxp-transaction-authentication-invalid", "sdk.error", "TRANSACTION_AUTHENTICATION_INVALID", "failure"),
        ("pxp-requires-sca-exemption", "sdk.error", "TRANSACTION_AUTHENTICATION_REQUIRES_SCA_EXEMPTION", "failure"),
        ("pxp-authentication-failed", "sdk.error", "AUTHENTICATION_FAILED", "failure"),
        ("pxp-challenge-timeout", "sdk.error", "CHALLENGE_TIMEOUT", "failure"),
        ("pxp-authentication-rejected", "sdk.error", "AUTHENTICATION_REJECTED", "failure"),
        ("pxp-authorised", "sdk.result", "AuthorisedSubmitResult", "success"),
        ("pxp-captured", "sdk.result", "CapturedSubmitResult", "success"),
        ("pxp-refused", "sdk.result", "RefusedSubmitResult", "failure"),
        ("pxp-failed", "sdk.result", "FailedSubmitResult", "failure"),
        ("tp-auth-declined", "sdk.responses.AUTH", "70000", "failure"),
        ("tp-invalid-field", "sdk.field", "pan", "failure"),
        ("tp-subscription-failed", "sdk.responses.SUBSCRIPTION", "30000", "success"),
        ("tp-jwt-unverified", "sdk.verified", "false", "failure"),
        ("tp-gateway-error", "sdk.error", "gatewayError", "failure"),
    ]

    static func value(_ json: JSON?, _ path: String) -> String? {
        var v = json
        for part in path.split(separator: ".") { v = v?[String(part)] }
        return v.flatMap { $0.stringValue ?? $0.compact }
    }

    /// The client on the gateway sessions' app challenge flow (card 4000000000001067, 2.3.1, OTP 1234).
    static func client(_ url: String, certs: String, gateway: String, _ extra: [String] = []) -> [String] {
        ["client", "--ds", url, "--card", "4000000000001067", "--message-version", "2.3.1", "--answer", "1234", "--certs", certs,
         "--gateway", gateway, "--cres-timeout", "2", "--ares-timeout", "2", "--rreq-timeout", "5"] + extra
    }

    @Test func everyGatewayScenarioSurfacesTheSDKsCodeFromAReplayOfTheGatewaySession() throws {
        let listed = try JSON.parse(try CLIRunner.run(["scenarios", "--json"]).stdout).arrayValue ?? []
        let gatewayScenarios = Set(listed.filter { $0["gateway"]?.stringValue != nil }.compactMap { $0["name"]?.stringValue })
        #expect(gatewayScenarios == Set(Self.expected.map(\.scenario)), "a test per gateway scenario")
        #expect(listed.allSatisfy { s in ["pxpCheckout", "cake3ds2", "trustPayments"].allSatisfy { !(s[$0]?.stringValue ?? "").isEmpty } },
                "every scenario has all three SDK columns")

        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let env = ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path]
        let certs = dir.appendingPathComponent("certs").path
        #expect(try CLIRunner.run(["ca", "export", "--ds", certs], environment: env).status == 0)
        for name in ["demo-pxp", "demo-trustpayments"] {
            try FileManager.default.copyItem(atPath: Self.root.appendingPathComponent("sessions/\(name).3dstape").path,
                                             toPath: dir.appendingPathComponent("\(name).3dstape").path)
        }
        for (scenario, field, value, outcome) in Self.expected {
            let gateway = scenario.hasPrefix("pxp-") ? "pxp" : "trustpayments"
            let session = dir.appendingPathComponent("demo-\(gateway).3dstape").path
            let out = dir.appendingPathComponent("\(scenario).3dstape").path
            let replay = try Spawned(CLIRunner.binary.path, ["replay", session, "--listen", "127.0.0.1:0", "--scenario", scenario, "--quiet",
                                                             "--timing", "none", "--session", out], environment: env)
            let port = try replay.port(after: "on http://127.0.0.1:")
            let r = try CLIRunner.run(Self.client("http://127.0.0.1:\(port)", certs: certs, gateway: gateway), environment: env)
            if scenario == "pxp-captured" {
                // With --json stdout stays one JSON document, the object its `result` member; the line goes to stderr.
                let j = try CLIRunner.run(Self.client("http://127.0.0.1:\(port)", certs: certs, gateway: gateway, ["--json"]), environment: env)
                #expect(try JSON.parse(j.stdout)["result"]?["sdk"]?["result"]?.stringValue == "CapturedSubmitResult", "\(j.stdout)")
                #expect(j.stderr.contains("3dstape-result: {\"outcome\":\"success\",\"sdk\":{\"name\":\"PXP Checkout\",\"result\":\"CapturedSubmitResult\"}}"),
                        "\(j.stderr)")
            }
            replay.interrupt()
            #expect(try replay.wait() == 0, "\(scenario): replayer exit; \(replay.stderr.suffix(300))")
            let last = r.stdout.split(separator: "\n").last.map(String.init) ?? ""
            #expect(last.hasPrefix("3dstape-result: "), "\(scenario): the result line is the last line: \(r.stdout)")
            let result = try? JSON.parse(String(last.dropFirst("3dstape-result: ".count)))
            #expect(Self.value(result, field) == value && Self.value(result, "outcome") == outcome, "\(scenario): \(last) \(r.stderr)")
            let faults = try sh(["sqlite3", out, "SELECT group_concat(faults, ' | ') FROM replay_matches WHERE faults IS NOT NULL"]).out
            #expect(!faults.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(scenario): the applied fault is in the replay session")
        }
    }

    @Test func checkPassesEveryGatewayScenarioForTheClientAndFailsOneThatTrustsAnUnverifiedJWT() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let env = ["THREEDSTAPE_HOME": dir.appendingPathComponent("home").path]
        let certs = dir.appendingPathComponent("certs").path
        #expect(try CLIRunner.run(["ca", "export", "--ds", certs], environment: env).status == 0)
        for (gateway, count) in [("pxp", 15), ("trustpayments", 5)] {
            let session = dir.appendingPathComponent("\(gateway).3dstape").path
            try FileManager.default.copyItem(atPath: Self.root.appendingPathComponent("sessions/demo-\(gateway).3dstape").path, toPath: session)
            let names = Self.expected.map(\.scenario).filter { $0.hasPrefix(gateway == "pxp" ? "pxp-" : "tp-") }
            #expect(names.count == count)
            let scenarioArgs = names.flatMap { ["--scenario", $0] }
            for misbehave in gateway == "pxp" ? [false] : [false, true] {
                let junit = dir.appendingPathComponent("\(gateway)-\(misbehave).xml").path
                let r = try CLIRunner.run(["check", session] + scenarioArgs + ["--junit", junit, "--report", dir.appendingPathComponent("r-\(gateway)-\(misbehave)").path,
                                           "--", CLIRunner.binary.path] + Self.client("{url}", certs: certs, gateway: gateway,
                                                                                      misbehave ? ["--misbehave", "trust-unverified-jwt"] : []),
                                          environment: env)
                let cases = try CheckEndToEndTests.junitCases(junit)
                #expect(cases.count == count, "\(gateway): \(cases)")
                if misbehave {
                    #expect(r.status == 1 && Set(cases.filter { $0.value.failed }.keys) == ["tp-jwt-unverified"], "\(r.stdout) \(r.stderr.suffix(400))")
                    #expect(r.stdout.contains("3dstape-result has no sdk.verified") && r.stdout.contains("3dstape-result outcome success"), "\(r.stdout)")
                } else {
                    #expect(r.status == 0 && cases.values.allSatisfy { !$0.failed && !$0.skipped }, "\(gateway): \(r.stdout) \(r.stderr.suffix(400))")
                }
            }
        }
        // On a session without gateway calls a gateway scenario cannot apply: named, it is a usage error (exit 2); under --all, skipped.
        let app = dir.appendingPathComponent("app.3dstape").path
        try FileManager.default.copyItem(atPath: Self.root.appendingPathComponent("sessions/demo-app.3dstape").path, toPath: app)
        let named = try CLIRunner.run(["check", app, "--scenario", "pxp-refused", "--report", dir.appendingPathComponent("r-app").path, "--", "true"],
                                      environment: env)
        #expect(named.status == 2 && named.stderr.contains("--scenario pxp-refused does not apply to this session")
                && named.stderr.contains("the scenario needs a PXP Checkout gateway session"), "\(named.stdout) \(named.stderr)")
        let refused = try CLIRunner.run(["replay", app, "--listen", "127.0.0.1:0", "--scenario", "tp-auth-declined"], environment: env)
        #expect(refused.status == 2 && refused.stderr.contains("the scenario needs a Trust Payments gateway session"), "\(refused.stderr)")
    }
}
