import Foundation
import TapCore
import TapCrypto
import TapEMV
import TapHTTP
import TapHTTPService
import TapNet
import TapStore

/// One line of the replayer's log, for the live view (`--json-lines` prints it as JSON).
public struct ReplayLine: Sendable {
    public var at: Double
    public var method: String
    public var target: String
    public var status: Int?
    public var recordedExchangeID: Int64?
    public var matchedBy: String?
    public var miss: String?
    public var scheduledMs: Double
    public var actualMs: Double?
    /// Faults injected into this answer.
    public var faults: String?
    /// `answered`, `client gave up`, `forwarded`, `RReq sent`, or a failure.
    public var outcome: String
}

/// The replay server: the engine's decisions on real sockets. One listener takes direct clients (origin-form,
/// HTTP or `--tls` HTTPS) and proxy clients (absolute-form, and CONNECT with TLS intercepted by 3dstape's CA).
/// Answers wait on the event loop's timers; every live exchange goes into the replay's own session file with what
/// it matched and its scheduled and actual delay; a client that gives up is recorded with the time it did.
///
/// `@unchecked Sendable`: all mutable state is used only on `loop`'s thread (forwarding and RReqs run on a
/// background queue and hop back with `loop.execute`).
public final class Replayer: @unchecked Sendable {
    public let loop: EventLoop
    public let engine: ReplayEngine
    let writer: SessionWriter?
    let outgoingTLS: TLSContext
    let report: @Sendable (ReplayLine) -> Void
    private var servers: [HTTPServer] = []
    private var selfURL = ""
    /// The live connections' identities and their requests in flight: the loop's, checked (`LoopConfined` traps off the
    /// loop in debug builds).
    private let perConnection: LoopConfined<PerConnection>
    private struct PerConnection {
        var connectionIDs: [ServerPeer: Int64] = [:]
        var nextConnectionID: Int64 = 2
        var seqs: [Int64: Int] = [:]
        var pending: [ServerPeer: Pending] = [:]
    }
    /// Clients present `--auth` credentials, which a forward does not pass on.
    private var clientsAuthenticate = false
    /// This replayer's name in the Via field of what it forwards: a forward that comes back names it (a loop).
    let viaName = "3dstape-replay-" + Digest.randomBytes(6).map { String(format: "%02x", $0) }.joined()
    /// Forwards that came back to this replayer, each answered 508 instead of being forwarded again.
    public private(set) var forwardLoops = 0
    private var loopLog = LogThrottle()
    /// Paces the stderr lines of `refused`.
    private var refusalLog = LogThrottle()
    /// Marks the 508 of a forwarding loop (with `viaName`), so that the forward it answers is recorded as the loop.
    static let loopHeader = "X-3dstape-Forwarding-Loop"
    /// Answers sent; the client's own closing messages after a fault or the end of its transaction, answered as an ACS
    /// would (`ReplayAnswer.closing`: an SDK's Erro, a challengeCancel CReq after it), counted apart from misses; misses;
    /// client aborts; RReqs delivered; RReqs nobody took (the 3DS Server's listener gone: refused, reset, closed);
    /// RReqs dropped by a `drop-rreq` fault.
    public private(set) var counts = (answered: 0, closing: 0, missed: 0, aborted: 0, rreqs: 0, rreqsUndelivered: 0, rreqsDropped: 0, cutShort: 0)

    struct Pending {
        var timer: TimerHandle?
        var record: ExchangeRecord
        var annotation: ReplayAnnotation
        var startedNanos: UInt64
        /// When the answer, due, began to wait for the session writer.
        var heldSince: UInt64?
        /// When the client finished sending (a FIN) while waiting: it is answered all the same, and the moment is
        /// recorded as when it gave up (a client that closed looks like one that half-closed until the answer goes out).
        var finishedSendingNanos: UInt64?
    }

    /// Hosts reached live instead of replayed (`--pass-through`): a CONNECT to one is tunnelled untouched, a plain-HTTP
    /// proxy request to one forwarded; both are recorded (the tunnel as a CONNECT exchange with what was seen of it).
    public var passThrough: [HostPattern] = []

    /// The pattern that passes this target through, if any.
    func passThroughPattern(_ target: HostPort) -> HostPattern? { passThrough.first { $0.matches(target) } }

