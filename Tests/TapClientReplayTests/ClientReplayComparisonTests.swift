import Foundation
import Testing
import TapCore
import TapNet
@testable import TapClientReplay
@testable import TapSandbox

/// How client-replay compares a live transaction with its recording, words its outcome, and rewrites recorded URLs.
struct ClientReplayComparisonTests {
    static func message(_ json: String) throws -> ClientReplayMessage {
        let j = try JSON.parse(json)
        return ClientReplayMessage(type: j["messageType"]?.stringValue ?? "?", json: j)
    }

    @Test func outcomeTakesTheRReqThenTheFinalCResThenTheARes() throws {
        let ares = try Self.message(#"{"messageType":"ARes","transStatus":"C"}"#)
        let cres = try Self.message(#"{"messageType":"CRes","transStatus":"Y"}"#)
        let rreq = try Self.message(#"{"messageType":"RReq","transStatus":"N"}"#)
        let erro = try Self.message(#"{"messageType":"Erro","errorCode":"305"}"#)
        #expect(ClientReplayRunner.outcome([ares]) == "C")
        #expect(ClientReplayRunner.outcome([ares, cres]) == "Y")
        #expect(ClientReplayRunner.outcome([ares, cres, rreq]) == "N")
        #expect(ClientReplayRunner.outcome([erro]) == "Erro 305")
        #expect(ClientReplayRunner.outcome([]) == "-")
    }

    /// Hostile tester (issue 25): `--repeat 1000000` held every outcome (and a list of all the work) until the end. The tally
    /// keeps counts exactly and at most `sampleLimit` latencies per type, with percentiles still where they belong.
    @Test func theTallyStaysBoundedAndItsPercentilesRepresentative() {
        var tally = ClientReplayTally()
        let n = ClientReplayTally.sampleLimit + 50_000
        for i in 0..<n {
            tally.add(ClientReplayOutcome(transaction: 1, pass: i, recordedOutcome: "Y", liveOutcome: "Y", differences: [], failure: nil, notes: [],
                                          latencies: [("AReq", Double(i % 1000))], totalMs: 1))
        }
        #expect(tally.count == n && tally.matched == n)
        let areq = tally.latencyTable.first { $0.type == "AReq" }
        #expect(areq?.count == n && areq?.max == 999)
        #expect(abs((areq?.p50 ?? 0) - 500) < 25 && abs((areq?.p99 ?? 0) - 990) < 10, "\(String(describing: areq))")
        #expect(tally.latencyTable.last?.type == "transaction")
    }

    /// Hostile tester (issue 25): every answer sent with the recorded body but HTTP 500 was "as recorded".
    @Test func theHTTPStatusOfAnAnswerIsCompared() throws {
        var recorded = try Self.message(#"{"messageType":"ARes","transStatus":"N"}"#)
        recorded.httpStatus = 200
        var live = recorded
        #expect(ClientReplayRunner.compare([recorded], [live]).isEmpty)
        live.httpStatus = 500
        let d = ClientReplayRunner.compare([recorded], [live])
        #expect(d.count == 1 && d[0].element == "HTTP status" && d[0].recorded == "200" && d[0].live == "500", "\(d)")
    }

    /// Hostile tester (issue 25): an ARes carrying another threeDSServerTransID/sdkTransID than the AReq's was accepted (the
    /// comparison ignores IDs), and the CReqs then carried the foreign IDs.
    @Test func anAnswerWithIDsThisRunDidNotSendStopsTheTransaction() throws {
        let ares = try JSON.parse(#"{"messageType":"ARes","threeDSServerTransID":"other","sdkTransID":"s1"}"#)
        #expect(throws: ClientReplayer.Stop.self) { try ClientReplayer.expectIDs(in: ares, "ARes", [(.threeDSServerTransID, "mine")]) }
        try ClientReplayer.expectIDs(in: ares, "ARes", [(.threeDSServerTransID, "other"), (.sdkTransID, "s1")])
        let missing = try JSON.parse(#"{"messageType":"CRes"}"#)
        #expect(throws: ClientReplayer.Stop.self) { try ClientReplayer.expectIDs(in: missing, "CRes #1", [(.acsTransID, "a")]) }
    }

    @Test func idsKeysDatesAndLoopbackPortsAreIgnoredWhatTheACSAnsweredIsNot() throws {
        let recorded = [try Self.message(#"{"messageType":"ARes","threeDSServerTransID":"a","acsTransID":"b","transStatus":"C","acsURL":"http://127.0.0.1:1/acs"}"#),
                        try Self.message(#"{"messageType":"CRes","acsUiType":"01","transStatus":"Y"}"#)]
        let same = [try Self.message(#"{"messageType":"ARes","threeDSServerTransID":"x","acsTransID":"y","transStatus":"C","acsURL":"http://127.0.0.1:2/acs"}"#),
                    try Self.message(#"{"messageType":"CRes","acsUiType":"01","transStatus":"Y"}"#)]
        #expect(ClientReplayRunner.compare(recorded, same).isEmpty)
        let other = [same[0], try Self.message(#"{"messageType":"CRes","acsUiType":"02","transStatus":"Y"}"#)]
        let d = ClientReplayRunner.compare(recorded, other)
        #expect(d.count == 1 && d[0].message == "CRes" && d[0].element == "/acsUiType" && d[0].recorded == "01" && d[0].live == "02")
        let short = ClientReplayRunner.compare(recorded, [same[0]])
        #expect(short.count == 1 && short[0].message == "CRes" && short[0].live == "missing")
        let extra = ClientReplayRunner.compare(recorded, same + [try Self.message(#"{"messageType":"Erro","errorCode":"402"}"#)])
        #expect(extra.count == 1 && extra[0].message == "Erro" && extra[0].live == "present")
    }

    @Test func targetReplacesTheRecordedDSOriginAndMapOtherHosts() throws {
        var inputs = ClientReplayPlan.Inputs()
        inputs.target = HTTPURL("http://127.0.0.1:18400")
        inputs.map = [("acs.example:443", HTTPURL("http://127.0.0.1:18401/")!)]
        let ds = ClientReplayPlan.origin("https://ds.example/ds/areq")
        #expect(ClientReplayPlan.liveURL("https://ds.example/ds/areq", dsOrigin: ds, inputs: inputs)?.description == "http://127.0.0.1:18400/ds/areq")
        #expect(ClientReplayPlan.liveURL("https://acs.example/acs/x", dsOrigin: ds, inputs: inputs)?.description == "http://127.0.0.1:18401/acs/x")
        #expect(ClientReplayPlan.liveURL("https://other.example/y", dsOrigin: ds, inputs: inputs)?.description == "https://other.example/y")
        #expect(ClientReplayPlan.liveURL("ftp://x/y", dsOrigin: ds, inputs: inputs) == nil)
    }

    @Test func aMaskedEntryTakesTheSecretOrStopsTheTransactionSayingSo() throws {
        #expect(try ClientReplayer.unmasked(.string("***"), secret: "1234") == .string("1234"))
        #expect(try ClientReplayer.unmasked(.string("Y"), secret: "1234") == .string("Y"))
        #expect(throws: ClientReplayer.Stop.self) { try ClientReplayer.unmasked(.string("***"), secret: nil) }
    }

    @Test func undecryptableDeviceDataFallsBackToAMinimalOneWithANote() {
        let (json, note) = ClientReplayPlan.deviceData("not-a-jwe", keys: [])
        #expect(json == nil && note.contains("no sdkEncData JWE"))
    }
}
