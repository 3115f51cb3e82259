import Foundation
import Testing
import TapCore
import TapHTTP
import TapHTTPService
import TapNet
import TapTestSupport

/// Issue 26: the parser says what went wrong and no status; `HTTPErrorAnswer` is the one place a problem becomes a status
/// and the one error body every server answers with.
@Suite struct HTTPErrorAnswerTests {
    /// What each problem is answered with is what a client saw before the parser lost its statuses (and an unreadable
    /// message cut short is a client's fault at a server, never a 502).
    @Test func everyProblemKeepsItsStatus() {
        let expected: [(HTTPParseError.Problem, Int)] = [(.malformed, 400), (.truncated, 400), (.headTooLarge, 431),
                                                         (.requestLineTooLong, 414), (.methodTooLong, 501), (.bodyTooLarge, 413),
                                                         (.unsupportedCoding, 501)]
        for (problem, status) in expected { #expect(HTTPErrorAnswer.status(for: problem) == status, "\(problem)") }
    }

    /// The same bytes as the parser tests, through the intake a server takes requests with: the statuses of before.
    @Test(arguments: [("GARBAGE\r\n\r\n", 400), ("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
                      ("POST / HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", 413),
                      ("GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 70_000) + "\r\n\r\n", 431),
                      ("GET /" + String(repeating: "a", count: 100_000) + " HTTP/1.1\r\nHost: a\r\n\r\n", 414),
                      (String(repeating: "G", count: 70_000) + " / HTTP/1.1\r\nHost: a\r\n\r\n", 501),
                      ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400)])
    func intakeRefusesWithTheMappedStatus(text: String, status: Int) {
        var intake = HTTPRequestIntake(rules: .init(limits: HTTPLimits(), authorization: nil, acceptsConnect: false))
        intake.received(Array(text.utf8), wallClock: 0)
        guard case let .refuse(refused, message, _) = intake.next(wallClock: 0) else {
            Issue.record("\(text.prefix(40).debugDescription) was not refused")
            return
        }
        #expect(refused == status && !message.isEmpty)
    }

    /// One body shape, escaped as JSON whatever the message quotes (the replayer's forward failure was escaped by hand,
    /// dropping quotes and passing a backslash through into invalid JSON).
    @Test func theBodyIsJSONWhateverTheMessageHolds() throws {
        let message = #"cannot forward to http://a/"b\c"# + "\u{1}"
        let reply = HTTPErrorAnswer.reply(status: 502, message, headers: [("X-Extra", "1")])
        #expect(reply.status == 502)
        #expect(reply.headers.contains { $0.0 == "Content-Type" && $0.1 == "application/json" })
        #expect(reply.headers.contains { $0.0 == "X-Extra" })
        #expect(try JSON.parse(reply.body)["error"]?.stringValue == message)
        // Members after `error` keep their order (the recording proxy's status, name and upstream).
        let more = HTTPErrorAnswer.body("x", [("status", .number("502")), ("proxy", .string("3dstape"))])
        #expect(String(decoding: more, as: UTF8.self) == #"{"error":"x","status":502,"proxy":"3dstape"}"#)
    }

    /// End to end: a server on loopback answers a malformed request with the mapped status and the one body.
    @Test func aServerAnswersAMalformedRequestInTheOneShape() throws {
        let server = try LoopbackServer("3dstape-test-error-answer") { _, _, respond in respond(HTTPReply(status: 200)) }
        defer { server.stop() }
        let client = try PipelineClient(port: server.address.port)
        try client.send("GET /a b HTTP/1.1\r\nHost: x\r\n\r\n")
        let response = try #require(try client.responses(1).first)
        #expect(response.head.status == 400)
        #expect(try JSON.parse(response.body)["error"]?.stringValue == "malformed request line")
    }
}