    /// When due answers wait for the session writer: held while it is behind, as the recorder's requests are.
    public var backpressure = WriterBackpressure()
    /// Session-writer backlog (events) above which due answers wait.
    public var writerBacklogLimit: Int {
        get { backpressure.eventLimit }
        set { backpressure.eventLimit = newValue }
    }

    /// True while the session writer has more than `writerBacklogLimit` events or its byte limit of bodies waiting.
    var writerIsBehind: Bool { backpressure.isBehind(writer?.backlogNow ?? .empty) }

    /// Answers that waited for the session writer past their scheduled delay, and the longest such wait.
    public private(set) var writerWaits = WriterBackpressure.Cost()

    private var notedWriterWaits = false

    /// One sentence on the answers the session writer made late, or nil when it made none late.
    public var writerWaitSummary: String? { writerWaits.answerSummary }

    /// The outcome of an RReq the 3DS Server answered, and of one nobody took (`replay_matches.outcome`).
    public static let rreqDelivered = "RReq delivered"
    public static let rreqClientGone = "RReq not delivered (client gone)"
    /// The outcome of a client's closing message after a fault or the end of its transaction (`ReplayAnswer.closing`).
    public static let closingAnswered = "closing message answered as an ACS"

    /// Whether an RReq's failure means nobody listens at the threeDSServerURL any more: the connection refused, reset or
    /// closed without an answer (a client that has ended), rather than a slow or broken 3DS Server (a timeout, TLS, a bad answer).
    static func clientGone(_ e: HTTPClientError) -> Bool {
        switch e.kind {
        case .connect: return !e.message.hasPrefix("cannot resolve")
        case .protocolError: return e.message.hasSuffix("closed the connection without a response")
        case .tls, .timeout: return false
        }
    }

    /// The pseudo-connection RReqs are recorded on (the replayer as the ACS calling the 3DS Server).
    public static let rreqConnection: Int64 = 1
    /// The RReqs to the 3DS Server's listener (kept-alive connections, the same few for a whole run), as every ACS sends them.
    private let rreqs: RReqSender

    public init(loop: EventLoop, engine: ReplayEngine, writer: SessionWriter?, outgoingTLS: TLSContext,
                report: @escaping @Sendable (ReplayLine) -> Void) {
        self.loop = loop
        perConnection = LoopConfined(PerConnection(), on: loop)
        self.engine = engine
        self.writer = writer
        self.outgoingTLS = outgoingTLS
        self.report = report
        rreqs = RReqSender(loop: loop, tls: outgoingTLS)
    }

    /// RReqs that went on a kept-alive connection so far.
    public var rreqConnectionReuses: Int { rreqs.connectionReuses }
    /// RReqs the replayer is due to send: counted from the answer that plans one until its record is made. Read from any
    /// thread.
    public let rreqsDue = PendingCount()

    /// Binds and starts serving; returns the bound address. Call before the loop runs or on its thread.
    @discardableResult
    public func start(on address: HostPort, tls: TLSContext?, intercepting: TLSContext?, scheme: String,
                      headerTimeout: Double = 30, idleTimeout: Double = 120, authorization: ClientAuthorization? = nil,
                      maxConnections: Int = 1024, maxBufferedBytes: Int = 512 << 20, maxUnsentBytes: Int = 1 << 20) throws -> HostPort {
        let s = HTTPServer(loop: loop, tls: tls, intercepting: intercepting, answering: { [weak self] req, peer, respond in
            self?.handle(req, peer, respond)
        })
        s.authorization = authorization
        if authorization != nil { clientsAuthenticate = true }
        s.maxConnections = maxConnections
        s.maxBufferedBytes = maxBufferedBytes
        s.maxUnsentBytes = maxUnsentBytes
        s.headerTimeout = headerTimeout
        s.idleTimeout = idleTimeout
        s.stampsArrivals = true // delays count from the request's arrival (`handle`)
        s.onClientAbort = { [weak self] peer in self?.clientGaveUp(peer) }
        if !passThrough.isEmpty {
            let patterns = passThrough
            s.passesThrough = { target in patterns.contains { $0.matches(target) } }
            s.onTunnelEnded = { [weak self] report in self?.recordTunnel(report) }
        }
        s.onClientFinishedSending = { [weak self] peer in self?.clientFinishedSending(peer) }
        // A request refused before it reached the replayer (malformed, too large, too slow): an event, as the recorder stores it.
        // Said on stderr too, as the recorder says it, at most once a second.
        s.onRefused = { [weak self] peer, status, message in self?.refused(peer, status: status, message: message) }
        s.onLog = { line in StandardStreams.err(Data("3dstape: replay: \(TerminalText.escaped(line))\n".utf8)) }
        let bound = try s.start(on: address)
        if servers.isEmpty {
            selfURL = "\(scheme)://\(bound)" // the first listener is the address written for direct clients
            writer?.submit(.connectionOpened(ConnectionRecord(id: Replayer.rreqConnection, clientAddress: "replayer (RReq to the 3DS Server)",
                                                              acceptedAt: Date().timeIntervalSince1970, mode: "replay", upstream: nil)))
        }
        servers.append(s)
        return bound
    }

