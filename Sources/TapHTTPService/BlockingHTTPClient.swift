import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TapCore
import TapCrypto
import TapHTTP
import TapNet

/// Why a request failed: connect, TLS, timeout, or a malformed answer.
public typealias HTTPClientError = KindedError<HTTPClientFailure>

/// The step of a request that failed (`HTTPClientError`).
public enum HTTPClientFailure: Sendable, Equatable { case connect, tls, timeout, protocolError }

/// A small blocking HTTP/1.1 client with TLS, an optional forward proxy (absolute-form for http, CONNECT for https) and
/// a whole-request timeout. For the SDK-like client and client-replay. Without a `pool` every request has a connection of
/// its own (`Connection: close`); with one, connections are kept alive per target and reused.
public struct BlockingHTTPClient: Sendable {
    public var tls: TLSContext
    /// `http://host:port` of a forward proxy, or nil.
    public var proxy: HostPort?
    public var timeout: Double
    /// Where idle keep-alive connections wait for the next request to the same target; nil: one connection per request.
    public var pool: BlockingConnectionPool?

    public init(tls: TLSContext, proxy: HostPort? = nil, timeout: Double = 30, pool: BlockingConnectionPool? = nil) {
        self.tls = tls
        self.proxy = proxy
        self.timeout = timeout
        self.pool = pool
    }

    /// Sends one request and returns the complete response. With a pool, an idle connection to the same target is
    /// reused; when the server had closed it before answering (nothing of a response arrived), the request is sent
    /// once more on a new connection, as browsers and HTTP libraries do.
    public func send(_ method: String, _ url: HTTPURL, headers: [(String, String)] = [], body: [UInt8] = [],
                     timeout: Double? = nil) throws(HTTPClientError) -> HTTPResponse {
        let deadline = Date().addingTimeInterval(timeout ?? self.timeout)
        let key = pool.map { _ in PooledConnectionKey(target: url.address.description, tls: url.tls, proxy: proxy?.description) }
        if let pool, let key, let idle = pool.take(key) {
            var received = false
            do {
                return try exchange(idle, method, url, headers: headers, body: body, deadline: deadline, key: key, received: &received)
            } catch {
                idle.close()
                // Only a connection the server closed before any answer is retried; anything else is the request's failure.
                if received || error.kind == .timeout { throw error }
            }
        }
        let fresh = try open(url, deadline: deadline)
        var received = false
        do {
            return try exchange(fresh, method, url, headers: headers, body: body, deadline: deadline, key: key, received: &received)
        } catch {
            fresh.close()
            throw error
        }
    }

    /// A new connection to the target (through the proxy when one is set), TLS handshake done.
    private func open(_ url: HTTPURL, deadline: Date) throws(HTTPClientError) -> PooledConnection {
        let socket = try BlockingSocket.connect(to: proxy ?? url.address, deadline: deadline)
        do throws(HTTPClientError) {
            if let proxy, url.tls {
                let connect = HTTPRequestHead(method: "CONNECT", target: url.address.description,
                                              headers: HTTPHeaders([("Host", url.address.description)]))
                try socket.write(connect.bytes, deadline: deadline)
                var p = HTTPParser(mode: .response)
                p.requestMethod = "CONNECT"
                var received = false
                let r = try read(socket, &p, tls: nil, deadline: deadline, received: &received)
                guard r.head.status == 200 else {
                    throw HTTPClientError(.connect, "proxy \(proxy) refused CONNECT \(url.address): \(r.head.status) \(String(decoding: r.body, as: UTF8.self))")
                }
            }
            var session: TLSSession?
            if url.tls {
                let s: TLSSession
                do { s = try TLSSession(context: tls, serverName: url.address.host) } catch { throw HTTPClientError(.tls, error.message) }
                try handshake(socket, s, deadline: deadline, url: url)
                session = s
            }
            return PooledConnection(socket: socket, session: session)
        } catch {
            socket.close()
            throw error
        }
    }

