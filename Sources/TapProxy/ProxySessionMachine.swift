import Foundation
import TapCore
import TapCrypto
import TapEMV
import TapHTTP
import TapHTTPService
import TapNet
import TapStore

/// Where a request goes.
struct Target: Equatable {
    let tls: Bool
    let address: HostPort
    let hostHeader: String
    var path: String
    /// `https://host[:port]`, and the address as text (recorded as the exchange's upstream): made once per target,
    /// and in reverse mode once per connection, not once per exchange.
    let urlPrefix: String
    let addressText: String

    init(tls: Bool, address: HostPort, hostHeader: String, path: String) {
        self.tls = tls
        self.address = address
        self.hostHeader = hostHeader
        self.path = path
        urlPrefix = "\(tls ? "https" : "http")://\(hostHeader)"
        addressText = address.description
    }

    /// This target with another path.
    func with(path: String) -> Target {
        var t = self
        t.path = path
        return t
    }
}

/// What a proxy session asks of the world around it besides its events: clocks, the session writer's backlog and
/// the shared memory budget. The I/O driver implements it; tests give fixed values.
protocol ProxySessionEnvironment {
    /// Wall-clock seconds (timestamps recorded in the session).
    func wallClock() -> Double
    /// Monotonic nanoseconds (deadlines).
    func monotonicClock() -> UInt64
    /// How long a new request should wait because the writer is falling behind (0: not at all).
    func pacingDelay() -> Double
    /// The writer is so far behind that new requests wait until it catches up.
    var writerIsBehind: Bool { get }
    /// Tells the shared budget how many request bytes this connection holds; false when that is over the limit.
    func holdBudget(_ bytes: Int) -> Bool
    /// Answer bytes queued for the client and not yet taken (output backpressure).
    func unsentByteCount() -> Int
    /// Answer bytes in the kernel's send queue the client has not acknowledged, where the system says (the
    /// stalled-reader deadline: a queue that shrinks is a client that reads).
    func kernelUnsentBytes() -> Int?
}

extension ProxySessionEnvironment {
    /// Not known (tests): only this end's own queue shows that the client reads.
    func kernelUnsentBytes() -> Int? { nil }
}

/// The recorder's world as its client side (`ServerConnectionMachine`) sees it: the session's clocks, unsent count and
/// budget, `--pass-through` for CONNECT targets, and the session writer's backpressure as the gate before each request
/// (paced once while the writer falls behind, held while it is far behind).
struct ClientSideWorld<Environment: ProxySessionEnvironment>: ServerConnectionEnvironment {
    let env: Environment
    let routing: HostRouting

    func monotonicNanos() -> UInt64 { env.monotonicClock() }
    func unsentByteCount() -> Int { env.unsentByteCount() }
    func kernelUnsentBytes() -> Int? { env.kernelUnsentBytes() }
    func holdBudget(_ bytes: Int) -> Bool { env.holdBudget(bytes) }
    func passesThrough(_ target: HostPort) -> Bool { routing.passesThrough(target).0 }
    func wallClock() -> Double { env.wallClock() }
    func intakeWait(paced: Bool) -> IntakeWait? {
        if !paced {
            // The writer is falling behind: this request waits a little (see `ProxyServer.pacingDelay`), then goes on.
            let delay = env.pacingDelay()
            if delay > 0 { return .pace(seconds: delay) }
        }
        return env.writerIsBehind ? .untilOpened : nil
    }
}

/// One proxied client connection as a state machine, free of I/O (sans-IO, as in mitmproxy's layers and SwiftNIO's
/// embedded channel): events in (client bytes, the upstream connected, upstream bytes, a deadline, the writer
/// caught up), actions out (write, connect, start TLS, close, pause reading, record an exchange). Its client side is
/// every server connection's (`ServerConnectionMachine`: requests taken one at a time with pipelined ones held, read-ahead,
/// the memory budget, output backpressure, the client deadlines, CONNECT, the writer's pacing as the machine's gate);
/// this machine forwards each request it is given, resolves its target (reverse, forward with absolute URLs, CONNECT
/// with interception), strips hop-by-hop headers, applies key substitution, waits for the upstream, hands the answer
/// back to the client side and builds each exchange's record.
/// `ClientSession` is the thin driver that carries events in from sockets and timers and performs the actions.
struct ProxySessionMachine {
    /// Something that happened to the connection.
    enum Event {
        case clientBytes([UInt8])
        /// The client finished sending (`shutdown(SHUT_WR)` after its request): what it sent is answered, then the
        /// connection closes.
        case clientFinishedSending
        /// The client closed (or the connection failed); `tlsFailure` when its TLS handshake failed, `peerAlert` the
        /// alert the client ended it with.
        case clientClosed(error: String?, tlsFailure: Bool, peerAlert: TLSAlert? = nil)
        /// The recorder is stopping (Ctrl-C, SIGTERM) and closes the connection itself: an exchange in flight is recorded
        /// as cut short by the recorder, not as the client's abort.
        case recorderStopping
        /// The upstream connection is ready (TCP and, for https, TLS), with those moments in wall-clock seconds.
        case upstreamConnected(connectedAt: Double?, tlsDoneAt: Double?)
        case upstreamBytes([UInt8])
        /// The upstream finished sending (its FIN) and may still read: only a tunnel keeps it open for that.
        case upstreamFinishedSending
        case upstreamClosed(UpstreamFailure?)
        /// The deadline the machine set (`deadline`) has passed.
        case deadlinePassed
        /// A pacing delay ended, or the writer caught up: go on with the next request.
        case resume
        /// The client took queued answer bytes (`unsentByteCount` went down): sent while the machine waits for that
        /// (`pausedForOutput`, `closingAfterFlush`).
        case clientDrained
        /// The actions that asked for it (`reportWhenWritten`) are performed: the unsent count includes their writes.
        case written
    }

    /// Why the upstream connection ended, when it was not a clean close.
    enum UpstreamFailure: Equatable {
        case connect(String)
        case tls(String)
        case other(String)
    }