    /// Serves a connected, non-blocking socket on the first listener's server as if it had been accepted there (the
    /// fuzz target drives the replayer over a socketpair). On the loop's thread, after `start`.
    public func adopt(fd: Int32, peer: String) {
        guard let server = servers.first else {
            close(fd)
            return
        }
        server.adopt(fd: fd, peer: peer)
    }

    /// What the replayer holds now, for leak checks: open connections, request bytes and unsent answer bytes held for
    /// them, requests not yet answered or given up, and of those the ones whose answer waits for a timer (not a hang).
    public var held: (connections: Int, requestBytes: Int, unsentBytes: Int, unanswered: Int, timed: Int) {
        (servers.reduce(0) { $0 + $1.connectionCount }, servers.reduce(0) { $0 + $1.bufferedBytes },
         servers.reduce(0) { $0 + $1.unsentBytes }, perConnection.value.pending.count, perConnection.value.pending.values.reduce(0) { $0 + ($1.timer == nil ? 0 : 1) })
    }

    /// Stops serving (on the loop's thread). `byUser`: the user stopped the replay (Ctrl-C, SIGTERM) while its clients may
    /// still wait, so answers not yet sent are recorded as cut short by the replayer (`recordAnswersCutShort`). Without it
    /// (check, timeouts, demo: stopped once their client has ended) closing the connections records each as its client's
    /// end, as `check` and `timeouts` read it.
    public func stop(byUser: Bool = false) {
        // The replay session says so too when the writer made answers late.
        if let line = writerWaitSummary, !notedWriterWaits {
            notedWriterWaits = true
            writer?.submit(.note(at: Date().timeIntervalSince1970, kind: "backpressure", detail: line))
        }
        if byUser { recordAnswersCutShort() }
        servers.forEach { $0.stop() }
        servers.removeAll()
        rreqs.closeAll()
    }

    /// The error of an exchange whose answer was still waiting (its delay, or the writer) when the replayer stopped;
    /// `scheduledMs` nil for a hang (no answer was due).
    static func stoppedBeforeAnswer(waitedMs: Double, scheduledMs: Double?) -> String {
        String(format: "the replayer stopped (Ctrl-C or SIGTERM) after %.1f ms, ", waitedMs)
            + (scheduledMs.map { String(format: "before its answer (scheduled at %.1f ms)", $0) } ?? "while it held the answer (a hang: none was due)")
            + "; the client did not give up"
    }

    /// Answers not yet sent when the replayer stops are recorded as cut short by the replayer, in the order they came,
    /// before the connections close: closing them would otherwise record each as its client giving up (`clientGaveUp`).
    private func recordAnswersCutShort() {
        let pending = perConnection.value.pending.values.sorted { $0.startedNanos < $1.startedNanos }
        perConnection.value.pending.removeAll()
        let now = EventLoop.nowNanos()
        for p in pending {
            if let t = p.timer { loop.cancel(t) }
            let waited = Double(now &- p.startedNanos) / 1e6
            var record = p.record
            record.done = Date().timeIntervalSince1970
            if let finished = p.finishedSendingNanos {
                // The client had closed its side (a FIN) first: it gave up then, as `clientGaveUp` records it.
                counts.aborted += 1
                let atMs = Double(finished &- p.startedNanos) / 1e6
                record.clientAbortAt = record.requestStart + atMs / 1000
                record.error = String(format: "client closed its side of the connection (FIN) after %.1f ms, before its answer; then the "
                                      + "replayer stopped (Ctrl-C or SIGTERM)", atMs)
                finishRecord(record, p.annotation, status: nil, headers: [], body: [], actualMs: nil,
                             outcome: String(format: "client gave up after %.1f ms (its FIN); replayer stopped after %.1f ms", atMs, waited))
                continue
            }
            counts.cutShort += 1
            let hang = p.timer == nil && p.heldSince == nil
            record.error = Replayer.stoppedBeforeAnswer(waitedMs: waited, scheduledMs: hang ? nil : (p.annotation.scheduledDelayMs ?? 0))
            finishRecord(record, p.annotation, status: nil, headers: [], body: [], actualMs: nil,
                         outcome: "replayer stopped after \(String(format: "%.1f", waited)) ms")
        }
    }