    /// One request and its response on `connection`; the connection goes back to the pool when both sides keep it open
    /// (HTTP/1.1, no `Connection: close`, a response with a length, nothing read beyond it), else it is closed.
    private func exchange(_ connection: PooledConnection, _ method: String, _ url: HTTPURL, headers: [(String, String)], body: [UInt8],
                          deadline: Date, key: PooledConnectionKey?, received: inout Bool) throws(HTTPClientError) -> HTTPResponse {
        var h = HTTPHeaders(headers)
        if h["Host"] == nil { h.add("Host", url.hostHeader) }
        h.replaceOrAdd("Content-Length", String(body.count))
        if key == nil { h.replaceOrAdd("Connection", "close") }
        let target = (proxy != nil && !url.tls) ? url.description : url.path
        let bytes = HTTPRequestHead(method: method, target: target, headers: h).bytes + body
        try writeApp(connection.socket, connection.session, bytes, deadline: deadline)
        var parser = HTTPParser(mode: .response)
        parser.requestMethod = method
        var closeDelimited = false
        let response = try read(connection.socket, &parser, tls: connection.session, deadline: deadline, received: &received,
                                closeDelimited: &closeDelimited)
        if let pool, let key, !closeDelimited, parser.isIdle, Self.keepsAlive(response.head) {
            pool.put(connection, for: key)
        } else {
            connection.close()
        }
        return response
    }

    /// Whether the server leaves the connection open after this response.
    static func keepsAlive(_ head: HTTPResponseHead) -> Bool {
        guard head.version == "HTTP/1.1" else { return false }
        guard let c = head.headers["Connection"] else { return true }
        return !c.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces).lowercased() == "close" }
    }

    private func handshake(_ s: BlockingSocket, _ t: TLSSession, deadline: Date, url: HTTPURL) throws(HTTPClientError) {
        while true {
            let done: Bool
            do { done = try t.handshake() } catch { throw HTTPClientError(.tls, "TLS to \(url.address): \(error.message)") }
            try s.write(t.takeCiphertext(), deadline: deadline)
            if done { return }
            let data = try s.read(deadline: deadline)
            if data.isEmpty { throw HTTPClientError(.tls, "TLS to \(url.address): connection closed during the handshake") }
            t.feed(data)
        }
    }

    private func writeApp(_ s: BlockingSocket, _ t: TLSSession?, _ bytes: [UInt8], deadline: Date) throws(HTTPClientError) {
        guard let t else { return try s.write(bytes, deadline: deadline) }
        do { try t.writePlaintext(bytes) } catch { throw HTTPClientError(.tls, error.message) }
        try s.write(t.takeCiphertext(), deadline: deadline)
    }

    private func read(_ s: BlockingSocket, _ p: inout HTTPParser, tls t: TLSSession?, deadline: Date, received: inout Bool) throws(HTTPClientError) -> HTTPResponse {
        var closeDelimited = false
        return try read(s, &p, tls: t, deadline: deadline, received: &received, closeDelimited: &closeDelimited)
    }

    /// Reads one response; `received` turns true with its first byte, `closeDelimited` when its end was the connection's.
    private func read(_ s: BlockingSocket, _ p: inout HTTPParser, tls t: TLSSession?, deadline: Date, received: inout Bool,
                      closeDelimited: inout Bool) throws(HTTPClientError) -> HTTPResponse {
        while true {
            do {
                if let r = try p.nextResponse() { return r }
            } catch {
                throw HTTPClientError(.protocolError, "invalid response: \(error.message)")
            }
            let data = try s.read(deadline: deadline)
            if data.isEmpty {
                do {
                    if let r = try p.finish() { closeDelimited = true; return r }
                } catch {
                    throw HTTPClientError(.protocolError, "connection closed before a complete response")
                }
                throw HTTPClientError(.protocolError, "connection closed without a response")
            }
            received = true
            if let t {
                t.feed(data)
                do { p.append(try t.readPlaintext()) } catch { throw HTTPClientError(.tls, error.message) }
                try? s.write(t.takeCiphertext(), deadline: deadline)
            } else {
                p.append(data)
            }
        }
    }
}

/// Which idle connections can carry a request: the same target, scheme and proxy.
public struct PooledConnectionKey: Hashable, Sendable {
    var target: String
    var tls: Bool
    var proxy: String?
}

/// One open connection (TLS session included) between requests.
///
/// `@unchecked Sendable` is safe because a connection has one user at a time: the request that opened it or took it from
/// the pool (under the pool's lock) uses it alone and either hands it back to the pool or closes it, never both.
final class PooledConnection: @unchecked Sendable {
    let socket: BlockingSocket
    let session: TLSSession?
    init(socket: BlockingSocket, session: TLSSession?) {
        self.socket = socket
        self.session = session
    }
    func close() { socket.close() }
}

