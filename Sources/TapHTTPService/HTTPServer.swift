#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TapCore
import TapCrypto
import TapHTTP
import TapNet

/// A response to send: status, headers and body. Content-Length is added when sent.
public struct HTTPReply: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int = 200, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON reply.
    public static func json(_ body: [UInt8], status: Int = 200, contentType: String = "application/json") -> HTTPReply {
        HTTPReply(status: status, headers: [("Content-Type", contentType)], body: body)
    }

    /// An HTML reply.
    public static func html(_ text: String, status: Int = 200) -> HTTPReply {
        HTTPReply(status: status, headers: [("Content-Type", "text/html; charset=utf-8")], body: Array(text.utf8))
    }

    public func bytes(keepAlive: Bool) -> [UInt8] { head(keepAlive: keepAlive) + body }

    /// The status line and headers (with Content-Length, and `Connection: close` when the connection ends after it).
    public func head(keepAlive: Bool) -> [UInt8] {
        var h = HTTPHeaders(headers)
        h.replaceOrAdd("Content-Length", String(body.count))
        if !keepAlive { h.replaceOrAdd("Connection", "close") }
        return HTTPResponseHead(status: status, headers: h).bytes
    }
}

/// Handles one request; calls `respond` once, now or later (on the loop thread), or never (a server
/// that hangs on purpose). Answering at once, from inside the call, is fine: the server takes a connection's pipelined
/// requests one after another in a loop, never by recursion.
public typealias HTTPHandler = (_ request: HTTPRequest, _ peer: String, _ respond: @escaping (HTTPReply) -> Void) -> Void

/// How a request of an `HTTPServer` is answered: a reply the server sends (keeping the connection alive as the request
/// asks), or the connection handed over to whoever answers, who then writes, closes or resets it as it likes (the
/// replayer's transport faults); the server takes nothing more from a connection it handed over.
public enum HTTPServerAnswer {
    case reply(HTTPReply)
    /// Called on the loop with the connection; the server's deadlines for it are cancelled.
    case takeOver((Connection) -> Void)
}

/// An `HTTPHandler` that may also take connections over (`HTTPServerAnswer`).
public typealias HTTPAnsweringHandler = (_ request: HTTPRequest, _ peer: String, _ respond: @escaping (HTTPServerAnswer) -> Void) -> Void

