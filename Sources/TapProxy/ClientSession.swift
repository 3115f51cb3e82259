import TapCore
import TapCrypto
import TapHTTP
import TapHTTPService
import TapNet
import TapStore

/// The I/O driver of one client connection: carries socket and timer events into its `ProxySessionMachine` and
/// performs the actions that come out (writes, the upstream connection, TLS, pauses, records). It holds no
/// protocol logic of its own.
final class ClientSession: ConnectionDelegate, ProxySessionEnvironment {
    unowned let server: ProxyServer
    let id: Int64
    let peer: String
    var client: Connection!
    private(set) var machine: ProxySessionMachine
    /// The connection to the machine's current upstream (events from a replaced one are not delivered).
    private var upstream: UpstreamDriver?
    /// What the session holds of the server's `BufferBudget`.
    private var budgetShare = BufferBudget.Share()

    init(server: ProxyServer, id: Int64, peer: String) {
        self.server = server
        self.id = id
        self.peer = peer
        machine = ProxySessionMachine(config: server.config, connectionID: id, peer: peer)
    }

    /// The one timer for the machine's deadline, and the moment it fires (monotonic ns). The deadline moves with every
    /// exchange (the upstream's answer, then idle), mostly later: the timer is moved only when the deadline comes
    /// earlier, and one that fires before the deadline as it is then is set again for it, so that an exchange sets no
    /// timer (as the 250 ms sweep it replaces set none, and the deadlines now pass on time).
    private var timer: TimerHandle?
    private var timerDue: UInt64 = 0

    func start() {
        machine.start(self)
        armTimer()
    }

    /// Sets the timer for the machine's deadline, unless one is set for that moment or earlier (0: none; a deadline
    /// past the clock's range never comes).
    private func armTimer() {
        let due = machine.deadline
        guard due != 0, due != .max else { return }
        if let timer {
            if timerDue <= due { return }
            server.loop.cancel(timer)
        }
        timerDue = due
        let now = EventLoop.nowNanos()
        timer = server.loop.schedule(after: Double(due - min(due, now)) / 1e9) { [weak self] in self?.timerFired() }
    }

    private func timerFired() {
        timer = nil
        let due = machine.deadline
        if due != 0, due <= EventLoop.nowNanos() { feed(.deadlinePassed) } else { armTimer() }
    }

    func resumeAfterBackpressure() { feed(.resume) }

    /// Closes the connection because the recorder stops: the machine records an exchange in flight as cut short by the
    /// recorder (not as the client's abort) before the socket closes.
    func shutdown() {
        feed(.recorderStopping)
        client.close()
    }

    /// When the idle deadline of a connection that holds nothing passes (monotonic ns): no exchange under way, no
    /// answer bytes waiting, not closing, no tunnel; nil otherwise. All connections share one idle timeout, so the
    /// earliest is the one idle the longest, which the server closes for a new connection at the connection cap.
    var idleUntil: UInt64? {
        guard machine.waitingFor == .idle, machine.inFlight == nil, !machine.isPassThrough, !machine.closingAfterFlush,
              !machine.client.busy, let client, !client.isClosed, client.unsentByteCount == 0 else { return nil }
        return machine.deadline
    }

    /// Closes the client connection as a client that left would (the server needs its slot).
    func closeIdle() { client?.close() }

    /// Feeds an event and performs what the machine asks, in order; when it asks (`reportWhenWritten`), feeds `written`
    /// once the writes are queued, so that the client's unsent count includes them.
    func feed(_ event: ProxySessionMachine.Event) {
        if performAll(event) {
            while performAll(.written) {}
        }
        if !machine.closed { armTimer() }
    }

    /// The machine's actions of the event being performed, kept between events so that no array is made per event.
    private var actions: [ProxySessionMachine.Action] = []

    /// Feeds one event and performs its actions but `reportWhenWritten`; returns whether that was asked for.
    private func performAll(_ event: ProxySessionMachine.Event) -> Bool {
        // Taken out while performed: an action may feed another event (a failed connect) and use the member meanwhile.
        var list: [ProxySessionMachine.Action] = []
        swap(&list, &actions)
        machine.handle(event, self, into: &list)
        var written = false
        // Taken out of the list in order (reversed, then popped), so that no action is copied.
        list.reverse()
        while let action = list.popLast() {
            if case .reportWhenWritten = action { written = true } else { perform(action) }
        }
        swap(&list, &actions)
        return written
    }

