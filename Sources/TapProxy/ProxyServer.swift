import Foundation
import Synchronization
import TapCompression
import TapCore
import TapCrypto
import TapEMV
import TapHTTP
import TapNet
import TapStore

/// A finished exchange, for the live view.
public struct ExchangeLine: Sendable {
    public var at: Double
    public var method: String
    public var url: String
    public var status: Int?
    public var requestTypes: [String]
    public var responseTypes: [String]
    public var durationMs: Double
    public var error: String?
}

/// Counters for the summary printed at the end.
public struct ProxyStats: Sendable {
    public var connections = 0
    public var exchanges = 0
    public var errors = 0
    public var messages: [String: Int] = [:]
}

/// The recording proxy: accepts clients, forwards each request to its upstream, returns the response
/// unchanged, and reports every exchange to the session writer and the live view.
/// Runs on one event loop; all its state is touched only on that loop's thread.
public final class ProxyServer: @unchecked Sendable {
    // Safe: every field is used only on `loop`'s thread (listeners and sessions are created from
    // loop tasks); the stats are behind a Mutex for readers on other threads.
    public let loop: EventLoop
    public let config: ProxyConfiguration
    let writer: SessionWriter?
    let onExchange: (@Sendable (ExchangeLine) -> Void)?
    let onLog: (@Sendable (String) -> Void)?
    private var listeners: [Listener] = []
    private var sessions: [ObjectIdentifier: ClientSession] = [:]
    private var nextConnectionID: Int64 = 1
    private let statsBox = Mutex(ProxyStats())

    public init(loop: EventLoop, config: ProxyConfiguration, writer: SessionWriter?,
                onExchange: (@Sendable (ExchangeLine) -> Void)? = nil, onLog: (@Sendable (String) -> Void)? = nil) {
        self.loop = loop
        self.config = config
        self.writer = writer
        self.onExchange = onExchange
        self.onLog = onLog
    }

    public var stats: ProxyStats { statsBox.withLock { $0 } }

    /// Binds a listener. Call before `loop.run()` or on the loop thread.
    @discardableResult
    public func listen(on address: HostPort) throws(NetError) -> HostPort {
        let l = try Listener(loop: loop, address: address) { [unowned self] fd, peer in self.accept(fd: fd, peer: peer) }
        try l.start()
        listeners.append(l)
        return l.address
    }

    /// Stops accepting and closes every connection (exchanges in flight are recorded as aborted).
    public func shutdown() {
        listeners.forEach { $0.close() }
        listeners.removeAll()
        for s in sessions.values { s.shutdown() }
        sessions.removeAll()
    }

    private func accept(fd: Int32, peer: String) {
        let id = nextConnectionID
        nextConnectionID += 1
        let session = ClientSession(server: self, id: id, peer: peer)
        do {
            session.client = try Connection.accepted(fd: fd, peer: peer, loop: loop, delegate: session)
        } catch {
            close(fd)
            onLog?("accept from \(peer): \(error)")
            return
        }
        sessions[ObjectIdentifier(session)] = session
        statsBox.withLock { $0.connections += 1 }
        let upstream: String? = { if case let .reverse(u) = config.mode { return u.description }; return nil }()
        writer?.submit(.connectionOpened(ConnectionRecord(id: id, clientAddress: peer, acceptedAt: wallNow(), mode: config.modeName, upstream: upstream)))
        session.armIdleTimer()
    }

    func sessionEnded(_ s: ClientSession) {
        sessions.removeValue(forKey: ObjectIdentifier(s))
        writer?.submit(.connectionClosed(id: s.id, at: wallNow()))
    }

    func record(_ x: ExchangeRecord) {
        writer?.submit(.exchange(x))
        let reqTypes = x.request.messages.compactMap { $0.summary?.messageType }
        let respTypes = x.response?.messages.compactMap { $0.summary?.messageType } ?? []
        statsBox.withLock { s in
            s.exchanges += 1
            if x.error != nil { s.errors += 1 }
            for t in reqTypes + respTypes { s.messages[t, default: 0] += 1 }
        }
        onExchange?(ExchangeLine(at: x.requestStart, method: x.method, url: x.url, status: x.status, requestTypes: reqTypes,
                                 responseTypes: respTypes, durationMs: ((x.done ?? wallNow()) - x.requestStart) * 1000, error: x.error))
    }

    func log(_ line: String) { onLog?(line) }
}

/// Builds the stored form of a message: decoded from gzip/deflate, masked, 3DS messages extracted.
enum StoredForm {
    static func make(headers: HTTPHeaders, body: [UInt8], wireSize: Int, mask: Bool) -> StoredMessage {
        let encoding = headers["Content-Encoding"]?.lowercased()
        var decoded = body
        var encodingNote = encoding
        if let encoding, !body.isEmpty, encoding != "identity" {
            let format: Compression.Format? = encoding == "gzip" || encoding == "x-gzip" ? .gzip : (encoding == "deflate" ? .zlib : nil)
            if let format {
                do { decoded = try Compression.decompress(body, format: format) } catch {
                    encodingNote = "\(encoding) (not decoded: \(error.message))"
                }
            }
        }
        let stored = mask ? ThreeDSContent.maskBody(decoded) : decoded
        return StoredMessage(headers: headers.fields.map { ($0.name, $0.value) }, body: stored, contentEncoding: encodingNote,
                             wireSize: wireSize, messages: ThreeDSContent.messages(in: stored))
    }
}