    func connectionID(_ peer: ServerPeer, at: Double) -> Int64 {
        if let id = perConnection.value.connectionIDs[peer] { return id }
        let id = perConnection.value.nextConnectionID
        perConnection.value.nextConnectionID += 1
        perConnection.value.connectionIDs[peer] = id
        writer?.submit(.connectionOpened(ConnectionRecord(id: id, clientAddress: peer.address, acceptedAt: at, mode: "replay", upstream: nil)))
        return id
    }

    func handle(_ req: HTTPRequest, _ peer: ServerPeer, _ answerWith: @escaping (HTTPServerAnswer) -> Void) {
        let respond: (HTTPReply) -> Void = { answerWith(.reply($0)) }
        if refusedForwardingLoop(req, respond) { return }
        // The request began when its last byte reached the socket (the kernel's receive time), as the client sees it, not
        // when the loop came to it: a loop busy with other answers, or waiting for a core, delays neither the delay's
        // start nor the record's. A request taken later from a pipeline (not in the read that completed it) begins now.
        let nowNanos = EventLoop.nowNanos()
        let startedNanos = min(loop.inputArrivedNanos ?? nowNanos, nowNanos)
        let started = Date().timeIntervalSince1970 - Double(nowNanos - startedNanos) / 1e9
        let conn = connectionID(peer, at: started)
        let seq = perConnection.value.seqs[conn, default: 0] + 1
        perConnection.value.seqs[conn] = seq
        let live = LiveRequest(method: req.head.method, target: req.head.target, headers: req.head.headers.fields.map { ($0.name, $0.value) },
                               body: req.body)
        if live.viaProxy, !req.head.target.hasPrefix("https://"), let url = HTTPURL(req.head.target), let pattern = passThroughPattern(url.address) {
            // A plain-HTTP proxy request to a host passed through: reached live, not replayed (and not counted as a miss).
            let (path, _) = ReplayURL.pathAndQuery(req.head.target)
            var record = ExchangeRecord(connectionID: conn, seq: seq, method: req.head.method, url: req.head.target, host: req.head.headers["Host"],
                                        path: path, upstream: url.address.description,
                                        request: CapturedMessage(headers: live.headers, body: req.body, wireSize: req.rawHead.count + req.rawBody.count),
                                        requestStart: started)
            record.requestSent = started
            let annotation = ReplayAnnotation(recordedExchangeID: nil, matchedBy: "passed through (--pass-through \(pattern))", miss: nil,
                                              scheduledDelayMs: nil, actualDelayMs: nil)
            forward(req, to: req.head.target, record: record, annotation: annotation, startedNanos: startedNanos, respond)
            return
        }
        let answer = engine.handle(live, selfURL: selfURL)
        let (path, _) = ReplayURL.pathAndQuery(req.head.target)
        var record = ExchangeRecord(connectionID: conn, seq: seq, method: req.head.method,
                                    url: live.viaProxy ? req.head.target : selfURL + req.head.target,
                                    host: req.head.headers["Host"], path: path, upstream: nil,
                                    request: CapturedMessage(headers: live.headers, body: req.body, wireSize: req.rawHead.count + req.rawBody.count,
                                                             plaintext: answer.requestPlaintext, plaintextNote: plaintextNote(answer.requestPlaintext)),
                                    requestStart: started)
        record.requestSent = started
        let annotation = ReplayAnnotation(recordedExchangeID: answer.recordedExchangeID, matchedBy: answer.matchedBy, miss: answer.miss,
                                          scheduledDelayMs: answer.delay * 1000, actualDelayMs: nil,
                                          faults: answer.faults.isEmpty ? nil : answer.faults.joined(separator: ", "))
        if case let .forward(url) = answer.action {
            forward(req, to: url, record: record, annotation: annotation, startedNanos: startedNanos, respond)
            return
        }
        // A nested function may schedule itself again without a closure that retains itself.
        func send() {
            // Backpressure: while the session writer is behind, answers wait (and so do the clients' next requests),
            // so that memory stays bounded instead of queueing every exchange (1.3 GB under wrk before this).
            if self.writerIsBehind {
                if self.perConnection.value.pending[peer]?.heldSince == nil { self.perConnection.value.pending[peer]?.heldSince = EventLoop.nowNanos() }
                self.perConnection.value.pending[peer]?.timer = self.loop.schedule(after: 0.001, send)
                return
            }
            if let since = self.perConnection.value.pending[peer]?.heldSince {
                self.writerWaits.held(since: since, until: EventLoop.nowNanos())
            }
            let finishedSending = self.perConnection.value.pending[peer]?.finishedSendingNanos
            self.perConnection.value.pending[peer] = nil
            let actual = Double(EventLoop.nowNanos() - startedNanos) / 1e6
            let reply = HTTPReply(status: answer.status, headers: answer.headers, body: answer.body)
            if case let .fault(fault) = answer.action {
                answerWith(.takeOver { Replayer.deliver(reply, with: fault, on: $0) })
            } else {
                answerWith(.reply(reply))
            }
            let sent: (status: Int?, outcome: String) = {
                switch answer.action {
                case .answer, .forward: return (answer.status, answer.closing ? Replayer.closingAnswered : "answered")
                case .fault(.close), .fault(.hang): return (nil, "closed without answering (fault)")
                case .fault(.reset): return (nil, "connection reset (fault)")
                case .fault(.raw): return (answer.status, "truncated or malformed answer sent (fault)")
                case .fault(.dribble): return (answer.status, "answer dribbled (fault)")
                }
            }()
            if answer.miss != nil {
                self.counts.missed += 1
            } else if answer.closing {
                self.counts.closing += 1
            } else {
                self.counts.answered += 1
            }
            if let r = answer.rreq {
                self.rreqsDue.begin()
                let due = self.rreqsDue
                self.loop.schedule(after: r.after) { [weak self] in
                    guard let self else { return due.end() }
                    self.sendRReq(r)
                }
            }
            if answer.rreqDropped != nil { self.counts.rreqsDropped += 1 }
            // The record waits until every answer due now is written: another timer due in this turn sends its answer
            // first, not after this one's bookkeeping (the record, the live view's line, the writer's queue).
            self.loop.afterDueTimers {
                var record = record
                var outcome = sent.outcome
                if let finishedSending {
                    let waited = Double(finishedSending &- startedNanos) / 1e6
                    record.clientAbortAt = record.requestStart + waited / 1000
                    record.error = String(format: "client closed its side of the connection (FIN) after %.1f ms, before its answer "
                                          + "(scheduled at %.1f ms); answered anyway", waited, annotation.scheduledDelayMs ?? 0)
                    outcome += String(format: " after the client's FIN at %.1f ms", waited)
                }
                self.finishRecord(record, annotation, status: sent.status, headers: answer.headers, body: answer.body, actualMs: actual,
                                  outcome: outcome, plaintext: answer.responsePlaintext)
                if let dropped = answer.rreqDropped {
                    // No exchange is made for an RReq never sent: the session says so, for whoever judges the run.
                    self.writer?.submit(.note(at: Date().timeIntervalSince1970, kind: "rreq",
                                              detail: "dropped by fault (drop-rreq): transaction \(dropped)"))
                }
            }
        }
        perConnection.value.pending[peer] = Pending(timer: nil, record: record, annotation: annotation, startedNanos: startedNanos)
        // A hang answers nothing: the connection stays open until the client gives up, which is recorded.
        if answer.action == .fault(.hang) { return }
        // The delay counts from the request's arrival: the engine's own work (matching, ECDH, signing) is part of it.
        let remaining = answer.delay - Double(EventLoop.nowNanos() - startedNanos) / 1e9
        if remaining <= 0 {
            send()
        } else {
            perConnection.value.pending[peer]?.timer = loop.schedule(after: remaining, send)
        }
    }

