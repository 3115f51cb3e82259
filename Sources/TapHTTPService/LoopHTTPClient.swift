import Dispatch
import TapCrypto
import TapHTTP
import TapNet
import TapCore

/// One HTTP/1.1 request sent from an event loop's thread without blocking it: connect, TLS if the URL is https,
/// send, read the whole response, call back once on the loop (with the response, or why it failed: connect, TLS,
/// timeout, a malformed answer). For a server that sends requests of its own, such as an ACS's RReq to the 3DS Server
/// (`RReqSender`) and the replayer's `--on-miss forward`, so that none of them needs a thread of its own. Through a
/// forward proxy when one is given, as the blocking client goes: absolute-form for http, a CONNECT tunnel for https.
///
/// `@unchecked Sendable`: used only on its loop's thread, but for one hop out and back: a host name is resolved on a
/// Dispatch thread (a slow resolver must not hold up the loop, whose timers are the replayer's product), and the client
/// returns to the loop with `loop.execute` before anything of it is touched.
public final class LoopHTTPClient: ConnectionDelegate, @unchecked Sendable {
    private let loop: EventLoop
    private let url: HTTPURL
    /// Sent once connected; kept after that only on a reused connection, until the answer starts (to send it again).
    private var request: (head: [UInt8], body: [UInt8])
    private let method: String
    private var parser = HTTPParser(mode: .response)
    private var connection: Connection?
    private var timer: TimerHandle?
    private var completion: ((Result<HTTPResponse, HTTPClientError>) -> Void)?
    /// Where a kept-alive connection comes from and goes back to (nil: one connection per request, closed after it).
    private let pool: LoopHTTPConnectionPool?
    /// The connection came from the pool: if it ends before a byte of the answer, the peer had closed it while idle
    /// and the request goes once more on a new connection (as curl and Go's client do).
    private var reusedConnection = false
    private var answerStarted = false
    private var tls: TLSContext?
    /// The forward proxy the connection goes to, or nil.
    private let proxy: HostPort?
    /// Reads the proxy's answer to CONNECT while the tunnel is being opened (nil: no tunnel, or it is open).
    private var tunnel: HTTPParser?

    /// Sends `method url` with `headers` and `body` (Host, Content-Length and, without a pool, `Connection: close` are
    /// set here) and calls `completion` on the loop's thread once, never from within this call. Call on the loop's
    /// thread. With a `pool` (of the same loop), a kept-alive connection to the same origin is reused and the
    /// connection goes back to it after a complete answer that allows it. With a `proxy` (`http://host:port`, a forward
    /// proxy), the request goes through it; pooled connections are kept per proxy and origin.
    public static func send(_ method: String, _ url: HTTPURL, headers: [(String, String)] = [], body: [UInt8] = [],
                            tls: TLSContext, timeout: Double, on loop: EventLoop, pool: LoopHTTPConnectionPool? = nil,
                            proxy: HostPort? = nil, completion: @escaping (Result<HTTPResponse, HTTPClientError>) -> Void) {
        var h = HTTPHeaders(headers)
        if h["Host"] == nil { h.add("Host", url.hostHeader) }
        h.replaceOrAdd("Content-Length", String(body.count))
        if pool == nil { h.replaceOrAdd("Connection", "close") }
        // A forward proxy takes a plain-http request in absolute form; an https one goes inside the tunnel as usual.
        let target = (proxy != nil && !url.tls) ? url.description : url.path
        let head = HTTPRequestHead(method: method, target: target, headers: h).bytes
        let client = LoopHTTPClient(loop: loop, url: url, head: head, body: body, method: method, pool: pool, proxy: proxy,
                                    completion: completion)
        // The timer holds the client until it finishes; the connection holds it only weakly, as its delegate.
        client.timer = loop.schedule(after: timeout) {
            client.finish(.failure(HTTPClientError(.timeout, "\(method) \(url): no complete response within \(timeout) s")))
        }
        // Connected later on the loop, so that a refusal is reported as every other outcome is: after `send` returns.
        loop.schedule(after: 0) { client.start(tls: tls) }
    }

    private init(loop: EventLoop, url: HTTPURL, head: [UInt8], body: [UInt8], method: String, pool: LoopHTTPConnectionPool?,
                 proxy: HostPort?, completion: @escaping (Result<HTTPResponse, HTTPClientError>) -> Void) {
        self.loop = loop
        self.url = url
        self.request = (head, body)
        self.method = method
        self.pool = pool
        self.proxy = proxy
        self.completion = completion
        parser.requestMethod = method
    }

    private func start(tls: TLSContext) {
        guard completion != nil else { return }
        self.tls = tls
        if let pool, let c = pool.take(LoopHTTPConnectionPool.origin(of: url, proxy: proxy)) {
            reusedConnection = true
            connection = c
            c.delegate = self
            connectionReady(c)
            return
        }
        open(tls: tls)
    }

