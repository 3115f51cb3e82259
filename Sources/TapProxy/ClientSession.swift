import Foundation
import TapCore
import TapCrypto
import TapEMV
import TapHTTP
import TapNet
import TapStore

/// Where a request goes.
struct Target: Equatable {
    var tls: Bool
    var address: HostPort
    var hostHeader: String
    var path: String

    var urlPrefix: String { "\(tls ? "https" : "http")://\(hostHeader)" }
}

/// One client connection: parses its requests, forwards them one at a time (pipelined requests wait
/// their turn), and writes back each response exactly as the upstream sent it.
final class ClientSession: ConnectionDelegate {
    unowned let server: ProxyServer
    let id: Int64
    let peer: String
    var client: Connection!
    var parser: HTTPParser
    /// The CONNECT target once a tunnel is being intercepted.
    var tunnel: HostPort?
    var upstream: UpstreamLink?
    var inFlight: InFlight?
    var seq = 0
    var requestStartedAt: Double?
    var sentContinue = false
    var closed = false
    /// Waiting for the session writer to catch up (backpressure).
    var isDeferred = false
    /// This request has had its pacing delay (it is not delayed twice).
    var pacedOnce = false
    /// What the session is waiting for, and until when (monotonic ns); checked by the server's sweep,
    /// so that no per-request timer is created.
    var waitingFor: Wait = .idle
    var deadline: UInt64 = 0

    enum Wait { case idle, requestHead, upstream }

    /// The exchange being forwarded.
    struct InFlight {
        var record: ExchangeRecord
        var keepAlive: Bool
        var target: Target
        /// Set when key substitution rewrote the request and must rewrite the response.
        var substitution: KeySubstitution.Context?
    }

    init(server: ProxyServer, id: Int64, peer: String) {
        self.server = server
        self.id = id
        self.peer = peer
        parser = HTTPParser(mode: .request, limits: server.config.limits)
    }

    var config: ProxyConfiguration { server.config }
    var loop: EventLoop { server.loop }

    func wait(for what: Wait, seconds: Double) {
        waitingFor = what
        deadline = EventLoop.nowNanos() + UInt64(seconds * 1e9)
    }

    func armIdleTimer() { wait(for: .idle, seconds: config.idleTimeout) }

    func resumeAfterBackpressure() {
        isDeferred = false
        guard !closed else { return }
        client.resumeReading()
        processNext()
    }

    /// Called by the server's sweep when `deadline` has passed.
    func deadlinePassed() {
        deadline = 0
        switch waitingFor {
        case .idle:
            if inFlight == nil, parser.isIdle { client.close() }
        case .requestHead:
            if inFlight == nil, !parser.isIdle { reject(status: 408, "request not received within \(Int(config.headerTimeout)) s") }
        case .upstream:
            if let f = inFlight {
                upstreamFailed(status: 504, "upstream \(f.target.address) did not answer within \(Int(config.upstreamTimeout)) s",
                               closeUpstream: true)
            }
        }
    }

    // MARK: ConnectionDelegate (client side)

    func connectionReady(_ connection: Connection) {
        // The intercepted TLS handshake with the client is done.
        if let tls = connection.tlsSession {
            server.writer?.submit(.connectionTLS(id: id, version: tls.protocolVersion, cipher: tls.cipher, sni: tls.serverName, alpn: tls.alpn))
        }
    }

    func connection(_ connection: Connection, received bytes: [UInt8]) {
        if parser.isIdle, requestStartedAt == nil { requestStartedAt = wallNow() }
        parser.append(bytes)
        guard holdBudget() else {
            server.refusedForBudget(peer)
            reject(status: 503, "request bytes held in memory across connections exceed --max-buffered (\(server.budget.limit) bytes); try again")
            return
        }
        if inFlight == nil {
            processNext()
        } else if parser.bufferedCount > ClientSession.pipelineAllowance, !client.readingPaused {
            // A request is with the upstream: hold at most a little of what follows (pipelined requests), then stop
            // reading until its response is written (hardening: 1.5 GiB sent behind one unanswered GET was buffered).
            client.pauseReading()
            pausedWhileInFlight = true
        }
    }

