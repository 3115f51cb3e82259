import Foundation
import Testing
import TapCore
import TapJOSE
@testable import TapReplay

/// Gateway fault actions (issue 28): parsed and refused with their allowed values, checked against the paths they
/// change, and applied by the engine to the recorded PXP- and Trust Payments-style answers.
@Suite struct GatewayFaultTests {
    static let secret = Array("3dstape-sandbox-gateway-secret".utf8)

    @Test func gatewayActionsRoundTripAndBadArgumentsNameTheirValues() throws {
        for text in ["pxp-error:TokenVaultUnavailable", "pxp-state:AuthenticationRejected", "pxp-state:Captured", "sca-exemption:LowValue",
                     "auth-refused", "auth-failed", "tp-errorcode:AUTH=70000", "tp-errorcode:THREEDQUERY=30000/pan", "jwt-bad-signature"] {
            #expect(try FaultAction.read(text).description == text)
        }
        func refusal(_ text: String) -> String { do { _ = try FaultAction.read(text); return "accepted" } catch { return error.description } }
        #expect(refusal("pxp-error:Nope").hasPrefix("pxp-error:CODE: expected one of InternalError, InvalidCard"))
        #expect(refusal("pxp-state:Done").hasPrefix("pxp-state:STATE: expected one of AuthenticationSuccessful"))
        #expect(refusal("tp-errorcode:AUTH").hasPrefix("tp-errorcode:REQUESTTYPE=CODE[/FIELD]"))
        #expect(refusal("tp-errorcode:PAY=1").hasPrefix("tp-errorcode:REQUESTTYPE=CODE[/FIELD]"))
        #expect(refusal("tp-errorcode:AUTH=700000").hasPrefix("tp-errorcode:REQUESTTYPE=CODE[/FIELD]"))
        #expect(refusal("tp-errorcode:AUTH=70000/<b>").hasPrefix("tp-errorcode:REQUESTTYPE=CODE[/FIELD]"))
        #expect(refusal("sca-exemption:").hasPrefix("sca-exemption:NAME"))
        // MATCH=ACTION splits at the first '=', so the request type's '=' stays in the action.
        #expect(try FaultRule.parse("path:/tp/jwt/=tp-errorcode:AUTH=70000@0.5").action == .tpErrorcode(type: "AUTH", code: "70000", field: nil))
    }