    /// A new connection (to the proxy when there is one): resolved off the loop unless the host is an address literal,
    /// then connected.
    private func open(tls: TLSContext) {
        let target = proxy ?? url.address
        guard ResolvedAddress.isLiteral(target.host) else {
            DispatchQueue.global().async {
                let numeric = Result { () throws(NetError) -> String in
                    guard let n = try ResolvedAddress(target).numericHost else { throw NetError("cannot resolve \(target.host)", code: 0, reason: "no address") }
                    return n
                }
                self.loop.execute {
                    switch numeric {
                    case let .success(host): self.connect(to: HostPort(host: host, port: target.port), tls: tls)
                    case let .failure(e): self.finish(.failure(HTTPClientError(.connect, "\(e)")))
                    }
                }
            }
            return
        }
        connect(to: target, tls: tls)
    }

    /// Connects to an address the loop can use without a resolver (TLS still names the URL's host).
    private func connect(to address: HostPort, tls: TLSContext) {
        guard completion != nil else { return }
        do {
            let c = try Connection.connect(to: address, loop: loop, delegate: self)
            connection = c
            if url.tls, proxy != nil {
                // TLS starts once the proxy has opened the tunnel (`connectionReady` asks it to).
                var p = HTTPParser(mode: .response)
                p.requestMethod = "CONNECT"
                tunnel = p
            } else if url.tls {
                c.startTLS(try TLSSession(context: tls, serverName: url.address.host))
            }
        } catch let error as ConnectionError {
            finish(.failure(LoopHTTPClient.failure(error, url)))
        } catch {
            finish(.failure(HTTPClientError(.tls, "TLS to \(url.address): \(error)")))
        }
    }

    private func finish(_ result: Result<HTTPResponse, HTTPClientError>) {
        guard let done = completion else { return }
        completion = nil
        if let timer { loop.cancel(timer) }
        timer = nil
        let c = connection
        connection = nil
        if let c, let pool, case let .success(response) = result, response.head.keepAlive, parser.isIdle, !c.isClosed, !c.inputEnded {
            pool.put(c, origin: LoopHTTPConnectionPool.origin(of: url, proxy: proxy))
        } else {
            c?.close()
        }
        done(result)
    }

    /// A reused connection that ended before any byte of the answer: the request goes again on a new one.
    private func retryOnNewConnection() -> Bool {
        guard reusedConnection, !answerStarted, completion != nil, let tls else { return false }
        reusedConnection = false
        connection = nil
        tunnel = nil
        parser = HTTPParser(mode: .response)
        parser.requestMethod = method
        open(tls: tls)
        return true
    }

    /// A connection's failure as the blocking client words it ("connect to 127.0.0.1:9: Connection refused").
    static func failure(_ error: ConnectionError, _ url: HTTPURL) -> HTTPClientError {
        switch error {
        case let .connect(e), let .io(e): return HTTPClientError(.connect, "\(e)")
        case let .tls(m): return HTTPClientError(.tls, "TLS to \(url.address): \(m)")
        case let .resolve(m): return HTTPClientError(.connect, "cannot resolve \(m)")
        }
    }

    // MARK: ConnectionDelegate

    public func connectionReady(_ connection: Connection) {
        if tunnel != nil {
            let authority = url.address.description
            connection.write(HTTPRequestHead(method: "CONNECT", target: authority, headers: HTTPHeaders([("Host", authority)])).bytes)
            return
        }
        let (head, body) = request
        if !reusedConnection { request = ([], []) }
        connection.write(head, body)
    }

    public func connection(_ connection: Connection, received bytes: [UInt8]) {
        if tunnel != nil { return tunnelAnswer(connection, bytes) }
        answerStarted = true
        request = ([], [])
        parser.append(bytes)
        do {
            if let response = try parser.nextResponse() { finish(.success(response)) }
        } catch {
            finish(.failure(HTTPClientError(.protocolError, "invalid response from \(url.address): \(error.message)")))
        }
    }

    public func connectionClosed(_ connection: Connection, error: ConnectionError?) {
        self.connection = nil
        if retryOnNewConnection() { return }
        if tunnel != nil, error == nil, let proxy {
            return finish(.failure(HTTPClientError(.connect, "proxy \(proxy) closed the connection before answering CONNECT \(url.address)")))
        }
        if let error { return finish(.failure(LoopHTTPClient.failure(error, url))) }
        do {
            if let response = try parser.finish() { return finish(.success(response)) }
            finish(.failure(HTTPClientError(.protocolError, "\(url.address) closed the connection without a response")))
        } catch {
            finish(.failure(HTTPClientError(.protocolError, "\(url.address) closed the connection before a complete response")))
        }
    }
}

