import Testing
import TapCrypto
import TapHTTP
import TapHTTPService
import TapNet
import TapStore
@testable import TapProxy

/// A fixed world for the machine: a clock the test moves, a writer backlog it sets, a budget it limits.
final class FakeEnvironment: ProxySessionEnvironment {
    var wall = 1_000.0
    var mono: UInt64 = 1_000_000_000
    var pacing = 0.0
    var behind = false
    /// Answer bytes queued for the client and not taken.
    var unsent = 0
    func unsentByteCount() -> Int { unsent }
    /// The kernel's unacknowledged bytes (nil: the system does not say).
    var kernelUnsent: Int?
    func kernelUnsentBytes() -> Int? { kernelUnsent }
    var limit = 1 << 20
    var held = 0
    func wallClock() -> Double { wall }
    func monotonicClock() -> UInt64 { mono }
    func pacingDelay() -> Double { pacing }
    var writerIsBehind: Bool { behind }
    func holdBudget(_ bytes: Int) -> Bool {
        held = bytes
        return bytes <= limit
    }
    /// Moves both clocks.
    func advance(_ seconds: Double) {
        wall += seconds
        mono += UInt64(seconds * 1e9)
    }
}

/// Drives a machine with byte arrays and keeps what it asked for, in the style of SwiftNIO's EmbeddedChannel.
struct Harness {
    var machine: ProxySessionMachine
    let env = FakeEnvironment()

    init(_ mode: ProxyConfiguration.Mode, configure: (inout ProxyConfiguration) -> Void = { _ in }) throws {
        var config = ProxyConfiguration(mode: mode, upstreamTLS: try TLSContext(clientRoots: []), interceptTLS: nil)
        if case .forward = mode { config.interceptTLS = try TLSContext(clientRoots: []) } // only its presence matters here
        configure(&config)
        machine = ProxySessionMachine(config: config, connectionID: 7, peer: "127.0.0.1:5555")
        machine.start(env)
    }

    static func reverse(_ configure: (inout ProxyConfiguration) -> Void = { _ in }) throws -> Harness {
        try Harness(.reverse(UpstreamURL("http://ds.example:8443/base")!), configure: configure)
    }

    /// Feeds an event and, as the driver does, `written` whenever the actions ask for it (`reportWhenWritten`, kept in the
    /// list); returns every action, in order.
    mutating func feed(_ e: ProxySessionMachine.Event) -> [ProxySessionMachine.Action] {
        var all: [ProxySessionMachine.Action] = []
        var next: ProxySessionMachine.Event? = e
        while let event = next {
            next = nil
            let actions = machine.handle(event, env)
            if actions.contains(where: { if case .reportWhenWritten = $0 { return true }; return false }) { next = .written }
            all += actions
        }
        return all
    }
    mutating func client(_ text: String) -> [ProxySessionMachine.Action] { feed(.clientBytes(Array(text.utf8))) }
    mutating func upstream(_ text: String) -> [ProxySessionMachine.Action] { feed(.upstreamBytes(Array(text.utf8))) }
}

extension Array where Element == ProxySessionMachine.Action {
    var clientWrites: [String] { compactMap { if case let .writeClient(h, b) = $0 { return String(decoding: h + b, as: UTF8.self) }; return nil } }
    var upstreamWrites: [String] { compactMap { if case let .writeUpstream(h, b) = $0 { return String(decoding: h + b, as: UTF8.self) }; return nil } }
    var connects: [Target] { compactMap { if case let .connectUpstream(t) = $0 { return t }; return nil } }
    var records: [ExchangeRecord] { compactMap { if case let .record(r) = $0 { return r }; return nil } }
    var closesClient: Bool { contains { if case .closeClient = $0 { return true }; return false } }
    var closesUpstream: Bool { contains { if case .closeUpstream = $0 { return true }; return false } }
    var pauses: Bool { contains { if case .pauseClientReading = $0 { return true }; return false } }
    var resumes: Bool { contains { if case .resumeClientReading = $0 { return true }; return false } }
    var notes: [String] { compactMap { if case let .note(kind, _) = $0 { return kind }; return nil } }
    var names: [String] {
        map {
            switch $0 {
            case .writeClient: "writeClient"
            case .closeClient: "closeClient"
            case .resetClient: "resetClient"
            case .startClientTLS: "startClientTLS"
            case .pauseClientReading: "pause"
            case .resumeClientReading: "resume"
            case .connectUpstream: "connect"
            case .writeUpstream: "writeUpstream"
            case .closeUpstream: "closeUpstream"
            case .shutdownClientWrite: "shutdownClientWrite"
            case .shutdownUpstreamWrite: "shutdownUpstreamWrite"
            case .record: "record"
            case .note: "note"
            case .certificateRefused: "certificateRefused"
            case .log: "log"
            case .budgetRefused: "budgetRefused"
            case .pace: "pace"
            case .waitForWriter: "waitForWriter"
            case .reportWhenWritten: "reportWhenWritten"
            case .ended: "ended"
            }
        }
    }
}