    /// Tells the server's budget what this connection holds: bytes read and not handled, and the body in flight.
    @discardableResult
    func holdBudget() -> Bool {
        server.budget.hold(ObjectIdentifier(self), parser.bufferedCount + (inFlight?.record.request.body.count ?? 0))
    }

    /// Bytes read ahead from a client while its previous request is with the upstream.
    static let pipelineAllowance = 256 * 1024
    /// Reading was paused because too much arrived while a request was in flight.
    var pausedWhileInFlight = false

    func connectionClosed(_ connection: Connection, error: ConnectionError?) {
        guard !closed else { return }
        closed = true
        if var f = inFlight {
            f.record.clientAbortAt = wallNow()
            f.record.error = "client closed the connection before the response" + (error.map { " (\($0))" } ?? "")
            f.record.done = wallNow()
            inFlight = nil
            server.record(f.record)
        } else if let error, case .tls = error {
            server.log("client \(peer): \(error)")
            server.writer?.submit(.note(at: wallNow(), kind: "client-tls-failed", detail: "\(peer): \(error)"))
        }
        upstream?.close()
        upstream = nil
        server.budget.release(ObjectIdentifier(self))
        server.sessionEnded(self)
    }

    func shutdown() {
        client.close()
    }

    // MARK: requests

    func processNext() {
        guard !closed, inFlight == nil, !isDeferred else { return }
        if pausedWhileInFlight {
            pausedWhileInFlight = false
            client.resumeReading()
        }
        if !parser.isIdle, !pacedOnce {
            let delay = server.pacingDelay()
            if delay > 0 {
                // The writer is falling behind: this request waits a little (see `pacingDelay`), then goes on.
                isDeferred = true
                pacedOnce = true
                client.pauseReading()
                server.loop.schedule(after: delay) { [weak self] in self?.resumeAfterBackpressure() }
                return
            }
        }
        pacedOnce = false
        if server.writerIsBehind, !parser.isIdle {
            isDeferred = true
            client.pauseReading()
            server.deferUntilWriterCatchesUp(self)
            return
        }
        let request: HTTPRequest
        do {
            if !sentContinue, let head = try parser.peekRequestHead(), head.headers["Expect"]?.lowercased() == "100-continue",
               parser.isInBody {
                sentContinue = true
                client.write(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
            }
            guard let r = try parser.nextRequest() else {
                if !parser.isIdle, waitingFor != .requestHead { wait(for: .requestHead, seconds: config.headerTimeout) }
                return
            }
            request = r
        } catch {
            reject(status: error.status == 502 ? 400 : error.status, error.message)
            return
        }
        sentContinue = false
        let startedAt = requestStartedAt ?? wallNow()
        requestStartedAt = parser.isIdle ? nil : wallNow()
        handle(request, startedAt: startedAt)
        holdBudget()
    }

    func handle(_ request: HTTPRequest, startedAt: Double) {
        let head = request.head
        if let auth = config.authorization, tunnel == nil,
           let refused = auth.refusal(for: head, viaProxy: head.method == "CONNECT" || head.target.contains("://")) {
            server.writer?.submit(.note(at: wallNow(), kind: "rejected", detail: "\(peer): \(refused.status) no valid credentials"))
            client.write(ProxyErrorResponse.bytes(status: refused.status, error: "authentication required (3dstape was started with --auth)",
                                                  upstream: nil, close: true, extraHeaders: [refused.challenge]))
            client.close(afterFlush: true)
            return
        }
        if head.method == "CONNECT" {
            guard case .forward = config.mode, let ctx = config.interceptTLS, tunnel == nil else {
                reject(status: 405, "CONNECT is only accepted by a forward proxy, once per connection")
                return
            }
            guard let hp = HostPort(head.target), !head.target.hasPrefix(":"), !hp.host.isEmpty else {
                reject(status: 400, "CONNECT target '\(head.target)' is not host:port")
                return
            }
            client.write(Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8))
            do {
                client.startTLS(try TLSSession(context: ctx, serverName: hp.host))
            } catch {
                server.log("TLS for \(hp): \(error)")
                client.close()
                return
            }
            tunnel = hp
            requestStartedAt = nil
            return
        }
        let target: Target
        switch resolveTarget(head) {
        case let .success(t): target = t
        case let .failure(e):
            reject(status: 400, e.message)
            return
        }
        seq += 1
        let captured = CapturedMessage(headers: head.headers.fields.map { ($0.name, $0.value) }, body: request.body,
                                       wireSize: request.rawHead.count + request.rawBody.count)
        var record = ExchangeRecord(connectionID: id, seq: seq, method: head.method, url: target.urlPrefix + target.path,
                                    host: target.hostHeader, path: target.path, upstream: target.address.description,
                                    request: captured, requestStart: startedAt)
        record.mask = config.mask

        // The request toward the upstream: origin-form, hop-by-hop headers removed, body bytes unchanged.
        var out = HTTPRequestHead(method: head.method, target: target.path, version: "HTTP/1.1", headers: head.headers)
        for h in ["Proxy-Connection", "Proxy-Authorization", "Keep-Alive", "Expect", "TE", "Upgrade"] { out.headers.remove(h) }
        if config.authorization != nil, case .reverse = config.mode { out.headers.remove("Authorization") } // it was 3dstape's
        out.headers.remove("Connection")
        // A reverse proxy names its upstream; a forward proxy given an absolute URL replaces the client's Host with that
        // URL's authority (RFC 9112 §3.2.2), so that what is recorded is what the upstream sees. In a tunnel the
        // client's own Host goes through, and the recorded URL comes from the CONNECT target.
        if case .reverse = config.mode { out.headers.replaceOrAdd("Host", target.hostHeader) }
        if case .forward = config.mode, tunnel == nil { out.headers.replaceOrAdd("Host", target.hostHeader) }
        if out.headers["Host"] == nil { out.headers.add("Host", target.hostHeader) }
        var forwardBody = request.rawBody
        var context: KeySubstitution.Context?
        if let sub = config.substitution {
            let (action, ctx) = sub.request(request.body)
            switch action {
            case let .unchanged(note):
                if let note { server.note("substitution", note) }
            case let .replaced(body, note):
                if let note { server.note("substitution", note) }
                forwardBody = body
                context = ctx
                out.headers.remove("Transfer-Encoding")
                out.headers.replaceOrAdd("Content-Length", String(body.count))
            case let .answer(status, body, note):
                server.note("substitution", note)
                let headers = HTTPHeaders([("Content-Type", "application/json; charset=utf-8"), ("Content-Length", String(body.count))])
                let reply = HTTPResponseHead(status: status, headers: headers)
                client.write(reply.bytes + body)
                record.status = status
                record.response = CapturedMessage(headers: headers.fields.map { ($0.name, $0.value) }, body: body, wireSize: body.count)
                record.done = wallNow()
                server.record(record)
                if head.keepAlive { processNext() } else { client.close(afterFlush: true) }
                return
            }
        }
        let bytes = out.bytes + forwardBody

        inFlight = InFlight(record: record, keepAlive: head.keepAlive, target: target, substitution: context)
        wait(for: .upstream, seconds: config.upstreamTimeout)
        if let link = upstream, link.target.address == target.address, link.target.tls == target.tls, link.isUsable {
            link.send(bytes, method: head.method)
        } else {
            upstream?.close()
            upstream = UpstreamLink(session: self, target: target)
            upstream?.open(sending: bytes, method: head.method)
        }
    }

