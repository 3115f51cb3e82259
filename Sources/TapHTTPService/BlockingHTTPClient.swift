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
public struct HTTPClientError: Error, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable { case connect, tls, timeout, protocolError }
    public let kind: Kind
    public let message: String
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
    public var description: String { message }
}

/// A small blocking HTTP/1.1 client (one request per connection) with TLS, an optional forward proxy
/// (absolute-form for http, CONNECT for https) and a whole-request timeout. For the SDK-like client.
public struct BlockingHTTPClient: Sendable {
    public var tls: TLSContext
    /// `http://host:port` of a forward proxy, or nil.
    public var proxy: HostPort?
    public var timeout: Double

    public init(tls: TLSContext, proxy: HostPort? = nil, timeout: Double = 30) {
        self.tls = tls
        self.proxy = proxy
        self.timeout = timeout
    }

    /// Sends one request and returns the complete response.
    public func send(_ method: String, _ url: HTTPURL, headers: [(String, String)] = [], body: [UInt8] = [],
                     timeout: Double? = nil) throws(HTTPClientError) -> HTTPResponse {
        let deadline = Date().addingTimeInterval(timeout ?? self.timeout)
        let socket = try BlockingSocket.connect(to: proxy ?? url.address, deadline: deadline)
        defer { socket.close() }
        var session: TLSSession?
        if let proxy {
            if url.tls {
                let connect = HTTPRequestHead(method: "CONNECT", target: url.address.description,
                                              headers: HTTPHeaders([("Host", url.address.description)]))
                try socket.write(connect.bytes, deadline: deadline)
                var p = HTTPParser(mode: .response)
                p.requestMethod = "CONNECT"
                let r = try read(socket, &p, tls: nil, deadline: deadline)
                guard r.head.status == 200 else {
                    throw HTTPClientError(.connect, "proxy \(proxy) refused CONNECT \(url.address): \(r.head.status) \(String(decoding: r.body, as: UTF8.self))")
                }
            }
        }
        if url.tls {
            do { session = try TLSSession(context: tls, serverName: url.address.host) } catch { throw HTTPClientError(.tls, error.message) }
            try handshake(socket, session!, deadline: deadline, url: url)
        }
        var h = HTTPHeaders(headers)
        if h["Host"] == nil { h.add("Host", url.hostHeader) }
        h.replaceOrAdd("Content-Length", String(body.count))
        h.replaceOrAdd("Connection", "close")
        let target = (proxy != nil && !url.tls) ? url.description : url.path
        let bytes = HTTPRequestHead(method: method, target: target, headers: h).bytes + body
        try writeApp(socket, session, bytes, deadline: deadline)
        var parser = HTTPParser(mode: .response)
        parser.requestMethod = method
        return try read(socket, &parser, tls: session, deadline: deadline)
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

    private func read(_ s: BlockingSocket, _ p: inout HTTPParser, tls t: TLSSession?, deadline: Date) throws(HTTPClientError) -> HTTPResponse {
        while true {
            do {
                if let r = try p.nextResponse() { return r }
            } catch {
                throw HTTPClientError(.protocolError, "invalid response: \(error.message)")
            }
            let data = try s.read(deadline: deadline)
            if data.isEmpty {
                do {
                    if let r = try p.finish() { return r }
                } catch {
                    throw HTTPClientError(.protocolError, "connection closed before a complete response")
                }
                throw HTTPClientError(.protocolError, "connection closed without a response")
            }
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

    func close() { _ = SystemCall.close(fd) }
}