    /// Something the driver must do.
    enum Action {
        /// Bytes for the client; a message's head and body are given apart and sent together without being joined.
        case writeClient([UInt8], then: [UInt8] = [])
        case closeClient(afterFlush: Bool)
        /// Close with a TCP reset, dropping what is queued: a client that took none of its answers for the idle timeout.
        case resetClient
        /// Answer a CONNECT: terminate the client's TLS with a leaf minted for this host; `early` is what the client sent
        /// with its CONNECT, the start of its TLS (never a request).
        case startClientTLS(serverName: String, early: [UInt8] = [])
        case pauseClientReading
        case resumeClientReading
        /// Open a connection to this target (closing any other first); report `upstreamConnected` or `upstreamClosed`.
        case connectUpstream(Target)
        case writeUpstream([UInt8], then: [UInt8] = [])
        case closeUpstream
        /// Pass a half-close on in a tunnel: finish sending to the client, or to the upstream (`shutdown(SHUT_WR)`
        /// once what is queued is out), while still reading from it.
        case shutdownClientWrite
        case shutdownUpstreamWrite
        /// A finished exchange for the session writer. Boxed (`indirect`): an exchange's record is several hundred bytes,
        /// and inline it would make every action that large, copied as such at each append and each read of the list.
        indirect case record(ExchangeRecord)
        /// An event for the session file's `events` table.
        case note(kind: String, detail: String)
        /// The client refused the certificate minted for the intercepted `host` (the server hints why, once per host).
        case certificateRefused(host: String, alert: TLSAlert)
        case log(String)
        /// The budget refused this connection (the server logs it, once a second at most).
        case budgetRefused
        /// Send `resume` after this many seconds.
        case pace(Double)
        /// Send `resume` when the writer has caught up.
        case waitForWriter
        /// Send `written` once the actions before this one are performed: the answers just written may put the client's
        /// unsent count over the high-water mark, and the next request is taken only when the count includes them.
        case reportWhenWritten
        /// The connection is over: release its budget and forget it.
        case ended
    }

    /// What the session waits for: on its client side, the deadline its `ServerConnectionMachine` armed (timed by
    /// `ConnectionPolicy` as `HTTPServer`'s are); on its upstream side, the answer.
    enum Wait: Equatable {
        case client(ConnectionDeadline)
        case upstream

        static let idle = Wait.client(.idle)
        static let requestHead = Wait.client(.request)
    }

    /// The exchange being forwarded.
    struct InFlight {
        /// The client side's number for the request (its answer is given back under it).
        var number: Int
        var record: ExchangeRecord
        var keepAlive: Bool
        /// The request came as HTTP/1.0 (its answer is framed for it: ClientResponseHead).
        var clientIsHTTP10: Bool
        var target: Target
        /// Set when key substitution rewrote the request and must rewrite the response.
        var substitution: KeySubstitution.Context?
        /// The request's Upgrade field (not forwarded: 3dstape passes no protocol upgrade on).
        var upgrade: String?
    }

    /// The connection to the current upstream, kept alive between exchanges.
    struct Upstream {
        var target: Target
        var parser: HTTPParser
        var pending: [UInt8] = []
        var awaiting = false
        var connected = false
        var closed = false
        var connectedAt: Double?
        var tlsDoneAt: Double?
        var requestSentAt: Double?
        var firstByteAt: Double?

        /// Open, idle and with nothing buffered: fit for the next request.
        var isUsable: Bool { !closed && !awaiting && connected && parser.isIdle }
    }

    let config: ProxyConfiguration
    /// The client side's deadlines and read-ahead, as every server connection's (`ServerConnectionMachine`).
    let policy: ConnectionPolicy
    let peer: String
    /// The client side: every 3dstape server connection's machine, in the recorder's error shape
    /// (`ProxyErrorResponse.shape`), counting the body being forwarded on the budget, with the writer's pacing as its gate.
    private(set) var client: ServerConnectionMachine
    /// The client side's actions of the event being handled (kept, so that no array is made per event).
    private var clientActions: [ServerConnectionMachine.Action] = []
    /// The exchange the answer being given back to the client side ends: recorded right after the answer's write.
    private var answerRecord: ExchangeRecord?
    /// The CONNECT target once a tunnel is being intercepted.
    var tunnel: HostPort? { client.intake.tunnel }
    private(set) var upstream: Upstream?
    private(set) var inFlight: InFlight?
    let connectionID: Int64
    private var seq = 0
    private(set) var closed = false
    /// The client sends no more: once what it sent is answered, the connection closes.
    private(set) var clientDone = false
    /// When the client finished sending (its FIN). A client that half-closed waits for its answer; one that closed
    /// (gave up) looks the same on the wire, so exchanges answered after it record the moment as a possible abort.
    private var clientFinishedAt: Double?
    /// Reading from the client is paused (by the client side, or by a tunnel whose upstream is not up).
    private(set) var readingPaused = false
    /// Reading and forwarding stopped because more than `policy.output.highWater` answer bytes wait for a client that
    /// does not read them (the client side's output backpressure); the driver sends `clientDrained`.
    var pausedForOutput: Bool { client.pausedForOutput }
    /// The connection closes once its answers are sent; until then the stalled-reader deadline holds (a client that does
    /// not read its last answer is not kept with it); the driver sends `clientDrained` as the client takes bytes.
    private(set) var closingAfterFlush = false
    /// The stalled-reader deadline of a closing connection (the same rule as a kept-alive one's).
    private var stalledReader = StalledReaderWatch()
    /// What the session is waiting for, and until when (monotonic ns; 0: no deadline). The driver's one timer
    /// sends `deadlinePassed` when it passes, moved only when the deadline comes earlier (no timer per request).
    private(set) var waitingFor: Wait = .idle
    private(set) var deadline: UInt64 = 0

    private var actions: [Action] = []
    /// The CONNECT being tunnelled untouched (`--pass-through`); once set, every event is the tunnel's.
    private(set) var passThrough: PassThrough?
    /// Whether the connection is a CONNECT tunnelled untouched (`passThrough` set), asked without copying the tunnel's state.
    var isPassThrough: Bool {
        if case .none = passThrough { return false }
        return true
    }

    /// In reverse mode, the upstream's target, its path the upstream URL's base path; each request's is this one with
    /// the request target appended to that path.
    private let reverseTarget: Target?