    func resolveTarget(_ head: HTTPRequestHead) -> Result<Target, HTTPParseError> {
        switch config.mode {
        case let .reverse(u):
            guard head.target.hasPrefix("/") || head.target == "*" else {
                return .failure(HTTPParseError(status: 400, "a reverse proxy expects origin-form targets, got '\(head.target.prefix(60))'"))
            }
            return .success(Target(tls: u.tls, address: u.address, hostHeader: u.hostHeader, path: u.basePath + head.target))
        case .forward:
            if let tunnel {
                let host = tunnel.port == 443 ? tunnel.host : tunnel.description
                return .success(Target(tls: true, address: tunnel, hostHeader: host, path: head.target))
            }
            if let scheme = head.target.range(of: "://"),
               head.target[scheme.upperBound...].prefix(while: { $0 != "/" && $0 != "?" && $0 != "#" }).contains("@") {
                return .failure(HTTPParseError(status: 400, "credentials in the request URL (user@host) are neither forwarded nor recorded"))
            }
            guard let u = UpstreamURL(head.target) else {
                return .failure(HTTPParseError(status: 400, "a forward proxy needs an absolute URL (http://host/path) or CONNECT, got '\(head.target.prefix(60))'"))
            }
            let t = head.target
            let afterScheme = t.index(t.startIndex, offsetBy: u.tls ? 8 : 7)
            let path = t[afterScheme...].firstIndex(of: "/").map { String(t[$0...]) } ?? "/"
            return .success(Target(tls: u.tls, address: u.address, hostHeader: u.hostHeader, path: path))
        }
    }

