import Testing
import TapCore
import TapEMV

/// Issue 26: the replayer's changes to a recorded ARes, CRes or RReq are typed (`MessageChange`), applied in their order:
/// a member the message has keeps its place, a new one goes at the end in the order of the list.
@Suite struct MessageChangeTests {
    static let rreq = JSON.object([("threeDSServerTransID", .string("t")), ("messageType", .string("RReq")), ("transStatus", .string("Y")),
                                   ("eci", .string("05")), ("authenticationValue", .string("AAABBBCCCDDDEEEFFFGGGHHHIII=")),
                                   ("interactionCounter", .string("01"))])

    @Test func changesKeepPlacesAndAppendInOrder() {
        let cancelled = Self.rreq.applying([.transStatus(.notAuthenticated), .challengeCancel("01"), .transStatusReason("01")])
        #expect(String(decoding: cancelled.bytes, as: UTF8.self)
                == #"{"threeDSServerTransID":"t","messageType":"RReq","transStatus":"N","eci":"05","authenticationValue":"AAABBBCCCDDDEEEFFFGGGHHHIII=","interactionCounter":"01","challengeCancel":"01","transStatusReason":"01"}"#)
        // The acs-timeout order: the reason before the cancel; a later change to the same member wins, in its place.
        let timedOut = Self.rreq.applying([.transStatus(.notAuthenticated), .transStatusReason("14"), .challengeCancel("04"), .challengeCancel("08")])
        #expect(timedOut.objectMembers?.map(\.0).suffix(2) == ["transStatusReason", "challengeCancel"])
        #expect(timedOut["challengeCancel"]?.stringValue == "08")
        #expect(JSON.string("x").applying([.transStatus(.authenticated)]) == .string("x"))
    }

    @Test func aFailedAuthenticationCarriesNoCAVV() {
        #expect(ThreeDSMessage.withoutAuthenticationValueUnlessAuthenticated(Self.rreq) == Self.rreq)
        let attempted = Self.rreq.applying([.transStatus(.attempted)])
        #expect(ThreeDSMessage.withoutAuthenticationValueUnlessAuthenticated(attempted) == attempted)
        let failed = ThreeDSMessage.withoutAuthenticationValueUnlessAuthenticated(Self.rreq.applying([.transStatus(.rejected)]))
        #expect(failed["authenticationValue"] == nil && failed["eci"]?.stringValue == "07" && failed["transStatus"]?.stringValue == "R")
        let noStatus = Self.rreq.removing("transStatus")
        #expect(ThreeDSMessage.withoutAuthenticationValueUnlessAuthenticated(noStatus) == noStatus)
        #expect(ThreeDSMessage.authenticationValue([UInt8](repeating: 0, count: 20)) == "AAAAAAAAAAAAAAAAAAAAAAAAAAA=")
    }
}