/// Idle keep-alive connections of a `BlockingHTTPClient`, by target; at most `maxIdlePerTarget` wait per target (one
/// more is closed), and a connection the server has closed meanwhile is dropped when taken. Closes what it holds when
/// it ends (`closeAll`, or its deinit).
public final class BlockingConnectionPool: Sendable {
    public let maxIdlePerTarget: Int
    private let idle = Locked<[PooledConnectionKey: [PooledConnection]]>([:])

    public init(maxIdlePerTarget: Int = 32) { self.maxIdlePerTarget = max(1, maxIdlePerTarget) }

    deinit { closeAll() }

    /// Idle connections held now (for tests and diagnostics).
    public var idleCount: Int { idle.withLock { $0.values.reduce(0) { $0 + $1.count } } }

    /// Closes every idle connection.
    public func closeAll() {
        let all = idle.withLock { held in defer { held = [:] }; return held.values.flatMap { $0 } }
        for c in all { c.close() }
    }

    /// The most recently used idle connection to `key` that is still open, or nil.
    func take(_ key: PooledConnectionKey) -> PooledConnection? {
        while let c = idle.withLock({ $0[key]?.popLast() }) {
            if !c.socket.peerHasClosedOrSent() { return c }
            c.close()
        }
        return nil
    }

    func put(_ connection: PooledConnection, for key: PooledConnectionKey) {
        let kept = idle.withLock { held -> Bool in
            guard held[key, default: []].count < maxIdlePerTarget else { return false }
            held[key, default: []].append(connection)
            return true
        }
        if !kept { connection.close() }
    }
}

/// A blocking TCP socket with deadlines (poll before each read and write).
final class BlockingSocket {
    let fd: Int32

    init(fd: Int32) { self.fd = fd }

    static func connect(to target: HostPort, deadline: Date) throws(HTTPClientError) -> BlockingSocket {
        let resolved: ResolvedAddress
        do { resolved = try ResolvedAddress(target) } catch { throw HTTPClientError(.connect, "\(error)") }
        let ai = resolved.first
        let fd = Platform.streamSocket(family: ai.ai_family)
        guard fd >= 0 else { throw HTTPClientError(.connect, "socket: \(String(cString: strerror(errno)))") }
        let s = BlockingSocket(fd: fd)
        if withExtendedLifetime(resolved, { SystemCall.connect(fd, ai.ai_addr, ai.ai_addrlen) }) != 0 {
            guard errno == EINPROGRESS else {
                let e = errno
                s.close()
                throw HTTPClientError(.connect, "connect to \(target): \(String(cString: strerror(e)))")
            }
            try s.wait(POLLOUT, deadline: deadline, what: "connect to \(target)")
            var err: Int32 = 0
            var len = socklen_t(4)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
            if err != 0 {
                s.close()
                throw HTTPClientError(.connect, "connect to \(target): \(String(cString: strerror(err)))")
            }
        }
        return s
    }

    func wait(_ events: Int32, deadline: Date, what: String) throws(HTTPClientError) {
        while true {
            let ms = Int32(clamping: max(0, Checked.clampedInt(deadline.timeIntervalSinceNow * 1000)))
            var p = pollfd(fd: fd, events: Int16(events), revents: 0)
            let n = poll(&p, 1, ms)
            if n > 0 { return }
            if n == 0 || deadline.timeIntervalSinceNow <= 0 { throw HTTPClientError(.timeout, "\(what): timed out") }
            if errno != EINTR { throw HTTPClientError(.connect, "\(what): \(String(cString: strerror(errno)))") }
        }
    }

    func write(_ bytes: [UInt8], deadline: Date) throws(HTTPClientError) {
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + off, $0.count - off, Platform.sendFlags) }
            if n > 0 { off += n; continue }
            if n < 0, errno == EAGAIN || errno == EINTR {
                try wait(POLLOUT, deadline: deadline, what: "send")
                continue
            }
            throw HTTPClientError(.connect, "send: \(String(cString: strerror(errno)))")
        }
    }

    /// Reads what is available (waiting until the deadline); empty at end of stream.
    func read(deadline: Date) throws(HTTPClientError) -> [UInt8] {
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n >= 0 { return Array(buf.prefix(n)) }
            if errno == EAGAIN || errno == EINTR {
                try wait(POLLIN, deadline: deadline, what: "waiting for the response")
                continue
            }
            throw HTTPClientError(.connect, "recv: \(String(cString: strerror(errno)))")
        }
    }

    /// Whether an idle connection has something to read: the server's close (or reset), or bytes nobody asked for; either
    /// way it cannot carry another request.
    func peerHasClosedOrSent() -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) != 0
    }

    func close() { _ = SystemCall.close(fd) }
}
