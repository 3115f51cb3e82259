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
public typealias HTTPHandler = (_ request: HTTPRequest, _ peer: ServerPeer, _ respond: @escaping (HTTPReply) -> Void) -> Void

/// Which connection of an `HTTPServer` a request came on: a number the server gives each connection it accepts (never
/// reused while the server lives) and the client's address, for logs and records. Two connections from one address
/// (a client that reconnects from the same port, or a NAT) are two peers: state kept per connection is keyed by this,
/// not by the address text.
public struct ServerPeer: Hashable, Sendable, CustomStringConvertible {
    /// The connection's number on its server (1, 2, …).
    public let connection: Int
    /// `host:port` of the client.
    public let address: String
    public init(connection: Int, address: String) {
        self.connection = connection
        self.address = address
    }
    public var description: String { address }
    /// Hashed by the connection's number alone (unique on its server; the address only says where it came from): the
    /// replayer looks its state up by peer several times an exchange, and hashing the address text cost each lookup.
    public func hash(into hasher: inout Hasher) { hasher.combine(connection) }
}

/// How a request of an `HTTPServer` is answered: a reply the server sends (keeping the connection alive as the request
/// asks), or the connection handed over to whoever answers, who then writes, closes or resets it as it likes (the
/// replayer's transport faults); the server takes nothing more from a connection it handed over.
public enum HTTPServerAnswer {
    case reply(HTTPReply)
    /// Called on the loop with the connection; the server's deadlines for it are cancelled.
    case takeOver((Connection) -> Void)
}

/// An `HTTPHandler` that may also take connections over (`HTTPServerAnswer`).
public typealias HTTPAnsweringHandler = (_ request: HTTPRequest, _ peer: ServerPeer, _ respond: @escaping (HTTPServerAnswer) -> Void) -> Void

