import TapCore
import TapHTTP
import TapNet

/// How a server connection is paced and bounded: the deadlines, how far it reads ahead of its answers, and how many
/// answer bytes may wait for a client that does not read them. One set of policy types for every 3dstape server
/// connection (`ServerConnectionMachine`), under `HTTPServer` and the recording proxy's client side (`ProxySessionMachine`).
public struct ConnectionPolicy: Sendable {
    /// A request begun and not complete within this many seconds is answered 408 and the connection closed.
    public var headerTimeout: Double
    /// An idle keep-alive connection is closed after this many seconds; so is one whose client has not read any of its
    /// waiting answers for as long, and a half-closed one still waiting for its answer.
    public var idleTimeout: Double
    /// How far the connection reads ahead of its answers (pipelined requests) before reading pauses.
    public var readAhead: ReadAheadLimit
    /// When the connection stops reading (and answering) for a client that does not read its answers.
    public var output: OutputBackpressure
    /// The memory budget counts the body of the request being answered as well as the bytes read and not taken (the
    /// recorder, which holds the body until the exchange is recorded); otherwise only the bytes not taken.
    public var budgetCountsRequestInFlight: Bool

    public init(headerTimeout: Double = 30, idleTimeout: Double = 120, readAhead: ReadAheadLimit = .pipelined,
                output: OutputBackpressure = OutputBackpressure(highWater: 1 << 20), budgetCountsRequestInFlight: Bool = false) {
        self.headerTimeout = headerTimeout
        self.idleTimeout = idleTimeout
        self.readAhead = readAhead
        self.output = output
        self.budgetCountsRequestInFlight = budgetCountsRequestInFlight
    }

    /// The seconds a deadline of this kind runs for.
    public func seconds(for deadline: ConnectionDeadline) -> Double {
        switch deadline {
        case .idle, .halfClosed, .stalledReader: return idleTimeout
        case .request: return headerTimeout
        }
    }

    /// How long after the stalled-reader deadline the kernel's queue is looked at again (a fifth of the idle timeout,
    /// at most a second): long enough for a slow reader to take a few bytes, short enough that a stalled one is closed
    /// soon after the idle timeout. Looking right after the pause would count the bytes the client's kernel takes into
    /// its receive buffer without the client reading.
    public var kernelProbeSeconds: Double { min(1, idleTimeout / 5) }
}

/// What a connection waits for when a deadline is armed; the kind decides what happens when it passes.
public enum ConnectionDeadline: Sendable, Equatable {
    /// Between requests (`idleTimeout`): the connection closes.
    case idle
    /// A request begun and not complete (`headerTimeout`): answered 408, then the connection closes.
    case request
    /// The client half-closed and its answer is not given yet (`idleTimeout`): the connection closes.
    case halfClosed
    /// Answers wait for a client that does not read them (`idleTimeout` without progress): the connection closes.
    case stalledReader
}

/// Bytes read ahead of the answers (pipelined requests) while a request is being answered; past it, reading pauses
/// and the rest waits in the kernel (hardening: 1.5 GiB sent behind one unanswered GET was once buffered).
public struct ReadAheadLimit: Sendable, Equatable {
    public var bytes: Int
    public init(bytes: Int) { self.bytes = bytes }
    /// What every 3dstape server holds ahead: 256 KiB.
    public static let pipelined = ReadAheadLimit(bytes: 256 * 1024)
    /// Whether `buffered` bytes held ahead are more than allowed (reading pauses).
    public func exceeded(by buffered: Int) -> Bool { buffered > bytes }
}

/// Output backpressure: while more than `highWater` answer bytes wait for the client, the connection stops reading
/// and answering; it goes on once no more than `lowWater` are left. One answer larger than `highWater` is still sent whole.
public struct OutputBackpressure: Sendable, Equatable {
    public var highWater: Int
    public var lowWater: Int
    /// `lowWater` defaults to half of `highWater`.
    public init(highWater: Int, lowWater: Int? = nil) {
        self.highWater = highWater
        self.lowWater = lowWater ?? highWater / 2
    }
    /// Too much waits for the client: stop.
    public func shouldPause(unsent: Int) -> Bool { unsent > highWater }
    /// Enough was taken: go on.
    public func shouldResume(unsent: Int) -> Bool { unsent <= lowWater }
}