/// A small HTTP/1.1 server on an event loop: keep-alive, one request at a time per connection, pipelined requests
/// taken in turn, optional TLS. For the sandbox, the client's RReq listener, the web inspector and the replayer.
/// Requests are taken by `HTTPRequestIntake`, as the recording proxy takes its clients' (limits, credentials, CONNECT,
/// `100 Continue`).
///
/// Memory per connection stays bounded whatever the client does: at most `ServerConnection.readAheadAllowance` bytes
/// are read ahead of the answers, and reading stops while more than `maxUnsentBytes` of answers wait for a client that
/// does not read them. A client that half-closes (shuts down its sending side after its requests) gets its answers,
/// then the connection is closed.
///
/// With `intercepting`, it also serves clients that use it as a proxy: a CONNECT is answered 200 and the
/// tunnel's TLS is terminated with a leaf minted for the requested host; requests inside the tunnel are
/// handed over with an absolute `https://host:port/path` target, as a plain proxied request would be.
public final class HTTPServer: @unchecked Sendable {
    // Safe: all mutable state is used only on `loop`'s thread.
    public let loop: EventLoop
    let tls: TLSContext?
    let intercepting: TLSContext?
    let handler: HTTPAnsweringHandler
    /// The listener and the connections it accepted: the loop's, checked (`LoopConfined` traps off the loop in debug builds).
    private let accepted: LoopConfined<Accepted>
    private struct Accepted {
        var listener: Listener?
        var connections: [ObjectIdentifier: ServerConnection] = [:]
    }
    /// Called on the loop when a client closes its connection while its request is still unanswered
    /// (a client that gave up), with the peer address.
    public var onClientAbort: ((_ peer: String) -> Void)?
    /// Called on the loop when a client finishes sending (a FIN) while its request is still unanswered. The answer is
    /// still written (a half-close is not an abort), but on the wire a client that gave up and closed looks the same
    /// until then, so the moment is worth keeping: it is when a timing-out client gave up.
    public var onClientFinishedSending: ((_ peer: String) -> Void)?
    /// A request begun and not complete within this many seconds is answered 408 and the connection closed
    /// (slow-loris clients: headers or bodies trickled a byte at a time).
    public var headerTimeout: Double = 30
    /// An idle keep-alive connection is closed after this many seconds; so is one whose client has not read any of
    /// its waiting answers for as long, and a half-closed one still waiting for its answer.
    public var idleTimeout: Double = 120
    /// Parsing limits (head size, body size).
    public var limits = HTTPLimits()
    /// Connections served at once; more are answered 503 and closed (with a log line).
    public var maxConnections = 1024
    private var turnAwayLog = LogThrottle()
    /// Failed TLS handshakes: one log line a second at most, with how many went unlogged since the last.
    private var handshakeLog = LogThrottle()
    private var handshakesUnlogged = 0
    /// Request bytes held in memory across all connections (`--max-buffered`); past it a connection asking for more gets 503.
    public var maxBufferedBytes: Int {
        get { budget.limit }
        set { budget.limit = newValue }
    }
    let budget = BufferBudget(limit: 512 << 20)
    /// Answer bytes a connection may have waiting for its client before the server stops reading (and answering) its
    /// next requests; it goes on once the client has read them. One answer larger than this is still sent whole.
    public var maxUnsentBytes = 1 << 20
    /// The most answer bytes any one connection had waiting for its client at once, before its next answer was
    /// taken (a client that does not read keeps this at `maxUnsentBytes` plus one answer at most).
    public private(set) var peakUnsentBytes = 0
    /// Credentials every client must present (`--auth`), or nil on loopback.
    public var authorization: ClientAuthorization?
    /// CONNECT targets tunnelled byte for byte instead of intercepted (`replay --pass-through`); nil: every one intercepted.
    public var passesThrough: ((HostPort) -> Bool)?
    /// Called on the loop when a tunnel (`passesThrough`) ends, with what was seen of it.
    public var onTunnelEnded: ((TunnelReport) -> Void)?
    /// Operational log lines (accepting paused for lack of file descriptors …).
    public var onLog: ((String) -> Void)?
    /// Connections open now.
    public var connectionCount: Int { accepted.value.connections.count }
    /// Request bytes the connections hold now (what `maxBufferedBytes` caps).
    public var bufferedBytes: Int { budget.total }
    /// Answer bytes waiting for their clients now, across connections.
    public var unsentBytes: Int { accepted.value.connections.values.reduce(0) { $0 + ($1.connection?.unsentByteCount ?? 0) } }

    public init(loop: EventLoop, tls: TLSContext? = nil, intercepting: TLSContext? = nil, handler: @escaping HTTPHandler) {
        self.loop = loop
        accepted = LoopConfined(Accepted(), on: loop)
        self.tls = tls
        self.intercepting = intercepting
        self.handler = { request, peer, respond in handler(request, peer) { respond(.reply($0)) } }
    }

    /// A server whose handler may take a connection over instead of replying (`HTTPServerAnswer.takeOver`).
    public init(loop: EventLoop, tls: TLSContext? = nil, intercepting: TLSContext? = nil, answering: @escaping HTTPAnsweringHandler) {
        self.loop = loop
        accepted = LoopConfined(Accepted(), on: loop)
        self.tls = tls
        self.intercepting = intercepting
        self.handler = answering
    }

    /// Binds and starts accepting; returns the bound address. Call on the loop thread or before it runs.
    @discardableResult
    public func start(on address: HostPort) throws(NetError) -> HostPort {
        let l = try Listener(loop: loop, address: address) { [weak self] fd, peer in
            guard let self else { close(fd); return }
            self.accept(fd, peer)
        }
        l.onBackoff = { [weak self] line in self?.onLog?(line) }
        try l.start()
        accepted.value.listener = l
        return l.address
    }

    /// Stops accepting and closes every connection.
    public func stop() {
        accepted.value.listener?.close()
        accepted.value.listener = nil
        for c in accepted.value.connections.values { c.connection?.close() }
        accepted.value.connections.removeAll()
    }

