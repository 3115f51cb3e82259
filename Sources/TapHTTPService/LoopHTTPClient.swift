import Dispatch
import TapCrypto
import TapHTTP
import TapNet

/// One HTTP/1.1 request sent from an event loop's thread without blocking it: connect, TLS if the URL is https,
/// send, read the whole response, call back once on the loop (with the response, or why it failed: connect, TLS,
/// timeout, a malformed answer). For a server that sends requests of its own, such as the replayer's RReq to the
/// live 3DS Server and its `--on-miss forward`, so that none of them needs a thread of its own.
///
/// `@unchecked Sendable`: used only on its loop's thread, but for one hop out and back: a host name is resolved on a
/// Dispatch thread (a slow resolver must not hold up the loop, whose timers are the replayer's product), and the client
/// returns to the loop with `loop.execute` before anything of it is touched.
public final class LoopHTTPClient: ConnectionDelegate, @unchecked Sendable {
    private let loop: EventLoop
    private let url: HTTPURL
    private var request: (head: [UInt8], body: [UInt8])
    private var parser = HTTPParser(mode: .response)
    private var connection: Connection?
    private var timer: TimerHandle?
    private var completion: ((Result<HTTPResponse, HTTPClientError>) -> Void)?

    /// Sends `method url` with `headers` and `body` (Host, Content-Length and `Connection: close` are set here) and
    /// calls `completion` on the loop's thread once, never from within this call. Call on the loop's thread.
    public static func send(_ method: String, _ url: HTTPURL, headers: [(String, String)] = [], body: [UInt8] = [],
                            tls: TLSContext, timeout: Double, on loop: EventLoop,
                            completion: @escaping (Result<HTTPResponse, HTTPClientError>) -> Void) {
        var h = HTTPHeaders(headers)
        if h["Host"] == nil { h.add("Host", url.hostHeader) }
        h.replaceOrAdd("Content-Length", String(body.count))
        h.replaceOrAdd("Connection", "close")
        let head = HTTPRequestHead(method: method, target: url.path, headers: h).bytes
        let client = LoopHTTPClient(loop: loop, url: url, head: head, body: body, method: method, completion: completion)
        // The timer holds the client until it finishes; the connection holds it only weakly, as its delegate.
        client.timer = loop.schedule(after: timeout) {
            client.finish(.failure(HTTPClientError(.timeout, "\(method) \(url): no complete response within \(timeout) s")))
        }
        // Connected later on the loop, so that a refusal is reported as every other outcome is: after `send` returns.
        loop.schedule(after: 0) { client.start(tls: tls) }
    }

    private init(loop: EventLoop, url: HTTPURL, head: [UInt8], body: [UInt8], method: String,
                 completion: @escaping (Result<HTTPResponse, HTTPClientError>) -> Void) {
        self.loop = loop
        self.url = url
        self.request = (head, body)
        self.completion = completion
        parser.requestMethod = method
    }

    private func start(tls: TLSContext) {
        guard completion != nil else { return }
        guard ResolvedAddress.isLiteral(url.address.host) else {
            let target = url.address
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
        connect(to: url.address, tls: tls)
    }

    /// Connects to an address the loop can use without a resolver (TLS still names the URL's host).
    private func connect(to address: HostPort, tls: TLSContext) {
        guard completion != nil else { return }
        do {
            let c = try Connection.connect(to: address, loop: loop, delegate: self)
            connection = c
            if url.tls { c.startTLS(try TLSSession(context: tls, serverName: url.address.host)) }
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
        c?.close()
        done(result)
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
        let (head, body) = request
        request = ([], [])
        connection.write(head, body)
    }

    public func connection(_ connection: Connection, received bytes: [UInt8]) {
        parser.append(bytes)
        do {
            if let response = try parser.nextResponse() { finish(.success(response)) }
        } catch {
            finish(.failure(HTTPClientError(.protocolError, "invalid response from \(url.address): \(error.message)")))
        }
    }

    public func connectionClosed(_ connection: Connection, error: ConnectionError?) {
        self.connection = nil
        if let error { return finish(.failure(LoopHTTPClient.failure(error, url))) }
        do {
            if let response = try parser.finish() { return finish(.success(response)) }
            finish(.failure(HTTPClientError(.protocolError, "\(url.address) closed the connection without a response")))
        } catch {
            finish(.failure(HTTPClientError(.protocolError, "\(url.address) closed the connection before a complete response")))
        }
    }
}