/// An error a connection answers itself, before (or instead of) a handler: what happened, not yet its bytes.
public enum ConnectionRefusal: Sendable {
    /// The shared budget of request bytes held in memory is spent (503).
    case overBudget
    /// A request begun and not complete within `ConnectionPolicy.headerTimeout` (408).
    case requestTimedOut(seconds: Double)
    /// The intake refused the request: malformed, too large, credentials missing, a CONNECT not taken (its status,
    /// message and extra header fields, e.g. a credentials challenge).
    case refused(status: Int, message: String, headers: [(String, String)])
    /// The client finished sending (a FIN) in the middle of a request.
    case cutShort
}

/// How a connection words the errors it answers itself: the status, message and whole answer (sent with
/// `Connection: close`) for each `ConnectionRefusal`, or nil to close without an answer. `HTTPServer` answers in the
/// one error shape (`standard`); the recording proxy in its own (`X-3dstape-Error`, its members), so each keeps its
/// wire bytes.
public struct ConnectionErrorShape: Sendable {
    /// One error answer: what the connection logs, and the bytes it writes.
    public struct Answer: Sendable {
        public var status: Int
        public var message: String
        public var bytes: [UInt8]
        public init(status: Int, message: String, bytes: [UInt8]) {
            self.status = status
            self.message = message
            self.bytes = bytes
        }
    }

    public let answer: @Sendable (ConnectionRefusal) -> Answer?
    public init(answer: @escaping @Sendable (ConnectionRefusal) -> Answer?) { self.answer = answer }

    /// The message every 3dstape server gives for a refusal (the recorder's budget message names the limit apart).
    public static func message(for refusal: ConnectionRefusal) -> (status: Int, message: String)? {
        switch refusal {
        case .overBudget: return (503, "request bytes held in memory exceed --max-buffered; try again")
        case let .requestTimedOut(seconds): return (408, "request not received within \(Checked.clampedInt(seconds)) s")
        case let .refused(status, message, _): return (status, message)
        case .cutShort: return nil
        }
    }

    /// `HTTPErrorAnswer`'s JSON body; a request cut short by a FIN is dropped without an answer.
    public static let standard = ConnectionErrorShape { refusal in
        guard let (status, message) = ConnectionErrorShape.message(for: refusal) else { return nil }
        var headers: [(String, String)] = []
        if case let .refused(_, _, extra) = refusal { headers = extra }
        return Answer(status: status, message: message,
                      bytes: HTTPErrorAnswer.reply(status: status, message, headers: headers).bytes(keepAlive: false))
    }
}

/// Why a connection's next request waits before it is taken (the recorder's session writer falling behind).
public enum IntakeWait: Sendable, Equatable {
    /// A pause of this many seconds, at most once per request (pacing while the writer falls behind).
    case pace(seconds: Double)
    /// Until the driver feeds `intakeOpened` (the writer caught up).
    case untilOpened
}

/// What a `ServerConnectionMachine` asks of the world around it besides its events: the clock, the connection's unsent
/// byte count and the server's shared memory budget. The I/O driver (`HTTPServer`) implements it; tests give fixed values.
public protocol ServerConnectionEnvironment {
    /// Monotonic nanoseconds (the stalled-reader deadline).
    func monotonicNanos() -> UInt64
    /// Answer bytes queued and not yet taken by the client. Asked once before each request is taken.
    func unsentByteCount() -> Int
    /// Tells the shared budget how many request bytes this connection holds; false when that is over the limit.
    func holdBudget(_ bytes: Int) -> Bool
    /// Whether a CONNECT to this target is tunnelled byte for byte instead of intercepted.
    func passesThrough(_ target: HostPort) -> Bool
    /// The gate before each request is taken: nil to take it now, or how long it waits (then reading pauses until
    /// `intakeOpened` or the pace has passed). `paced`: this request already had its pacing pause. Asked only when the
    /// client has sent something of its next request.
    func intakeWait(paced: Bool) -> IntakeWait?
    /// Wall-clock seconds, stamped on each request as the moment its first byte arrived (`deliveredStartedAt`): the
    /// recorder records it as the exchange's start.
    func wallClock() -> Double
    /// Answer bytes in the kernel's send queue that the client has not acknowledged, where the system says (Linux), or
    /// nil. Asked only once the stalled-reader deadline has passed, and again `ConnectionPolicy.kernelProbeSeconds` later:
    /// a queue that shrank between the two is a client that reads, slowly, behind a send buffer too large for this end's
    /// own queue to move within the idle timeout.
    func kernelUnsentBytes() -> Int?
}