    /// Serves a connected, non-blocking socket as if it had been accepted (the server owns `fd` from here on, and
    /// closes it if it cannot be served). On the loop thread.
    public func adopt(fd: Int32, peer: String) {
        accept(fd, peer)
    }

    private func accept(_ fd: Int32, _ peer: String) {
        guard Listener.admit(fd, open: accepted.value.connections.count, max: maxConnections, tls: tls != nil, throttle: &turnAwayLog,
                             log: { onLog?($0) }) else { return }
        let sc = ServerConnection(server: self, peer: peer)
        let c: Connection
        do {
            c = try Connection.accepted(fd: fd, peer: peer, loop: loop, delegate: sc)
        } catch {
            close(fd)
            return
        }
        sc.connection = c
        accepted.value.connections[ObjectIdentifier(sc)] = sc
        sc.arm(.idle)
        if let tls {
            // A client that connects by IP address sends no SNI: it gets a leaf for the address it reached and localhost.
            do {
                c.startTLS(try TLSSession(context: tls, serverName: nil, fallbackNames: [Listener.localHost(of: fd), "localhost"].compactMap { $0 }))
            } catch { c.close() }
        }
    }

    fileprivate func noteUnsent(_ bytes: Int) { peakUnsentBytes = max(peakUnsentBytes, bytes) }

    fileprivate func ended(_ sc: ServerConnection) { accepted.value.connections.removeValue(forKey: ObjectIdentifier(sc)) }

    /// A client's TLS handshake failed (no common version or cipher, a certificate it refused …): logged, rate-limited.
    fileprivate func handshakeFailed(_ peer: String, _ reason: String) {
        guard handshakeLog.allow(nowNanos: EventLoop.nowNanos()) else { handshakesUnlogged += 1; return }
        let more = handshakesUnlogged > 0 ? " (and \(handshakesUnlogged) more since the last line)" : ""
        handshakesUnlogged = 0
        onLog?("client \(peer): \(reason)\(more)") // the reason begins "TLS handshake failed: "
    }
}

/// One client connection of an `HTTPServer`: takes its requests one at a time, in a loop (`takeRequests`), hands each
/// to the handler and writes the answer; reads no further ahead than `readAheadAllowance` while a request is with the
/// handler, and not at all while `maxUnsentBytes` of answers wait for the client.
private final class ServerConnection: ConnectionDelegate {
    weak var server: HTTPServer?
    let peer: String
    var connection: Connection?
    /// Requests as every 3dstape server takes them (parsing, limits, credentials, CONNECT, `100 Continue`).
    var intake: HTTPRequestIntake
    /// A request is with the handler, unanswered.
    var busy = false
    /// Which request the handler has (a `respond` for an earlier one, called again, is ignored).
    var dispatched = 0
    /// Inside `takeRequests`: an answer given meanwhile lets its loop go on instead of starting another.
    var taking = false
    /// The connection closes once what is queued is sent (an answer with `Connection: close`, a refusal, a fault).
    var closing = false
    /// The client half-closed: it sends nothing more, and the connection closes after the last answer.
    var inputEnded = false
    /// Reading stopped because too much arrived while a request was being answered.
    var pausedForReadAhead = false
    /// Reading and answering stopped because `maxUnsentBytes` of answers wait for the client.
    var pausedForOutput = false
    /// When the client last took queued bytes (monotonic ns), for the stalled-reader deadline.
    var lastDrainNanos: UInt64 = 0
    /// The one timer of the connection (see `Wait`).
    var timer: TimerHandle?
    var timerKind: Wait = .idle
    /// The CONNECT tunnelled untouched, once the connection is one (every byte is then the tunnel's).
    var tunnel: TunnelRelay?

    enum Wait {
        /// Between requests (`idleTimeout`).
        case idle
        /// A request begun and not complete (`headerTimeout`).
        case request
        /// The client half-closed and its answer is not given yet (`idleTimeout`).
        case halfClosed
        /// Answers wait for a client that does not read them (`idleTimeout` without progress).
        case stalledReader
    }

    /// Bytes read ahead (pipelined requests) while a request is being answered, before reading pauses.
    static let readAheadAllowance = 256 * 1024