    /// How the engine holds an app-channel plaintext it hands to the writer (the `decryption` note a key would give).
    func plaintextNote(_ plaintext: JSON?) -> String? { plaintext.map { _ in "decrypted: \(engine.method)" } }

    func finishRecord(_ r: ExchangeRecord, _ a: ReplayAnnotation, status: Int?, headers: [(String, String)], body: [UInt8], actualMs: Double?,
                      outcome: String = "answered", plaintext: JSON? = nil) {
        var record = r
        var annotation = a
        annotation.actualDelayMs = actualMs
        annotation.outcome = outcome
        let now = Date().timeIntervalSince1970
        if let status {
            record.status = status
            record.response = CapturedMessage(headers: headers, body: body, wireSize: body.count, plaintext: plaintext,
                                              plaintextNote: plaintextNote(plaintext))
            record.firstByte = record.requestStart + (actualMs ?? 0) / 1000
            record.done = now
        }
        record.replay = annotation
        writer?.submit(.exchange(record))
        report(ReplayLine(at: r.requestStart, method: r.method, target: r.url, status: status, recordedExchangeID: a.recordedExchangeID,
                          matchedBy: a.matchedBy, miss: a.miss, scheduledMs: a.scheduledDelayMs ?? 0, actualMs: actualMs, faults: a.faults,
                          outcome: outcome))
    }