    /// Answers the client with an error of our own and closes after it (malformed or refused request).
    func reject(status: Int, _ message: String) {
        server.log("\(peer): \(status) \(message)")
        server.writer?.submit(.note(at: wallNow(), kind: "rejected", detail: "\(peer): \(status) \(message)"))
        client.write(ProxyErrorResponse.bytes(status: status, error: message, upstream: nil, close: true))
        client.close(afterFlush: true)
    }

    // MARK: upstream results

    func responseReceived(_ response: HTTPResponse, firstByteAt: Double?) {
        guard var f = inFlight else { return }
        inFlight = nil
        holdBudget()
        var headers = response.head.headers
        var body = response.body
        var wire = response.rawHead + response.rawBody
        if let ctx = f.substitution, let sub = config.substitution {
            switch sub.response(response.body, context: ctx) {
            case let .unchanged(note):
                if let note { server.note("substitution", note) }
            case let .replaced(newBody, note):
                if let note { server.note("substitution", note) }
                headers.remove("Transfer-Encoding")
                headers.replaceOrAdd("Content-Length", String(newBody.count))
                body = newBody
                wire = HTTPResponseHead(status: response.head.status, reason: response.head.reason, version: response.head.version,
                                        headers: headers).bytes + newBody
            case .answer:
                break
            }
        }
        // The client gets (and the session stores) the response as the client sees it.
        client.write(wire)
        f.record.status = response.head.status
        f.record.response = CapturedMessage(headers: headers.fields.map { ($0.name, $0.value) }, body: body, wireSize: wire.count)
        fillUpstreamTimes(&f.record)
        f.record.firstByte = firstByteAt
        f.record.done = wallNow()
        server.record(f.record)
        let closeDelimited = response.head.headers["Content-Length"] == nil && response.head.headers["Transfer-Encoding"] == nil
            && !(response.head.status == 204 || response.head.status == 304 || f.record.method == "HEAD")
        if !f.keepAlive || closeDelimited {
            client.close(afterFlush: true)
            return
        }
        armIdleTimer()
        processNext()
    }

    func upstreamFailed(status: Int, _ message: String, closeUpstream: Bool) {
        guard var f = inFlight else { return }
        inFlight = nil
        holdBudget()
        armIdleTimer()
        if closeUpstream { upstream?.close(); upstream = nil }
        let body = ProxyErrorResponse.bytes(status: status, error: message, upstream: f.target.address.description, close: !f.keepAlive)
        client.write(body)
        f.record.status = status
        f.record.error = message
        fillUpstreamTimes(&f.record)
        f.record.done = wallNow()
        server.record(f.record)
        if !f.keepAlive { client.close(afterFlush: true) } else { processNext() }
    }

    func fillUpstreamTimes(_ r: inout ExchangeRecord) {
        guard let link = upstream else { return }
        r.upstreamConnect = link.connectedAt
        r.tlsDone = link.tlsDoneAt
        r.requestSent = link.requestSentAt
    }
}

/// The JSON error answers the proxy itself gives (malformed requests, unreachable upstreams, timeouts).
enum ProxyErrorResponse {
    static func bytes(status: Int, error: String, upstream: String?, close: Bool, extraHeaders: [(String, String)] = []) -> [UInt8] {
        var members: [(String, JSON)] = [("error", .string(error)), ("status", .number(String(status))), ("proxy", .string("3dstape"))]
        if let upstream { members.append(("upstream", .string(upstream))) }
        let body = JSON.object(members).bytes + [0x0A]
        var headers = HTTPHeaders([("Content-Type", "application/json"), ("Content-Length", String(body.count)), ("X-3dstape-Error", "1")]
                                  + extraHeaders)
        if close { headers.add("Connection", "close") }
        return HTTPResponseHead(status: status, headers: headers).bytes + body
    }
}