    init(server: HTTPServer, peer: String) {
        self.server = server
        self.peer = peer
        intake = HTTPRequestIntake(rules: .init(limits: server.limits, authorization: server.authorization,
                                                acceptsConnect: server.intercepting != nil,
                                                connectRefusal: "CONNECT is not taken here: this server is not started as a proxy"))
    }

    func arm(_ kind: Wait) {
        guard let server else { return }
        if let timer { server.loop.cancel(timer) }
        timerKind = kind
        let seconds: Double
        switch kind {
        case .idle, .halfClosed, .stalledReader: seconds = server.idleTimeout
        case .request: seconds = server.headerTimeout
        }
        timer = server.loop.schedule(after: seconds) { [weak self] in
            self?.deadlinePassed()
        }
    }

    func disarm() {
        if let timer { server?.loop.cancel(timer) }
        timer = nil
    }

    func deadlinePassed() {
        timer = nil
        guard let connection, let server, !connection.isClosed else { return }
        switch timerKind {
        case .idle:
            if !busy { connection.close() }
        case .request:
            guard !busy else { return }
            let timeout = Checked.clampedInt(server.headerTimeout)
            refuse(HTTPErrorAnswer.reply(status: 408, "request not received within \(timeout) s"))
        case .halfClosed:
            connection.close() // an answer that never came (a hang) does not hold the connection for ever
        case .stalledReader:
            let idle = Double(EventLoop.nowNanos() &- lastDrainNanos) / 1e9
            if idle >= server.idleTimeout {
                connection.close()
            } else {
                timer = server.loop.schedule(after: server.idleTimeout - idle) { [weak self] in self?.deadlinePassed() }
            }
        }
    }

    func connectionReady(_ connection: Connection) {}

    func connection(_ connection: Connection, received bytes: [UInt8]) {
        if let tunnel { tunnel.clientBytes(bytes); return }
        guard !closing else { return }
        // Requests here carry no recorded start time (the handlers keep their own clocks).
        intake.received(bytes, wallClock: 0)
        if let server, !server.budget.hold(ObjectIdentifier(self), intake.bufferedCount) {
            if server.budget.shouldLog(nowNanos: EventLoop.nowNanos()) {
                server.onLog?("request bytes held in memory reached --max-buffered (\(server.budget.limit) bytes): answering 503 to connections asking for more")
            }
            refuse(HTTPErrorAnswer.reply(status: 503, "request bytes held in memory exceed --max-buffered; try again"))
            return
        }
        if busy || pausedForOutput {
            // Not taking requests now: hold a little of what follows, then let the rest wait in the kernel.
            if intake.bufferedCount > ServerConnection.readAheadAllowance, !connection.readingPaused {
                connection.pauseReading()
                pausedForReadAhead = true
            }
            return
        }
        takeRequests()
    }

    func connectionInputEnded(_ connection: Connection) -> Bool {
        if let tunnel {
            // Passed on to the upstream; the tunnel ends when both sides have finished (or either closes, or it idles).
            tunnel.clientFinishedSending()
            return true
        }
        // A half-close is not an abort: what was asked is answered, then the connection closes.
        inputEnded = true
        pausedForReadAhead = false
        if busy {
            server?.onClientFinishedSending?(peer)
            arm(.halfClosed)
        } else if !pausedForOutput {
            takeRequests()
        }
        return true
    }

    func connectionWroteQueued(_ connection: Connection) {
        if let tunnel { tunnel.clientDrained(); return }
        lastDrainNanos = EventLoop.nowNanos()
        guard pausedForOutput, let server, connection.unsentByteCount <= server.maxUnsentBytes / 2 else { return }
        pausedForOutput = false
        disarm()
        takeRequests()
    }

    func connectionClosed(_ connection: Connection, error: ConnectionError?) {
        tunnel?.clientClosed()
        tunnel = nil
        if case let .tls(reason)? = error, !connection.isReady { server?.handshakeFailed(peer, reason) }
        disarm()
        server?.budget.release(ObjectIdentifier(self))
        self.connection = nil
        intake = HTTPRequestIntake(rules: intake.rules) // what the client sent and was not taken is freed now
        if busy { server?.onClientAbort?(peer) }
        server?.ended(self)
    }