extension ServerConnectionEnvironment {
    /// No gate: every request is taken as soon as it is complete.
    public func intakeWait(paced: Bool) -> IntakeWait? { nil }
    /// No clock: requests carry no start time (the handlers keep their own clocks).
    public func wallClock() -> Double { 0 }
    /// Not known: only this end's own queue (`outputDrained`) shows that the client reads.
    public func kernelUnsentBytes() -> Int? { nil }
}

/// The server side of one HTTP/1.1 connection as a state machine, free of I/O (sans-IO, as `ProxySessionMachine`):
/// events in (bytes received, input ended, output drained, the answer to request N, a deadline passed, the handler took
/// the connection over, the connection closed), actions out (deliver request N, write, pause/resume reading, arm or
/// cancel a deadline, start TLS or a tunnel for a CONNECT, close with a reason). Requests are taken by
/// `HTTPRequestIntake` one at a time, pipelined ones in turn; while one is with the handler, at most
/// `policy.readAhead` bytes are read ahead; while more than `policy.output.highWater` answer bytes wait for the client,
/// nothing is read or answered; a half-closed client gets its answers, then the connection closes. `HTTPServer` is its
/// I/O driver; the recorder's `ProxySessionMachine` embeds one for its client side (its handler is the upstream).
public struct ServerConnectionMachine {
    /// Something that happened to the connection.
    public enum Event {
        /// Bytes from the client.
        case received([UInt8])
        /// The client finished sending (a FIN): what it asked is answered, then the connection closes.
        case inputEnded
        /// The client took queued answer bytes (the environment's unsent count went down).
        case outputDrained
        /// The handler's answer to request `number` (a second answer, or one to an earlier request, is ignored).
        case answered(number: Int, HTTPReply)
        /// The answer to request `number` as wire bytes already made (the recorder forwards the upstream's head as it
        /// came, which `answered` would rebuild); `keepAlive` false closes the connection once they are sent.
        case answeredRaw(number: Int, head: [UInt8], body: [UInt8], keepAlive: Bool)
        /// The handler takes the connection over instead of replying to request `number`.
        case takenOver(number: Int)
        /// The deadline of this kind, armed by the machine, passed.
        case deadlinePassed(ConnectionDeadline)
        /// The wait the gate asked for (`waitBeforeNextRequest`) is over: take the next request.
        case intakeOpened
        /// The actions that asked for it (`reportWhenWritten`) are performed: the unsent count includes their writes.
        /// Asked for only when the answers just written may hold reading back; otherwise the next request is taken in
        /// the same round as the answer.
        case written
        /// The connection closed (either side, or it failed).
        case closed
    }

    /// Why the machine closes the connection.
    public enum CloseReason: Equatable, Sendable {
        /// The answer said `Connection: close` (or the request asked for it).
        case answeredWithClose
        /// An error was answered (malformed, refused, over the budget, a request deadline).
        case refused(status: Int)
        /// The client finished sending and every complete request was answered.
        case inputEnded
        /// A deadline passed (idle, half-closed, stalled reader).
        case deadline(ConnectionDeadline)
        /// A CONNECT could not be intercepted (no TLS for it).
        case cannotIntercept
    }

