import Testing
import TapCore
import TapHTTP
import TapHTTPService
import TapNet

/// A fixed world for the server-connection machine: a clock, an unsent count and a budget the test sets.
final class FakeConnectionWorld: ServerConnectionEnvironment {
    var now: UInt64 = 1_000_000_000
    var unsent = 0
    var budgetLimit = Int.max
    var held = 0
    var tunnelled: Set<String> = []
    /// The gate: what `intakeWait(paced:)` answers (nil: open), and the `paced` flags it was asked with.
    var gate: ((Bool) -> IntakeWait?)?
    var gateAsked: [Bool] = []
    /// The wall clock the machine stamps requests with (nil: the protocol's default, no clock).
    var wall: Double?
    func monotonicNanos() -> UInt64 { now }
    func wallClock() -> Double { wall ?? 0 }
    func intakeWait(paced: Bool) -> IntakeWait? {
        gateAsked.append(paced)
        return gate?(paced)
    }
    func unsentByteCount() -> Int { unsent }
    func holdBudget(_ bytes: Int) -> Bool {
        held = bytes
        return bytes <= budgetLimit
    }
    func passesThrough(_ target: HostPort) -> Bool { tunnelled.contains(target.host) }
    /// The kernel's unacknowledged bytes (nil: the system does not say).
    var kernelUnsent: Int?
    func kernelUnsentBytes() -> Int? { kernelUnsent }
}

/// Drives a `ServerConnectionMachine` with byte arrays and keeps the actions, as the proxy's machine tests do; like the
/// I/O driver, it adds what it was asked to write to the unsent count, and feeds `written` when asked.
struct ConnectionHarness {
    var machine: ServerConnectionMachine
    let world = FakeConnectionWorld()

    init(policy: ConnectionPolicy = ConnectionPolicy(), acceptsConnect: Bool = false, errorShape: ConnectionErrorShape = .standard,
         absoluteTargetsInTunnels: Bool = true) {
        machine = ServerConnectionMachine(policy: policy, rules: .init(limits: HTTPLimits(), authorization: nil, acceptsConnect: acceptsConnect),
                                          errorShape: errorShape, absoluteTargetsInTunnels: absoluteTargetsInTunnels)
        let first = machine.start()
        #expect(first.armedDeadlines == [.idle])
    }

    /// Feeds an event, then (as the driver) every `written` the actions ask for; returns all the actions, in order, with
    /// the requests delivered (taken from the machine as the driver takes them).
    mutating func feed(_ event: ServerConnectionMachine.Event) -> ConnectionSteps {
        var all = ConnectionSteps()
        var next: ServerConnectionMachine.Event? = event
        while let e = next {
            next = nil
            let actions = machine.handle(e, world)
            for a in actions {
                if case let .write(h, b) = a { world.unsent += h.count + b.count }
                if case .reportWhenWritten = a { next = .written }
                if case let .deliver(n) = a, let r = machine.takeDelivered() { all.requests.append((n, r)) }
            }
            all.actions += actions
        }
        return all
    }

    mutating func send(_ text: String) -> ConnectionSteps { feed(.received(Array(text.utf8))) }
    mutating func answer(_ number: Int, _ body: String = "ok", close: Bool = false) -> ConnectionSteps {
        feed(.answered(number: number, HTTPReply(status: 200, headers: close ? [("Connection", "close")] : [], body: Array(body.utf8))))
    }
}

/// What one feed of the harness gave: the machine's actions and the requests the driver took for its `deliver`s.
struct ConnectionSteps {
    var actions: [ServerConnectionMachine.Action] = []
    var requests: [(number: Int, request: HTTPRequest)] = []
    var isEmpty: Bool { actions.isEmpty }
    func contains(where match: (ServerConnectionMachine.Action) -> Bool) -> Bool { actions.contains(where: match) }
    var delivered: [(number: Int, target: String)] { requests.map { ($0.number, $0.request.head.target) } }
    var written: String { actions.written }
    var armedDeadlines: [ConnectionDeadline] { actions.armedDeadlines }
    var closeReason: ServerConnectionMachine.CloseReason? { actions.closeReason }
    var pauses: Bool { actions.pauses }
    var resumes: Bool { actions.resumes }
}

