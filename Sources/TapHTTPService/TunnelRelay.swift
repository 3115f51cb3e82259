import Foundation
import TapNet

/// What an `HTTPServer` saw of a CONNECT it tunnelled untouched (`replay --pass-through`): the target, the client's
/// ClientHello (SNI, ALPN offered) when the tunnel carried TLS, the bytes each way, and how it ended.
public struct TunnelReport: Sendable {
    public var peer: String
    /// The connection's number on the `HTTPServer` that passed it through (`ServerPeer.connection`); nil for others.
    public var connection: Int?
    public var target: HostPort
    /// Wall-clock seconds: the CONNECT taken, the upstream's TCP connection up (nil: never), the end.
    public var startedAt: Double
    public var connectedAt: Double?
    public var endedAt: Double
    public var clientHello: TLSClientHello?
    public var bytesUp: Int
    public var bytesDown: Int
    /// `client closed`, `upstream closed`, `idle for N s`, or why the upstream was not reached (then `connectedAt` is nil).
    public var ended: String
}

/// One CONNECT tunnelled byte for byte: connects to the target, answers `200 Connection established` once connected
/// (502 when it cannot be reached), then copies bytes both ways, reading neither side faster than the other takes
/// them. Lives on the server's loop; owned by its `ServerConnection`.
final class TunnelRelay: ConnectionDelegate {
    /// Bytes queued toward one side past which the other side is not read.
    static let highWater = 1 << 20

    let client: Connection
    let target: HostPort
    let idleTimeout: Double
    let onEnd: (TunnelReport) -> Void
    private var upstream: Connection?
    private var report: TunnelReport
    private var pending: [UInt8] = []
    private var helloBytes: [UInt8] = []
    private var helloSettled = false
    private var finished = false
    /// Each side's FIN, passed on to the other (`Connection.shutdownWrite`): the tunnel ends once both have sent theirs.
    private var clientDone = false, upstreamDone = false
    private var lastActivity = EventLoop.nowNanos()
    private var timer: TimerHandle?

    init(client: Connection, target: HostPort, idleTimeout: Double, connection: Int? = nil, onEnd: @escaping (TunnelReport) -> Void) {
        self.client = client
        self.target = target
        self.idleTimeout = idleTimeout
        self.onEnd = onEnd
        report = TunnelReport(peer: client.peer, connection: connection, target: target, startedAt: Date().timeIntervalSince1970, connectedAt: nil, endedAt: 0,
                              clientHello: nil, bytesUp: 0, bytesDown: 0, ended: "")
    }

    /// Starts connecting; `early` is what the client sent right behind its CONNECT.
    func start(early: [UInt8]) {
        if !early.isEmpty { clientBytes(early) }
        do {
            upstream = try Connection.connect(to: target, loop: client.loop, delegate: self)
        } catch {
            refuse("upstream \(target) unreachable: \(error)")
            return
        }
        armIdle(after: idleTimeout)
    }

    func clientBytes(_ bytes: [UInt8]) {
        guard !finished else { return }
        lastActivity = EventLoop.nowNanos()
        report.bytesUp += bytes.count
        if !helloSettled {
            helloBytes += bytes.prefix(TLSClientHello.maxBytes - helloBytes.count)
            switch TLSClientHello.read(helloBytes) {
            case .needMore: break
            case let .hello(h): report.clientHello = h; helloSettled = true; helloBytes = []
            case .notClientHello: helloSettled = true; helloBytes = []
            }
        }
        if let upstream, upstream.isReady {
            upstream.write(bytes)
            if upstream.unsentByteCount > Self.highWater { client.pauseReading() }
        } else {
            pending += bytes
            if pending.count > Self.highWater / 4 { client.pauseReading() }
        }
    }

    /// The client took queued bytes: read the upstream again once little is left.
    func clientDrained() {
        if client.unsentByteCount <= Self.highWater / 4 { upstream?.resumeReading() }
    }

    /// The client finished sending (its FIN): the upstream gets it once the client's bytes are out; the tunnel ends
    /// when the upstream has finished too. Before the upstream is reached, what the client sent still goes to it.
    func clientFinishedSending() {
        guard !finished else { return }
        clientDone = true
        if upstreamDone { return endBothFinished() }
        if let upstream, upstream.isReady { upstream.shutdownWrite() }
    }

    /// The upstream finished sending: the client reads the end of the stream and may still send.
    func connectionInputEnded(_ c: Connection) -> Bool {
        guard !finished else { return false }
        upstreamDone = true
        if clientDone {
            endBothFinished()
            return true
        }
        client.shutdownWrite()
        return true
    }

    private func endBothFinished() {
        end("both sides finished sending")
        upstream?.delegate = nil
        upstream?.close()
        client.close(afterFlush: true)
    }

    func clientClosed() {
        end("client closed")
        upstream?.delegate = nil
        upstream?.close()
    }

    // MARK: the upstream connection

    func connectionReady(_ c: Connection) {
        report.connectedAt = Date().timeIntervalSince1970
        client.write(HTTPRequestIntake.connectEstablished)
        if !pending.isEmpty { c.write(pending) }
        pending = []
        if clientDone { c.shutdownWrite() } else { client.resumeReading() }
    }

    func connection(_ c: Connection, received bytes: [UInt8]) {
        lastActivity = EventLoop.nowNanos()
        report.bytesDown += bytes.count
        client.write(bytes)
        if client.unsentByteCount > Self.highWater { c.pauseReading() }
    }

    func connectionWroteQueued(_ c: Connection) {
        if c.unsentByteCount <= Self.highWater / 4 { client.resumeReading() }
    }

    func connectionClosed(_ c: Connection, error: ConnectionError?) {
        guard report.connectedAt != nil else {
            refuse("upstream \(target) unreachable: \(error.map { "\($0)" } ?? "closed the connection")")
            return
        }
        end("upstream closed" + (error.map { " (\($0))" } ?? ""))
        client.close(afterFlush: true)
    }

    // MARK: ending

    private func armIdle(after seconds: Double) {
        timer = client.loop.schedule(after: seconds) { [weak self] in
            guard let self, !self.finished else { return }
            let idle = Double(EventLoop.nowNanos() &- self.lastActivity) / 1e9
            if idle + 0.001 < self.idleTimeout { self.armIdle(after: self.idleTimeout - idle); return }
            self.end(self.report.connectedAt == nil ? "upstream \(self.target) not reached within \(Int(self.idleTimeout)) s"
                                                    : "idle for \(Int(self.idleTimeout)) s")
            self.upstream?.delegate = nil
            self.upstream?.close()
            self.client.close(afterFlush: true)
        }
    }

    private func refuse(_ why: String) {
        end(why)
        upstream?.delegate = nil
        upstream?.close()
        client.write(HTTPErrorAnswer.reply(status: 502, why).bytes(keepAlive: false))
        client.close(afterFlush: true)
    }

    private func end(_ how: String) {
        guard !finished else { return }
        finished = true
        if let timer { client.loop.cancel(timer) }
        report.ended = how
        report.endedAt = Date().timeIntervalSince1970
        onEnd(report)
    }
}