    init(config: ProxyConfiguration, connectionID: Int64, peer: String) {
        self.config = config
        var policy = config.clientPolicy
        policy.budgetCountsRequestInFlight = true // the body is held until the exchange is recorded
        self.policy = policy
        self.connectionID = connectionID
        self.peer = peer
        client = ServerConnectionMachine(policy: policy,
                                         rules: .init(limits: config.limits, authorization: config.authorization,
                                                      acceptsConnect: config.takesConnect),
                                         errorShape: ProxyErrorResponse.shape(budgetLimit: config.maxBufferedBytes),
                                         absoluteTargetsInTunnels: false)
        if case let .reverse(u) = config.mode {
            reverseTarget = Target(tls: u.tls, address: u.address, hostHeader: u.hostHeader, path: u.basePath)
        } else {
            reverseTarget = nil
        }
    }

    /// Arms the idle deadline (a new connection starts idle).
    mutating func start(_ env: some ProxySessionEnvironment) {
        var none: ServerConnectionMachine.Event?
        for action in client.start() { perform(action, then: &none, env) }
        actions = []
    }

    /// Feeds one event; returns what the driver must do, in order.
    mutating func handle(_ event: Event, _ env: some ProxySessionEnvironment) -> [Action] {
        var out: [Action] = []
        handle(event, env, into: &out)
        return out
    }

    /// Feeds one event and appends what the driver must do, in order, to `out` (a buffer the driver keeps and empties,
    /// so that no array is made per event).
    mutating func handle(_ event: Event, _ env: some ProxySessionEnvironment, into out: inout [Action]) {
        swap(&actions, &out)
        defer { swap(&actions, &out) } // `actions` is empty again between events
        if isPassThrough {
            tunnelEvent(event, env)
            return
        }
        switch event {
        case let .clientBytes(bytes): if !closed { feedClient(.received(bytes), env) }
        case .clientFinishedSending: clientFinishedSending(env)
        case let .clientClosed(error, tlsFailure, alert): clientClosed(error: error, tlsFailure: tlsFailure, peerAlert: alert, env)
        case .recorderStopping: clientClosed(error: nil, tlsFailure: false, peerAlert: nil, byRecorder: true, env)
        case let .upstreamConnected(connectedAt, tlsDoneAt): upstreamConnected(connectedAt, tlsDoneAt, env)
        case let .upstreamBytes(bytes): upstreamBytes(bytes, env)
        case let .upstreamClosed(failure): upstreamClosed(failure, env)
        case .upstreamFinishedSending: upstreamClosed(nil, env) // not kept open outside a tunnel; the driver closes it
        case .deadlinePassed: deadlinePassed(env)
        case .resume: if !closed { feedClient(.intakeOpened, env) }
        case .clientDrained: clientDrained(env)
        case .written: if !closed { feedClient(.written, env) }
        }
    }

    // MARK: client side

    /// Feeds the client side and performs what it asks, in order. A request it delivers is forwarded; an answer the
    /// recorder gives at once (an error of its own, key substitution's) goes back to it in turn, and `answerRecord`, the
    /// exchange an answer ends, follows the answer's write.
    private mutating func feedClient(_ event: ServerConnectionMachine.Event, _ env: some ProxySessionEnvironment) {
        var next: ServerConnectionMachine.Event? = event
        var buffer: [ServerConnectionMachine.Action] = []
        swap(&buffer, &clientActions)
        while let e = next {
            next = nil
            buffer.removeAll(keepingCapacity: true)
            client.handle(e, ClientSideWorld(env: env, routing: config.routing), into: &buffer)
            // Taken out of the buffer in order (reversed, then popped), so that no action is copied.
            buffer.reverse()
            while let action = buffer.popLast() { perform(action, then: &next, env) }
        }
        if answerRecord != nil { actions.append(.record(answerRecord.take()!)) } // an answer not taken is recorded all the same
        buffer.removeAll(keepingCapacity: true)
        swap(&buffer, &clientActions)
    }

    /// Performs one of the client side's actions; `next` is what goes back to it afterwards (an answer given at once).
    private mutating func perform(_ action: ServerConnectionMachine.Action, then next: inout ServerConnectionMachine.Event?,
                                  _ env: some ProxySessionEnvironment) {
        switch action {
        case let .deliver(number):
            guard var request = client.takeDelivered() else { return }
            next = forward(&request, number: number, startedAt: client.deliveredStartedAt, env)
        case .reportWhenWritten:
            actions.append(.reportWhenWritten)
        case let .write(head, body):
            actions.append(.writeClient(head, then: body))
            if answerRecord != nil { actions.append(.record(answerRecord.take()!)) }
        case .pauseReading:
            readingPaused = true
            actions.append(.pauseClientReading)
        case .resumeReading:
            readingPaused = false
            actions.append(.resumeClientReading)
        case let .arm(kind, seconds):
            // A half-closed client waits for the upstream's deadline while its request is forwarded, not the idle timeout.
            if kind != .halfClosed { wait(for: .client(kind), seconds: seconds, env) }
        case .cancelDeadline:
            if case .client = waitingFor { deadline = 0 }
        case let .close(afterFlush, reason):
            if reason == .deadline(.stalledReader) {
                actions.append(.log("client \(peer): took none of its answers for \(Checked.clampedInt(policy.idleTimeout)) s; closed"))
                actions.append(.resetClient)
            } else if afterFlush {
                closeAfterAnswers(env)
            } else {
                actions.append(.closeClient(afterFlush: false))
            }
        case let .startTLS(serverName, early):
            actions.append(.startClientTLS(serverName: serverName, early: early))
        case let .passThrough(target, early):
            startPassThrough(target, decidedBy: config.routing.passesThrough(target).reason, early: early, env)
        case .budgetExhausted:
            actions.append(.budgetRefused)
        case let .refusing(status, message):
            actions.append(.log("\(peer): \(status) \(message)"))
            actions.append(.note(kind: "rejected", detail: "\(peer): \(status) \(message)"))
        case let .waitBeforeNextRequest(wait):
            switch wait {
            case let .pace(seconds): actions.append(.pace(seconds))
            case .untilOpened: actions.append(.waitForWriter)
            }
        case .handOver, .clientFinishedSending, .ended:
            break // never taken over; the client's FIN and end are the recorder's own events
        }
    }