extension Array where Element == ServerConnectionMachine.Action {
    var written: String {
        compactMap { if case let .write(h, b) = $0 { return String(decoding: h + b, as: UTF8.self) }; return nil }.joined()
    }
    var armedDeadlines: [ConnectionDeadline] { compactMap { if case let .arm(k, _) = $0 { return k }; return nil } }
    var closeReason: ServerConnectionMachine.CloseReason? {
        compactMap { if case let .close(_, r) = $0 { return r }; return nil }.first
    }
    var pauses: Bool { contains { if case .pauseReading = $0 { return true }; return false } }
    var resumes: Bool { contains { if case .resumeReading = $0 { return true }; return false } }
}

/// `ServerConnectionMachine`, bytes in and actions out: what `HTTPServer` does for the replayer, the sandbox, the web
/// inspector and the RReq listener, without a socket.
@Suite struct ServerConnectionMachineTests {
    static func get(_ path: String) -> String { "GET \(path) HTTP/1.1\r\nHost: a\r\n\r\n" }

    @Test func pipelinedRequestsAreDeliveredOneAtATimeInOrder() {
        var h = ConnectionHarness()
        let first = h.send(Self.get("/1") + Self.get("/2") + Self.get("/3"))
        #expect(first.delivered.map(\.target) == ["/1"], "one request with the handler at a time")
        #expect(h.answer(2).isEmpty, "an answer to a request the handler does not have is ignored")
        let second = h.answer(1, "one")
        #expect(second.written.hasSuffix("one") && second.delivered.map(\.target) == ["/2"])
        #expect(h.answer(1, "again").isEmpty, "a second answer to the same request is ignored")
        #expect(h.answer(2).delivered.map(\.number) == [3])
        let last = h.answer(3)
        #expect(last.delivered.isEmpty && last.armedDeadlines == [.idle] && last.closeReason == nil)
    }