    @Test func rulesAreCheckedAgainstTheGatewayPathsTheyChange() throws {
        let pxp = try ReplayEngineTests.catalog("demo-pxp.3dstape"), app = try ReplayEngineTests.catalog("demo-app.3dstape")
        func problems(_ rule: String, _ c: ReplayCatalog) throws -> [String] { ReplayFaults.problems([try FaultRule.parse(rule)], catalog: c) }
        #expect(try problems("path:/pxp/tokens=pxp-error:InvalidCard", pxp).isEmpty)
        #expect(try problems("path:/pxp/tokens=pxp-state:Captured", pxp).first?
            .hasPrefix("--fault path:/pxp/tokens=pxp-state:Captured can never apply: pxp-state:Captured changes only the answers of /pxp/transactions") == true)
        #expect(try problems("ARes=auth-refused", pxp).first?.contains("auth-refused changes only the answers of /pxp/transactions or /tp/jwt/ (match them by path:)") == true)
        #expect(try problems("path:/tp/jwt/=jwt-bad-signature", app).first?.contains("no recorded request has the path /tp/jwt/") == true)
        let gatewayScenario = try #require(ReplayScenario.named("pxp-refused"))
        let onApp = try gatewayScenario.applicability(to: app)
        #expect(onApp.applicable.isEmpty && onApp.notApplicable.map(\.reason) == ["the scenario needs a PXP Checkout gateway session (no /pxp/… exchange recorded)"])
        #expect(try gatewayScenario.applicability(to: pxp).notApplicable.isEmpty)
        // Its 3DS rules would apply to any session; the gateway decides (pxp-authentication-failed is ARes=erro:305).
        #expect(try ReplayScenario.named("pxp-authentication-failed")!.applicability(to: app).applicable.isEmpty)
        // Every scenario names what each of the three SDKs surfaces.
        #expect(ReplayScenario.all.allSatisfy { !$0.surfaces.pxp.isEmpty && !$0.surfaces.cake.isEmpty && !$0.surfaces.trustPayments.isEmpty && !$0.expectation.isEmpty })
    }

    /// The recorded request of the first exchange on `path`, replayed with `rule`.
    func answer(_ session: String, path: String, rule: String?, jwtSecret: String? = nil) throws -> ReplayAnswer {
        let catalog = try ReplayEngineTests.catalog(session)
        var options = ReplayOptions()
        options.faults = try rule.map { [try FaultRule.parse($0)] } ?? []
        if let jwtSecret { options.jwtSecret = jwtSecret }
        let engine = ReplayEngine(catalog: catalog, options: options, identity: try ReplayEngineTests.Trust().identity)
        let x = try #require(catalog.exchanges.first { ReplayURL.pathAndQuery($0.url).path == path })
        return engine.handle(LiveRequest(method: "POST", target: path, body: x.requestBody), selfURL: "http://127.0.0.1:1")
    }

    func responses(_ a: ReplayAnswer, verify: Bool = true) throws -> [JSON] {
        let jws = try JWS(compact: try #require(try JSON.parse(a.body)["jwt"]?.stringValue))
        if verify { try jws.verifyHS256(secret: Self.secret) }
        return jws.payloadJSON?["payload"]?["response"]?.arrayValue ?? []
    }

    @Test func trustPaymentsAnswersAreChangedAndSignedAgainOrBrokenOnPurpose() throws {
        let plain = try answer("demo-trustpayments.3dstape", path: "/tp/jwt/", rule: nil)
        #expect(try responses(plain).map { $0["errorcode"]?.stringValue } == ["0", "0", "0"] && plain.faults.isEmpty)
        let invalid = try answer("demo-trustpayments.3dstape", path: "/tp/jwt/", rule: "path:/tp/jwt/=tp-errorcode:THREEDQUERY=30000/pan")
        let threeDQuery = try #require(try responses(invalid).first { $0["requesttypedescription"]?.stringValue == "THREEDQUERY" })
        #expect(threeDQuery["errorcode"]?.stringValue == "30000" && threeDQuery["errormessage"]?.stringValue == "Invalid field"
                && threeDQuery["errordata"] == .array([.string("pan")]))
        #expect(invalid.faults == ["tp-errorcode:THREEDQUERY=30000/pan"])
        // A request type the answer does not carry changes nothing and is not recorded as applied.
        let notHere = try answer("demo-trustpayments.3dstape", path: "/tp/jwt/", rule: "path:/tp/jwt/=tp-errorcode:AUTH=70000")
        #expect(notHere.faults.isEmpty)
        // Signed again with --jwt-secret: a client with that secret verifies it, one with the sandbox's does not.
        let other = try answer("demo-trustpayments.3dstape", path: "/tp/jwt/", rule: "path:/tp/jwt/=tp-errorcode:RISKDEC=60022", jwtSecret: "merchant-secret")
        let otherJWS = try JWS(compact: try #require(try JSON.parse(other.body)["jwt"]?.stringValue))
        #expect((try? otherJWS.verifyHS256(secret: Array("merchant-secret".utf8))) != nil)
        #expect((try? otherJWS.verifyHS256(secret: Self.secret)) == nil)
        let bad = try answer("demo-trustpayments.3dstape", path: "/tp/jwt/", rule: "path:/tp/jwt/=jwt-bad-signature")
        #expect(throws: (any Error).self) { try self.responses(bad) }
        #expect(try responses(bad, verify: false).count == 3 && bad.faults == ["jwt-bad-signature"])
    }

    @Test func pxpAnswersCarryTheGatewaysErrorShapeAndStates() throws {
        let vault = try answer("demo-pxp.3dstape", path: "/pxp/tokens", rule: "path:/pxp/tokens=pxp-error:TokenVaultUnavailable")
        let body = try JSON.parse(vault.body)
        #expect(vault.status == 503 && body["errorCode"]?.stringValue == "TokenVaultUnavailable" && body["gatewayTokenId"] == nil)
        let exemption = try answer("demo-pxp.3dstape", path: "/pxp/authentication/pre-initiate", rule: "path:/pxp/authentication/pre-initiate=sca-exemption:LowValue")
        let pre = try JSON.parse(exemption.body)
        #expect(pre["scaMandated"] == .bool(false) && pre["applicableExemptions"] == .array([.string("LowValue")]) && pre["state"]?.stringValue == "PendingClientData")
        let refused = try answer("demo-pxp.3dstape", path: "/pxp/transactions", rule: "path:/pxp/transactions=auth-refused")
        let t = try JSON.parse(refused.body)
        #expect(t["state"]?.stringValue == "Refused" && t["providerResponse"]?["code"]?.stringValue == "05" && refused.faults == ["auth-refused"])
    }
}