    private mutating func clientFinishedSending(_ env: some ProxySessionEnvironment) {
        guard !closed, !clientDone else { return }
        clientDone = true
        clientFinishedAt = env.wallClock()
        // A request in flight, or one waiting for the writer, is answered first; the client side closes when none is left.
        feedClient(.inputEnded, env)
    }

    /// The client side is gone: closed by the client, failed, or (`byRecorder`) closed by a recorder that is stopping.
    private mutating func clientClosed(error: String?, tlsFailure: Bool, peerAlert: TLSAlert?, byRecorder: Bool = false,
                                       _ env: some ProxySessionEnvironment) {
        guard !closed else { return }
        closed = true
        if var f = inFlight.take() {
            fillUpstreamTimes(&f.record) // what did happen upstream (connected, request sent) before the end
            if byRecorder, let finished = clientFinishedAt {
                // The client had closed its side (a FIN) first: that moment is kept, as when the answer comes after it.
                f.record.clientAbortAt = finished
                f.record.error = "client closed its side of the connection (FIN) before the response; then the recorder stopped (Ctrl-C or SIGTERM)"
            } else if byRecorder {
                f.record.error = ProxySessionMachine.stoppedBeforeResponse
            } else {
                f.record.clientAbortAt = env.wallClock()
                f.record.error = "client closed the connection before the response" + (error.map { " (\($0))" } ?? "")
            }
            f.record.done = env.wallClock()
            actions.append(.record(f.record))
        } else if let error, tlsFailure {
            actions.append(.log("client \(peer): \(error)"))
            actions.append(.note(kind: "client-tls-failed", detail: "\(peer): \(error)"))
            if let peerAlert, peerAlert.refusesCertificate, let host = tunnel?.host {
                actions.append(.certificateRefused(host: host, alert: peerAlert))
            }
        }
        if upstream != nil {
            actions.append(.closeUpstream)
            upstream = nil
        }
        feedClient(.closed, env) // last: it forgets the intake, and with it the CONNECT's host named above
        deadline = 0
        actions.append(.ended)
    }

    /// The error an exchange in flight is recorded with when the recorder stops before its response.
    static let stoppedBeforeResponse = "the recorder stopped (Ctrl-C or SIGTERM) before the response; the client did not abort"

    private mutating func deadlinePassed(_ env: some ProxySessionEnvironment) {
        guard !closed else { return }
        deadline = 0
        switch waitingFor {
        case .client(.stalledReader) where closingAfterFlush:
            // Closed once the client has taken nothing for the idle timeout (`StalledReaderWatch`); else wait as it says.
            let now = env.monotonicClock()
            switch stalledReader.deadlinePassed(at: now, policy: policy, kernelUnsent: { env.kernelUnsentBytes() }) {
            case let .wait(seconds):
                deadline = Checked.deadline(now, plus: Checked.nanoseconds(seconds))
            case .stalled:
                actions.append(.log("client \(peer): took none of its answers for \(Checked.clampedInt(policy.idleTimeout)) s; closed"))
                closingAfterFlush = false
                actions.append(.resetClient)
            }
        case let .client(kind):
            feedClient(.deadlinePassed(kind), env)
        case .upstream:
            if let f = inFlight {
                upstreamFailed(status: 504, "upstream \(f.target.address) did not answer within \(Checked.clampedInt(config.upstreamTimeout)) s",
                               closeUpstream: true, env)
            }
        }
    }

    private mutating func clientDrained(_ env: some ProxySessionEnvironment) {
        guard !closed else { return }
        if closingAfterFlush {
            stalledReader.drained(at: env.monotonicClock())
            return
        }
        feedClient(.outputDrained, env)
    }

    private mutating func wait(for what: Wait, _ env: some ProxySessionEnvironment) {
        let seconds: Double = switch what {
        case let .client(kind): policy.seconds(for: kind)
        case .upstream: config.upstreamTimeout
        }
        wait(for: what, seconds: seconds, env)
    }

    private mutating func wait(for what: Wait, seconds: Double, _ env: some ProxySessionEnvironment) {
        waitingFor = what
        deadline = Checked.deadline(env.monotonicClock(), plus: Checked.nanoseconds(seconds)) // saturates: never traps
    }

    private mutating func pauseReading() {
        readingPaused = true
        actions.append(.pauseClientReading)
    }

    private mutating func resumeReading() {
        readingPaused = false
        actions.append(.resumeClientReading)
    }

    // MARK: requests

