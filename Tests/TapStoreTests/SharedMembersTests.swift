import Testing
import TapCore
import TapEMV
import TapStore

/// A message summary reads and sets its `MessageFields`, and an exchange its `ExchangeTimeline`, as its own members
/// (key paths into the one stored value, `@dynamicMemberLookup`): a write through either name is seen through the other.
@Suite struct SharedMembersTests {
    @Test func aSummarysFieldsAreItsOwnMembers() throws {
        var summary = try #require(MessageSummary(.object([("messageType", .string("ARes")), ("messageVersion", .string("2.2.0")),
                                                           ("transStatus", .string("C")), ("acsTransID", .string("A1"))])))
        #expect(summary.messageType == "ARes" && summary.messageVersion == "2.2.0" && summary.transStatus == "C" && summary.acsTransID == "A1")
        #expect(summary.errorCode == nil && summary.dsTransID == nil)
        summary.transStatus = "Y"
        summary.errorCode = "402"
        #expect(summary.fields.transStatus == "Y" && summary.fields.errorCode == "402")
        summary.fields.sdkTransID = "S1"
        #expect(summary.sdkTransID == "S1")
    }

    @Test func anExchangesTimelineIsItsOwnMembers() {
        var x = ExchangeRecord(connectionID: 1, seq: 0, method: "POST", url: "https://ds.example/areq", host: nil, path: nil, upstream: nil,
                               request: CapturedMessage(headers: [], body: [], wireSize: 0), requestStart: 10)
        #expect(x.requestStart == 10 && x.firstByte == nil && x.error == nil)
        x.firstByte = 10.5
        x.done = 11
        x.error = "upstream closed"
        #expect(x.timeline == ExchangeTimeline(requestStart: 10, firstByte: 10.5, done: 11, error: "upstream closed"))
        x.timeline.clientAbortAt = 12
        #expect(x.clientAbortAt == 12)
    }
}
