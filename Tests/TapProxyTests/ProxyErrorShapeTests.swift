import Testing
import TapHTTPService
@testable import TapProxy

/// The recorder's own refusals go through its `ConnectionErrorShape` (`ProxyErrorResponse.shape`), as a
/// `ServerConnectionMachine` answers them: the bytes on the wire are those the recorder wrote before, byte for byte
/// (the same call with the same words), for each kind of refusal, through the machine's own paths.
@Suite struct ProxyErrorShapeTests {
    /// What the recorder wrote for a refusal before the shape: its JSON error with `Connection: close`.
    static func before(_ status: Int, _ message: String, headers: [(String, String)] = []) -> [UInt8] {
        ProxyErrorResponse.bytes(status: status, error: message, upstream: nil, close: true, extraHeaders: headers)
    }

    static func written(_ a: [ProxySessionMachine.Action]) -> [[UInt8]] {
        a.compactMap { if case let .writeClient(h, b) = $0 { return h + b }; return nil }
    }

    @Test func overTheBudgetTheAnswerNamesTheLimitAsBefore() throws {
        var h = try Harness.reverse { $0.maxBufferedBytes = 10 }
        h.env.limit = 10
        let a = h.client("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
        #expect(Self.written(a) == [Self.before(503, "request bytes held in memory across connections exceed --max-buffered (10 bytes); try again")])
        #expect(a.closesClient)
    }

    @Test func aTimedOutRequestIsAnsweredAsBefore() throws {
        var h = try Harness.reverse { $0.headerTimeout = 2 }
        _ = h.client("POST /x HTTP/1.1\r\nHost: a\r\n")
        h.env.advance(2.5)
        let a = h.feed(.deadlinePassed)
        #expect(Self.written(a) == [Self.before(408, "request not received within 2 s")])
    }

    @Test func aRequestCutShortIsAnswered400AsBefore() throws {
        var h = try Harness.reverse()
        _ = h.client("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        let a = h.feed(.clientFinishedSending)
        #expect(Self.written(a) == [Self.before(400, "the client finished sending before its request was complete")])
    }

    @Test func anIntakeRefusalKeepsItsStatusMessageAndFields() throws {
        let shape = ProxyErrorResponse.shape(budgetLimit: 1)
        let challenge = [("Proxy-Authenticate", "Basic realm=\"3dstape\"")]
        let answer = try #require(shape.answer(.refused(status: 407, message: "credentials needed", headers: challenge)))
        #expect(answer.status == 407 && answer.message == "credentials needed")
        #expect(answer.bytes == Self.before(407, "credentials needed", headers: challenge))
        #expect(String(decoding: answer.bytes, as: UTF8.self).contains("X-3dstape-Error: 1\r\n"))
    }

    @Test func aTargetTheRecorderCannotResolveIsRefusedAsBefore() throws {
        var h = try Harness.reverse()
        let a = h.client("GET http://elsewhere.example/ HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(Self.written(a) == [Self.before(400, "a reverse proxy expects origin-form targets, got 'http://elsewhere.example/'")])
        #expect(a.closesClient && a.notes == ["rejected"])
    }
}