    /// A CONNECT tunnelled untouched (`--pass-through`) ended: recorded as a CONNECT exchange with what was seen of it.
    func recordTunnel(_ t: TunnelReport) {
        let conn = connectionID(ServerPeer(connection: t.connection ?? 0, address: t.peer), at: t.startedAt)
        let seq = perConnection.value.seqs[conn, default: 0] + 1
        perConnection.value.seqs[conn] = seq
        let address = t.target.description
        var record = ExchangeRecord(connectionID: conn, seq: seq, method: "CONNECT", url: address, host: t.target.host, path: nil, upstream: address,
                                    request: CapturedMessage(headers: [], body: [], wireSize: t.bytesUp), requestStart: t.startedAt)
        let reached = t.connectedAt != nil
        record.status = reached ? 200 : 502
        record.response = CapturedMessage(headers: [], body: [], wireSize: t.bytesDown)
        record.upstreamConnect = t.connectedAt
        record.done = t.endedAt
        if !reached { record.error = t.ended }
        let pattern = passThroughPattern(t.target).map { "--pass-through \($0)" }
        record.tunnel = TunnelAnnotation(host: t.target.host, port: Int(t.target.port), sni: t.clientHello?.serverName,
                                         alpnOffered: t.clientHello.flatMap { $0.alpn.isEmpty ? nil : $0.alpn },
                                         bytesUp: t.bytesUp, bytesDown: t.bytesDown, ended: t.ended, decidedBy: pattern)
        record.replay = ReplayAnnotation(recordedExchangeID: nil, matchedBy: "passed through (\(pattern ?? "--pass-through"))", miss: nil,
                                         scheduledDelayMs: nil, actualDelayMs: nil, outcome: reached ? "tunnelled" : "tunnel failed")
        writer?.submit(.exchange(record))
        report(ReplayLine(at: t.startedAt, method: "CONNECT", target: address, status: record.status, recordedExchangeID: nil,
                          matchedBy: record.replay?.matchedBy, miss: nil, scheduledMs: 0, actualMs: nil, faults: nil,
                          outcome: record.replay?.outcome ?? ""))
    }

    /// The client finished sending (a FIN) with its answer not yet due: noted, and the answer still goes out.
    func clientFinishedSending(_ peer: ServerPeer) {
        if perConnection.value.pending[peer] != nil, perConnection.value.pending[peer]?.finishedSendingNanos == nil { perConnection.value.pending[peer]?.finishedSendingNanos = EventLoop.nowNanos() }
    }

