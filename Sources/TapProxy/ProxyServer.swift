import Foundation
import Synchronization
import TapCore
import TapCrypto
import TapEMV
import TapHTTP
import TapNet
import TapStore

/// Counters for the summary printed at the end.
public struct ProxyStats: Sendable {
    public var connections = 0
    public var exchanges = 0
    public var errors = 0
    /// Requests paced or held because the session writer was behind (see `WriterBackpressure`), and their waits.
    public var backpressure = WriterBackpressure.Cost()

    public init() {}

    /// One sentence on what the writer's backpressure cost the traffic, or nil when it never slowed a request.
    public var backpressureSummary: String? { backpressure.requestSummary(exchanges: exchanges) }
}

/// The recording proxy: accepts clients, forwards each request to its upstream, returns the response
/// unchanged, and reports every exchange to the session writer and the live view.
/// Runs on one event loop; all its state is touched only on that loop's thread.
public final class ProxyServer: @unchecked Sendable {
    // Safe: the listeners, sessions and what goes with them are in `owned`, whose every use is checked to be on `loop`'s
    // thread (in debug builds); the other fields are set before the loop runs or used on it too; the stats are behind
    // a lock (`Locked`) for readers on other threads.
    public let loop: EventLoop
    public let config: ProxyConfiguration
    let writer: SessionWriter?
    let onLog: (@Sendable (String) -> Void)?
    /// What the proxy owns on its loop, checked (`LoopConfined` traps off the loop in debug builds).
    private let owned: LoopConfined<Owned>
    private struct Owned {
        var listeners: [Listener] = []
        var sessions: [ObjectIdentifier: ClientSession] = [:]
        var nextConnectionID: Int64 = 1
        /// Sessions waiting for the writer to catch up before their next request is taken, with when each began to wait.
        var deferred: [(session: ClientSession, since: UInt64)] = []
        /// Hosts whose clients refused 3dstape's certificate: the hint is given once per host (and for at most
        /// `maxHintedHosts` hosts, so that a client cycling names cannot grow it without bound). Host names compare
        /// case-folded, without a trailing dot: `localhost` and `LocalHost.` are one host.
        var certificateRefusals: Set<String> = []
    }
    /// When new requests wait for the session writer (paced, then held until it catches up).
    public var backpressure = WriterBackpressure()
    /// Writer backlog (events) above which new requests are held.
    public var writerBacklogLimit: Int {
        get { backpressure.eventLimit }
        set { backpressure.eventLimit = newValue }
    }
    private let statsBox = Locked(ProxyStats())
    static let maxHintedHosts = 1024

    /// `writer` stores the exchanges (and drives the live view through its callback).
    public init(loop: EventLoop, config: ProxyConfiguration, writer: SessionWriter?, onLog: (@Sendable (String) -> Void)? = nil) {
        self.loop = loop
        owned = LoopConfined(Owned(), on: loop)
        self.config = config
        self.writer = writer
        self.onLog = onLog
    }

    public var stats: ProxyStats { statsBox.withLock { $0 } }

    /// Binds a listener. Call before `loop.run()` or on the loop thread.
    @discardableResult
    public func listen(on address: HostPort) throws(NetError) -> HostPort {
        let l = try Listener(loop: loop, address: address) { [weak self] fd, peer in
            guard let self else { close(fd); return }
            self.accept(fd: fd, peer: peer)
        }
        l.onBackoff = { [weak self] line in self?.log(line) }
        try l.start()
        owned.value.listeners.append(l)
        return l.address
    }

    /// Stops accepting and closes every connection (exchanges in flight are recorded as cut short by the recorder).
    public func shutdown() {
        // The session says so too when the recorder slowed the traffic it recorded.
        if let line = stats.backpressureSummary { note("backpressure", line) }
        owned.value.listeners.forEach { $0.close() }
        owned.value.listeners.removeAll()
        for s in owned.value.sessions.values { s.shutdown() }
        owned.value.sessions.removeAll()
    }

    private func accept(fd: Int32, peer: String) {
        guard Listener.admit(fd, open: owned.value.sessions.count, max: config.maxConnections, tls: false, throttle: &turnAwayLog,
                             noun: "client connections", evictIdle: { closeLongestIdle() }, log: { log($0) }) else { return }
        let id = owned.value.nextConnectionID
        owned.value.nextConnectionID += 1
        let session = ClientSession(server: self, id: id, peer: peer)
        do {
            session.client = try Connection.accepted(fd: fd, peer: peer, loop: loop, delegate: session)
        } catch {
            close(fd)
            onLog?("accept from \(peer): \(error)")
            return
        }
        owned.value.sessions[ObjectIdentifier(session)] = session
        statsBox.withLock { $0.connections += 1 }
        let upstream: String? = { if case let .reverse(u) = config.mode { return u.description }; return nil }()
        writer?.submit(.connectionOpened(ConnectionRecord(id: id, clientAddress: peer, acceptedAt: wallNow(), mode: config.modeName, upstream: upstream)))
        session.start()
    }