    /// Answers an error and closes (nothing after it is read or answered).
    func refuse(_ reply: HTTPReply) {
        guard let connection else { return }
        disarm()
        closing = true
        connection.write(reply.bytes(keepAlive: false))
        connection.close(afterFlush: true)
    }

    /// Takes the client's requests in turn while each is answered at once, in this loop: a handler that answers from
    /// inside its call returns here instead of recursing, so a thousand pipelined requests use one stack frame, not
    /// a thousand. Stops at a request answered later (its answer calls this again), at an incomplete request, or while
    /// `maxUnsentBytes` of answers wait for the client.
    func takeRequests() {
        guard !taking else { return }
        taking = true
        defer { taking = false }
        while !busy, !closing, !pausedForOutput, let connection, !connection.isClosed, let server {
            let unsent = connection.unsentByteCount
            server.noteUnsent(unsent)
            if unsent > server.maxUnsentBytes {
                // The client is not reading its answers: stop reading and answering until it has taken half of them.
                pausedForOutput = true
                connection.pauseReading()
                lastDrainNanos = EventLoop.nowNanos()
                arm(.stalledReader)
                return
            }
            var step = intake.next(wallClock: 0)
            if case .sendContinue = step {
                connection.write(HTTPRequestIntake.continueBytes)
                step = intake.next(wallClock: 0)
            }
            switch step {
            case .needMore, .sendContinue:
                if inputEnded {
                    // Nothing more will come: what was answered goes out, then the connection closes (an incomplete
                    // request is dropped with it).
                    closing = true
                    disarm()
                    connection.close(afterFlush: true)
                    return
                }
                // Everything complete is answered: read again (after a pause for read-ahead or for unsent answers).
                pausedForReadAhead = false
                connection.resumeReading()
                if intake.isIdle {
                    if timerKind != .idle || timer == nil { arm(.idle) }
                } else if timerKind != .request || timer == nil {
                    arm(.request)
                }
                return
            case let .refuse(status, message, headers):
                refuse(HTTPErrorAnswer.reply(status: status, message, headers: headers))
                return
            case let .intercept(target):
                disarm()
                if server.passesThrough?(target) == true {
                    let relay = TunnelRelay(client: connection, target: target, idleTimeout: server.idleTimeout) { [weak server] report in
                        server?.onTunnelEnded?(report)
                    }
                    tunnel = relay
                    server.budget.release(ObjectIdentifier(self))
                    relay.start(early: intake.takeTunnelBytes())
                    return
                }
                guard let ctx = server.intercepting else { connection.close(); return }
                connection.write(HTTPRequestIntake.connectEstablished)
                do {
                    connection.startTLS(try TLSSession(context: ctx, serverName: target.host))
                } catch {
                    connection.close()
                    return
                }
            case let .request(request, _):
                dispatch(request, server)
            }
        }
    }

    /// Hands one request to the handler; its answer comes back through `answer`, now or later.
    func dispatch(_ r: HTTPRequest, _ server: HTTPServer) {
        var request = r
        _ = server.budget.hold(ObjectIdentifier(self), intake.bufferedCount)
        if inputEnded { arm(.halfClosed) } else { disarm() }
        if let tunnel = intake.tunnel, request.head.target.hasPrefix("/") {
            request.head.target = "https://\(tunnel)\(request.head.target)"
        }
        busy = true
        dispatched &+= 1
        let number = dispatched
        let keepAlive = request.head.keepAlive
        server.handler(request, peer) { [weak self] reply in
            self?.answer(reply, to: number, keepAlive: keepAlive)
        }
    }

    /// Writes the answer to request `number` (a second answer to it, or one to a request of a closed connection, is
    /// dropped) and goes on with the next request.
    func answer(_ answer: HTTPServerAnswer, to number: Int, keepAlive: Bool) {
        guard busy, number == dispatched, let c = connection, !c.isClosed else { return }
        busy = false // answered (even by a fault): a close from here on is not the client giving up
        switch answer {
        case let .reply(reply):
            c.write(reply.head(keepAlive: keepAlive), reply.body)
            if !keepAlive {
                closing = true
                disarm()
                c.close(afterFlush: true)
                return
            }
            takeRequests() // returns at once when called from inside takeRequests, whose loop goes on
        case let .takeOver(use):
            closing = true
            disarm()
            use(c)
        }
    }
}