    /// The client closed its connection before its answer was due: the time it gave up is what a timeout test measures.
    func clientGaveUp(_ peer: ServerPeer) {
        guard let p = perConnection.value.pending.removeValue(forKey: peer) else { return }
        if let t = p.timer { loop.cancel(t) }
        counts.aborted += 1
        var record = p.record
        // A client that finished sending first gave up then, not when the connection was at last closed.
        let waited = Double((p.finishedSendingNanos ?? EventLoop.nowNanos()) &- p.startedNanos) / 1e6
        record.clientAbortAt = record.requestStart + waited / 1000
        record.error = String(format: "client gave up after %.1f ms (answer scheduled at %.1f ms)", waited, p.annotation.scheduledDelayMs ?? 0)
        finishRecord(record, p.annotation, status: nil, headers: [], body: [], actualMs: nil, outcome: "client gave up after \(String(format: "%.1f", waited)) ms")
    }

    /// A request the server refused before it reached the replayer (malformed, too large, too slow): a `rejected` event
    /// of the session, and a line on stderr, at most once a second.
    func refused(_ peer: ServerPeer, status: Int, message: String) {
        let detail = "\(peer.address): \(status) \(message)"
        writer?.submit(.note(at: Date().timeIntervalSince1970, kind: "rejected", detail: detail))
        if refusalLog.allow(nowNanos: EventLoop.nowNanos()) {
            StandardStreams.err(Data("3dstape: replay: \(ThreeDSContent.printable(detail))\n".utf8))
        }
    }

    /// A request this replayer forwarded itself, come back (its Via names this replayer): `--on-miss forward:` or a live
    /// endpoint that leads to the replayer. Answered 508 with the reason, once, instead of forwarding it again until every
    /// connection is taken (1,024 of them, and a summary of "0 answered", before this).
    func refusedForwardingLoop(_ req: HTTPRequest, _ respond: (HTTPReply) -> Void) -> Bool {
        guard req.head.headers["Via"] != nil, req.head.headers.tokens("Via").contains(where: { $0.contains(viaName) }) else { return false }
        forwardLoops += 1
        let why = "forwarding loop: \(req.head.method) \(ThreeDSContent.printable(String(req.head.target.prefix(200)))) was forwarded by this "
            + "replayer and came back to it; --on-miss forward:URL (or the transaction's live endpoint) must not lead to the replayer"
        if loopLog.allow(nowNanos: EventLoop.nowNanos()) { StandardStreams.err(Data("3dstape: replay: \(why)\n".utf8)) }
        respond(HTTPErrorAnswer.reply(status: 508, why, headers: [(Replayer.loopHeader, viaName)]))
        return true
    }

    /// Forwards a request to a live endpoint (the transaction's own 3DS Server or merchant page) or, with
    /// `--on-miss forward:URL`, to a real server; the answer is passed back and recorded.
    func forward(_ req: HTTPRequest, to urlText: String, record: ExchangeRecord, annotation: ReplayAnnotation, startedNanos: UInt64,
                 _ respond: @escaping (HTTPReply) -> Void) {
        guard let url = HTTPURL(urlText) else {
            let reply = HTTPErrorAnswer.reply(status: 502, "cannot forward to \(urlText.prefix(100))")
            respond(reply)
            finishRecord(record, annotation, status: 502, headers: [], body: reply.body, actualMs: 0, outcome: "forward failed")
            return
        }
        // What the hop to the replayer carried stays with it (the one list, as the recorder's); the client's framing and
        // Host are the client's own; a direct client's Authorization, with --auth, was the replayer's credentials.
        var forwarded = req.head.headers
        forwarded.removeHopByHop(also: ["Host", "Content-Length", "Transfer-Encoding"]
                                 + (clientsAuthenticate && req.head.target.hasPrefix("/") ? ["Authorization"] : []))
        forwarded.add("Via", "1.1 \(viaName)") // after any Via the client sent: a forward that comes back is recognised
        let headers = forwarded.fields.map { ($0.name, $0.value) }
        LoopHTTPClient.send(req.head.method, url, headers: headers, body: req.body, tls: outgoingTLS, timeout: 10, on: loop) { [weak self] result in
            guard let self else { return }
            let actual = Double(EventLoop.nowNanos() - startedNanos) / 1e6
            if annotation.miss != nil { self.counts.missed += 1 } // a miss, whatever the live server answered
            // A forward that brought no answer to pass on: 502, and why, to the client and into the record.
            func failed(_ why: String) {
                let reply = HTTPErrorAnswer.reply(status: 502, why)
                respond(reply)
                var row = record
                row.error = why
                self.finishRecord(row, annotation, status: 502, headers: [], body: reply.body, actualMs: actual, outcome: "forward failed")
            }
            switch result {
            case let .success(r) where r.head.status == 101:
                // A switch of protocols is no answer a replay can pass on (Upgrade is not forwarded either).
                failed("forwarding to \(url) failed: it answered 101 Switching Protocols, and the replayer passes no protocol upgrade on")
            case let .success(r):
                var h = ReplayEngine.replayableHeaders(r.head.headers.fields.map { ($0.name, $0.value) })
                var forwarded = record
                var outcome = "forwarded"
                if r.head.headers[Replayer.loopHeader] == self.viaName {
                    h.removeAll { $0.0.caseInsensitiveEquals(Replayer.loopHeader) }
                    forwarded.error = "forwarding to \(url) leads back to this replayer (a forwarding loop): answered 508"
                    outcome = "forwarding loop refused (508)"
                }
                respond(HTTPReply(status: r.head.status, headers: h, body: r.body))
                self.finishRecord(forwarded, annotation, status: r.head.status, headers: h, body: r.body, actualMs: actual, outcome: outcome)
            case let .failure(e):
                failed("forwarding to \(url) failed: \(e.message)")
            }
        }
    }