/// A small HTTP/1.1 server on an event loop: keep-alive, one request at a time per connection, pipelined requests
/// taken in turn, optional TLS. For the sandbox, the client's RReq listener, the web inspector and the replayer.
/// Requests are taken by `HTTPRequestIntake`, as the recording proxy takes its clients' (limits, credentials, CONNECT,
/// `100 Continue`).
///
/// Memory per connection stays bounded whatever the client does: at most `ReadAheadLimit.pipelined` bytes
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
    public var onClientAbort: ((_ peer: ServerPeer) -> Void)?
    /// Called on the loop when a client finishes sending (a FIN) while its request is still unanswered. The answer is
    /// still written (a half-close is not an abort), but on the wire a client that gave up and closed looks the same
    /// until then, so the moment is worth keeping: it is when a timing-out client gave up.
    public var onClientFinishedSending: ((_ peer: ServerPeer) -> Void)?
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
    /// Connections accepted so far: the next one is numbered one more (`ServerPeer.connection`).
    private var connectionsAccepted = 0
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
    /// The most answer bytes any one connection had waiting for its client at once, counted as each answer is queued
    /// (a client that does not read keeps this at `maxUnsentBytes` plus one answer at most).
    public private(set) var peakUnsentBytes = 0
    /// Credentials every client must present (`--auth`), or nil on loopback.
    public var authorization: ClientAuthorization?
    /// CONNECT targets tunnelled byte for byte instead of intercepted (`replay --pass-through`); nil: every one intercepted.
    public var passesThrough: ((HostPort) -> Bool)?
    /// Called on the loop when a tunnel (`passesThrough`) ends, with what was seen of it.
    public var onTunnelEnded: ((TunnelReport) -> Void)?
    /// Whether each connection's reads take the kernel's receive time of their bytes (`Connection.stampArrivals`), so that
    /// a handler can count from when its request arrived (`EventLoop.inputArrivedNanos`, while it is being delivered):
    /// the replayer's delays. Set before `start`.
    public var stampsArrivals = false
    /// Operational log lines (accepting paused for lack of file descriptors …).
    public var onLog: ((String) -> Void)?

    /// Told, on the loop, of each request the server refused with an answer of its own (400 malformed, 408, 413, 431, 503
    /// over --max-buffered …): the peer, and the status and message it answered. The replayer stores each as a `rejected`
    /// event, as the recorder does.
    public var onRefused: ((_ peer: ServerPeer, _ status: Int, _ message: String) -> Void)?
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
        if stampsArrivals { l.stampArrivals() }
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
                             evictIdle: { closeLongestIdle() }, log: { onLog?($0) }) else { return }
        connectionsAccepted &+= 1
        let sc = ServerConnection(server: self, peer: ServerPeer(connection: connectionsAccepted, address: peer))
        let c: Connection
        do {
            c = try Connection.accepted(fd: fd, peer: peer, loop: loop, delegate: sc)
        } catch {
            close(fd)
            return
        }
        sc.connection = c
        if stampsArrivals { c.stampArrivals() }
        accepted.value.connections[ObjectIdentifier(sc)] = sc
        sc.start()
        if let tls {
            // A client that connects by IP address sends no SNI: it gets a leaf for the address it reached and localhost.
            do {
                c.startTLS(try TLSSession(context: tls, serverName: nil, fallbackNames: [Listener.localHost(of: fd), "localhost"].compactMap { $0 }))
            } catch { c.close() }
        }
    }

    /// Closes the connection idle the longest (see `ServerConnection.idleSince`), to make room for a new one at the
    /// connection cap; false when every connection holds a request or an answer.
    private func closeLongestIdle() -> Bool {
        guard let oldest = Listener.longestIdle(accepted.value.connections.values, idleKey: \.idleSince,
                                                isQuiet: { $0.connection?.isQuiet == true }) else { return false }
        oldest.closeIdle()
        return true
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

/// The I/O driver of one client connection of an `HTTPServer`: carries socket and timer events into its
/// `ServerConnectionMachine` and performs the actions that come out (writes, pauses, the one deadline timer, TLS, the
/// handler's requests, tunnels). It holds no protocol logic of its own. Events that arise while actions are being
/// performed (a handler answering from inside its call) are queued and fed in turn, never by recursion, so a thousand
/// pipelined requests answered at once use one stack frame, not a thousand.
private final class ServerConnection: ConnectionDelegate, ServerConnectionEnvironment {
    weak var server: HTTPServer?
    let peer: ServerPeer
    var connection: Connection?
    private var machine: ServerConnectionMachine
    /// The one timer of the connection (the machine's armed deadline).
    private var timer: TimerHandle?
    /// The CONNECT tunnelled untouched, once the connection is one (every byte is then the tunnel's).
    private var tunnel: TunnelRelay?
    /// Events waiting to be fed, and whether actions are being performed now.
    private var pending: [ServerConnectionMachine.Event] = []
    private var feeding = false
    /// `written` waits to be fed (asked for by `reportWhenWritten`, after the actions being performed).
    private var writtenPending = false
    /// The machine's actions for the event being fed (kept, so that no array is made per event).
    private var actions: [ServerConnectionMachine.Action] = []
    /// The last request actually given to the handler (a client that closes while it is unanswered gave up).
    private var handedToHandler = 0
    /// What a handler that took the connection over does with it, by request number.
    private var takeOver: (number: Int, use: (Connection) -> Void)?
    /// What the connection holds of the server's `BufferBudget`.
    private var budgetShare = BufferBudget.Share()
    /// When the machine last armed its idle deadline (monotonic ns), nil while another deadline or none is armed.
    private var idleArmedAt: UInt64?

    /// Since when the connection has been idle (monotonic ns): it holds no request (none begun, none with the handler)
    /// and no answer bytes, and is no tunnel or handed-over connection. Nil otherwise. The server closes the one idle the
    /// longest when a new connection comes at the connection cap.
    var idleSince: UInt64? {
        guard let idleArmedAt, !machine.busy, !machine.closing, tunnel == nil, takeOver == nil,
              let connection, connection.unsentByteCount == 0 else { return nil }
        return idleArmedAt
    }

    /// Closes the connection as its idle deadline would (the server needs its slot).
    func closeIdle() { connection?.close() }

    init(server: HTTPServer, peer: ServerPeer) {
        self.server = server
        self.peer = peer
        machine = ServerConnectionMachine(
            policy: ConnectionPolicy(headerTimeout: server.headerTimeout, idleTimeout: server.idleTimeout,
                                     output: OutputBackpressure(highWater: server.maxUnsentBytes)),
            rules: .init(limits: server.limits, authorization: server.authorization, acceptsConnect: server.intercepting != nil,
                         connectRefusal: "CONNECT is not taken here: this server is not started as a proxy"))
    }

    func start() { perform(machine.start()) }

    /// Feeds an event and performs what the machine asks, in order; an event that arrives meanwhile waits its turn.
    func feed(_ event: ServerConnectionMachine.Event) {
        guard !feeding else { pending.append(event); return }
        feeding = true
        defer { feeding = false }
        run(event)
        var next = 0
        while writtenPending || next < pending.count {
            if writtenPending {
                writtenPending = false
                run(.written)
                continue
            }
            let e = pending[next]
            next += 1
            run(e)
        }
        if !pending.isEmpty { pending.removeAll(keepingCapacity: true) }
    }

    /// Feeds one event and performs its actions.
    private func run(_ event: ServerConnectionMachine.Event) {
        machine.handle(event, self, into: &actions)
        perform(actions)
        actions.removeAll(keepingCapacity: true)
    }

    private func perform(_ actions: [ServerConnectionMachine.Action]) {
        guard let connection, let server else { return }
        for action in actions {
            // Once the connection closed (a write failed), what remains to do for it is moot.
            guard !connection.isClosed else { return }
            switch action {
            case let .deliver(number):
                guard let request = machine.takeDelivered() else { continue }
                handedToHandler = number
                server.handler(request, peer) { [weak self] answer in self?.answer(answer, to: number) }
            case let .write(head, body):
                connection.write(head, body)
                server.noteUnsent(connection.unsentByteCount)
            case .reportWhenWritten: writtenPending = true // fed once these actions are performed
            case .pauseReading: connection.pauseReading()
            case .resumeReading: connection.resumeReading()
            case let .arm(kind, seconds):
                idleArmedAt = kind == .idle ? EventLoop.nowNanos() : nil
                if let timer { server.loop.cancel(timer) }
                timer = server.loop.schedule(after: seconds) { [weak self] in
                    self?.timer = nil
                    self?.feed(.deadlinePassed(kind))
                }
            case .cancelDeadline:
                idleArmedAt = nil
                if let timer { server.loop.cancel(timer) }
                timer = nil
            case let .close(afterFlush, _): connection.close(afterFlush: afterFlush)
            case let .startTLS(serverName, early):
                guard let ctx = server.intercepting else { connection.close(); continue }
                do {
                    connection.startTLS(try TLSSession(context: ctx, serverName: serverName), early: early)
                } catch {
                    connection.close()
                }
            case let .passThrough(target, early):
                let relay = TunnelRelay(client: connection, target: target, idleTimeout: server.idleTimeout,
                                        connection: peer.connection) { [weak server] report in
                    server?.onTunnelEnded?(report)
                }
                tunnel = relay
                server.budget.release(&budgetShare)
                relay.start(early: early)
            case let .handOver(number):
                if let t = takeOver, t.number == number {
                    takeOver = nil
                    t.use(connection)
                }
            case .clientFinishedSending: server.onClientFinishedSending?(peer)
            case .budgetExhausted:
                if server.budget.shouldLog(nowNanos: EventLoop.nowNanos()) {
                    server.onLog?("request bytes held in memory reached --max-buffered (\(server.budget.limit) bytes): answering 503 to connections asking for more")
                }
            case .ended: break // only ever the answer to `closed`, which `connectionClosed` feeds and performs itself
            case let .refusing(status, message): server.onRefused?(peer, status, message)
            case let .waitBeforeNextRequest(wait):
                // HTTPServer's environment has no gate (`intakeWait` is nil); a pace, were there one, is timed here.
                if case let .pace(seconds) = wait {
                    server.loop.schedule(after: seconds) { [weak self] in self?.feed(.intakeOpened) }
                }
            }
        }
    }

    /// The handler's answer to request `number`, now (from inside its call) or later.
    func answer(_ answer: HTTPServerAnswer, to number: Int) {
        guard let c = connection, !c.isClosed else { return }
        switch answer {
        case let .reply(reply): feed(.answered(number: number, reply))
        case let .takeOver(use):
            takeOver = (number, use) // used by the `handOver` that follows (the event may wait its turn)
            feed(.takenOver(number: number))
        }
    }

    // MARK: ConnectionDelegate

    func connectionReady(_ connection: Connection) {}

    func connection(_ connection: Connection, received bytes: [UInt8]) {
        if let tunnel { tunnel.clientBytes(bytes); return }
        feed(.received(bytes))
    }

    func connectionInputEnded(_ connection: Connection) -> Bool {
        if let tunnel {
            // Passed on to the upstream; the tunnel ends when both sides have finished (or either closes, or it idles).
            tunnel.clientFinishedSending()
            return true
        }
        feed(.inputEnded)
        return true
    }

    func connectionWroteQueued(_ connection: Connection) {
        if let tunnel { tunnel.clientDrained(); return }
        feed(.outputDrained)
    }

    func connectionClosed(_ connection: Connection, error: ConnectionError?) {
        tunnel?.clientClosed()
        tunnel = nil
        if case let .tls(reason)? = error, !connection.isReady { server?.handshakeFailed(peer.address, reason) }
        if let timer { server?.loop.cancel(timer) }
        timer = nil
        server?.budget.release(&budgetShare)
        self.connection = nil
        var unanswered: Int?
        for action in machine.handle(.closed, self) { if case let .ended(n) = action { unanswered = n } }
        if let unanswered, unanswered == handedToHandler { server?.onClientAbort?(peer) }
        server?.ended(self)
    }

    // MARK: ServerConnectionEnvironment

    func monotonicNanos() -> UInt64 { EventLoop.nowNanos() }

    func unsentByteCount() -> Int { connection?.unsentByteCount ?? 0 }

    func kernelUnsentBytes() -> Int? { connection?.kernelUnsentBytes }

    func holdBudget(_ bytes: Int) -> Bool { server?.budget.hold(&budgetShare, bytes) ?? true }

    func passesThrough(_ target: HostPort) -> Bool { server?.passesThrough?(target) == true }
}