extension LoopHTTPClient {
    /// The proxy's answer to CONNECT: 200 opens the tunnel and TLS starts in it (the request follows in `connectionReady`,
    /// once the handshake is done); any other answer is the request's failure, worded as the blocking client words it.
    private func tunnelAnswer(_ connection: Connection, _ bytes: [UInt8]) {
        guard var p = tunnel, let proxy, let tls else { return }
        p.append(bytes)
        let answer: HTTPResponse?
        do { answer = try p.nextResponse() } catch {
            return finish(.failure(HTTPClientError(.protocolError, "invalid answer to CONNECT from proxy \(proxy): \(error.message)")))
        }
        tunnel = p
        guard let answer else { return }
        tunnel = nil
        guard answer.head.status == 200 else {
            return finish(.failure(HTTPClientError(.connect, "proxy \(proxy) refused CONNECT \(url.address): \(answer.head.status) "
                                                   + String(decoding: answer.body, as: UTF8.self))))
        }
        do {
            connection.startTLS(try TLSSession(context: tls, serverName: url.address.host))
        } catch {
            finish(.failure(HTTPClientError(.tls, "TLS to \(url.address): \(error)")))
        }
    }
}

/// Kept-alive connections for `LoopHTTPClient` requests from one event loop, by origin (scheme, host and port): the
/// replayer's RReqs go to one 3DS Server listener, and a TCP connect and close for each of them was a tenth of its
/// CPU per app challenge. At most `maxIdlePerOrigin` wait per origin and `maxIdle` in all (the origins come from the
/// traffic: a client naming a new threeDSServerURL in every AReq must not make the pool hold sockets without bound),
/// each for at most `idleSeconds`; one the peer closes, or that receives bytes while idle, is dropped.
///
/// `@unchecked Sendable`: as `LoopHTTPClient`, used only on its loop's thread (made there, or before the loop runs).
public final class LoopHTTPConnectionPool: ConnectionDelegate, @unchecked Sendable {
    private let loop: EventLoop
    public let maxIdlePerOrigin: Int
    public let maxIdle: Int
    public let idleSeconds: Double
    private var idle: [String: [(connection: Connection, timer: TimerHandle)]] = [:]
    /// Requests that went on a kept-alive connection (for tests and the closing figures).
    public private(set) var reuses = 0

    public init(loop: EventLoop, maxIdlePerOrigin: Int = 8, maxIdle: Int = 32, idleSeconds: Double = 20) {
        self.loop = loop
        self.maxIdlePerOrigin = max(0, maxIdlePerOrigin)
        self.maxIdle = max(0, maxIdle)
        self.idleSeconds = idleSeconds
    }

    /// The pool's key for a URL, reached directly or through a forward proxy (a connection to the proxy carries only
    /// requests for the origin it was opened for: a tunnel is bound to it).
    static func origin(of url: HTTPURL, proxy: HostPort? = nil) -> String {
        let origin = (url.tls ? "https://" : "http://") + url.address.host + ":" + String(url.address.port)
        return proxy.map { "\($0) → " + origin } ?? origin
    }

    /// Connections waiting now.
    public var idleCount: Int { idle.values.reduce(0) { $0 + $1.count } }

    /// An idle connection to `origin`, taken out of the pool (nil: none).
    func take(_ origin: String) -> Connection? {
        while var list = idle[origin], let last = list.popLast() {
            idle[origin] = list.isEmpty ? nil : list
            loop.cancel(last.timer)
            if last.connection.isClosed || last.connection.inputEnded { last.connection.close(); continue }
            reuses += 1
            return last.connection
        }
        return nil
    }

    /// Keeps `connection` for the next request to `origin`, or closes it when the origin has enough waiting.
    func put(_ connection: Connection, origin: String) {
        guard (idle[origin]?.count ?? 0) < maxIdlePerOrigin, idleCount < maxIdle else { return connection.close() }
        connection.delegate = self
        let timer = loop.schedule(after: idleSeconds) { [weak self, weak connection] in
            guard let self, let connection else { return }
            self.drop(connection)
        }
        idle[origin, default: []].append((connection, timer))
    }

    /// Closes every idle connection (the owner stops).
    public func closeAll() {
        let all = idle.values.flatMap { $0 }
        idle = [:]
        for entry in all {
            loop.cancel(entry.timer)
            entry.connection.close()
        }
    }

    private func drop(_ connection: Connection) {
        for (origin, list) in idle {
            guard let i = list.firstIndex(where: { $0.connection === connection }) else { continue }
            loop.cancel(list[i].timer)
            var rest = list
            rest.remove(at: i)
            idle[origin] = rest.isEmpty ? nil : rest
        }
        connection.close()
    }

    // MARK: ConnectionDelegate (idle connections only)

    public func connectionReady(_ connection: Connection) {}

    /// Bytes nobody asked for: the connection cannot carry another exchange.
    public func connection(_ connection: Connection, received bytes: [UInt8]) { drop(connection) }

    public func connectionClosed(_ connection: Connection, error: ConnectionError?) { drop(connection) }
}