    /// Something the driver must do.
    public enum Action {
        /// Hand request `number` to the handler (its answer comes back as `answered` or `takenOver`); the request is
        /// the machine's until the driver takes it with `takeDelivered()` (an action stays small to copy, and no box is
        /// made per request).
        case deliver(number: Int)
        /// Feed `written` once the actions before this one are performed: the answers just written may put the unsent
        /// count over `policy.output.highWater` (counted as if the client had taken none of them), so the next request
        /// is taken only when the count includes them (output backpressure counts what is really queued).
        case reportWhenWritten
        /// Bytes for the client; a message's head and body are given apart and sent together without being joined.
        case write([UInt8], then: [UInt8] = [])
        case pauseReading
        case resumeReading
        /// Send `deadlinePassed(kind)` after this many seconds (replacing any deadline armed before).
        case arm(ConnectionDeadline, seconds: Double)
        case cancelDeadline
        /// Close the connection, after what is queued is sent or at once.
        case close(afterFlush: Bool, reason: CloseReason)
        /// Terminate the client's TLS (a CONNECT answered 200) with a leaf for this host. `early`: what the client sent
        /// after its CONNECT in the same stream, the start of its TLS (a ClientHello sent without waiting for the 200),
        /// which the driver gives the TLS session as received; never parsed as HTTP.
        case startTLS(serverName: String, early: [UInt8])
        /// Tunnel the CONNECT to `target` byte for byte, starting with `early` (what the client sent after its CONNECT);
        /// every later byte is the tunnel's.
        case passThrough(HostPort, early: [UInt8])
        /// Give the connection to whoever answers request `number`: the machine takes nothing more from it.
        case handOver(number: Int)
        /// The client finished sending while request `number` is unanswered (worth a note: a client that gave up looks
        /// the same until then).
        case clientFinishedSending(number: Int)
        /// The shared budget refused this connection (the driver logs it, throttled); its 503 follows.
        case budgetExhausted
        /// The connection answers an error itself (its `write` and `close` follow): for the driver's log.
        case refusing(status: Int, message: String)
        /// The gate asked the next request to wait (reading is paused): feed `intakeOpened` once the wait is over (after
        /// `seconds` for a pace, or when the driver decides for `untilOpened`).
        case waitBeforeNextRequest(IntakeWait)
        /// The connection is over: release its budget. `unanswered`: the request the handler had, if any (a client that
        /// gave up).
        case ended(unanswered: Int?)
    }

    public let policy: ConnectionPolicy
    /// How the errors the connection answers itself are worded.
    public let errorShape: ConnectionErrorShape
    /// Requests inside an intercepted CONNECT tunnel are delivered with an absolute `https://host:port/path` target (as
    /// `HTTPServer`'s handlers route them); false delivers them as the client sent them (the recorder, which resolves the
    /// tunnel's target itself).
    public let absoluteTargetsInTunnels: Bool
    /// Requests as every 3dstape server takes them (parsing, limits, credentials, CONNECT, `100 Continue`).
    public private(set) var intake: HTTPRequestIntake
    /// A request is with the handler, unanswered.
    public private(set) var busy = false
    /// The number of the last request delivered (a `respond` for an earlier one, called again, is ignored).
    public private(set) var delivered = 0
    /// When the last request delivered began: the environment's wall clock as its first byte arrived.
    public private(set) var deliveredStartedAt: Double = 0
    /// The connection closes once what is queued is sent (an answer with `Connection: close`, a refusal, a hand-over).
    public private(set) var closing = false
    /// The connection closed; nothing more happens.
    public private(set) var ended = false
    /// The client half-closed: it sends nothing more, and the connection closes after the last answer.
    public private(set) var inputEnded = false
    /// Reading is paused by this machine (read-ahead or output backpressure).
    public private(set) var readingPaused = false
    /// Reading and answering stopped because too many answer bytes wait for the client.
    public private(set) var pausedForOutput = false
    /// The deadline armed now, if any.
    public private(set) var armed: ConnectionDeadline?
    /// The connection is a CONNECT tunnelled untouched: every byte is the tunnel's, none the machine's.
    public private(set) var tunnelled = false
    /// The next request waits for the gate (`waitBeforeNextRequest`).
    public private(set) var waitingAtGate = false
    /// The next request has had its pacing pause (it is not paced twice).
    private var pacedOnce = false
    /// The body of the request being answered, when the budget counts it (`budgetCountsRequestInFlight`).
    private var bodyInFlight = 0
    /// When the client last took queued bytes, and what the kernel said at the last look: the stalled-reader deadline.
    private var stalledReader = StalledReaderWatch()
    /// Whether the request with the handler asked to keep the connection (read once, as it is delivered).
    public private(set) var keepAlive = true
    /// The request of the last `deliver`, until the driver takes it.
    private var toDeliver: HTTPRequest?
    /// Bytes of the `write` actions of the event being handled: the driver has not performed them yet, so the unsent
    /// count the environment gives does not include them.
    private var writing = 0
    private var actions: [Action] = []

