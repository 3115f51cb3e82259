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

/// A blocking loopback HTTP/1.1 client that sends many requests before reading any answer (pipelining), over plain TCP
/// or TLS (TapCrypto's session, verification off), and can half-close (shut down its sending side) or leave its answers
/// unread, for the tests of the servers' pipelining, backpressure and half-close handling.
public final class PipelineClient {
    public let fd: Int32
    private let tls: TLSSession?
    private var parser = HTTPParser(mode: .response, limits: PipelineClient.limits)
    private var closedByPeer = false

    static let limits: HTTPLimits = {
        var l = HTTPLimits()
        l.maxBodyBytes = 64 << 20
        return l
    }()

    /// How a TLS client reaches its server through a proxy: `CONNECT target`, then the handshake; `helloWithConnect`
    /// sends the ClientHello in the same write as the CONNECT, before the proxy's 200 (as some clients do).
    public struct Tunnel {
        public var target: String
        public var helloWithConnect: Bool
        public init(target: String, helloWithConnect: Bool) {
            self.target = target
            self.helloWithConnect = helloWithConnect
        }
    }

    /// Connects to 127.0.0.1:`port`; with `tls`, completes a handshake naming `serverName` (through `tunnel`'s CONNECT
    /// when given). `receiveBuffer` sets SO_RCVBUF before connecting (a client that reads nothing then holds little in
    /// its kernel).
    public init(port: UInt16, tls: Bool = false, serverName: String = "localhost", receiveBuffer: Int32? = nil,
                timeout: Int = 10, tunnel: Tunnel? = nil) throws {
        let fd = socket(AF_INET, Platform.streamType, 0)
        guard fd >= 0 else { throw NetError("socket", code: errno) }
        self.fd = fd
        var tv = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(port.bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            let e = NetError("connect to 127.0.0.1:\(port)", code: errno)
            close(fd)
            throw e
        }
        guard tls else {
            self.tls = nil
            return
        }
        let session: TLSSession
        do {
            session = try TLSSession(context: try TLSContext(clientRoots: [], verify: false), serverName: serverName)
        } catch {
            close(fd)
            throw error
        }
        self.tls = session
        do {
            if let tunnel {
                let connect = Array("CONNECT \(tunnel.target) HTTP/1.1\r\nHost: \(tunnel.target)\r\n\r\n".utf8)
                if tunnel.helloWithConnect {
                    _ = try session.handshake()
                    try sendRaw(connect + session.takeCiphertext())
                } else {
                    try sendRaw(connect)
                }
                // The proxy's answer, then (with an early hello) the start of the server's handshake flight.
                var raw: [UInt8] = []
                while Self.endOfHead(raw) == nil {
                    let got = try receiveRaw()
                    guard !got.isEmpty else { throw NetError("CONNECT: the proxy closed", code: 0) }
                    raw += got
                }
                let end = Self.endOfHead(raw)!
                guard raw.starts(with: Array("HTTP/1.1 200".utf8)) else {
                    throw NetError("CONNECT refused: \(String(decoding: raw[..<end], as: UTF8.self))", code: 0)
                }
                if end < raw.count { session.feed(Array(raw[end...])) }
            }
            while try !session.handshake() {
                try sendRaw(session.takeCiphertext())
                let got = try receiveRaw()
                guard !got.isEmpty else { throw NetError("TLS handshake: the server closed", code: 0) }
                session.feed(got)
            }
            try sendRaw(session.takeCiphertext())
        } catch {
            close(fd)
            throw error
        }
    }

    deinit { close(fd) }

    /// Where an HTTP head ends (after its blank line) in `bytes`, if it does.
    private static func endOfHead(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i + 4
        }
        return nil
    }

    /// Sends `bytes` (encrypted first with TLS).
    public func send(_ bytes: [UInt8]) throws {
        guard let tls else { return try sendRaw(bytes) }
        try tls.writePlaintext(bytes)
        try sendRaw(tls.takeCiphertext())
    }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Shuts down the sending side (a half-close): the server sees the end of the requests and may still answer.
    public func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// Reads until `count` answers have come (or the peer closed, or the receive timeout passed); returns those that came.
    public func responses(_ count: Int) throws -> [HTTPResponse] {
        var out: [HTTPResponse] = []
        while out.count < count {
            while out.count < count, let r = try parser.nextResponse() { out.append(r) }
            if out.count == count || closedByPeer { break }
            let got = try receivePlaintext()
            if got.isEmpty {
                closedByPeer = true
                if let r = try? parser.finish() { out.append(r) }
                break
            }
            parser.append(got)
        }
        return out
    }

    /// True once the server has closed its side (waits for it, within the receive timeout).
    public func serverClosed() throws -> Bool {
        while !closedByPeer {
            let got = try receivePlaintext()
            if got.isEmpty { closedByPeer = true } else { parser.append(got) }
        }
        return true
    }

    private func receivePlaintext() throws -> [UInt8] {
        guard let tls else { return try receiveRaw() }
        while true {
            let raw = try receiveRaw()
            if raw.isEmpty { return [] }
            tls.feed(raw)
            let plain = try tls.readPlaintext()
            try sendRaw(tls.takeCiphertext())
            if !plain.isEmpty { return plain }
            if tls.receivedClose { return [] }
        }
    }

    private func sendRaw(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { SystemCall.send(fd, $0.baseAddress! + sent, $0.count - sent, Platform.sendFlags) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw NetError("send", code: errno) }
            sent += n
        }
    }

    /// What one recv returns; empty when the peer closed. Throws on the timeout.
    private func receiveRaw() throws -> [UInt8] {
        var buf = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = recv(fd, &buf, buf.count, 0)
            if n >= 0 { return Array(buf[0..<n]) }
            if errno == EINTR { continue }
            if errno == ECONNRESET { return [] }
            throw NetError("recv", code: errno)
        }
    }
}