    /// Forwards a request the client side delivered. Returns the answer to give back to the client side at once (a target
    /// the recorder cannot resolve, an answer of key substitution's, whose exchange is then `answerRecord`), or nil while
    /// the upstream answers. The request's header fields become the upstream request's (`upstreamHead(taking:target:)`).
    private mutating func forward(_ request: inout HTTPRequest, number: Int, startedAt: Double,
                                  _ env: some ProxySessionEnvironment) -> ServerConnectionMachine.Event? {
        let head = request.head
        let target: Target
        switch resolveTarget(head) {
        case let .success(t): target = t
        case let .failure(e):
            return refusal(number, .refused(status: HTTPErrorAnswer.status(for: e.problem), message: e.message, headers: []))
        }
        seq += 1
        let captured = CapturedMessage(headers: head.headers.fields.map { ($0.name, $0.value) }, body: request.body,
                                       wireSize: request.rawHead.count + request.rawBody.count)
        var record = ExchangeRecord(connectionID: connectionID, seq: seq, method: head.method, url: target.urlPrefix + target.path,
                                    host: target.hostHeader, path: target.path, upstream: target.addressText,
                                    request: captured, requestStart: startedAt)
        record.mask = config.mask
        let (method, upgrade, clientIsHTTP10) = (head.method, head.headers["Upgrade"], head.version == "HTTP/1.0")

        _ = consume head // its fields are now the request's alone: taken (not copied) for the upstream's, and changed there
        var out = upstreamHead(taking: &request.head, target: target)
        var forwardBody = request.rawBody
        var context: KeySubstitution.Context?
        if let sub = config.substitution {
            let (action, ctx) = sub.request(request.body)
            switch action {
            case let .unchanged(note):
                if let note { actions.append(.note(kind: "substitution", detail: note)) }
            case let .replaced(body, note):
                if let note { actions.append(.note(kind: "substitution", detail: note)) }
                forwardBody = body
                context = ctx
                out.headers.remove("Transfer-Encoding")
                out.headers.replaceOrAdd("Content-Length", String(body.count))
            case let .answer(status, body, note):
                actions.append(.note(kind: "substitution", detail: note))
                let headers = HTTPHeaders([("Content-Type", "application/json; charset=utf-8"), ("Content-Length", String(body.count))])
                let answer = HTTPResponseHead(status: status, headers: headers).bytes + body
                record.status = status
                record.response = CapturedMessage(headers: headers.fields.map { ($0.name, $0.value) }, body: body, wireSize: body.count)
                record.done = env.wallClock()
                answerRecord = record
                return .answeredRaw(number: number, head: answer, body: [], keepAlive: true)
            }
        }
        let outHead = out.bytes

        inFlight = InFlight(number: number, record: record, keepAlive: client.keepAlive, clientIsHTTP10: clientIsHTTP10, target: target,
                            substitution: context,
                            upgrade: upgrade)
        wait(for: .upstream, env)
        if let link = upstream, link.target.address == target.address, link.target.tls == target.tls, link.isUsable {
            // Changed in place: a copy of the link would share its parser's buffer, and the next read would copy it.
            upstream!.awaiting = true
            upstream!.parser.requestMethod = method
            upstream!.firstByteAt = nil
            upstream!.requestSentAt = env.wallClock()
            actions.append(.writeUpstream(outHead, then: forwardBody))
        } else {
            if upstream != nil { actions.append(.closeUpstream) }
            var link = Upstream(target: target, parser: HTTPParser(mode: .response, limits: config.limits))
            link.awaiting = true
            link.parser.requestMethod = method
            link.pending = outHead + forwardBody
            upstream = link
            actions.append(.connectUpstream(target))
        }
        return nil
    }

    /// Answers request `number` with an error of the recorder's own in the client side's error shape, and closes after it
    /// (a target the recorder cannot resolve); it is logged and noted as the client side's own refusals are.
    private mutating func refusal(_ number: Int, _ refusal: ConnectionRefusal) -> ServerConnectionMachine.Event {
        guard let answer = client.errorShape.answer(refusal) else {
            return .answeredRaw(number: number, head: [], body: [], keepAlive: false)
        }
        actions.append(.log("\(peer): \(answer.status) \(answer.message)"))
        actions.append(.note(kind: "rejected", detail: "\(peer): \(answer.status) \(answer.message)"))
        return .answeredRaw(number: number, head: answer.bytes, body: [], keepAlive: false)
    }

    /// The request toward the upstream: origin-form, hop-by-hop headers removed (the body goes unchanged). Its fields are
    /// taken from `head` (left with none), so that they are changed where they are instead of copied first.
    func upstreamHead(taking head: inout HTTPRequestHead, target: Target) -> HTTPRequestHead {
        var out = HTTPRequestHead(method: head.method, target: target.path, version: "HTTP/1.1")
        swap(&out.headers, &head.headers)
        // Hop-by-hop fields, and in reverse mode with --auth the Authorization that was 3dstape's.
        let ownAuthorization: Bool
        if config.authorization != nil, case .reverse = config.mode { ownAuthorization = true } else { ownAuthorization = false }
        out.headers.removeHopByHop(also: ownAuthorization ? ["Authorization"] : [])
        // A reverse proxy names its upstream; a forward proxy given an absolute URL replaces the client's Host with that
        // URL's authority (RFC 9112 §3.2.2), so that what is recorded is what the upstream sees. In a tunnel the
        // client's own Host goes through, and the recorded URL comes from the CONNECT target.
        if case .reverse = config.mode { out.headers.replaceOrAdd("Host", target.hostHeader) }
        if case .forward = config.mode, tunnel == nil { out.headers.replaceOrAdd("Host", target.hostHeader) }
        if out.headers["Host"] == nil { out.headers.add("Host", target.hostHeader) }
        return out
    }

    func resolveTarget(_ head: HTTPRequestHead) -> Result<Target, HTTPParseError> {
        switch config.mode {
        case .reverse:
            guard head.target.hasPrefix("/") || head.target == "*", let base = reverseTarget else {
                return .failure(HTTPParseError(.malformed, "a reverse proxy expects origin-form targets, got '\(head.target.prefix(60))'"))
            }
            return .success(base.with(path: base.path + head.target))
        case .forward:
            if let tunnel {
                let host = tunnel.port == 443 ? tunnel.host : tunnel.description
                return .success(Target(tls: true, address: tunnel, hostHeader: host, path: head.target))
            }
            if let scheme = head.target.range(of: "://"),
               head.target[scheme.upperBound...].prefix(while: { $0 != "/" && $0 != "?" && $0 != "#" }).contains("@") {
                return .failure(HTTPParseError(.malformed, "credentials in the request URL (user@host) are neither forwarded nor recorded"))
            }
            guard let u = UpstreamURL(head.target) else {
                return .failure(HTTPParseError(.malformed, "a forward proxy needs an absolute URL (http://host/path) or CONNECT, got '\(head.target.prefix(60))'"))
            }
            let t = head.target
            let afterScheme = t.index(t.startIndex, offsetBy: u.tls ? 8 : 7)
            let path = t[afterScheme...].firstIndex(of: "/").map { String(t[$0...]) } ?? "/"
            return .success(Target(tls: u.tls, address: u.address, hostHeader: u.hostHeader, path: path))
        }
    }

    // MARK: upstream side

    private mutating func upstreamConnected(_ connectedAt: Double?, _ tlsDoneAt: Double?, _ env: some ProxySessionEnvironment) {
        guard upstream?.closed == false, var link = upstream.take() else { return }
        link.connected = true
        link.connectedAt = connectedAt
        link.tlsDoneAt = tlsDoneAt
        actions.append(.writeUpstream(link.pending))
        link.pending = []
        link.requestSentAt = env.wallClock()
        upstream = link
    }

