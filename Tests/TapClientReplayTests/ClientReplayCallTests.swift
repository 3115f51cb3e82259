import Foundation
import TapIdentity
import Testing
import TapCore
import TapJOSE
import TapNet
import TapRecording
import TapReplay
import TapStore
@testable import TapClientReplay
@testable import TapSandbox

/// The non-3DS calls of client-replay (issue 25): which recorded gateway calls belong to which transaction, which
/// answer values are fresh IDs to learn, and how a body is rewritten with the live IDs.
struct ClientReplayCallTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized

    @Test func freshIDsAreTheSameShapeWithADigitStatusesAndCodesAreNot() {
        #expect(ClientReplayIDMap.looksFresh("48c4b0db-f85e-4268-b110-e26a0bfbe493", "1c0c2d88-6df1-45e6-9042-dd850c8fe2f1"))
        #expect(ClientReplayIDMap.looksFresh("3-9-676a49c5", "3-9-b85b6cfa"))
        #expect(ClientReplayIDMap.looksFresh("Wc8398ae8", "W0094ed93"))
        #expect(!ClientReplayIDMap.looksFresh("Authorised", "Refused"))          // another length
        #expect(!ClientReplayIDMap.looksFresh("Y", "N"))                          // too short
        #expect(!ClientReplayIDMap.looksFresh("PendingX", "Declined"))            // no digit
        #expect(!ClientReplayIDMap.looksFresh("3-9-676a49c5", "39-9-676a49c"))   // separators elsewhere
        #expect(!ClientReplayIDMap.looksFresh("Invalid JWT", "Invalid jwt"))      // a text
        var ids = ClientReplayIDMap()
        ids.learn(recorded: try! JSON.parse(#"{"state":"Authorised","ref":"aaaa-1111","code":"00"}"#),
                  live: try! JSON.parse(#"{"state":"Refused","ref":"bbbb-2222","code":"05"}"#))
        #expect(ids.live == ["aaaa-1111": "bbbb-2222"])
        #expect(ids.substituted(try! JSON.parse(#"{"x":["aaaa-1111"],"y":"aaaa-11110"}"#)).compact == #"{"x":["bbbb-2222"],"y":"aaaa-11110"}"#)
    }

    /// The PXP demo: token and pre-initiation (tied by the gateway token and the threeDSServerTransID), the 3DS Method
    /// post before the AReq, the authorisation after; the ACS's post to the 3DS Server's own page is not re-sent.
    @Test func gatewayCallsGoToTheirTransactionBeforeOrAfterIt() throws {
        let catalog = try ReplayCatalog.load(path: Self.root.appendingPathComponent("sessions/demo-pxp.3dstape").path)
        let calls = ClientReplayCallPlan.assign(catalog)
        func paths(_ idx: [Int]) -> [String] { idx.map { HTTPURL(catalog.exchanges[$0].url)!.path } }
        #expect(calls.count == 4)
        #expect(paths(calls[0].before) == ["/pxp/tokens", "/pxp/authentication/pre-initiate"])
        #expect(paths(calls[0].after) == ["/pxp/transactions"])
        #expect(paths(calls[1].before) == ["/pxp/tokens", "/pxp/authentication/pre-initiate", "/acs/method"])
        #expect(paths(calls[1].after) == ["/pxp/transactions"])
        #expect(paths(calls[3].after) == ["/pxp/transactions"])
        // Trust Payments: no ID ties a call to the AReq; the AUTH (it carries the threedresponse) closes the transaction
        // before it, the next THREEDQUERY opens the next one.
        let tp = try ReplayCatalog.load(path: Self.root.appendingPathComponent("sessions/demo-trustpayments.3dstape").path)
        let tpCalls = ClientReplayCallPlan.assign(tp)
        #expect(tpCalls.map(\.before.count) == [1, 1, 1, 1])
        #expect(tpCalls.map(\.after.count) == [1, 1, 1, 1])
        #expect(tpCalls[0].after.first.map { ClientReplayCallPlan.carriesOutcome(ClientReplayCallBody.comparable(tp.exchanges[$0].requestBody)!) } == true)
    }

    @Test func maskedCardsInACallTakeTheGivenCardATestCardOrMakeTheTransactionUnplayable() throws {
        let body = try JSON.parse(#"{"card":{"number":"555555******4444","securityCode":"***"},"n":"12345"}"#)
        var missing: String?
        let resolved = ClientReplayCallPlan.resolveCards(body, cards: ["4000000000001018", "5555555555554444"], missing: &missing)
        #expect(missing == nil && resolved["card"]?["number"]?.stringValue == "5555555555554444")
        _ = ClientReplayCallPlan.resolveCards(body, cards: ["4000000000001018"], missing: &missing)
        #expect(missing == "555555******4444")
        // One of 3dstape's test cards needs no --card, in a gateway call as in the AReq (the sandbox's sessions replay as they are).
        var none: String?
        let test = try JSON.parse(#"{"card":{"number":"400000******1018"}}"#)
        #expect(ClientReplayCallPlan.resolveCards(test, cards: [], missing: &none)["card"]?["number"]?.stringValue == "4000000000001018")
        #expect(none == nil)
    }

    /// A Trust Payments request: its JWT's payload opened for the comparison; re-signed only with a secret, with the IDs
    /// the run learned and a fresh UUID in place of one the client made.
    @Test func aJWTIsOpenedForComparisonAndSignedAgainOnlyWithASecret() throws {
        let jws = try JWS.signHS256(payload: Array(#"{"iat":1,"payload":{"ref":"aaaa-1111","merchant":"0f8fad5b-d9cb-469f-a165-70867728950e"}}"#.utf8),
                                    secret: Array("s1".utf8), extraHeader: [("typ", .string("JWT"))]).compact
        let body = Array(#"{"alias":"m","jwt":"\#(jws)"}"#.utf8)
        #expect(ClientReplayCallBody.comparable(body)?["jwt"]?["payload"]?["ref"]?.stringValue == "aaaa-1111")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("creplay-calls-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let ds = try Self.identity(dir)
        for secret in [nil, "s2"] as [String?] {
            var options = ClientReplayer.Options()
            options.jwtSecret = secret.map { Array($0.utf8) }
            let replayer = try ClientReplayer(ds: ds, options: options)
            defer { replayer.stop() }
            var run = ClientReplayRun()
            run.ids.learn(recorded: "aaaa-1111", live: "bbbb-2222")
            let sent = try JSON.parse(replayer.live(body, &run))
            let jwt = sent["jwt"]!.stringValue!
            if secret == nil {
                #expect(jwt == jws && run.notes.contains(ClientReplayer.jwtNote))
            } else {
                let payload = try JSON.parse(Base64URL.decode(String(jwt.split(separator: ".")[1]))!)
                #expect(payload["payload"]?["ref"]?.stringValue == "bbbb-2222")
                let merchant = payload["payload"]?["merchant"]?.stringValue
                #expect(merchant != "0f8fad5b-d9cb-469f-a165-70867728950e" && merchant.map(ClientReplayIDMap.isUUID) == true)
                #expect(jwt != jws && Self.verifies(jwt, secret: "s2") && !Self.verifies(jwt, secret: "s1"))
            }
        }
    }

    static func verifies(_ jwt: String, secret: String) -> Bool {
        (try? JWS(compact: jwt).verifyHS256(secret: Array(secret.utf8))) != nil
    }

    static func identity(_ dir: String) throws -> ClientReplayer.DSIdentity {
        let keys = try SandboxKeys.loadOrCreate(in: dir + "/sandbox")
        try keys.writeClientCertificates(to: dir + "/certs", dsKeyType: .rsa)
        return try ClientReplayer.DSIdentity(directory: dir + "/certs")
    }
}

/// A PReq recorded before a transaction's AReq (its own threeDSServerTransID) is a call of that transaction, re-sent
/// with a fresh threeDSServerTransID; the PRes's fresh dsTransID is learned, not reported.
struct ClientReplayPReqTests {
    @Test func aPReqBeforeTheAReqIsReSentWithAFreshIDAndItsAnswerCompared() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("creplay-preq-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/preq.3dstape"
        let writer = try SessionWriter(path: path, meta: [("label", "preq")])
        writer.submit(.connectionOpened(ConnectionRecord(id: 1, clientAddress: "127.0.0.1:1", acceptedAt: 1_700_000_000, mode: "forward", upstream: nil)))
        let preqID = "8a880dc0-d2d2-4067-bcb1-b08d1690b26e"
        let bodies = [
            (#"{"messageType":"PReq","messageVersion":"2.2.0","threeDSServerRefNumber":"X","threeDSServerTransID":"\#(preqID)"}"#,
             #"{"messageType":"PRes","messageVersion":"2.2.0","threeDSServerTransID":"\#(preqID)","dsTransID":"11111111-2222-4333-8444-555555555555","serialNum":"1"}"#,
             "/ds/preq"),
            (#"{"messageType":"AReq","messageVersion":"2.2.0","deviceChannel":"02","messageCategory":"01","acctNumber":"4000000000001000","threeDSServerTransID":"0f8fad5b-d9cb-469f-a165-70867728950e"}"#,
             #"{"messageType":"ARes","messageVersion":"2.2.0","transStatus":"Y","threeDSServerTransID":"0f8fad5b-d9cb-469f-a165-70867728950e","dsTransID":"9b2c1d5e-1111-4222-8333-444455556666"}"#,
             "/ds/areq"),
        ]
        for (seq, (request, response, p)) in bodies.enumerated() {
            var x = ExchangeRecord(connectionID: 1, seq: seq, method: "POST", url: "http://127.0.0.1:9/\(p.dropFirst())", host: "127.0.0.1", path: p,
                                   upstream: nil, request: CapturedMessage(headers: [("Content-Type", "application/json")], body: Array(request.utf8),
                                                                           wireSize: request.utf8.count),
                                   requestStart: 1_700_000_000 + Double(seq))
            x.status = 200
            x.response = CapturedMessage(headers: [("Content-Type", "application/json")], body: Array(response.utf8), wireSize: response.utf8.count)
            x.done = 1_700_000_000.5 + Double(seq)
            writer.submit(.exchange(x))
        }
        writer.close()
        let plan = try ClientReplayPlan.load(path: path, inputs: ClientReplayPlan.Inputs())
        #expect(plan.transactions.count == 1)
        let script = try #require(plan.transactions.first?.script)
        #expect(script.callsBefore.map(\.label) == ["POST /ds/preq"] && script.callsAfter.isEmpty)
        let ds = try ClientReplayCallTests.identity(dir)
        let replayer = try ClientReplayer(ds: ds, options: ClientReplayer.Options())
        defer { replayer.stop() }
        var run = ClientReplayRun()
        let sent = try JSON.parse(replayer.live(script.callsBefore[0].body, &run))
        let fresh = try #require(sent["threeDSServerTransID"]?.stringValue)
        #expect(fresh != preqID && ClientReplayIDMap.isUUID(fresh) && sent["threeDSServerRefNumber"]?.stringValue == "X")
        // The live PRes echoes the fresh ID and has its own dsTransID: no difference; another serialNum is one.
        for (serial, expected) in [("1", 0), ("2", 1)] {
            var x = ClientReplayExchange(url: "http://127.0.0.1:9/ds/preq", requestHeaders: [], requestBody: [], started: 0)
            x.call = script.callsBefore[0]
            x.status = 200
            x.responseBody = Array(#"{"messageType":"PRes","messageVersion":"2.2.0","threeDSServerTransID":"\#(fresh)","dsTransID":"aaaaaaaa-2222-4333-8444-555555555555","serialNum":"\#(serial)"}"#.utf8)
            var r = run
            r.ids.learn(recorded: ClientReplayCallBody.comparable(x.call!.recordedResponse)!, live: ClientReplayCallBody.comparable(x.responseBody)!)
            r.exchanges = [x]
            let d = ClientReplayRunner.callDifferences(r, masked: true)
            #expect(d.count == expected, "\(d)")
        }
    }
}