    private func perform(_ action: ProxySessionMachine.Action) {
        switch action {
        case let .writeClient(head, body):
            client.write(head, body)
            // A tunnel's upstream is read no faster than the client takes its bytes.
            if machine.isPassThrough, Self.tunnelOutput.shouldPause(unsent: client.unsentByteCount) { upstream?.connection?.pauseReading() }
        case let .closeClient(afterFlush): client.close(afterFlush: afterFlush)
        case .resetClient: client.reset()
        case let .startClientTLS(serverName, early):
            do {
                guard let ctx = server.config.interceptTLS else { client.close(); return }
                client.startTLS(try TLSSession(context: ctx, serverName: serverName), early: early)
            } catch {
                server.log("TLS for \(serverName): \(error)")
                client.close()
            }
        case .pauseClientReading: client.pauseReading()
        case .resumeClientReading: client.resumeReading()
        case let .connectUpstream(target): connectUpstream(target)
        case let .writeUpstream(head, body):
            upstream?.connection?.write(head, body)
            if machine.isPassThrough, let c = upstream?.connection, Self.tunnelOutput.shouldPause(unsent: c.unsentByteCount) { client.pauseReading() }
        case .closeUpstream:
            upstream?.close()
            upstream = nil
        case .shutdownClientWrite: client.shutdownWrite()
        case .shutdownUpstreamWrite: upstream?.connection?.shutdownWrite()
        case let .record(record): server.record(record)
        case let .note(kind, detail): server.note(kind, detail)
        case let .certificateRefused(host, alert): server.clientRefusedCertificate(host: host, peer: peer, alert: alert)
        case let .log(line): server.log(line)
        case .budgetRefused: server.refusedForBudget(peer)
        case let .pace(seconds):
            server.paced(seconds)
            server.loop.schedule(after: seconds) { [weak self] in self?.feed(.resume) }
        case .waitForWriter: server.deferUntilWriterCatchesUp(self)
        case .reportWhenWritten: break // fed as `written` by `feed`, once the actions before it are performed
        case .ended:
            if let timer { server.loop.cancel(timer) }
            timer = nil
            server.budget.release(&budgetShare)
            server.sessionEnded(self)
        }
    }

    private func connectUpstream(_ target: Target) {
        upstream?.close()
        let driver = UpstreamDriver(session: self)
        upstream = driver
        do {
            let c = try Connection.connect(to: target.address, loop: server.loop, delegate: driver)
            driver.connection = c
            if target.tls {
                do {
                    c.startTLS(try TLSSession(context: server.config.upstreamTLS, serverName: target.address.host))
                } catch {
                    driver.close()
                    feed(.upstreamClosed(.tls("\(error)")))
                }
            }
        } catch {
            driver.close()
            feed(.upstreamClosed(.connect("\(error)")))
        }
    }

    /// In a tunnel (`--pass-through`), bytes queued toward one side past which the other side is not read, and at or
    /// below which it is read again (the output backpressure of every server connection, with its own marks).
    static let tunnelOutput = OutputBackpressure(highWater: 1 << 20, lowWater: 1 << 18)

    /// The upstream took queued tunnel bytes: read the client again once little is left.
    fileprivate func upstreamDrained(_ driver: UpstreamDriver) {
        guard driver === upstream, machine.isPassThrough, !machine.readingPaused,
              let c = driver.connection, Self.tunnelOutput.shouldResume(unsent: c.unsentByteCount) else { return }
        client.resumeReading()
    }

    fileprivate func upstreamEvent(from driver: UpstreamDriver, _ event: ProxySessionMachine.Event) {
        guard driver === upstream else { return } // a replaced connection's late event
        feed(event)
    }

    // MARK: ConnectionDelegate (client side)

    func connectionReady(_ connection: Connection) {
        // The intercepted TLS handshake with the client is done.
        if let tls = connection.tlsSession {
            server.writer?.submit(.connectionTLS(id: id, version: tls.protocolVersion, cipher: tls.cipher, sni: tls.serverName, alpn: tls.alpn,
                                                 alpnOffered: connection.clientHello.flatMap { $0.alpn.isEmpty ? nil : $0.alpn }))
        }
    }

