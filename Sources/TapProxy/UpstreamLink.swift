import TapCrypto
import TapHTTP
import TapNet

/// The connection from a client session to its current upstream, kept alive between exchanges.
final class UpstreamLink: ConnectionDelegate {
    unowned let session: ClientSession
    let target: Target
    var connection: Connection?
    var parser = HTTPParser(mode: .response)
    var pending: [UInt8] = []
    var awaiting = false
    var closed = false
    var connectedAt: Double?
    var tlsDoneAt: Double?
    var requestSentAt: Double?
    var firstByteAt: Double?

    init(session: ClientSession, target: Target) {
        self.session = session
        self.target = target
        parser = HTTPParser(mode: .response, limits: session.config.limits)
    }

    /// Open, idle and with nothing buffered: fit for the next request.
    var isUsable: Bool { !closed && !awaiting && connection?.isClosed == false && parser.isIdle }

    func open(sending bytes: [UInt8], method: String) {
        awaiting = true
        parser.requestMethod = method
        pending = bytes
        do {
            let c = try Connection.connect(to: target.address, loop: session.loop, delegate: self)
            connection = c
            if target.tls {
                c.startTLS(try TLSSession(context: session.config.upstreamTLS, serverName: target.address.host))
            }
        } catch let e as ConnectionError {
            fail(502, "upstream \(target.address) unreachable: \(e)")
        } catch {
            fail(502, "upstream \(target.address): \(error)")
        }
    }

    func send(_ bytes: [UInt8], method: String) {
        awaiting = true
        parser.requestMethod = method
        firstByteAt = nil
        connection?.write(bytes)
        requestSentAt = wallNow()
    }

    func close() {
        closed = true
        connection?.delegate = nil
        connection?.close()
    }

    func connectionReady(_ c: Connection) {
        if let m = c.connectedAt { connectedAt = wall(fromMonotonic: m) }
        if let t = c.tlsEstablishedAt { tlsDoneAt = wall(fromMonotonic: t) }
        c.write(pending)
        pending = []
        requestSentAt = wallNow()
    }

    func connection(_ c: Connection, received bytes: [UInt8]) {
        if firstByteAt == nil { firstByteAt = wallNow() }
        parser.append(bytes)
        do {
            if let response = try parser.nextResponse() {
                awaiting = false
                let first = firstByteAt
                firstByteAt = nil
                if !response.head.keepAlive { close() }
                session.responseReceived(response, firstByteAt: first)
            } else if !awaiting, !parser.isIdle {
                fail(502, "upstream \(target.address) sent data without a request")
            }
        } catch {
            fail(502, "upstream \(target.address) sent an invalid response: \(error.message)")
        }
    }

    func connectionClosed(_ c: Connection, error: ConnectionError?) {
        guard !closed else { return }
        closed = true
        guard awaiting else { return }
        if error == nil, let response = try? parser.finish() {
            awaiting = false
            session.responseReceived(response, firstByteAt: firstByteAt)
            return
        }
        let why: String
        switch error {
        case let .connect(e)?: why = "upstream \(target.address) unreachable: \(e.reason)"
        case let .tls(m)?: why = "TLS to upstream \(target.address) failed: \(m)"
        case let e?: why = "upstream \(target.address): \(e)"
        case nil: why = "upstream \(target.address) closed the connection before a complete response"
        }
        fail(502, why)
    }

    private func fail(_ status: Int, _ message: String) {
        awaiting = false
        closed = true
        connection?.delegate = nil
        connection?.close()
        session.upstreamFailed(status: status, message, closeUpstream: true)
    }
}