    /// Closes the client connection idle the longest (`ClientSession.idleUntil`: the earliest idle deadline), to make room
    /// for a new one at the connection cap; false when every connection has an exchange or an answer under way.
    private func closeLongestIdle() -> Bool {
        guard let oldest = Listener.longestIdle(owned.value.sessions.values, idleKey: \.idleUntil,
                                                isQuiet: { $0.client?.isQuiet == true }) else { return false }
        oldest.closeIdle()
        return true
    }

    /// Request bytes held by all client connections, against `config.maxBufferedBytes`.
    lazy var budget = BufferBudget(limit: config.maxBufferedBytes)

    /// A connection refused because the budget is spent: one log line a second at most.
    func refusedForBudget(_ peer: String) {
        if budget.shouldLog(nowNanos: EventLoop.nowNanos()) {
            log("request bytes held in memory reached --max-buffered (\(budget.limit) bytes): answering 503 to connections asking for more (\(peer))")
        }
    }

    /// The session writer's backlog now (empty without a writer).
    var writerBacklog: WriterBacklog { writer?.backlogNow ?? .empty }

    /// True while the session writer is behind: new requests are held, so memory stays bounded.
    var writerIsBehind: Bool { backpressure.isBehind(writerBacklog) }

    /// How long a new request waits because the writer is falling behind (see `WriterBackpressure.pacingDelay`).
    func pacingDelay() -> Double { backpressure.pacingDelay(writerBacklog) }

    /// Parks a session until the writer has caught up (`WriterBackpressure.hasCaughtUp`), checked every millisecond.
    func deferUntilWriterCatchesUp(_ s: ClientSession) {
        owned.value.deferred.append((s, EventLoop.nowNanos()))
        if owned.value.deferred.count == 1 { scheduleDeferredCheck() }
    }

    private func scheduleDeferredCheck() {
        loop.schedule(after: 0.001) { [weak self] in
            guard let self else { return }
            if !self.backpressure.hasCaughtUp(self.writerBacklog) {
                self.scheduleDeferredCheck()
                return
            }
            let ready = self.owned.value.deferred
            self.owned.value.deferred.removeAll()
            let now = EventLoop.nowNanos()
            self.statsBox.withLock { stats in
                for r in ready { stats.backpressure.held(since: r.since, until: now) }
            }
            for r in ready { r.session.resumeAfterBackpressure() }
        }
    }

    private var turnAwayLog = LogThrottle()

    func sessionEnded(_ s: ClientSession) {
        owned.value.sessions.removeValue(forKey: ObjectIdentifier(s))
        writer?.submit(.connectionClosed(id: s.id, at: wallNow()))
    }

    /// Counts a request slowed by `seconds` of pacing.
    func paced(_ seconds: Double) {
        statsBox.withLock { $0.backpressure.paced(seconds) }
    }

    /// Hands a finished exchange to the writer; decoding, masking and 3DS parsing happen on its thread.
    func record(_ x: ExchangeRecord) {
        writer?.submit(.exchange(x))
        statsBox.withLock { s in
            s.exchanges += 1
            if x.error != nil { s.errors += 1 }
        }
    }

    /// A log line; what it quotes from the network is masked and stripped of control characters first.
    func log(_ line: String) { onLog?(ThreeDSContent.printable(line)) }

    /// What a client that refused the certificate minted for `host` most likely means.
    public static func certificateRefusedHint(host: String) -> String {
        "\(host) refused 3dstape's certificate: the client does not trust the CA, or pins its certificate (see --pass-through)"
    }

    /// A client ended the intercepted handshake for `host` with a certificate alert: the hint goes to the log and the
    /// session's events once per host; each connection's failure is noted apart (`client-tls-failed`).
    func clientRefusedCertificate(host: String, peer: String, alert: TLSAlert) {
        guard owned.value.certificateRefusals.count < Self.maxHintedHosts, owned.value.certificateRefusals.insert(Self.foldedHost(host)).inserted else { return }
        let hint = Self.certificateRefusedHint(host: host)
        log("\(hint); the client sent TLS alert \(alert) (\(peer))")
        note("certificate-refused", "\(hint); TLS alert \(alert) from \(peer)")
    }

    /// A host name as DNS compares it: lower case, no trailing dot.
    static func foldedHost(_ host: String) -> String {
        let lower = host.lowercased()
        return lower.count > 1 && lower.hasSuffix(".") ? String(lower.dropLast()) : lower
    }

    /// Records an event in the session (and the log).
    func note(_ kind: String, _ detail: String) {
        writer?.submit(.note(at: wallNow(), kind: kind, detail: detail))
    }
}