    private mutating func upstreamBytes(_ bytes: [UInt8], _ env: some ProxySessionEnvironment) {
        // Taken out while it is changed (and put back on every path), so that its parser's buffer is not shared.
        guard upstream?.closed == false, var link = upstream.take() else { return }
        if link.firstByteAt == nil { link.firstByteAt = env.wallClock() }
        link.parser.append(bytes)
        do {
            if let response = try link.parser.nextResponse() {
                if response.head.status == 101 {
                    // The upstream switched protocols: nothing after this is HTTP, and the client asked for no switch
                    // through 3dstape (Upgrade is not forwarded). Refused, not passed on as a final response.
                    upstream = link
                    let asked = inFlight?.upgrade.map {
                        " (the request's Upgrade: \($0.prefix(60)) was not forwarded: 3dstape records HTTP exchanges and passes no protocol upgrade on)"
                    }
                    failUpstream(502, "upstream \(link.target.address) answered 101 Switching Protocols"
                                 + (asked ?? " to a request that asked for no upgrade"), env)
                    return
                }
                link.awaiting = false
                let first = link.firstByteAt
                link.firstByteAt = nil
                let upstreamKeepsAlive = response.head.keepAlive
                if !upstreamKeepsAlive {
                    link.closed = true
                    actions.append(.closeUpstream)
                }
                upstream = link
                responseReceived(response, firstByteAt: first, upstreamKeepsAlive: upstreamKeepsAlive, env)
            } else if !link.awaiting, !link.parser.isIdle {
                upstream = link
                failUpstream(502, "upstream \(link.target.address) sent data without a request", env)
            } else {
                upstream = link
            }
        } catch {
            upstream = link
            failUpstream(502, "upstream \(link.target.address) sent an invalid response: \(error.message)", env)
        }
    }

    private mutating func upstreamClosed(_ failure: UpstreamFailure?, _ env: some ProxySessionEnvironment) {
        guard var link = upstream, !link.closed else { return }
        link.closed = true
        upstream = link
        guard link.awaiting else { return }
        if failure == nil, let response = try? link.parser.finish() {
            link.awaiting = false
            upstream = link
            responseReceived(response, firstByteAt: link.firstByteAt, upstreamKeepsAlive: response.head.keepAlive, env)
            return
        }
        let why: String
        switch failure {
        case let .connect(reason)?: why = "upstream \(link.target.address) unreachable: \(reason)"
        case let .tls(m)?: why = "TLS to upstream \(link.target.address) failed: \(m)"
        case let .other(e)?: why = "upstream \(link.target.address): \(e)"
        case nil: why = "upstream \(link.target.address) closed the connection before a complete response"
        }
        failUpstream(502, why, env)
    }

    private mutating func failUpstream(_ status: Int, _ message: String, _ env: some ProxySessionEnvironment) {
        upstream?.awaiting = false
        upstream?.closed = true
        actions.append(.closeUpstream)
        upstreamFailed(status: status, message, closeUpstream: true, env)
    }

    /// `upstreamKeepsAlive`: what the response's version and Connection field say of the upstream's connection.
    private mutating func responseReceived(_ response: HTTPResponse, firstByteAt: Double?, upstreamKeepsAlive: Bool,
                                           _ env: some ProxySessionEnvironment) {
        guard var f = inFlight.take() else { return }
        var headers = response.head.headers
        var body = response.body
        var (wireHead, wireBody) = (response.rawHead, response.rawBody)
        if let ctx = f.substitution, let sub = config.substitution {
            switch sub.response(response.body, context: ctx) {
            case let .unchanged(note):
                if let note { actions.append(.note(kind: "substitution", detail: note)) }
            case let .replaced(newBody, note):
                if let note { actions.append(.note(kind: "substitution", detail: note)) }
                headers.remove("Transfer-Encoding")
                headers.replaceOrAdd("Content-Length", String(newBody.count))
                body = newBody
                wireHead = HTTPResponseHead(status: response.head.status, reason: response.head.reason, version: response.head.version,
                                            headers: headers).bytes
                wireBody = newBody
            case .answer:
                break
            }
        }
        // The client side writes it (as it came, but for the hop-by-hop parts: ClientResponseHead) and closes after it or
        // takes the next request; the record follows the write.
        let bodyless = HTTPParser.responseHasNoBody(status: response.head.status, requestMethod: f.record.method)
        let out = ClientResponseHead(response.head, headers: headers, upstreamKeepsAlive: upstreamKeepsAlive, wireHead: wireHead,
                                     wireBody: wireBody, body: body, clientIsHTTP10: f.clientIsHTTP10, clientKeepAlive: f.keepAlive,
                                     bodyless: bodyless)
        // The session stores the response's content as the client sees it (after key substitution), its connection options
        // as the upstream sent them, and the size of what the client got.
        f.record.status = response.head.status
        f.record.response = CapturedMessage(headers: headers.fields.map { ($0.name, $0.value) }, body: body, wireSize: out.head.count + out.body.count)
        fillUpstreamTimes(&f.record)
        f.record.firstByte = firstByteAt
        f.record.done = env.wallClock()
        noteClientFinished(&f.record)
        let number = f.number
        answerRecord = f.record
        feedClient(.answeredRaw(number: number, head: out.head, body: out.body, keepAlive: out.keepAlive), env)
    }

    private mutating func upstreamFailed(status: Int, _ message: String, closeUpstream: Bool, _ env: some ProxySessionEnvironment) {
        guard var f = inFlight.take() else { return }
        fillUpstreamTimes(&f.record)
        if closeUpstream {
            if upstream?.closed == false { actions.append(.closeUpstream) }
            upstream = nil
        }
        let answer = ProxyErrorResponse.bytes(status: status, error: message, upstream: f.target.addressText, close: !f.keepAlive,
                                              http10KeepAlive: f.keepAlive && f.clientIsHTTP10)
        f.record.status = status
        f.record.error = message
        f.record.done = env.wallClock()
        noteClientFinished(&f.record)
        let (number, keepAlive) = (f.number, f.keepAlive)
        answerRecord = f.record
        feedClient(.answeredRaw(number: number, head: answer, body: [], keepAlive: keepAlive), env)
    }

