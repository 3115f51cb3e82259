import Glibc
import TapCore
import TapCrypto
import TapHTTP
import TapNet

/// A response to send: status, headers and body. Content-Length is added when sent. A `transport` fault, for
/// replaying failures, changes how (or whether) it reaches the client.
public struct HTTPReply: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]
    public var transport: TransportFault?

    /// A failure at the TCP or HTTP layer instead of (or while) sending the reply.
    public enum TransportFault: Sendable, Equatable {
        /// Close the connection without answering.
        case close
        /// Close with a TCP reset.
        case reset
        /// Send these bytes instead of the reply (a truncated or malformed answer), then close.
        case raw([UInt8])
        /// Send the reply's bytes spread over this many seconds, in small pieces.
        case dribble(Double)
    }

    public init(status: Int = 200, headers: [(String, String)] = [], body: [UInt8] = [], transport: TransportFault? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.transport = transport
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
/// that hangs on purpose).
public typealias HTTPHandler = (_ request: HTTPRequest, _ peer: String, _ respond: @escaping (HTTPReply) -> Void) -> Void

/// A small HTTP/1.1 server on an event loop: keep-alive, one request at a time per connection,
/// optional TLS. For the sandbox, the client's RReq listener, the web inspector and the replayer. Requests are taken
/// by `HTTPRequestIntake`, as the recording proxy takes its clients' (limits, credentials, CONNECT, `100 Continue`).
///
/// With `intercepting`, it also serves clients that use it as a proxy: a CONNECT is answered 200 and the
/// tunnel's TLS is terminated with a leaf minted for the requested host; requests inside the tunnel are
/// handed over with an absolute `https://host:port/path` target, as a plain proxied request would be.
public final class HTTPServer: @unchecked Sendable {
    // Safe: all mutable state is used only on `loop`'s thread.
    public let loop: EventLoop
    let tls: TLSContext?
    let intercepting: TLSContext?
    let handler: HTTPHandler
    private var listener: Listener?
    private var connections: [ObjectIdentifier: ServerConnection] = [:]
    /// Called on the loop when a client closes its connection while its request is still unanswered
    /// (a client that gave up), with the peer address.
    public var onClientAbort: ((_ peer: String) -> Void)?
    /// A request begun and not complete within this many seconds is answered 408 and the connection closed
    /// (slow-loris clients: headers or bodies trickled a byte at a time).
    public var headerTimeout: Double = 30
    /// An idle keep-alive connection is closed after this many seconds.
    public var idleTimeout: Double = 120
    /// Parsing limits (head size, body size).
    public var limits = HTTPLimits()
    /// Connections served at once; more are answered 503 and closed (with a log line).
    public var maxConnections = 1024
    private var turnAwayLog = LogThrottle()
    /// Request bytes held in memory across all connections (`--max-buffered`); past it a connection asking for more gets 503.
    public var maxBufferedBytes: Int {
        get { budget.limit }
        set { budget.limit = newValue }
    }
    let budget = BufferBudget(limit: 512 << 20)
    /// Credentials every client must present (`--auth`), or nil on loopback.
    public var authorization: ClientAuthorization?
    /// Operational log lines (accepting paused for lack of file descriptors …).
    public var onLog: ((String) -> Void)?
    /// Connections open now.
    public var connectionCount: Int { connections.count }

    public init(loop: EventLoop, tls: TLSContext? = nil, intercepting: TLSContext? = nil, handler: @escaping HTTPHandler) {
        self.loop = loop
        self.tls = tls
        self.intercepting = intercepting
        self.handler = handler
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
        listener = l
        return l.address
    }

    /// Stops accepting and closes every connection.
    public func stop() {
        listener?.close()
        listener = nil
        for c in connections.values { c.connection?.close() }
        connections.removeAll()
    }

    private func accept(_ fd: Int32, _ peer: String) {
        guard Listener.admit(fd, open: connections.count, max: maxConnections, tls: tls != nil, throttle: &turnAwayLog,
                             log: { onLog?($0) }) else { return }
        let sc = ServerConnection(server: self, peer: peer)
        do {
            let c = try Connection.accepted(fd: fd, peer: peer, loop: loop, delegate: sc)
            sc.connection = c
            if let tls { c.startTLS(try TLSSession(context: tls, serverName: nil)) }
        } catch {
            return
        }
        connections[ObjectIdentifier(sc)] = sc
        sc.arm(.idle)
    }

    /// A JSON error body (the message may quote the client's bytes, so it is escaped, never interpolated).
    static func errorBody(_ message: String) -> [UInt8] { JSON.object([("error", .string(message))]).bytes }

    fileprivate func ended(_ sc: ServerConnection) { connections.removeValue(forKey: ObjectIdentifier(sc)) }
}

private final class ServerConnection: ConnectionDelegate {
    weak var server: HTTPServer?
    let peer: String
    var connection: Connection?
    /// Requests as every 3dstape server takes them (parsing, limits, credentials, CONNECT, `100 Continue`).
    var intake: HTTPRequestIntake
    var busy = false
    /// Reading stopped because a client kept sending while its request was being answered.
    var pausedWhileBusy = false
    /// The one timer of the connection: idle between requests, or the deadline of a request being received.
    var timer: TimerHandle?
    var timerKind: Wait = .idle

    enum Wait { case idle, request }

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
        timer = server.loop.schedule(after: kind == .idle ? server.idleTimeout : server.headerTimeout) { [weak self] in
            self?.deadlinePassed()
        }
    }

    func disarm() {
        if let timer { server?.loop.cancel(timer) }
        timer = nil
    }

    func deadlinePassed() {
        timer = nil
        guard let connection, !busy else { return }
        switch timerKind {
        case .idle:
            connection.close()
        case .request:
            let timeout = Checked.clampedInt(server?.headerTimeout ?? 0)
            connection.write(HTTPReply.json(HTTPServer.errorBody("request not received within \(timeout) s"), status: 408).bytes(keepAlive: false))
            connection.close(afterFlush: true)
        }
    }

    func connectionReady(_ connection: Connection) {}

    /// Writes `bytes` in about 20 pieces spread evenly over `seconds`, then closes (WireMock's chunkedDribbleDelay).
    func dribble(_ bytes: [UInt8], over seconds: Double) {
        guard let server else { return }
        let pieces = max(1, min(20, bytes.count))
        let size = (bytes.count + pieces - 1) / pieces
        for i in 0..<pieces {
            let chunk = Array(bytes[min(bytes.count, i * size)..<min(bytes.count, (i + 1) * size)])
            let last = i == pieces - 1
            server.loop.schedule(after: seconds * Double(i) / Double(max(1, pieces - 1))) { [weak self] in
                guard let c = self?.connection else { return }
                c.write(chunk)
                if last { c.close(afterFlush: true) }
            }
        }
    }

    func connection(_ connection: Connection, received bytes: [UInt8]) {
        // Requests here carry no recorded start time (the handlers keep their own clocks).
        intake.received(bytes, wallClock: 0)
        if let server, !server.budget.hold(ObjectIdentifier(self), intake.bufferedCount) {
            if server.budget.shouldLog(nowNanos: EventLoop.nowNanos()) {
                server.onLog?("request bytes held in memory reached --max-buffered (\(server.budget.limit) bytes): answering 503 to connections asking for more")
            }
            disarm()
            connection.write(HTTPReply.json(HTTPServer.errorBody("request bytes held in memory exceed --max-buffered; try again"), status: 503)
                .bytes(keepAlive: false))
            connection.close(afterFlush: true)
            return
        }
        if busy {
            if intake.bufferedCount > ServerConnection.readAheadAllowance, !connection.readingPaused {
                connection.pauseReading()
                pausedWhileBusy = true
            }
            return
        }
        next()
    }

    func connectionClosed(_ connection: Connection, error: ConnectionError?) {
        disarm()
        server?.budget.release(ObjectIdentifier(self))
        self.connection = nil
        if busy { server?.onClientAbort?(peer) }
        server?.ended(self)
    }

    func next() {
        guard !busy, let connection, let server else { return }
        if pausedWhileBusy {
            pausedWhileBusy = false
            connection.resumeReading()
        }
        var step = intake.next(wallClock: 0)
        if case .sendContinue = step {
            connection.write(HTTPRequestIntake.continueBytes)
            step = intake.next(wallClock: 0)
        }
        var request: HTTPRequest
        switch step {
        case .needMore, .sendContinue:
            if intake.isIdle { if timerKind != .idle || timer == nil { arm(.idle) } } else if timerKind != .request || timer == nil { arm(.request) }
            return
        case let .refuse(status, message, headers):
            disarm()
            var reply = HTTPReply.json(HTTPServer.errorBody(message), status: status)
            reply.headers += headers
            connection.write(reply.bytes(keepAlive: false))
            connection.close(afterFlush: true)
            return
        case let .intercept(target):
            disarm()
            guard let ctx = server.intercepting else { connection.close(); return }
            connection.write(HTTPRequestIntake.connectEstablished)
            do {
                connection.startTLS(try TLSSession(context: ctx, serverName: target.host))
            } catch {
                connection.close()
                return
            }
            return next()
        case let .request(r, _):
            request = r
        }
        _ = server.budget.hold(ObjectIdentifier(self), intake.bufferedCount)
        disarm()
        if let tunnel = intake.tunnel, request.head.target.hasPrefix("/") {
            request.head.target = "https://\(tunnel)\(request.head.target)"
        }
        busy = true
        let keepAlive = request.head.keepAlive
        server.handler(request, peer) { [weak self] reply in
            guard let self, let c = self.connection else { return }
            self.busy = false // answered (even by a fault): a close from here on is not the client giving up
            switch reply.transport {
            case nil:
                c.write(reply.head(keepAlive: keepAlive), reply.body)
                if keepAlive { self.next() } else { c.close(afterFlush: true) }
            case .close?:
                c.close()
            case .reset?:
                c.reset()
            case let .raw(bytes)?:
                c.write(bytes)
                c.close(afterFlush: true)
            case let .dribble(seconds)?:
                self.dribble(reply.bytes(keepAlive: false), over: seconds)
            }
        }
    }
}
