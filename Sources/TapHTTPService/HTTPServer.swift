import Glibc
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

    func bytes(keepAlive: Bool) -> [UInt8] {
        var h = HTTPHeaders(headers)
        h.replaceOrAdd("Content-Length", String(body.count))
        if !keepAlive { h.replaceOrAdd("Connection", "close") }
        return HTTPResponseHead(status: status, headers: h).bytes + body
    }
}

/// Handles one request; calls `respond` once, now or later (on the loop thread), or never (a server
/// that hangs on purpose).
public typealias HTTPHandler = (_ request: HTTPRequest, _ peer: String, _ respond: @escaping (HTTPReply) -> Void) -> Void

/// A small HTTP/1.1 server on an event loop: keep-alive, one request at a time per connection,
/// optional TLS. For the sandbox, the client's RReq listener and the replayer.
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
        let sc = ServerConnection(server: self, peer: peer)
        do {
            let c = try Connection.accepted(fd: fd, peer: peer, loop: loop, delegate: sc)
            sc.connection = c
            if let tls { c.startTLS(try TLSSession(context: tls, serverName: nil)) }
        } catch {
            return
        }
        connections[ObjectIdentifier(sc)] = sc
    }

    fileprivate func ended(_ sc: ServerConnection) { connections.removeValue(forKey: ObjectIdentifier(sc)) }
}

private final class ServerConnection: ConnectionDelegate {
    weak var server: HTTPServer?
    let peer: String
    var connection: Connection?
    var parser = HTTPParser(mode: .request)
    var busy = false
    /// The CONNECT target once the connection is an intercepted tunnel.
    var tunnel: HostPort?

    init(server: HTTPServer, peer: String) {
        self.server = server
        self.peer = peer
    }

    func connectionReady(_ connection: Connection) {}

    func connection(_ connection: Connection, received bytes: [UInt8]) {
        parser.append(bytes)
        next()
    }

    func connectionClosed(_ connection: Connection, error: ConnectionError?) {
        self.connection = nil
        if busy { server?.onClientAbort?(peer) }
        server?.ended(self)
    }

    func next() {
        guard !busy, let connection, let server else { return }
        var request: HTTPRequest
        do {
            guard let r = try parser.nextRequest() else { return }
            request = r
        } catch {
            connection.write(HTTPReply.json(Array("{\"error\":\"\(error.message)\"}".utf8), status: error.status == 502 ? 400 : error.status)
                .bytes(keepAlive: false))
            connection.close(afterFlush: true)
            return
        }
        if request.head.method == "CONNECT" {
            guard let ctx = server.intercepting, tunnel == nil, let hp = HostPort(request.head.target) else {
                connection.write(HTTPReply.json(Array("{\"error\":\"CONNECT needs host:port, once per connection\"}".utf8), status: 400)
                    .bytes(keepAlive: false))
                connection.close(afterFlush: true)
                return
            }
            connection.write(Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8))
            do {
                connection.startTLS(try TLSSession(context: ctx, serverName: hp.host))
            } catch {
                connection.close()
                return
            }
            tunnel = hp
            return next()
        }
        if let tunnel, request.head.target.hasPrefix("/") {
            request.head.target = "https://\(tunnel)\(request.head.target)"
        }
        busy = true
        let keepAlive = request.head.keepAlive
        server.handler(request, peer) { [weak self] reply in
            guard let self, let c = self.connection else { return }
            c.write(reply.bytes(keepAlive: keepAlive))
            self.busy = false
            if keepAlive { self.next() } else { c.close(afterFlush: true) }
        }
    }
}