    /// Closes once the queued answers are sent. Until then the stalled-reader deadline holds, as on a kept-alive
    /// connection: a client that takes none of them for the idle timeout is reset, not kept with its answer in memory
    /// (hostile tester: `Connection: close` or HTTP/1.0 clients that never read held 20 MB answers indefinitely).
    private mutating func closeAfterAnswers(_ env: some ProxySessionEnvironment) {
        closingAfterFlush = true
        stalledReader.drained(at: env.monotonicClock())
        wait(for: .client(.stalledReader), env)
        actions.append(.closeClient(afterFlush: true))
    }

    /// An exchange answered after the client finished sending: the client may have half-closed (and got the answer) or
    /// closed (and gave up at that moment); the record keeps the moment and says so.
    private func noteClientFinished(_ r: inout ExchangeRecord) {
        guard let at = clientFinishedAt else { return }
        r.clientAbortAt = at
        r.error = "client closed its side of the connection (FIN) before the response; answered anyway, as a client that only "
            + "half-closed waits for it" + (r.error.map { "; \($0)" } ?? "")
    }

    private func fillUpstreamTimes(_ r: inout ExchangeRecord) {
        guard let link = upstream else { return }
        r.upstreamConnect = link.connectedAt
        r.tlsDone = link.tlsDoneAt
        r.requestSent = link.requestSentAt
    }
}

/// A CONNECT tunnelled byte for byte without interception: the upstream's TCP connection, what the client sent
/// before it was up, the ClientHello read from the first bytes, and the counts for the record.
struct PassThrough {
    let target: HostPort
    let decidedBy: String
    let startedAt: Double
    var connected = false
    var connectedAt: Double?
    /// Client bytes waiting for the upstream's TCP connection.
    var pending: [UInt8] = []
    /// The client's first bytes, kept until the ClientHello in them is read (at most `TLSClientHello.maxBytes`).
    var helloBytes: [UInt8] = []
    var hello: TLSClientHello.Outcome = .needMore
    var bytesUp = 0
    var bytesDown = 0
    var recorded = false
    /// The client finished sending (its FIN, passed on to the upstream), and the upstream (its FIN, passed on to the
    /// client): the tunnel ends when both have, when either side fails or closes, or at the idle timeout.
    var clientDone = false
    var upstreamDone = false

    /// The record of the tunnel (an exchange with method CONNECT), as it ended.
    func record(connectionID: Int64, status: Int, ended: String, error: String?, mask: Bool, at now: Double) -> ExchangeRecord {
        let address = target.description
        var r = ExchangeRecord(connectionID: connectionID, seq: 1, method: "CONNECT", url: address, host: target.host, path: nil,
                               upstream: address, request: CapturedMessage(headers: [], body: [], wireSize: bytesUp), requestStart: startedAt)
        r.mask = mask
        r.status = status
        r.response = CapturedMessage(headers: [], body: [], wireSize: bytesDown)
        r.upstreamConnect = connectedAt
        r.done = now
        r.error = error
        var sni: String?
        var alpn: [String]?
        if case let .hello(h) = hello {
            sni = h.serverName
            alpn = h.alpn.isEmpty ? nil : h.alpn
        }
        r.tunnel = TunnelAnnotation(host: target.host, port: Int(target.port), sni: sni, alpnOffered: alpn, bytesUp: bytesUp,
                                    bytesDown: bytesDown, ended: ended, decidedBy: decidedBy)
        return r
    }
}

extension ProxySessionMachine {
    /// Starts tunnelling a CONNECT untouched, from `early` (what the client sent after it): connect to its target, answer
    /// 200 once connected, then copy bytes both ways (the client side holds no budget for it any more).
    private mutating func startPassThrough(_ target: HostPort, decidedBy: String, early: [UInt8], _ env: some ProxySessionEnvironment) {
        passThrough = PassThrough(target: target, decidedBy: decidedBy, startedAt: env.wallClock())
        if !early.isEmpty { tunnelClientBytes(early, env) }
        wait(for: .upstream, env)
        actions.append(.log("\(peer): CONNECT \(target) passed through (\(decidedBy))"))
        actions.append(.connectUpstream(Target(tls: false, address: target, hostHeader: target.description, path: "")))
    }

    private mutating func tunnelEvent(_ event: Event, _ env: some ProxySessionEnvironment) {
        guard !closed else { return }
        switch event {
        case let .clientBytes(bytes):
            tunnelClientBytes(bytes, env)
        case .clientFinishedSending:
            passThrough?.clientDone = true
            if passThrough?.connected != true {
                endTunnel(status: 502, ended: "client finished sending before the upstream was reached", error: nil, env)
            } else if passThrough?.upstreamDone == true {
                endBothFinished(env)
            } else {
                actions.append(.shutdownUpstreamWrite) // the upstream reads the end of the client's stream
            }
        case .upstreamFinishedSending:
            guard passThrough?.connected == true else { return tunnelEvent(.upstreamClosed(nil), env) }
            passThrough?.upstreamDone = true
            if passThrough?.clientDone == true {
                endBothFinished(env)
            } else {
                actions.append(.shutdownClientWrite) // the client reads the end, and may still send
            }
        case .clientClosed, .recorderStopping:
            var ended = "recorder stopped"
            if case let .clientClosed(error, _, _) = event { ended = "client closed" + (error.map { " (\($0))" } ?? "") }
            endTunnel(status: passThrough?.connected == true ? 200 : 502, ended: ended, error: nil, env)
            closed = true
            deadline = 0
            actions.append(.closeUpstream)
            actions.append(.ended)
        case .upstreamConnected(let connectedAt, _):
            guard var t = passThrough.take() else { return }
            t.connected = true
            t.connectedAt = connectedAt ?? env.wallClock()
            actions.append(.writeClient(HTTPRequestIntake.connectEstablished))
            if !t.pending.isEmpty { actions.append(.writeUpstream(t.pending)) }
            t.pending = []
            passThrough = t
            if readingPaused { resumeReading() }
            wait(for: .idle, env)
        case let .upstreamBytes(bytes):
            passThrough?.bytesDown += bytes.count
            actions.append(.writeClient(bytes))
            wait(for: .idle, env)
        case let .upstreamClosed(failure):
            if passThrough?.connected == true {
                let why: String? = switch failure {
                case nil: nil
                case let .connect(m)?, let .tls(m)?, let .other(m)?: m
                }
                endTunnel(status: 200, ended: "upstream closed" + (why.map { " (\($0))" } ?? ""), error: why, env)
                actions.append(.closeClient(afterFlush: true))
            } else {
                let why: String = switch failure {
                case let .connect(m)?, let .tls(m)?, let .other(m)?: m
                case nil: "closed the connection"
                }
                refuseTunnel(502, "upstream \(passThrough?.target.description ?? "?") unreachable: \(why)", env)
            }
        case .deadlinePassed:
            deadline = 0
            if passThrough?.connected == true {
                endTunnel(status: 200, ended: "idle for \(Checked.clampedInt(config.idleTimeout)) s", error: nil, env)
                actions.append(.closeUpstream)
                actions.append(.closeClient(afterFlush: true))
            } else {
                refuseTunnel(504, "upstream \(passThrough?.target.description ?? "?") not reached within \(Checked.clampedInt(config.upstreamTimeout)) s", env)
            }
        case .resume, .clientDrained, .written:
            break
        }
    }