    public init(policy: ConnectionPolicy, rules: HTTPRequestIntake.Rules, errorShape: ConnectionErrorShape = .standard,
                absoluteTargetsInTunnels: Bool = true) {
        self.policy = policy
        self.errorShape = errorShape
        self.absoluteTargetsInTunnels = absoluteTargetsInTunnels
        intake = HTTPRequestIntake(rules: rules)
    }

    /// Arms the idle deadline (a new connection starts idle).
    public mutating func start() -> [Action] {
        arm(.idle)
        defer { actions = [] }
        return actions
    }

    /// The request of the `deliver` just returned (nil once taken): the driver takes it when it performs the action.
    public mutating func takeDelivered() -> HTTPRequest? { toDeliver.take() }

    /// Feeds one event; returns what the driver must do, in order. A `deliver` is always the last action: what follows
    /// it comes with the answer; so is `reportWhenWritten`.
    public mutating func handle(_ event: Event, _ env: some ServerConnectionEnvironment) -> [Action] {
        var out: [Action] = []
        handle(event, env, into: &out)
        return out
    }

    /// Feeds one event and appends what the driver must do to `out` (a buffer the driver keeps, so that no array is
    /// made per event).
    public mutating func handle(_ event: Event, _ env: some ServerConnectionEnvironment, into out: inout [Action]) {
        guard !ended, !tunnelled || event.isClosed else { return }
        writing = 0
        swap(&actions, &out)
        defer { swap(&actions, &out) }
        switch event {
        case let .received(bytes): received(bytes, env)
        case .inputEnded: endInput(env)
        case .outputDrained: drained(env)
        case let .answered(number, reply): answered(number, reply, env)
        case let .answeredRaw(number, head, body, keepAlive): answeredRaw(number, head, body, keepAlive: keepAlive, env)
        case let .takenOver(number): takenOver(number)
        case let .deadlinePassed(kind): deadlinePassed(kind, env)
        case .intakeOpened: intakeOpened(env)
        case .written: takeNextRequest(env)
        case .closed: closed()
        }
    }

    // MARK: events

    private mutating func received(_ bytes: [UInt8], _ env: some ServerConnectionEnvironment) {
        guard !closing else { return }
        intake.received(bytes, wallClock: env.wallClock())
        guard env.holdBudget(intake.bufferedCount &+ bodyInFlight) else {
            actions.append(.budgetExhausted)
            refuse(.overBudget)
            return
        }
        if busy || pausedForOutput || waitingAtGate {
            // Not taking requests now: hold a little of what follows, then let the rest wait in the kernel.
            if policy.readAhead.exceeded(by: intake.bufferedCount), !readingPaused { pauseReading() }
            return
        }
        takeNextRequest(env)
    }

    private mutating func endInput(_ env: some ServerConnectionEnvironment) {
        // A half-close is not an abort: what was asked is answered, then the connection closes.
        inputEnded = true
        readingPaused = false // the connection reads no more whatever this machine asked
        if busy {
            actions.append(.clientFinishedSending(number: delivered))
            arm(.halfClosed)
        } else if !pausedForOutput, !closing, !waitingAtGate {
            takeNextRequest(env)
        }
    }

    private mutating func intakeOpened(_ env: some ServerConnectionEnvironment) {
        guard waitingAtGate else { return }
        waitingAtGate = false
        guard !closing else { return }
        if !inputEnded { resumeReading() }
        takeNextRequest(env)
    }

    private mutating func drained(_ env: some ServerConnectionEnvironment) {
        stalledReader.drained(at: env.monotonicNanos())
        guard pausedForOutput, policy.output.shouldResume(unsent: env.unsentByteCount()) else { return }
        pausedForOutput = false
        cancelDeadline()
        takeNextRequest(env)
    }