    @Test func readAheadPausesPastTheCapAndResumesOnceAnswered() {
        var h = ConnectionHarness()
        #expect(h.send(Self.get("/slow")).delivered.count == 1)
        let chunk = String(repeating: Self.get("/next"), count: 2000) // ~70 KB a time while /slow is unanswered
        var paused = false
        for _ in 0..<6 where !paused { paused = h.send(chunk).pauses }
        #expect(paused && h.machine.intake.bufferedCount > ReadAheadLimit.pipelined.bytes
                && h.machine.intake.bufferedCount < ReadAheadLimit.pipelined.bytes + chunk.utf8.count + 1)
        #expect(h.send(chunk).isEmpty, "reading paused: nothing more is asked for")
        // Answering takes the next requests in turn; once all are answered, reading resumes.
        var number = 1
        var resumed = false
        while !resumed, number < 20_000 {
            let a = h.answer(number)
            resumed = a.resumes
            number += 1
            h.world.unsent = 0
        }
        #expect(resumed && h.machine.intake.isIdle)
    }

    @Test func budgetExhaustionAnswers503AndCloses() {
        var h = ConnectionHarness()
        h.world.budgetLimit = 10
        let a = h.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n")
        #expect(a.contains { if case .budgetExhausted = $0 { return true }; return false })
        #expect(a.written.hasPrefix("HTTP/1.1 503") && a.written.contains("--max-buffered"))
        #expect(a.closeReason == .refused(status: 503))
        #expect(h.send(Self.get("/after")).isEmpty, "nothing after a refusal is read")
    }

    @Test func eachDeadlineKind() {
        // idle: closes a connection between requests.
        var idle = ConnectionHarness(policy: ConnectionPolicy(headerTimeout: 2, idleTimeout: 5))
        #expect(idle.feed(.deadlinePassed(.idle)).closeReason == .deadline(.idle))

        // request: a head begun and not finished is answered 408.
        var slow = ConnectionHarness(policy: ConnectionPolicy(headerTimeout: 2, idleTimeout: 5))
        let begun = slow.send("GET / HTTP/1.1\r\nHo")
        #expect(begun.contains { if case .arm(.request, 2) = $0 { return true }; return false })
        #expect(slow.feed(.deadlinePassed(.idle)).isEmpty, "a deadline no longer armed is ignored")
        let timedOut = slow.feed(.deadlinePassed(.request))
        #expect(timedOut.written.hasPrefix("HTTP/1.1 408") && timedOut.written.contains("within 2 s") && timedOut.closeReason == .refused(status: 408))

        // halfClosed: a client that finished sending waits at most idleTimeout for its answer.
        var half = ConnectionHarness(policy: ConnectionPolicy(idleTimeout: 5))
        #expect(half.send(Self.get("/hang")).delivered.count == 1)
        let ended = half.feed(.inputEnded)
        #expect(ended.armedDeadlines == [.halfClosed] && ended.contains { if case .clientFinishedSending(1) = $0 { return true }; return false })
        #expect(half.feed(.deadlinePassed(.halfClosed)).closeReason == .deadline(.halfClosed))

        // stalledReader: re-armed for what is left while the client reads now and then, closed once it stops for idleTimeout.
        var stalled = ConnectionHarness(policy: ConnectionPolicy(idleTimeout: 10, output: OutputBackpressure(highWater: 100)))
        stalled.world.unsent = 101
        let paused = stalled.send(Self.get("/x"))
        #expect(paused.pauses && paused.armedDeadlines == [.stalledReader] && paused.delivered.isEmpty)
        stalled.world.now += 4_000_000_000
        stalled.world.unsent = 90 // took a little, not enough to go on
        #expect(stalled.feed(.outputDrained).isEmpty)
        stalled.world.now += 6_000_000_000
        let rearmed = stalled.feed(.deadlinePassed(.stalledReader))
        #expect(rearmed.contains { if case let .arm(.stalledReader, s) = $0 { return abs(s - 4) < 0.001 }; return false }, "\(rearmed)")
        stalled.world.now += 4_000_000_000
        #expect(stalled.feed(.deadlinePassed(.stalledReader)).closeReason == .deadline(.stalledReader))
    }

    @Test func aStalledReaderStopsAnsweringUntilItTakesHalf() {
        var h = ConnectionHarness(policy: ConnectionPolicy(output: OutputBackpressure(highWater: 1000)))
        #expect(h.send(Self.get("/1") + Self.get("/2") + Self.get("/3")).delivered.count == 1)
        let big = String(repeating: "a", count: 1200)
        let a = h.answer(1, big)
        #expect(a.delivered.isEmpty && a.pauses && a.armedDeadlines == [.stalledReader],
                "the answer just written is counted before the next request is taken")
        h.world.unsent = 600
        #expect(h.feed(.outputDrained).isEmpty, "more than half still waits")
        h.world.unsent = 500
        let going = h.feed(.outputDrained)
        #expect(going.delivered.map(\.target) == ["/2"] && going.contains { if case .cancelDeadline = $0 { return true }; return false })
    }

    /// The replayer's loop: an answer and the next pipelined request in one round, without a `written` round between
    /// them, while the answer cannot put the unsent count over the high-water mark even if the client takes none of it.
    @Test func theNextRequestIsTakenInTheAnswersRoundWhenItCannotReachTheHighWaterMark() {
        var h = ConnectionHarness(policy: ConnectionPolicy(output: OutputBackpressure(highWater: 1000)))
        #expect(h.send(Self.get("/1") + Self.get("/2")).delivered.count == 1)
        let actions = h.machine.handle(.answered(number: 1, HTTPReply(status: 200, body: Array("one".utf8))), h.world)
        #expect(!actions.contains { if case .reportWhenWritten = $0 { return true }; return false }, "\(actions)")
        #expect(actions.contains { if case .deliver(number: 2) = $0 { return true }; return false }, "\(actions)")
        #expect(h.machine.takeDelivered()?.head.target == "/2" && h.machine.takeDelivered() == nil, "the request is taken once")
    }

    /// An answer that could put the unsent count over the mark is counted for real before the next request is taken:
    /// the machine asks for `written`, and goes on then if the client took enough of it at once.
    @Test func anAnswerThatMayReachTheHighWaterMarkIsCountedOnceWritten() {
        var h = ConnectionHarness(policy: ConnectionPolicy(output: OutputBackpressure(highWater: 1000)))
        h.world.unsent = 300
        #expect(h.send(Self.get("/1") + Self.get("/2")).delivered.count == 1)
        let big = HTTPReply(status: 200, body: [UInt8](repeating: 0x61, count: 800)) // 300 + 800 + head > 1000
        let actions = h.machine.handle(.answered(number: 1, big), h.world)
        #expect(actions.contains { if case .reportWhenWritten = $0 { return true }; return false } && !actions.contains {
            if case .deliver = $0 { return true }; return false
        }, "\(actions)")
        h.world.unsent = 0 // the kernel took all of it when it was written
        let next = h.machine.handle(.written, h.world)
        #expect(next.contains { if case .deliver(number: 2) = $0 { return true }; return false } && !next.pauses, "\(next)")
    }

    @Test func aHalfClosedClientGetsItsAnswersThenTheConnectionCloses() {
        var h = ConnectionHarness()
        #expect(h.send(Self.get("/1") + Self.get("/2")).delivered.count == 1)
        _ = h.feed(.inputEnded)
        #expect(h.answer(1).delivered.map(\.target) == ["/2"])
        let last = h.answer(2, "two")
        #expect(last.written.hasSuffix("two") && last.closeReason == .inputEnded)
        #expect(last.contains { if case .close(afterFlush: true, _) = $0 { return true }; return false }, "the answers go out first")
        #expect(h.feed(.closed).contains { if case .ended(unanswered: nil) = $0 { return true }; return false })
    }

    @Test func aParseErrorMidPipelineIsAnsweredAfterTheRequestsBeforeIt() {
        var h = ConnectionHarness()
        let a = h.send(Self.get("/ok") + "GET / HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n" + Self.get("/never"))
        #expect(a.delivered.map(\.target) == ["/ok"] && a.written.isEmpty)
        let b = h.answer(1, "fine")
        #expect(b.written.hasPrefix("HTTP/1.1 200") && b.written.contains("HTTP/1.1 400") && b.closeReason == .refused(status: 400))
        #expect(b.delivered.isEmpty, "nothing after the malformed request is taken")
    }

    @Test func aClientThatClosesWithAnUnansweredRequestGaveUp() {
        var h = ConnectionHarness()
        #expect(h.send(Self.get("/slow")).delivered.count == 1)
        #expect(h.feed(.closed).contains { if case .ended(unanswered: 1) = $0 { return true }; return false })
        #expect(h.answer(1).isEmpty, "an answer after the close is dropped")
    }

    @Test func takingTheConnectionOverEndsTheMachinesPart() {
        var h = ConnectionHarness()
        #expect(h.send(Self.get("/fault") + Self.get("/next")).delivered.count == 1)
        let a = h.feed(.takenOver(number: 1))
        #expect(a.contains { if case .handOver(1) = $0 { return true }; return false } && a.delivered.isEmpty)
        #expect(h.send(Self.get("/more")).isEmpty)
    }

    @Test func answersWithConnectionCloseCloseAfterFlush() {
        var h = ConnectionHarness()
        #expect(h.send("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n" + Self.get("/after")).delivered.count == 1)
        let a = h.answer(1)
        #expect(a.written.contains("Connection: close") && a.closeReason == .answeredWithClose && a.delivered.isEmpty)
    }

    @Test func connectIsInterceptedOrPassedThrough() {
        var h = ConnectionHarness(acceptsConnect: true)
        let a = h.send("CONNECT acs.example:443 HTTP/1.1\r\nHost: acs.example:443\r\n\r\n")
        #expect(a.written.hasPrefix("HTTP/1.1 200 Connection established"))
        #expect(a.contains { if case .startTLS("acs.example", _) = $0 { return true }; return false })
        let inner = h.send(Self.get("/areq"))
        #expect(inner.delivered.map(\.target) == ["https://acs.example:443/areq"], "requests inside the tunnel name it")

        // The recorder resolves the tunnel's target itself: its requests come as the client sent them.
        var origin = ConnectionHarness(acceptsConnect: true, absoluteTargetsInTunnels: false)
        _ = origin.send("CONNECT acs.example:443 HTTP/1.1\r\nHost: acs.example:443\r\n\r\n")
        #expect(origin.send(Self.get("/areq")).delivered.map(\.target) == ["/areq"])

        var p = ConnectionHarness(acceptsConnect: true)
        p.world.tunnelled = ["bank.example"]
        let t = p.send("CONNECT bank.example:443 HTTP/1.1\r\nHost: bank.example:443\r\n\r\n\u{16}\u{03}")
        #expect(t.contains { if case let .passThrough(target, early) = $0 { return target.host == "bank.example" && early == [0x16, 0x03] }; return false })
        #expect(p.send("more").isEmpty, "every later byte is the tunnel's")
    }

    /// The gate (the recorder's pacing and writer waits): asked before a request is taken, it holds the request back with
    /// reading paused until `intakeOpened`; a pace is given once per request, then the writer wait is asked for.
    @Test func theGateHoldsTheNextRequestUntilItOpens() {
        var h = ConnectionHarness()
        h.world.gate = { paced in paced ? .untilOpened : .pace(seconds: 0.002) }
        let first = h.send(Self.get("/1"))
        #expect(first.delivered.isEmpty && first.pauses && first.contains {
            if case .waitBeforeNextRequest(.pace(seconds: 0.002)) = $0 { return true }; return false
        }, "\(first.actions)")
        #expect(h.send(Self.get("/2")).delivered.isEmpty, "nothing is taken while the gate is shut")
        let afterPace = h.feed(.intakeOpened)
        #expect(afterPace.delivered.isEmpty && afterPace.contains { if case .waitBeforeNextRequest(.untilOpened) = $0 { return true }; return false },
                "paced once, then held for the writer: \(afterPace.actions)")
        h.world.gate = nil
        let opened = h.feed(.intakeOpened)
        #expect(opened.delivered.map(\.target) == ["/1"] && opened.resumes)
        #expect(h.world.gateAsked == [false, true, true], "the pace is not given twice to one request")
        #expect(h.answer(1).delivered.map(\.target) == ["/2"])
        #expect(h.world.gateAsked.last == false, "the next request starts afresh (it may be paced)")
        #expect(h.feed(.intakeOpened).isEmpty, "an opening not waited for is ignored")
    }

    /// A gate is asked only when the client has sent something of its next request (an idle connection is not paced).
    @Test func theGateIsNotAskedForAnIdleConnection() {
        var h = ConnectionHarness()
        h.world.gate = { _ in .untilOpened }
        #expect(h.send("").isEmpty && h.world.gateAsked.isEmpty)
        #expect(h.feed(.inputEnded).closeReason == .inputEnded && h.world.gateAsked.isEmpty)
    }

    /// Each refusal in the shape the connection is given, and the same bytes as before in the standard one; a request cut
    /// short by a FIN is answered only where the shape says so.
    @Test func errorsAreAnsweredInTheConnectionsShape() {
        let shape = ConnectionErrorShape { refusal in
            let (status, message) = ConnectionErrorShape.message(for: refusal) ?? (400, "cut short")
            return .init(status: status, message: message, bytes: Array("HTTP/1.1 \(status) X\r\nX-Shape: test\r\n\r\n\(message)".utf8))
        }
        var malformed = ConnectionHarness(errorShape: shape)
        let a = malformed.send("GET / HTTP/1.1\r\nBad Header\r\n\r\n")
        #expect(a.written.hasPrefix("HTTP/1.1 400 X\r\nX-Shape: test") && a.closeReason == .refused(status: 400))
        #expect(a.contains { if case .refusing(400, _) = $0 { return true }; return false })

        var slow = ConnectionHarness(policy: ConnectionPolicy(headerTimeout: 3), errorShape: shape)
        _ = slow.send("GET / HTTP/1.1\r\nHo")
        #expect(slow.feed(.deadlinePassed(.request)).written.hasSuffix("request not received within 3 s"))

        var cut = ConnectionHarness(errorShape: shape)
        _ = cut.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc")
        let ended = cut.feed(.inputEnded)
        #expect(ended.written.hasSuffix("cut short") && ended.closeReason == .refused(status: 400))

        var standard = ConnectionHarness()
        _ = standard.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc")
        let dropped = standard.feed(.inputEnded)
        #expect(dropped.written.isEmpty && dropped.closeReason == .inputEnded, "the standard shape drops it, as before")
        var standardMalformed = ConnectionHarness()
        let std = standardMalformed.send("GET / HTTP/1.1\r\nBad Header\r\n\r\n").written
        #expect(std.hasPrefix("HTTP/1.1 400") && std.contains("Content-Type: application/json") && std.contains("Connection: close")
                && std.hasSuffix("}") && std.contains("{\"error\":"), "\(std)")
    }

    /// With `budgetCountsRequestInFlight` (the recorder), the body being answered stays on the budget until its answer.
    @Test func theBudgetCanCountTheRequestInFlight() {
        var h = ConnectionHarness(policy: ConnectionPolicy(budgetCountsRequestInFlight: true))
        #expect(h.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n" + String(repeating: "b", count: 100)).delivered.count == 1)
        #expect(h.world.held == 100, "the body in flight is held: \(h.world.held)")
        _ = h.send("GET /next HTTP")
        #expect(h.world.held == 100 + 14)
        _ = h.answer(1)
        #expect(h.world.held == 14, "answered: only what was read and not taken")

        var plain = ConnectionHarness()
        _ = plain.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n" + String(repeating: "b", count: 100))
        #expect(plain.world.held == 0, "HTTPServer's connections count only the bytes not taken")
    }

    @Test func continueIsSentBeforeTheBody() {
        var h = ConnectionHarness()
        let a = h.send("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        #expect(a.written == "HTTP/1.1 100 Continue\r\n\r\n" && a.delivered.isEmpty && a.armedDeadlines == [.request])
        #expect(h.send("hi").delivered.count == 1)
    }

    /// The recorder forwards the upstream's head as it came: a raw answer goes out byte for byte (not rebuilt from an
    /// HTTPReply, which would reorder or reword its fields), and one that does not keep the connection closes it after.
    @Test func aRawAnswerIsWrittenAsGiven() {
        var h = ConnectionHarness()
        #expect(h.send(Self.get("/1") + Self.get("/2")).delivered.count == 1)
        let head = Array("HTTP/1.1 200 Fine\r\nx-odd:  spaced \r\nContent-Length: 3\r\n\r\n".utf8)
        let a = h.feed(.answeredRaw(number: 1, head: head, body: Array("one".utf8), keepAlive: true))
        #expect(a.written == String(decoding: head, as: UTF8.self) + "one", "\(a.written)")
        #expect(a.delivered.map(\.target) == ["/2"] && a.closeReason == nil)
        #expect(h.feed(.answeredRaw(number: 1, head: head, body: [], keepAlive: true)).isEmpty, "a second answer is ignored")
        let b = h.feed(.answeredRaw(number: 2, head: head, body: Array("two".utf8), keepAlive: false))
        #expect(b.written.hasSuffix("two") && b.closeReason == .answeredWithClose && b.delivered.isEmpty)
        #expect(b.contains { if case .close(afterFlush: true, _) = $0 { return true }; return false })

        var byRequest = ConnectionHarness()
        _ = byRequest.send("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        #expect(byRequest.feed(.answeredRaw(number: 1, head: head, body: [], keepAlive: true)).closeReason == .answeredWithClose,
                "a request that asked to close closes whatever the answer says")
    }

    /// Each request carries the wall-clock moment its first byte arrived (the recorder's requestStart), not when it was
    /// complete or taken; without a clock (HTTPServer), 0.
    @Test func eachRequestCarriesWhenItsFirstByteArrived() {
        var h = ConnectionHarness()
        h.world.wall = 100
        _ = h.send("GET /1 HTTP/1.1\r\n")
        h.world.wall = 101
        #expect(h.send("Host: a\r\n\r\nGET /2 HTTP/1.1\r\n").delivered.count == 1)
        #expect(h.machine.deliveredStartedAt == 100, "\(h.machine.deliveredStartedAt)")
        h.world.wall = 102
        _ = h.send("Host: a\r\n\r\n")
        h.world.wall = 103
        #expect(h.answer(1).delivered.map(\.target) == ["/2"])
        #expect(h.machine.deliveredStartedAt == 101, "the pipelined request began with the bytes after the first: \(h.machine.deliveredStartedAt)")
        h.world.wall = 104
        _ = h.answer(2)
        h.world.wall = 105
        _ = h.send(Self.get("/3"))
        #expect(h.machine.deliveredStartedAt == 105)

        var plain = ConnectionHarness()
        _ = plain.send(Self.get("/x"))
        #expect(plain.machine.deliveredStartedAt == 0, "no clock, no start time")
    }

    /// A client that reads slowly behind a large kernel send buffer frees too little for this end's own queue to move
    /// (no `outputDrained` for the whole idle timeout), but the kernel's queue shrinks: once the idle timeout has passed
    /// the machine looks at that queue, and again a moment later; shrunk, the client reads and the wait starts again;
    /// the same, it is closed. Where the system does not say (nil), it is closed at the idle timeout, as before.
    @Test func aClientThatTakesBytesFromTheKernelsQueueIsNotAStalledReader() {
        var h = ConnectionHarness(policy: ConnectionPolicy(idleTimeout: 5, output: OutputBackpressure(highWater: 100)))
        h.world.unsent = 101
        h.world.kernelUnsent = 2_500_000
        #expect(h.send(Self.get("/x")).armedDeadlines == [.stalledReader])
        h.world.now += 5_000_000_000
        let look = h.feed(.deadlinePassed(.stalledReader))
        #expect(look.closeReason == nil && look.contains { if case let .arm(.stalledReader, s) = $0 { return s == 1 }; return false }, "\(look)")
        h.world.now += 1_000_000_000
        h.world.kernelUnsent = 2_480_000 // the client read 20 KB from the kernel's queue in that second
        let reading = h.feed(.deadlinePassed(.stalledReader))
        #expect(reading.closeReason == nil && reading.contains { if case let .arm(.stalledReader, s) = $0 { return s == 5 }; return false }, "\(reading)")
        h.world.now += 5_000_000_000 // and then nothing
        #expect(h.feed(.deadlinePassed(.stalledReader)).closeReason == nil, "one more look")
        h.world.now += 1_000_000_000
        #expect(h.feed(.deadlinePassed(.stalledReader)).closeReason == .deadline(.stalledReader))

        var unknown = ConnectionHarness(policy: ConnectionPolicy(idleTimeout: 5, output: OutputBackpressure(highWater: 100)))
        unknown.world.unsent = 101
        _ = unknown.send(Self.get("/x"))
        unknown.world.now += 5_000_000_000
        #expect(unknown.feed(.deadlinePassed(.stalledReader)).closeReason == .deadline(.stalledReader))
        #expect(ConnectionPolicy(idleTimeout: 0.3).kernelProbeSeconds == 0.06 && ConnectionPolicy(idleTimeout: 120).kernelProbeSeconds == 1)
    }

    /// What a client sends after its CONNECT in the same write (a ClientHello that did not wait for the 200) is the start
    /// of the tunnel's TLS, handed to the TLS session; it is never parsed or delivered as a request.
    @Test func bytesSentWithAnInterceptedConnectStartItsTLS() {
        var h = ConnectionHarness(acceptsConnect: true)
        let smuggled = "POST /smuggled HTTP/1.1\r\nHost: acs.example\r\nContent-Length: 4\r\n\r\nsecr"
        let a = h.send("CONNECT acs.example:443 HTTP/1.1\r\nHost: acs.example:443\r\n\r\n" + smuggled)
        #expect(a.written.hasPrefix("HTTP/1.1 200 Connection established") && a.delivered.isEmpty)
        #expect(a.contains { if case let .startTLS("acs.example", early) = $0 { return early == Array(smuggled.utf8) }; return false }, "\(a)")
        // What comes out of the TLS session afterwards is parsed from its first byte.
        #expect(h.send(Self.get("/areq")).delivered.count == 1)
    }
}