    private mutating func tunnelClientBytes(_ bytes: [UInt8], _ env: some ProxySessionEnvironment) {
        guard var t = passThrough.take() else { return }
        t.bytesUp += bytes.count
        if case .needMore = t.hello {
            t.helloBytes += bytes.prefix(TLSClientHello.maxBytes - t.helloBytes.count)
            t.hello = TLSClientHello.read(t.helloBytes)
            if case .needMore = t.hello {} else { t.helloBytes = [] }
        }
        if t.connected {
            actions.append(.writeUpstream(bytes))
            passThrough = t
            wait(for: .idle, env)
        } else {
            t.pending += bytes
            passThrough = t
            // The upstream is not up yet: hold a little, then stop reading until it is.
            if policy.readAhead.exceeded(by: t.pending.count), !readingPaused { pauseReading() }
        }
    }

    /// Both sides finished sending, each FIN passed on: the tunnel is over (the client's queued bytes go out first).
    private mutating func endBothFinished(_ env: some ProxySessionEnvironment) {
        endTunnel(status: 200, ended: "both sides finished sending", error: nil, env)
        actions.append(.closeUpstream)
        actions.append(.closeClient(afterFlush: true))
    }

    /// The upstream could not be reached: the client gets the error instead of `200 Connection established`.
    private mutating func refuseTunnel(_ status: Int, _ message: String, _ env: some ProxySessionEnvironment) {
        actions.append(.log("\(peer): \(status) \(message)"))
        endTunnel(status: status, ended: message, error: message, env)
        actions.append(.closeUpstream)
        actions.append(.writeClient(ProxyErrorResponse.bytes(status: status, error: message, upstream: passThrough?.target.description, close: true)))
        actions.append(.closeClient(afterFlush: true))
    }

    /// Records the tunnel once, as it ended.
    private mutating func endTunnel(status: Int, ended: String, error: String?, _ env: some ProxySessionEnvironment) {
        guard let t = passThrough, !t.recorded else { return }
        passThrough?.recorded = true
        actions.append(.record(t.record(connectionID: connectionID, status: status, ended: ended, error: error, mask: config.mask,
                                        at: env.wallClock())))
    }
}

/// The JSON error answers the proxy itself gives (malformed requests, unreachable upstreams, timeouts): as every server's
/// (`HTTPErrorAnswer`), plus an `X-3dstape-Error` field and the proxy's members.
enum ProxyErrorResponse {
    /// The recorder's refusals in this shape, for a connection's `ConnectionErrorShape`: each server's message, except
    /// over the budget (which names the limit, `budgetLimit` bytes) and a request cut short by a FIN (answered 400,
    /// where a server closes without an answer); always with `Connection: close`.
    static func shape(budgetLimit: Int) -> ConnectionErrorShape {
        ConnectionErrorShape { refusal in
            let own: (status: Int, message: String)? = switch refusal {
            case .overBudget: (503, "request bytes held in memory across connections exceed --max-buffered (\(budgetLimit) bytes); try again")
            case .cutShort: (400, "the client finished sending before its request was complete")
            case .requestTimedOut, .refused: nil
            }
            guard let said = own ?? ConnectionErrorShape.message(for: refusal) else { return nil }
            var headers: [(String, String)] = []
            if case let .refused(_, _, extra) = refusal { headers = extra }
            return ConnectionErrorShape.Answer(status: said.status, message: said.message,
                                               bytes: bytes(status: said.status, error: said.message, upstream: nil, close: true,
                                                            extraHeaders: headers))
        }
    }

    /// `close`: the connection closes after it (`Connection: close`); `http10KeepAlive`: an HTTP/1.0 client's connection
    /// is kept (`Connection: keep-alive`, without which it would wait for the close).
    static func bytes(status: Int, error: String, upstream: String?, close: Bool, http10KeepAlive: Bool = false,
                      extraHeaders: [(String, String)] = []) -> [UInt8] {
        // The one error shape (HTTPErrorAnswer), with the proxy's own members after `error`: what it answered and that
        // the answer is the proxy's, not the upstream's.
        var members: [(String, JSON)] = [("status", .number(String(status))), ("proxy", .string("3dstape"))]
        if let upstream { members.append(("upstream", .string(upstream))) }
        let body = HTTPErrorAnswer.body(error, members) + [0x0A]
        var headers = HTTPHeaders([("Content-Type", "application/json"), ("Content-Length", String(body.count)), ("X-3dstape-Error", "1")]
                                  + extraHeaders)
        if close { headers.add("Connection", "close") } else if http10KeepAlive { headers.add("Connection", "keep-alive") }
        return HTTPResponseHead(status: status, headers: headers).bytes + body
    }
}