    private mutating func answered(_ number: Int, _ reply: HTTPReply, _ env: some ServerConnectionEnvironment) {
        guard let keepAlive = accept(number) else { return }
        sendAnswer(reply.head(keepAlive: keepAlive), reply.body, keepAlive: keepAlive, env)
    }

    private mutating func answeredRaw(_ number: Int, _ head: [UInt8], _ body: [UInt8], keepAlive answerKeepsAlive: Bool,
                                      _ env: some ServerConnectionEnvironment) {
        guard let keepAlive = accept(number) else { return }
        sendAnswer(head, body, keepAlive: keepAlive && answerKeepsAlive, env)
    }

    /// Writes the answer to the request with the handler, then closes or takes the next request.
    private mutating func sendAnswer(_ head: [UInt8], _ body: [UInt8], keepAlive: Bool, _ env: some ServerConnectionEnvironment) {
        if bodyInFlight > 0 {
            bodyInFlight = 0
            _ = env.holdBudget(intake.bufferedCount)
        }
        write(head, then: body)
        if !keepAlive {
            closing = true
            cancelDeadline()
            actions.append(.close(afterFlush: true, reason: .answeredWithClose))
            return
        }
        takeNextRequest(env)
    }

    private mutating func takenOver(_ number: Int) {
        guard accept(number) != nil else { return }
        closing = true
        cancelDeadline()
        actions.append(.handOver(number: number))
    }

    /// The request whose answer this is was the one with the handler: it is answered (even by a hand-over, so that a
    /// close from here on is not the client giving up). Returns whether the request asked to keep the connection.
    private mutating func accept(_ number: Int) -> Bool? {
        guard busy, number == delivered else { return nil }
        busy = false
        return keepAlive
    }

    private mutating func deadlinePassed(_ kind: ConnectionDeadline, _ env: some ServerConnectionEnvironment) {
        guard armed == kind, !closing else { return }
        armed = nil
        switch kind {
        case .idle:
            if !busy { close(.deadline(.idle)) }
        case .request:
            guard !busy else { return }
            refuse(.requestTimedOut(seconds: policy.headerTimeout))
        case .halfClosed:
            close(.deadline(.halfClosed)) // an answer that never came (a hang) does not hold the connection for ever
        case .stalledReader:
            switch stalledReader.deadlinePassed(at: env.monotonicNanos(), policy: policy, kernelUnsent: { env.kernelUnsentBytes() }) {
            case let .wait(seconds):
                armed = .stalledReader
                actions.append(.arm(.stalledReader, seconds: seconds))
            case .stalled:
                close(.deadline(.stalledReader))
            }
        }
    }

    private mutating func closed() {
        ended = true
        armed = nil
        intake = HTTPRequestIntake(rules: intake.rules) // what the client sent and was not taken is freed now
        toDeliver = nil
        actions.append(.ended(unanswered: busy ? delivered : nil))
        busy = false
    }

    // MARK: requests