    /// Sends the RReq as the ACS would, to the live threeDSServerURL, and records it with its RRes; it stops being due
    /// (`rreqsDue`) once that record is made (or the RReq could not be sent).
    func sendRReq(_ r: PlannedRReq) {
        let due = rreqsDue
        let started = Date().timeIntervalSince1970
        let seq = perConnection.value.seqs[Replayer.rreqConnection, default: 0] + 1
        perConnection.value.seqs[Replayer.rreqConnection] = seq
        let serverTransID = r.threeDSServerTransID
        guard let url = HTTPURL(r.url) else {
            engine.rreqDone(for: serverTransID)
            return due.end()
        }
        let headers = RReqSender.headers
        var pendingRecord = ExchangeRecord(connectionID: Replayer.rreqConnection, seq: seq, method: "POST", url: r.url, host: url.hostHeader,
                                    path: url.path, upstream: r.url, request: CapturedMessage(headers: headers, body: r.body, wireSize: r.body.count),
                                    requestStart: started)
        pendingRecord.requestSent = started
        let record = pendingRecord
        let annotation = ReplayAnnotation(recordedExchangeID: r.recordedExchangeID, matchedBy: "RReq sent by the replayer as the ACS",
                                          miss: nil, scheduledDelayMs: r.after * 1000, actualDelayMs: nil)
        rreqs.send(r.body, to: url) { [weak self] result in
            defer { due.end() }
            guard let self else { return }
            self.engine.rreqDone(for: serverTransID)
            switch result {
            case let .success(resp):
                self.counts.rreqs += 1
                self.finishRecord(record, annotation, status: resp.head.status, headers: resp.head.headers.fields.map { ($0.name, $0.value) },
                                  body: resp.body, actualMs: r.after * 1000, outcome: Replayer.rreqDelivered)
                self.writer?.submit(.note(at: Date().timeIntervalSince1970, kind: "rreq", detail: "delivered: transaction \(serverTransID)"))
            case let .failure(e) where Replayer.clientGone(e):
                // The 3DS Server's listener is gone (a client that ended after a fault, as it may): not the replayer's failure.
                self.counts.rreqsUndelivered += 1
                var gone = record
                gone.error = "RReq to \(r.url) not delivered (client gone): \(e.message)"
                self.finishRecord(gone, annotation, status: nil, headers: [], body: [], actualMs: nil, outcome: Replayer.rreqClientGone)
                self.writer?.submit(.note(at: Date().timeIntervalSince1970, kind: "rreq",
                                          detail: "not delivered: client gone (\(e.message)): transaction \(serverTransID)"))
            case let .failure(e):
                var failed = record
                failed.error = "RReq to \(r.url) failed: \(e.message)"
                self.finishRecord(failed, annotation, status: nil, headers: [], body: [], actualMs: nil, outcome: "RReq failed: \(e.message)")
                self.writer?.submit(.note(at: Date().timeIntervalSince1970, kind: "rreq", detail: "failed (\(e.message)): transaction \(serverTransID)"))
            }
        }
    }
}