let ares = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 21\r\n\r\n{\"messageType\":\"ARes\"}"
    .replacingOccurrences(of: "Length: 21", with: "Length: 22")

@Suite struct ReverseModeTests {
    @Test func aRequestIsForwardedAndItsResponseWrittenBackAndRecorded() throws {
        var h = try Harness.reverse()
        let request = "POST /areq?x=1 HTTP/1.1\r\nHost: proxy.local\r\nProxy-Connection: keep-alive\r\nKeep-Alive: 5\r\nTE: trailers\r\n"
            + "Upgrade: h2c\r\nConnection: Upgrade, keep-alive\r\nContent-Length: 4\r\n\r\nbody"
        var a = h.client(request)
        #expect(a.names == ["connect"])
        let t = try #require(a.connects.first)
        #expect(t.address == HostPort(host: "ds.example", port: 8443) && t.path == "/base/areq?x=1" && !t.tls)
        h.env.advance(0.001)
        a = h.feed(.upstreamConnected(connectedAt: 1000.0005, tlsDoneAt: nil))
        let sent = try #require(a.upstreamWrites.first)
        #expect(sent.hasPrefix("POST /base/areq?x=1 HTTP/1.1\r\n"))
        #expect(sent.contains("Host: ds.example:8443\r\n") && sent.hasSuffix("\r\n\r\nbody"))
        for hop in ["Proxy-Connection", "Keep-Alive", "TE:", "Upgrade", "Connection:"] { #expect(!sent.contains(hop), "\(hop)") }
        h.env.advance(0.002)
        a = h.upstream(ares)
        #expect(a.clientWrites == [ares])
        let r = try #require(a.records.first)
        #expect(r.status == 200 && r.method == "POST" && r.url == "http://ds.example:8443/base/areq?x=1" && r.connectionID == 7 && r.seq == 1)
        func near(_ a: Double?, _ b: Double) -> Bool { a.map { abs($0 - b) < 1e-9 } ?? false }
        #expect(near(r.requestStart, 1000) && near(r.upstreamConnect, 1000.0005) && near(r.requestSent, 1000.001))
        #expect(near(r.firstByte, 1000.003) && near(r.done, 1000.003))
        #expect(r.request.body == Array("body".utf8) && r.response?.body == Array("{\"messageType\":\"ARes\"}".utf8))
        #expect(!a.closesClient && h.machine.waitingFor == .idle)
    }

    @Test func keepAliveReusesTheUpstreamAndPipelinedRequestsWaitTheirTurn() throws {
        var h = try Harness.reverse()
        var a = h.client("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(a.connects.count == 1)
        a = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        #expect(a.upstreamWrites.count == 1 && a.upstreamWrites[0].hasPrefix("GET /base/a "))
        a = h.upstream("HTTP/1.1 204 No Content\r\n\r\n")
        // The first answer goes back, then the second request leaves on the same upstream connection.
        #expect(a.names == ["writeClient", "record", "writeUpstream"])
        #expect(a.upstreamWrites[0].hasPrefix("GET /base/b "))
        a = h.upstream("HTTP/1.1 204 No Content\r\n\r\n")
        #expect(a.records.map(\.seq) == [2] && a.connects.isEmpty)
    }

    @Test func aRequestArrivingByteByByteIsForwardedOnceComplete() throws {
        var h = try Harness.reverse()
        let request = Array("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc".utf8)
        var all: [ProxySessionMachine.Action] = []
        for b in request { all += h.feed(.clientBytes([b])) }
        #expect(all.connects.count == 1 && all.names == ["connect"])
        #expect(h.machine.waitingFor == .upstream)
    }

    @Test func aSlowHeadIsAnswered408AtItsDeadline() throws {
        var h = try Harness.reverse { $0.headerTimeout = 2 }
        #expect(h.client("POST /x HTTP/1.1\r\nHost: a\r\n").isEmpty)
        #expect(h.machine.waitingFor == .requestHead)
        h.env.advance(2.5)
        let a = h.feed(.deadlinePassed)
        #expect(a.clientWrites.first?.hasPrefix("HTTP/1.1 408 ") == true && a.closesClient && a.notes == ["rejected"])
    }

    @Test func anIdleConnectionIsClosedAtItsDeadline() throws {
        var h = try Harness.reverse { $0.idleTimeout = 5 }
        #expect(h.machine.deadline == h.env.mono + 5_000_000_000)
        let a = h.feed(.deadlinePassed)
        #expect(a.names == ["closeClient"])
    }

    @Test func anAbsoluteTargetIsRefusedInReverseModeAndCONNECTToo() throws {
        var h = try Harness.reverse()
        var a = h.client("GET http://elsewhere/ HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(a.clientWrites.first?.hasPrefix("HTTP/1.1 400 ") == true && a.clientWrites.first?.contains("origin-form") == true && a.closesClient)
        h = try Harness.reverse()
        a = h.client("CONNECT ds.example:443 HTTP/1.1\r\nHost: ds.example:443\r\n\r\n")
        #expect(a.clientWrites.first?.hasPrefix("HTTP/1.1 405 ") == true)
    }

    @Test func malformedRequestsGet400AndTheConnectionCloses() throws {
        var h = try Harness.reverse()
        let a = h.client("GARBAGE\r\n\r\n")
        #expect(a.clientWrites.first?.hasPrefix("HTTP/1.1 400 ") == true && a.closesClient && a.connects.isEmpty)
    }

    @Test func expect100ContinueIsAnsweredBeforeTheBody() throws {
        var h = try Harness.reverse()
        var a = h.client("POST /x HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
        #expect(a.clientWrites == ["HTTP/1.1 100 Continue\r\n\r\n"])
        a = h.client("abc")
        #expect(a.connects.count == 1 && a.clientWrites.isEmpty)
        a = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        #expect(!(a.upstreamWrites.first?.contains("Expect") ?? true))
    }

    @Test func connectionCloseFromTheClientClosesAfterTheResponse() throws {
        var h = try Harness.reverse()
        _ = h.client("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        let a = h.upstream(ares)
        #expect(a.names == ["writeClient", "record", "closeClient"])
    }
}

@Suite struct UpstreamFailureTests {
    @Test func anUpstreamThatDoesNotAnswerGets504AtTheDeadline() throws {
        var h = try Harness.reverse { $0.upstreamTimeout = 3 }
        _ = h.client("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        _ = h.feed(.upstreamConnected(connectedAt: 1000.001, tlsDoneAt: nil))
        h.env.advance(3.1)
        let a = h.feed(.deadlinePassed)
        #expect(a.clientWrites.first?.hasPrefix("HTTP/1.1 504 ") == true && a.closesUpstream)
        let r = try #require(a.records.first)
        #expect(r.status == 504 && r.error == "upstream ds.example:8443 did not answer within 3 s" && r.upstreamConnect == 1000.001)
        #expect(!a.closesClient) // keep-alive: the client may send another request
        let next = h.client("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(next.connects.count == 1)
    }

    @Test func anUnreachableUpstreamGets502() throws {
        var h = try Harness.reverse()
        _ = h.client("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        let a = h.feed(.upstreamClosed(.connect("connection refused")))
        #expect(a.clientWrites.first?.hasPrefix("HTTP/1.1 502 ") == true)
        #expect(a.records.first?.error == "upstream ds.example:8443 unreachable: connection refused")
    }

    /// Issue 23: the recorder refuses a bare-LF request as soon as its first line arrives (before: it waited for a
    /// CRLFCRLF that never came, then the header timeout), and a request with two Host lines; an upstream answer with
    /// bare LFs is a 502 at once.
    @Test func bareLFAndTwoHostLinesAreRefusedAtOnce() throws {
        for text in ["GET / HTTP/1.1\nHost: a\n", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"] {
            var h = try Harness.reverse()
            let a = h.client(text)
            #expect(a.clientWrites.first?.hasPrefix("HTTP/1.1 400 ") == true && a.closesClient && a.connects.isEmpty, "\(text.debugDescription)")
        }
        var h = try Harness.reverse()
        _ = h.client("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        let a = h.upstream("HTTP/1.1 200 OK\nContent-Length: 2\n")
        #expect(a.clientWrites.first?.hasPrefix("HTTP/1.1 502 ") == true && a.records.first?.error?.contains("bare LF") == true)
    }

    @Test func aResponseCutShortGets502AndAnInvalidOneToo() throws {
        var h = try Harness.reverse()
        _ = h.client("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        _ = h.upstream("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
        var a = h.feed(.upstreamClosed(nil))
        #expect(a.records.first?.error == "upstream ds.example:8443 closed the connection before a complete response")
        h = try Harness.reverse()
        _ = h.client("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        a = h.upstream("NOT HTTP AT ALL\r\n\r\n")
        #expect(a.clientWrites.first?.hasPrefix("HTTP/1.1 502 ") == true && a.closesUpstream)
        #expect(a.records.first?.error?.hasPrefix("upstream ds.example:8443 sent an invalid response") == true)
    }

    @Test func aCloseDelimitedResponseEndsWithTheUpstreamAndReachesTheClientWithItsLength() throws {
        var h = try Harness.reverse()
        _ = h.client("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        #expect(h.upstream("HTTP/1.0 200 OK\r\nConnection: close\r\nX-A: 1\r\n\r\nhello ").isEmpty)
        let a = h.feed(.upstreamClosed(nil))
        // The body is whole once the upstream closed: the client gets its length, and its connection stays open.
        #expect(a.names == ["writeClient", "record"])
        #expect(a.clientWrites == ["HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 6\r\n\r\nhello "])
        #expect(a.records.first?.response?.body == Array("hello ".utf8))
        #expect(a.records.first?.response?.headers.map(\.0) == ["Connection", "X-A"], "the session keeps the upstream's fields")
    }

    @Test func anUpstreamThatClosesAfterItsAnswerIsReopenedForTheNext() throws {
        var h = try Harness.reverse()
        _ = h.client("GET /1 HTTP/1.1\r\nHost: a\r\n\r\n")
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        var a = h.upstream("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
        #expect(a.names == ["closeUpstream", "writeClient", "record"])
        a = h.client("GET /2 HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(a.connects.count == 1)
    }

    @Test func aClientThatLeavesMidExchangeIsRecordedAsAnAbort() throws {
        var h = try Harness.reverse()
        _ = h.client("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        h.env.advance(0.5)
        let a = h.feed(.clientClosed(error: nil, tlsFailure: false))
        let r = try #require(a.records.first)
        #expect(r.clientAbortAt == 1000.5 && r.error == "client closed the connection before the response")
        #expect(a.names == ["record", "closeUpstream", "ended"])
        #expect(h.upstream(ares).isEmpty) // a late answer goes nowhere
    }

    @Test func aRecorderThatStopsMidExchangeRecordsItAsStoppedNotAsTheClientsAbort() throws {
        var h = try Harness.reverse()
        _ = h.client("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        _ = h.feed(.upstreamConnected(connectedAt: 1000.1, tlsDoneAt: nil))
        h.env.advance(0.5)
        let a = h.feed(.recorderStopping)
        let r = try #require(a.records.first)
        #expect(r.clientAbortAt == nil && r.done == 1000.5 && r.error == ProxySessionMachine.stoppedBeforeResponse)
        #expect(r.upstreamConnect == 1000.1 && r.requestSent == 1000, "what happened upstream before the stop is kept")
        #expect(a.names == ["record", "closeUpstream", "ended"])
        // The socket's close that follows changes nothing more.
        #expect(h.feed(.clientClosed(error: nil, tlsFailure: false)).isEmpty)
    }

    @Test func aClientThatSentItsFINBeforeTheStopKeepsThatMoment() throws {
        var h = try Harness.reverse()
        _ = h.client("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        h.env.advance(0.3)
        _ = h.feed(.clientFinishedSending)
        h.env.advance(0.5)
        let r = try #require(h.feed(.recorderStopping).records.first)
        #expect(r.clientAbortAt == 1000.3 && r.error?.hasPrefix("client closed its side of the connection (FIN) before the response; then the recorder stopped") == true,
                "\(r.error ?? "")")
    }
}

@Suite struct ForwardModeTests {
    @Test func anAbsoluteURLGoesToItsHostWithTheHostHeaderReplaced() throws {
        var h = try Harness(.forward)
        var a = h.client("GET http://acs.example:8080/challenge?id=1 HTTP/1.1\r\nHost: wrong.example\r\nProxy-Authorization: Basic eA==\r\n\r\n")
        let t = try #require(a.connects.first)
        #expect(t.address == HostPort(host: "acs.example", port: 8080) && t.path == "/challenge?id=1")
        a = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        let sent = try #require(a.upstreamWrites.first)
        #expect(sent.hasPrefix("GET /challenge?id=1 HTTP/1.1\r\n") && sent.contains("Host: acs.example:8080\r\n") && !sent.contains("wrong.example"))
        #expect(!sent.contains("Proxy-Authorization"))
    }

    @Test func credentialsInTheURLAndOriginFormAreRefused() throws {
        var h = try Harness(.forward)
        var a = h.client("GET http://user:pw@acs.example/ HTTP/1.1\r\nHost: acs.example\r\n\r\n")
        #expect(a.clientWrites.first?.contains("credentials in the request URL") == true && a.connects.isEmpty)
        h = try Harness(.forward)
        a = h.client("GET /relative HTTP/1.1\r\nHost: acs.example\r\n\r\n")
        #expect(a.clientWrites.first?.contains("needs an absolute URL") == true)
    }

    @Test func connectIsInterceptedAndRequestsInsideGoToTheTunnelsHost() throws {
        var h = try Harness(.forward)
        var a = h.client("CONNECT acs.example:443 HTTP/1.1\r\nHost: acs.example:443\r\n\r\n")
        #expect(a.clientWrites == ["HTTP/1.1 200 Connection established\r\n\r\n"])
        // The requests inside are taken once the 200 is queued (and TLS started): the driver reports it written.
        #expect(a.names == ["writeClient", "startClientTLS", "reportWhenWritten"])
        if case let .startClientTLS(name, early) = a[1] { #expect(name == "acs.example" && early.isEmpty) }
        a = h.client("POST /challenge HTTP/1.1\r\nHost: acs.example\r\nContent-Length: 0\r\n\r\n")
        let t = try #require(a.connects.first)
        #expect(t.tls && t.address == HostPort(host: "acs.example", port: 443) && t.hostHeader == "acs.example")
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        a = h.upstream(ares)
        #expect(a.records.first?.url == "https://acs.example/challenge")
        a = h.client("CONNECT other.example:443 HTTP/1.1\r\nHost: other.example:443\r\n\r\n")
        #expect(a.clientWrites.first?.hasPrefix("HTTP/1.1 405 ") == true)
    }

    @Test func withAuthAClientWithoutCredentialsGets407() throws {
        var h = try Harness(.forward) { $0.authorization = ClientAuthorization("qa:secret") }
        var a = h.client("GET http://acs.example/ HTTP/1.1\r\nHost: acs.example\r\n\r\n")
        #expect(a.clientWrites.first?.hasPrefix("HTTP/1.1 407 ") == true && a.clientWrites.first?.contains("Proxy-Authenticate: Basic") == true)
        #expect(a.closesClient && a.connects.isEmpty)
        h = try Harness(.forward) { $0.authorization = ClientAuthorization("qa:secret") }
        a = h.client("GET http://acs.example/ HTTP/1.1\r\nHost: acs.example\r\nProxy-Authorization: Basic cWE6c2VjcmV0\r\n\r\n")
        #expect(a.connects.count == 1)
    }
}

@Suite struct BackpressureTests {
    @Test func aRequestIsPacedWhileTheWriterFallsBehindThenGoesOn() throws {
        var h = try Harness.reverse()
        h.env.pacing = 0.0015
        var a = h.client("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(a.names == ["pause", "pace"])
        if case let .pace(d) = a[1] { #expect(d == 0.0015) }
        a = h.feed(.resume)
        #expect(a.names == ["resume", "connect"]) // paced once, not twice
    }

    @Test func aRequestWaitsForTheWriterWhenItIsFarBehind() throws {
        var h = try Harness.reverse()
        h.env.behind = true
        var a = h.client("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(a.names == ["pause", "waitForWriter"])
        h.env.behind = false
        a = h.feed(.resume)
        #expect(a.names == ["resume", "connect"])
    }

    @Test func overTheMemoryBudgetTheClientGets503() throws {
        var h = try Harness.reverse()
        h.env.limit = 10
        let a = h.client("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
        #expect(a.names.first == "budgetRefused" && a.clientWrites.first?.hasPrefix("HTTP/1.1 503 ") == true && a.closesClient)
    }

    @Test func readingPausesWhenTooMuchFollowsARequestInFlight() throws {
        var h = try Harness.reverse()
        _ = h.client("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        // A pipelined request whose body is still coming: reading resumes once the first is answered and the intake
        // needs more of the second.
        let next = Array("POST /big HTTP/1.1\r\nHost: a\r\nContent-Length: 400000\r\n\r\n".utf8)
        var a = h.feed(.clientBytes(next + Array(repeating: UInt8(ascii: "G"), count: ReadAheadLimit.pipelined.bytes + 1 - next.count)))
        #expect(a.names == ["pause"])
        a = h.upstream("HTTP/1.1 204 No Content\r\n\r\n")
        #expect(a.resumes && a.records.count == 1 && !a.closesClient, "\(a.names)")
        #expect(h.machine.waitingFor == .requestHead)
    }
}

/// Issue 23 item 15: a client that finishes sending after its request (shutdown(SHUT_WR)) is answered, then closed;
/// an upstream's 101 is refused with a reason instead of being passed on as a final response.
@Suite struct HalfCloseAndUpgradeTests {
    @Test func aHalfClosedClientIsAnsweredThenClosed() throws {
        var h = try Harness.reverse()
        var a = h.client("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(a.connects.count == 1)
        a = h.feed(.clientFinishedSending)
        #expect(a.isEmpty, "both requests are answered first: \(a.names)")
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        a = h.upstream(ares)
        #expect(a.names == ["writeClient", "record", "writeUpstream"], "the second, pipelined, goes on")
        h.env.advance(0.25)
        a = h.upstream(ares)
        #expect(a.names == ["writeClient", "record", "closeClient"], "then the connection closes after the last answer")
        // A FIN cannot tell a half-close from a client that gave up: the moment is kept, and the record says so.
        let r = try #require(a.records.first)
        #expect(r.status == 200 && r.response != nil && r.clientAbortAt == 1000)
        #expect(r.error?.hasPrefix("client closed its side of the connection (FIN) before the response; answered anyway") == true)
    }

    @Test func aRequestCutShortByTheClientsEndIs400AndAnIdleOneCloses() throws {
        var h = try Harness.reverse()
        _ = h.client("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        var a = h.feed(.clientFinishedSending)
        #expect(a.clientWrites.first?.hasPrefix("HTTP/1.1 400 ") == true && a.closesClient && a.connects.isEmpty)
        #expect(a.clientWrites.first?.contains("finished sending before its request was complete") == true)
        h = try Harness.reverse()
        a = h.feed(.clientFinishedSending)
        #expect(a.names == ["closeClient"])
    }

    @Test func aHalfClosedClientWaitingForTheWriterIsAnsweredWhenItCatchesUp() throws {
        var h = try Harness.reverse()
        h.env.behind = true
        var a = h.client("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(a.names.contains("waitForWriter"))
        a = h.feed(.clientFinishedSending)
        #expect(a.isEmpty)
        h.env.behind = false
        a = h.feed(.resume)
        #expect(a.connects.count == 1 && !a.closesClient)
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        #expect(h.upstream(ares).names == ["writeClient", "record", "closeClient"])
    }

    @Test func anUpstream101IsRefusedWithAReason() throws {
        for (upgrade, reason) in [(nil, "answered 101 Switching Protocols to a request that asked for no upgrade"),
                                  ("websocket", "answered 101 Switching Protocols (the request's Upgrade: websocket was not forwarded")] {
            var h = try Harness.reverse()
            _ = h.client("GET /ws HTTP/1.1\r\nHost: x\r\n" + (upgrade.map { "Upgrade: \($0)\r\nConnection: Upgrade\r\n" } ?? "") + "\r\n")
            let sent = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil)).upstreamWrites.first ?? ""
            #expect(!sent.contains("Upgrade"), "an upgrade is never asked of the upstream")
            let a = h.upstream("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\u{81}\u{05}hello")
            #expect(a.clientWrites.count == 1 && a.clientWrites[0].hasPrefix("HTTP/1.1 502 ") && a.clientWrites[0].contains(reason), "\(a.clientWrites)")
            #expect(a.closesUpstream && a.records.first?.status == 502 && a.records.first?.error?.contains(reason) == true)
            #expect(h.client("GET /next HTTP/1.1\r\nHost: x\r\n\r\n").connects.count == 1, "a fresh upstream for the next request")
        }
    }
}

/// Hardening, round two, defect 2: `--upstream-timeout 1e300` (and `inf` idle or header timeouts) trapped in
/// `UInt64(seconds * 1e9)` on the first connection. The deadlines saturate: they never come, nothing traps, and a
/// deadline sent anyway (the sweep cannot tell) still answers with a message that does not trap either.
@Suite struct HugeTimeoutTests {
    @Test func infiniteAndHugeTimeoutsSaturateTheDeadline() throws {
        var h = try Harness.reverse { $0.idleTimeout = .infinity; $0.headerTimeout = 1e300; $0.upstreamTimeout = 1e300 }
        #expect(h.machine.deadline == .max, "idle: never")
        #expect(h.client("POST /x HTTP/1.1\r\nHost: a\r\n").isEmpty)
        #expect(h.machine.waitingFor == .requestHead && h.machine.deadline == .max)
        _ = h.client("Content-Length: 0\r\n\r\n")
        _ = h.feed(.upstreamConnected(connectedAt: 1000.001, tlsDoneAt: nil))
        #expect(h.machine.waitingFor == .upstream && h.machine.deadline == .max)
        let a = h.feed(.deadlinePassed)
        #expect(a.records.first?.error == "upstream ds.example:8443 did not answer within \(Int.max) s")
    }

    @Test func aClockNearItsEndStillSaturates() throws {
        var h = try Harness.reverse { $0.idleTimeout = 5 }
        h.env.mono = .max - 1_000
        #expect(h.client("GET / HTTP/1.1\r\nHost: a\r\n\r\n").connects.count == 1)
        #expect(h.machine.deadline == .max, "upstream wait of 60 s past the clock's range")
        var nan = try Harness.reverse { $0.idleTimeout = .nan }
        #expect(nan.machine.deadline == nan.env.mono, "NaN: due at once")
        #expect(nan.feed(.deadlinePassed).names == ["closeClient"])
    }
}

/// Issue 27 §2: a client that ends the intercepted handshake with a certificate alert gets the server's hint, for the
/// CONNECT's host; any other TLS failure, or a closed connection without one, does not.
@Suite struct CertificateRefusalTests {
    func refusedHosts(_ a: [ProxySessionMachine.Action]) -> [String] {
        a.compactMap { if case let .certificateRefused(host, _) = $0 { return host }; return nil }
    }

    @Test func aCertificateAlertAfterCONNECTNamesTheHost() throws {
        var h = try Harness(.forward)
        _ = h.client("CONNECT acs.example:443 HTTP/1.1\r\nHost: acs.example:443\r\n\r\n")
        let a = h.feed(.clientClosed(error: "TLS: TLS handshake failed: tlsv1 alert unknown ca", tlsFailure: true, peerAlert: TLSAlert(code: 48)))
        #expect(refusedHosts(a) == ["acs.example"])
        #expect(a.notes == ["client-tls-failed"], "each connection's failure is still noted")
    }

    @Test func otherAlertsAndPlainClosesGiveNoHint() throws {
        for (alert, tls) in [(TLSAlert(code: 40), true), (TLSAlert(code: 120), true), (nil, true), (nil, false)] as [(TLSAlert?, Bool)] {
            var h = try Harness(.forward)
            _ = h.client("CONNECT acs.example:443 HTTP/1.1\r\nHost: acs.example:443\r\n\r\n")
            let a = h.feed(.clientClosed(error: tls ? "TLS: failed" : nil, tlsFailure: tls, peerAlert: alert))
            #expect(refusedHosts(a).isEmpty, "\(String(describing: alert))")
        }
    }
}

/// The recorder's client side has every server connection's output backpressure: while more than the high-water mark
/// of answers waits for a client that does not read them, no further request is taken or forwarded, and a client that
/// takes nothing for the idle timeout is closed (before: every pipelined request was forwarded and all its answers held).
@Suite struct ProxyOutputBackpressureTests {
    static let two = "GET /1 HTTP/1.1\r\nHost: p\r\n\r\nGET /2 HTTP/1.1\r\nHost: p\r\n\r\n"

    @Test func aClientThatDoesNotReadStopsTheNextRequestUntilItTakesEnough() throws {
        var h = try Harness.reverse { $0.idleTimeout = 10 }
        #expect(h.client(Self.two).names == ["connect"])
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        h.env.unsent = 2 << 20 // earlier answers the client has not taken
        var a = h.upstream(ares)
        #expect(a.names == ["writeClient", "record", "reportWhenWritten", "pause"], "the second request waits: \(a.names)")
        #expect(h.machine.pausedForOutput && h.machine.waitingFor == .client(.stalledReader))
        #expect(h.machine.deadline == h.env.mono + 10_000_000_000)

        h.env.unsent = 1 << 20
        #expect(h.feed(.clientDrained).isEmpty, "above the low-water mark: still waiting")
        h.env.advance(6)
        h.env.unsent = 600 << 10
        #expect(h.feed(.clientDrained).isEmpty)
        h.env.advance(6)
        #expect(h.feed(.deadlinePassed).isEmpty, "it took some 6 s ago: not stalled")
        #expect(h.machine.deadline == h.env.mono + 4_000_000_000, "the rest of the idle timeout from its last progress")
        h.env.unsent = 0
        a = h.feed(.clientDrained)
        // The second request was read already: it goes on, and reading resumes once the intake needs more.
        #expect(a.names == ["writeUpstream"] && !h.machine.pausedForOutput, "\(a.names)")
        #expect(a.upstreamWrites.first?.hasPrefix("GET /base/2 ") == true)
        #expect(h.upstream(ares).names == ["writeClient", "record", "resume"])
    }

    @Test func aClientThatTakesNothingForTheIdleTimeoutIsClosed() throws {
        var h = try Harness.reverse { $0.idleTimeout = 10 }
        _ = h.client(Self.two)
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        h.env.unsent = 2 << 20
        _ = h.upstream(ares)
        h.env.advance(10)
        let a = h.feed(.deadlinePassed)
        #expect(a.names == ["log", "resetClient"], "\(a.names)")
    }

    /// The last answer of a connection that closes after it: the stalled-reader deadline holds until it is sent.
    @Test func aClosingConnectionWhoseClientTakesNothingIsReset() throws {
        var h = try Harness.reverse { $0.idleTimeout = 10 }
        _ = h.client("GET /1 HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n")
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        h.env.unsent = 2 << 20
        #expect(h.upstream(ares).names == ["writeClient", "record", "closeClient"])
        #expect(h.machine.closingAfterFlush && h.machine.waitingFor == .client(.stalledReader))
        h.env.advance(6)
        #expect(h.feed(.clientDrained).isEmpty, "it took some: the deadline counts from now")
        h.env.advance(6)
        #expect(h.feed(.deadlinePassed).isEmpty)
        h.env.advance(4)
        #expect(h.feed(.deadlinePassed).names == ["log", "resetClient"])
    }

    /// A closing connection whose client reads only from the kernel's queue (too slowly for this end's own queue to
    /// move): not reset while that queue shrinks; reset once it stops.
    @Test func aClosingConnectionWhoseClientReadsFromTheKernelsQueueIsNotReset() throws {
        var h = try Harness.reverse { $0.idleTimeout = 10 }
        _ = h.client("GET /1 HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n")
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        h.env.unsent = 2 << 20
        h.env.kernelUnsent = 4 << 20
        #expect(h.upstream(ares).names == ["writeClient", "record", "closeClient"])
        h.env.advance(10)
        #expect(h.feed(.deadlinePassed).isEmpty, "a look at the kernel's queue, again in a second")
        h.env.advance(1)
        h.env.kernelUnsent = (4 << 20) - 100_000
        #expect(h.feed(.deadlinePassed).isEmpty, "the kernel's queue shrank: a reader")
        #expect(h.machine.deadline > 0)
        h.env.advance(10)
        #expect(h.feed(.deadlinePassed).isEmpty)
        h.env.advance(1)
        #expect(h.feed(.deadlinePassed).names == ["log", "resetClient"], "and then took nothing")
    }

    /// An answer larger than the mark is counted as if the client took none of it (the driver has not queued it yet):
    /// the next request waits until the driver reports what the client really left unsent.
    @Test func anAnswerOverTheMarkIsCountedBeforeItIsQueued() throws {
        var h = try Harness.reverse()
        _ = h.client(Self.two)
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        let body = String(repeating: "x", count: 2 << 20)
        // Fed without the driver's `written`: the machine stops at the answer and asks for it.
        let a = h.machine.handle(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8)), h.env)
        #expect(a.names == ["writeClient", "record", "reportWhenWritten"], "\(a.names)")
        h.env.unsent = 2 << 20 // queued, none taken: the next request waits for the client
        #expect(h.feed(.written).names == ["pause"])
        h.env.unsent = 0
        #expect(h.feed(.clientDrained).names == ["writeUpstream"], "taken: the next request goes on")
        var taken = try Harness.reverse()
        _ = taken.client(Self.two)
        _ = taken.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        _ = taken.machine.handle(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8)), taken.env)
        #expect(taken.feed(.written).names == ["writeUpstream"], "the kernel took it at once: no pause")
    }
}

/// The hop-by-hop parts of a forwarded response (ClientResponseHead): the client's connection and framing are 3dstape's.
@Suite struct ClientResponseFramingTests {
    static let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n5\r\nhello\r\n0\r\n\r\n"

    /// Answers one request with `response` and returns what the client got and the actions.
    static func answer(_ request: String, _ response: String) throws -> (String, [ProxySessionMachine.Action]) {
        var h = try Harness.reverse()
        _ = h.client(request)
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        let a = h.upstream(response)
        return (a.clientWrites.joined(), a)
    }

    @Test func anHTTP10ClientGetsAChunkedAnswerDechunkedWithItsLength() throws {
        let (got, a) = try Self.answer("GET / HTTP/1.0\r\nHost: a\r\n\r\n", Self.chunked)
        #expect(got == "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
        #expect(a.closesClient)
        #expect(a.records.first?.response?.wireSize == got.utf8.count)
        #expect(a.records.first?.response?.headers.contains { $0.0 == "Transfer-Encoding" } == true, "the session keeps the upstream's framing")
    }

    @Test func anHTTP11ClientGetsTheChunksAsTheyCame() throws {
        let (got, a) = try Self.answer("GET / HTTP/1.1\r\nHost: a\r\n\r\n", Self.chunked)
        #expect(got == Self.chunked && !a.closesClient)
    }

    @Test func anHTTP10KeepAliveClientIsToldItsConnectionIsKept() throws {
        let (got, a) = try Self.answer("GET / HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n", ares)
        #expect(got.hasPrefix("HTTP/1.1 200 OK\r\n") && got.contains("\r\nConnection: keep-alive\r\n") && !a.closesClient)
    }

    @Test func aClientThatAskedForACloseIsNotToldKeepAlive() throws {
        let response = "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\nok"
        let (got, a) = try Self.answer("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", response)
        #expect(got == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        #expect(a.closesClient)
    }

    @Test func anUpstreamClosingItsOwnConnectionDoesNotCloseTheClients() throws {
        let response = "HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nContent-Length: 2\r\n\r\nok"
        let (got, a) = try Self.answer("GET / HTTP/1.1\r\nHost: a\r\n\r\n", response)
        #expect(got == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "the fields Connection named go with it")
        #expect(!a.closesClient && a.closesUpstream)
    }

    @Test func aResponseWhoseOptionsAgreeGoesAsItCame() throws {
        let response = "HTTP/1.1 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok"
        let (got, _) = try Self.answer("GET / HTTP/1.1\r\nHost: a\r\n\r\n", response)
        #expect(got == response)
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"
        let (toHEAD, _) = try Self.answer("HEAD / HTTP/1.1\r\nHost: a\r\n\r\n", head)
        #expect(toHEAD == head, "a HEAD answer's length is the resource's, not a body's")
    }

    @Test func hopByHopFieldsNeverReachTheClient() throws {
        // Whether or not the connection options agree (a hostile re-check's find: they passed whenever they did).
        let named = "HTTP/1.1 200 OK\r\nConnection: X-Foo\r\nX-Foo: secret\r\nKeep-Alive: timeout=5, max=100\r\nContent-Length: 2\r\n\r\nok"
        #expect(try Self.answer("GET / HTTP/1.1\r\nHost: a\r\n\r\n", named).0 == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        let proxyConnection = "HTTP/1.1 200 OK\r\nProxy-Connection: close\r\nUpgrade: h2c\r\nContent-Length: 2\r\n\r\nok"
        #expect(try Self.answer("GET / HTTP/1.1\r\nHost: a\r\n\r\n", proxyConnection).0 == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        let closing = "HTTP/1.1 200 OK\r\nConnection: close, X-Foo\r\nX-Foo: secret\r\nContent-Length: 2\r\n\r\nok"
        let (got, a) = try Self.answer("GET / HTTP/1.0\r\nHost: a\r\n\r\n", closing)
        #expect(got == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok" && a.closesClient)
        #expect(a.records.first?.response?.headers.contains { $0.0 == "X-Foo" } == true, "the session keeps the upstream's fields")
    }

    @Test func anHTTP10UpstreamsStatusLineBecomes3dstapesVersion() throws {
        let response = "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"
        let (got, a) = try Self.answer("GET / HTTP/1.1\r\nHost: a\r\n\r\n", response)
        #expect(got == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" && !a.closesClient)
    }

    @Test func anHTTP10ClientAskingForACloseIsClosedWhateverElseItSays() throws {
        for request in ["GET / HTTP/1.0\r\nHost: a\r\nConnection: close, keep-alive\r\n\r\n",
                        "GET / HTTP/1.0\r\nHost: a\r\nConnection: close\r\nProxy-Connection: keep-alive\r\n\r\n"] {
            let (got, a) = try Self.answer(request, ares)
            #expect(got.contains("\r\nConnection: close\r\n") && a.closesClient, "\(request.debugDescription)")
        }
    }

    @Test func aNoContentAnswerGoesWithoutFraming() throws {
        for response in ["HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n"] {
            let (got, a) = try Self.answer("DELETE /x HTTP/1.1\r\nHost: a\r\n\r\n", response)
            #expect(got == "HTTP/1.1 204 No Content\r\n\r\n" && !a.closesClient, "\(response.debugDescription)")
        }
    }

    @Test func aDechunkedBodyLosesItsTrailerField() throws {
        let response = "HTTP/1.1 200 OK\r\nTrailer: X-T\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: tv\r\n\r\n"
        let (got, _) = try Self.answer("GET / HTTP/1.0\r\nHost: a\r\n\r\n", response)
        #expect(got == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
    }

    @Test func theProxysOwnErrorTellsAnHTTP10KeepAliveClientItsConnectionIsKept() throws {
        var h = try Harness.reverse()
        _ = h.client("GET / HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n")
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        let a = h.upstream("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n")
        let got = try #require(a.clientWrites.first)
        #expect(got.hasPrefix("HTTP/1.1 502 ") && got.contains("\r\nConnection: keep-alive\r\n") && !a.closesClient)
    }

    @Test func anHTTP10RequestWithATransferEncodingClosesAfterItsAnswer() throws {
        var h = try Harness.reverse()
        _ = h.client("POST / HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n")
        _ = h.feed(.upstreamConnected(connectedAt: nil, tlsDoneAt: nil))
        let a = h.upstream(ares)
        #expect(a.closesClient && a.clientWrites.first?.contains("Connection: close\r\n") == true)
    }
}