    func connection(_ connection: Connection, received bytes: [UInt8]) { feed(.clientBytes(bytes)) }

    /// The client took queued tunnel bytes: read the upstream again once little is left.
    func connectionWroteQueued(_ connection: Connection) {
        if machine.pausedForOutput || machine.closingAfterFlush { return feed(.clientDrained) }
        guard machine.isPassThrough, Self.tunnelOutput.shouldResume(unsent: connection.unsentByteCount) else { return }
        upstream?.connection?.resumeReading()
    }

    /// A half-closed client is answered: the machine writes what is in flight, then closes (the connection stays open
    /// for writing until then).
    func connectionInputEnded(_ connection: Connection) -> Bool {
        feed(.clientFinishedSending)
        return true
    }

    func connectionClosed(_ connection: Connection, error: ConnectionError?) {
        var tlsFailure = false
        if let error, case .tls = error { tlsFailure = true }
        if tlsFailure, let offered = connection.clientHello?.alpn, !offered.isEmpty, !offered.contains(TLSContext.applicationProtocol) {
            // Refused in the handshake (no_application_protocol): say why, with what the client offered.
            // The SNI and ALPN names are the client's: cut short, so a 15 KB SNI or 60 long names make one short line.
            let sni = connection.clientHello?.serverName.map { TerminalText.abbreviated($0) } ?? "none"
            let detail = "\(peer) (SNI \(sni)) offered ALPN \(TerminalText.nameList(offered, limit: 32)) only: 3dstape "
                + "intercepts \(TLSContext.applicationProtocol) and answered no_application_protocol; let the client fall back to HTTP/1.1, "
                + "or tunnel the host untouched with --pass-through"
            server.note("client-alpn-refused", detail)
            server.log(detail)
        }
        feed(.clientClosed(error: error.map { "\($0)" }, tlsFailure: tlsFailure, peerAlert: connection.tlsSession?.receivedAlert))
    }

    // MARK: ProxySessionEnvironment

    func wallClock() -> Double { wallNow() }
    func monotonicClock() -> UInt64 { EventLoop.nowNanos() }
    func pacingDelay() -> Double { server.pacingDelay() }
    var writerIsBehind: Bool { server.writerIsBehind }
    func holdBudget(_ bytes: Int) -> Bool { server.budget.hold(&budgetShare, bytes) }
    func unsentByteCount() -> Int { client.unsentByteCount }
    func kernelUnsentBytes() -> Int? { client.kernelUnsentBytes }
}

/// Carries one upstream connection's events to its session.
final class UpstreamDriver: ConnectionDelegate {
    unowned let session: ClientSession
    var connection: Connection?

    init(session: ClientSession) { self.session = session }

    func close() {
        connection?.delegate = nil
        connection?.close()
    }

    func connectionReady(_ c: Connection) {
        session.upstreamEvent(from: self, .upstreamConnected(connectedAt: c.connectedAt.map(wall(fromMonotonic:)),
                                                             tlsDoneAt: c.tlsEstablishedAt.map(wall(fromMonotonic:))))
    }

    func connection(_ c: Connection, received bytes: [UInt8]) { session.upstreamEvent(from: self, .upstreamBytes(bytes)) }

    func connectionWroteQueued(_ c: Connection) { session.upstreamDrained(self) }

    /// In a tunnel the upstream's FIN is passed on to the client and the connection stays open for the client's bytes;
    /// otherwise it closes, and the machine takes that as the upstream closing.
    func connectionInputEnded(_ c: Connection) -> Bool {
        guard session.machine.isPassThrough else { return false }
        session.upstreamEvent(from: self, .upstreamFinishedSending)
        return true
    }

    func connectionClosed(_ c: Connection, error: ConnectionError?) {
        let failure: ProxySessionMachine.UpstreamFailure?
        switch error {
        case let .connect(e)?: failure = .connect(e.reason)
        case let .tls(m)?: failure = .tls(m)
        case let e?: if case .resolve = e { failure = .connect("\(e)") } else { failure = .other("\(e)") } // looked up off the loop
        case nil: failure = nil
        }
        session.upstreamEvent(from: self, .upstreamClosed(failure))
    }
}