    /// Takes the client's next request: stops at a request delivered (its answer goes on from there), at an incomplete
    /// request, or while too many answer bytes wait for the client.
    private mutating func takeNextRequest(_ env: some ServerConnectionEnvironment) {
        guard !busy, !closing, !pausedForOutput, !waitingAtGate else { return }
        // What waits for the client once this event's writes are performed is at most what waits now plus them (the
        // client may take some at once). Under the high-water mark that bound decides; over it, the real count does,
        // once the writes are performed (`written`).
        if policy.output.shouldPause(unsent: env.unsentByteCount() &+ writing) {
            if writing > 0 {
                actions.append(.reportWhenWritten)
                return
            }
            // The client is not reading its answers: stop reading and answering until it has taken enough of them.
            pausedForOutput = true
            pauseReading()
            stalledReader.drained(at: env.monotonicNanos())
            arm(.stalledReader)
            return
        }
        if !intake.isIdle, let wait = env.intakeWait(paced: pacedOnce) {
            // The gate holds the next request back (the recorder's writer falls behind): stop reading until it opens.
            if case .pace = wait { pacedOnce = true }
            waitingAtGate = true
            pauseReading()
            actions.append(.waitBeforeNextRequest(wait))
            return
        }
        pacedOnce = false
        var step = intake.next(wallClock: env.wallClock())
        if case .sendContinue = step {
            write(HTTPRequestIntake.continueBytes)
            step = intake.next(wallClock: env.wallClock())
        }
        switch step {
        case .needMore, .sendContinue:
            if inputEnded {
                // Nothing more will come: what was answered goes out, then the connection closes (an incomplete
                // request is dropped with it, or answered as cut short where the error shape says so).
                if !intake.isIdle, errorShape.answer(.cutShort) != nil {
                    refuse(.cutShort)
                } else {
                    close(.inputEnded, afterFlush: true)
                }
                return
            }
            // Everything complete is answered: read again (after a pause for read-ahead or for unsent answers).
            resumeReading()
            if intake.isIdle {
                if armed != .idle { arm(.idle) }
            } else if armed != .request {
                arm(.request)
            }
            return
        case let .refuse(status, message, headers):
            refuse(.refused(status: status, message: message, headers: headers))
            return
        case let .intercept(target):
            cancelDeadline()
            if env.passesThrough(target) {
                tunnelled = true
                _ = env.holdBudget(0)
                actions.append(.passThrough(target, early: intake.takeTunnelBytes()))
                return
            }
            write(HTTPRequestIntake.connectEstablished)
            actions.append(.startTLS(serverName: target.host, early: intake.takeTunnelBytes()))
            // The requests inside the tunnel come next, once the answer is queued (and TLS started).
            actions.append(.reportWhenWritten)
            return
        case let .request(request, startedAt):
            deliveredStartedAt = startedAt
            deliver(request, env)
            return
        }
    }

    /// Hands one request to the handler.
    private mutating func deliver(_ r: HTTPRequest, _ env: some ServerConnectionEnvironment) {
        var request = r
        if policy.budgetCountsRequestInFlight { bodyInFlight = request.body.count }
        _ = env.holdBudget(intake.bufferedCount &+ bodyInFlight)
        if inputEnded { arm(.halfClosed) } else { cancelDeadline() }
        if absoluteTargetsInTunnels, let tunnel = intake.tunnel, request.head.target.hasPrefix("/") {
            request.head.target = "https://\(tunnel)\(request.head.target)"
        }
        busy = true
        delivered &+= 1
        keepAlive = request.head.keepAlive
        toDeliver = request
        actions.append(.deliver(number: delivered))
    }

    /// Answers an error in the connection's shape and closes (nothing after it is read or answered); closes without an
    /// answer where the shape gives none.
    private mutating func refuse(_ refusal: ConnectionRefusal) {
        guard let answer = errorShape.answer(refusal) else {
            close(.inputEnded, afterFlush: true)
            return
        }
        cancelDeadline()
        closing = true
        actions.append(.refusing(status: answer.status, message: answer.message))
        write(answer.bytes)
        actions.append(.close(afterFlush: true, reason: .refused(status: answer.status)))
    }

    /// Asks the driver to write, and counts the bytes until it has (`writing`).
    private mutating func write(_ head: [UInt8], then body: [UInt8] = []) {
        writing &+= head.count &+ body.count
        actions.append(.write(head, then: body))
    }

    private mutating func close(_ reason: CloseReason, afterFlush: Bool = false) {
        closing = true
        cancelDeadline()
        actions.append(.close(afterFlush: afterFlush, reason: reason))
    }

    private mutating func arm(_ kind: ConnectionDeadline) {
        armed = kind
        actions.append(.arm(kind, seconds: policy.seconds(for: kind)))
    }

    private mutating func cancelDeadline() {
        guard armed != nil else { return }
        armed = nil
        actions.append(.cancelDeadline)
    }

    private mutating func pauseReading() {
        guard !readingPaused else { return }
        readingPaused = true
        actions.append(.pauseReading)
    }

    private mutating func resumeReading() {
        guard readingPaused else { return }
        readingPaused = false
        actions.append(.resumeReading)
    }
}

extension ServerConnectionMachine.Event {
    var isClosed: Bool { if case .closed = self { return true }; return false }
}
