import TapCore
import CLinux
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TapCrypto

/// What a `Connection` tells its owner.
public protocol ConnectionDelegate: AnyObject {
    /// TCP connect finished (outgoing) and, if TLS was started, the handshake completed.
    func connectionReady(_ connection: Connection)
    /// Plaintext arrived.
    func connection(_ connection: Connection, received bytes: [UInt8])
    /// The connection is closed; called once. `error` is nil for an orderly close by the peer or by us.
    func connectionClosed(_ connection: Connection, error: ConnectionError?)
    /// The peer has finished sending (a TCP FIN, or TLS close_notify) while it may still read: a half-close. Return
    /// true to keep the connection open for writing (reading stops for good; close it when done), false to close it
    /// now (the default).
    func connectionInputEnded(_ connection: Connection) -> Bool
    /// Queued bytes went out to the socket (`unsentByteCount` went down).
    func connectionWroteQueued(_ connection: Connection)
}

extension ConnectionDelegate {
    public func connectionInputEnded(_ connection: Connection) -> Bool { false }
    public func connectionWroteQueued(_ connection: Connection) {}
}

/// Why a connection ended abnormally.
public enum ConnectionError: Error, Equatable, CustomStringConvertible {
    case connect(NetError)
    case io(NetError)
    case tls(String)
    case resolve(String)

    public var description: String {
        switch self {
        case let .connect(e): return "connect failed: \(e.reason)"
        case let .io(e): return "\(e)"
        case let .tls(m): return "TLS: \(m)"
        case let .resolve(m): return "cannot resolve: \(m)"
        }
    }
}

/// One non-blocking TCP connection on an event loop, optionally wrapped in TLS. Owns its fd.
/// Used only on its loop's thread.
public final class Connection: EventHandler {
    public let loop: EventLoop
    /// The socket; -1 while the host name is being looked up (`connect`).
    public private(set) var fd: Int32
    public weak var delegate: (any ConnectionDelegate)?
    /// `host:port` of the peer.
    public let peer: String
    private var registration: Registration?
    private var tls: TLSSession?
    private var outbox: [UInt8] = []
    private var outboxOffset = 0
    private var connecting: Bool
    private var closeAfterFlush = false
    public private(set) var isClosed = false
    /// Whether the TCP connection is up and any TLS handshake is done.
    public private(set) var isReady = false
    /// Monotonic nanoseconds when TCP connect completed (outgoing connections).
    public private(set) var connectedAt: UInt64?
    /// Monotonic nanoseconds when the TLS handshake completed.
    public private(set) var tlsEstablishedAt: UInt64?
    /// While true, the connection does not read (backpressure); the peer's data waits in the kernel.
    public private(set) var readingPaused = false
    /// The peer finished sending and the delegate kept the connection open to answer (`connectionInputEnded`).
    public private(set) var inputEnded = false
    /// This end finished sending (`shutdownWrite`): nothing more is written; the peer reads its end of the stream.
    public private(set) var outputEnded = false
    private var shutdownAfterFlush = false

    /// Bytes queued for the socket and not yet taken by it (what a peer that does not read leaves in memory).
    public var unsentByteCount: Int { outbox.count - outboxOffset }

    /// Stops reading until `resumeReading`.
    public func pauseReading() {
        guard !readingPaused, !isClosed else { return }
        readingPaused = true
        if let registration { loop.update(registration, readable: false, writable: outboxOffset < outbox.count || connecting) }
    }

    /// Reads again after `pauseReading` (not after the peer's input ended).
    public func resumeReading() {
        guard readingPaused, !isClosed, !inputEnded else { return }
        readingPaused = false
        if let registration { loop.update(registration, readable: true, writable: outboxOffset < outbox.count || connecting) }
    }

    /// The client's ClientHello (SNI, ALPN offered) on a connection where this end is the TLS server, once read; kept
    /// so that what the client offered is known even when the handshake fails.
    public private(set) var clientHello: TLSClientHello?
    /// The first bytes of a TLS server connection, until its ClientHello is read (bounded by `TLSClientHello.maxBytes`).
    private var helloBytes: [UInt8] = []
    private var helloSettled = false

    /// Bytes received and sent on the wire.
    public private(set) var bytesIn = 0, bytesOut = 0

    /// Whether the connection is waiting for nothing of its own: no TLS handshake begun and not finished (a client that
    /// sent part of its ClientHello is under way, as one that sent part of a request is), and no bytes the peer sent
    /// still unread in the kernel (a request that arrived but was not read yet). What a server asks before it closes a
    /// connection it took for idle (`Listener.longestIdle`); a system call each time.
    public var isQuiet: Bool {
        guard !isClosed else { return false }
        if tls != nil, !isReady, bytesIn > 0 { return false }
        return !SystemCall.hasUnreadInput(fd)
    }

    /// Bytes handed to the kernel that the peer has not yet acknowledged (Linux's SIOCOUTQ), or nil where the system
    /// does not say or the connection is closed. It shrinks while the peer reads, even when too little frees for this
    /// end's own queue to move: a slow reader behind a large send buffer is still reading.
    public var kernelUnsentBytes: Int? { isClosed ? nil : Platform.kernelUnsentBytes(fd) }

    init(loop: EventLoop, fd: Int32, peer: String, connecting: Bool) {
        self.loop = loop
        self.fd = fd
        self.peer = peer
        self.connecting = connecting
    }

    /// Adopts an accepted socket and starts reading.
    public static func accepted(fd: Int32, peer: String, loop: EventLoop, delegate: any ConnectionDelegate) throws(NetError) -> Connection {
        let c = Connection(loop: loop, fd: fd, peer: peer, connecting: false)
        c.delegate = delegate
        _ = clinux_set_nodelay(fd)
        c.registration = try loop.register(fd: fd, handler: c, readable: true, writable: false)
        c.isReady = true
        return c
    }

    /// Starts a non-blocking connect. A literal address is connected to at once; a host name is looked up off the loop
    /// (`loop.resolver`: getaddrinfo may block for seconds), and the connect starts when the answer is back. Writes and
    /// `startTLS` before then wait for it; a failed lookup ends the connection with `.resolve` (`connectionClosed`).
    public static func connect(to target: HostPort, loop: EventLoop, delegate: any ConnectionDelegate) throws(ConnectionError) -> Connection {
        guard ResolvedAddress.isLiteral(target.host) else {
            let c = Connection(loop: loop, fd: -1, peer: target.description, connecting: true)
            c.delegate = delegate
            loop.resolver.resolve(target, on: loop) { [c] result in c.resolved(result, port: target.port) }
            return c
        }
        let c = Connection(loop: loop, fd: -1, peer: target.description, connecting: true)
        c.delegate = delegate
        try c.open(target)
        return c
    }

    /// Opens the socket and starts connecting to `target` (a literal address).
    private func open(_ target: HostPort) throws(ConnectionError) {
        let resolved: ResolvedAddress
        do { resolved = try ResolvedAddress(target) } catch { throw .resolve("\(target.host): \(error.reason)") }
        let ai = resolved.first
        let fd = Platform.streamSocket(family: ai.ai_family)
        guard fd >= 0 else { throw .connect(NetError.errno("socket")) }
        _ = clinux_set_nodelay(fd)
        // ai_addr points into `resolved`, which must outlive the call.
        let r = withExtendedLifetime(resolved) { SystemCall.connect(fd, ai.ai_addr, ai.ai_addrlen) }
        if r != 0, errno != EINPROGRESS {
            let e = NetError.errno("connect to \(peer)")
            _ = SystemCall.close(fd)
            throw .connect(e)
        }
        self.fd = fd
        do {
            registration = try loop.register(fd: fd, handler: self, readable: !readingPaused, writable: true)
        } catch {
            _ = SystemCall.close(fd)
            self.fd = -1
            throw .io(error)
        }
    }

    /// The host name's lookup answered (on the loop): connect to the address, or end with why there is none.
    private func resolved(_ result: Result<String, ConnectionError>, port: UInt16) {
        guard !isClosed else { return }
        do throws(ConnectionError) {
            try open(HostPort(host: try result.get(), port: port))
        } catch {
            fail(error)
        }
    }

    /// Wraps the connection in TLS. A client session sends its ClientHello as soon as TCP is up. `early` is what the
    /// peer already sent that belongs to the TLS stream (a client that sent its ClientHello in the same write as its
    /// CONNECT): it goes into the session as if just received, never to the delegate as plaintext.
    public func startTLS(_ session: TLSSession, early: [UInt8] = []) {
        tls = session
        isReady = false
        guard !connecting else { return }
        if early.isEmpty { advanceHandshake() } else { deliver(early) }
    }

    /// The TLS session, once started.
    public var tlsSession: TLSSession? { tls }

    /// Whether reads take the kernel's receive time of their bytes (`stampArrivals`).
    private var stampsArrivals = false

    /// From now on each read takes the kernel's receive time of its bytes (SO_TIMESTAMPNS where the platform has it), and
    /// the loop holds it as `inputArrivedNanos` while the bytes are handed to the delegate: so that what the delegate does
    /// with them can count from when they arrived, not from when the loop came to them (the replayer's delays). False
    /// where the platform gives no such time (reads then go on as before, without one).
    @discardableResult
    public func stampArrivals() -> Bool {
        guard !isClosed, fd >= 0, Platform.enableReceiveTimestamps(fd) else { return false }
        stampsArrivals = true
        return true
    }

    /// Queues plaintext for sending (encrypting it if TLS is on).
    public func write(_ bytes: [UInt8]) { write(bytes, []) }

    /// Queues `head` then `body` (a message's head and its body): on a plain socket with nothing queued, both go in one
    /// `sendmsg` from where they lie, without first being joined into one array; with TLS, in one record.
    public func write(_ head: [UInt8], _ body: [UInt8]) {
        guard !isClosed, !outputEnded, !head.isEmpty || !body.isEmpty else { return }
        guard let tls else { return sendRaw(head, body) }
        do {
            try tls.writePlaintext(body.isEmpty ? head : (head.isEmpty ? body : head + body))
        } catch {
            fail(.tls(error.message))
            return
        }
        sendRaw(tls.takeCiphertext())
    }

    /// Finishes sending, once queued bytes are out: a TCP FIN (`shutdown(SHUT_WR)`), so the peer reads the end of the
    /// stream while this end still reads what it sends (a tunnel passes a client's half-close on). Later writes are
    /// dropped. On a TLS connection, which has no half-close of its own here, it closes once flushed instead.
    public func shutdownWrite() {
        guard !isClosed, !outputEnded else { return }
        guard tls == nil else { return close(afterFlush: true) }
        outputEnded = true
        if outboxOffset < outbox.count || connecting {
            shutdownAfterFlush = true
            return
        }
        sendFIN()
    }

    private func sendFIN() {
        shutdownAfterFlush = false
        if SystemCall.shutdownWrite(fd) != 0, errno != ENOTCONN { fail(.io(NetError.errno("shutdown to \(peer)"))) }
    }

    /// Closes now, or once queued bytes are sent.
    public func close(afterFlush: Bool = false) {
        guard !isClosed else { return }
        if afterFlush, outboxOffset < outbox.count {
            closeAfterFlush = true
            return
        }
        finish(error: nil, notify: true)
    }

    /// Closes with a TCP reset (SO_LINGER 0): the peer sees "connection reset by peer", not an orderly close.
    public func reset() {
        guard !isClosed else { return }
        var option = linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
        finish(error: nil, notify: true)
    }

    /// Sends `head` then `body` at once when nothing is queued (the socket may take part; the rest is queued), else
    /// queues them behind what is.
    private func sendRaw(_ head: [UInt8], _ body: [UInt8] = []) {
        let total = head.count + body.count
        guard total > 0 else { return }
        if outboxOffset == outbox.count, !connecting {
            outbox.removeAll(keepingCapacity: true)
            outboxOffset = 0
            let n = head.withUnsafeBytes { h in
                body.withUnsafeBytes { b in
                    withUnsafeTemporaryAllocation(of: iovec.self, capacity: 2) { iov -> Int in
                        iov[0] = iovec(iov_base: UnsafeMutableRawPointer(mutating: h.baseAddress), iov_len: h.count)
                        iov[1] = iovec(iov_base: UnsafeMutableRawPointer(mutating: b.baseAddress), iov_len: b.count)
                        var message = msghdr()
                        message.msg_iov = iov.baseAddress
                        message.msg_iovlen = body.isEmpty ? 1 : 2
                        return sendmsg(fd, &message, Platform.sendFlags)
                    }
                }
            }
            if n == total { bytesOut += n; return }
            if n < 0, errno != EAGAIN, errno != EWOULDBLOCK {
                fail(.io(NetError.errno("send to \(peer)")))
                return
            }
            let sent = max(0, n)
            bytesOut += sent
            outbox = sent < head.count ? Array(head[sent...]) + body : Array(body[(sent - head.count)...])
        } else {
            if outboxOffset > 1 << 16, outboxOffset > outbox.count / 2 {
                // Drop what was sent before appending, so that a peer that reads slowly but never lets the queue run dry
                // does not keep every byte ever sent to it.
                outbox.removeFirst(outboxOffset)
                outboxOffset = 0
            }
            outbox += head
            outbox += body
        }
        if let registration { loop.update(registration, readable: !readingPaused, writable: true) }
    }

    private func flush() {
        var wrote = false
        defer { if wrote, !isClosed { delegate?.connectionWroteQueued(self) } }
        while outboxOffset < outbox.count {
            let n = outbox.withUnsafeBytes { send(fd, $0.baseAddress! + outboxOffset, $0.count - outboxOffset, Platform.sendFlags) }
            if n > 0 {
                outboxOffset += n
                bytesOut += n
                wrote = true
                continue
            }
            if n < 0, errno == EAGAIN || errno == EWOULDBLOCK { return }
            if n < 0, errno == EINTR { continue }
            fail(.io(NetError.errno("send to \(peer)")))
            return
        }
        outbox.removeAll(keepingCapacity: outbox.capacity <= 1 << 16) // a large backlog's storage is given back
        outboxOffset = 0
        if let registration { loop.update(registration, readable: !readingPaused, writable: false) }
        if closeAfterFlush { finish(error: nil, notify: true) } else if shutdownAfterFlush { sendFIN() }
    }

    public func handleEvent(readable: Bool, writable: Bool, hangup: Bool) {
        if connecting {
            guard writable || hangup else { return }
            let err = clinux_socket_error(fd)
            if err != 0 {
                fail(.connect(NetError("connect to \(peer)", code: err)))
                return
            }
            connecting = false
            connectedAt = EventLoop.nowNanos()
            if tls != nil {
                advanceHandshake()
            } else {
                isReady = true
                delegate?.connectionReady(self)
            }
            if !isClosed { flush() }
            return
        }
        if writable, !isClosed { flush() }
        if readingPaused {
            // Not reading (backpressure, or the peer's input ended): a hang-up, which epoll and poll report whatever the interest
            // set, means a reset or both directions closed. Nothing more can be sent, and waiting would spin on it.
            if hangup, !isClosed {
                let err = clinux_socket_error(fd)
                if err != 0 { fail(.io(NetError("recv from \(peer)", code: err))) } else { finish(error: nil, notify: true) }
            }
            return
        }
        if (readable || hangup), !isClosed { readAvailable() }
    }

    /// The peer sent its last byte: the delegate answers what it has and closes, or the connection closes now.
    private func peerFinishedSending() {
        guard !isClosed, !inputEnded else { return }
        guard delegate?.connectionInputEnded(self) == true else {
            finish(error: nil, notify: true)
            return
        }
        guard !isClosed else { return } // the delegate closed it meanwhile
        inputEnded = true
        readingPaused = true
        if let registration { loop.update(registration, readable: false, writable: outboxOffset < outbox.count) }
    }

    private func readAvailable() {
        var rounds = 0
        // Stops as soon as the delegate pauses reading (backpressure), not after the round's remaining reads.
        while !isClosed, !readingPaused, rounds < 16 {
            rounds += 1
            var stamp: Int64 = 0
            let (n, capacity) = loop.readBuffer.withUnsafeMutableBytes { buffer -> (Int, Int) in
                guard buffer.count > 0 else { return (0, 0) }
                return (stampsArrivals ? Platform.receive(fd, buffer.baseAddress, buffer.count, stampNanos: &stamp)
                                       : recv(fd, buffer.baseAddress, buffer.count, 0), buffer.count)
            }
            if n > 0 {
                bytesIn += n
                if stamp > 0 {
                    loop.inputArrivedNanos = EventLoop.monotonicNanos(ofRealtime: stamp)
                    deliver(Array(loop.readBuffer[0..<n]))
                    loop.inputArrivedNanos = nil
                } else {
                    deliver(Array(loop.readBuffer[0..<n]))
                }
                if n < capacity { return }
                continue
            }
            if n == 0 {
                peerFinishedSending()
                return
            }
            if errno == EAGAIN || errno == EWOULDBLOCK { return }
            if errno == EINTR { continue }
            fail(.io(NetError.errno("recv from \(peer)")))
            return
        }
    }

    private func deliver(_ bytes: [UInt8]) {
        guard let tls else {
            delegate?.connection(self, received: bytes)
            return
        }
        if !helloSettled, tls.isServer { readClientHello(bytes) }
        tls.feed(bytes)
        if !tls.isEstablished {
            advanceHandshake()
            if !tls.isEstablished || isClosed { return }
        }
        do {
            let plain = try tls.readPlaintext()
            sendRaw(tls.takeCiphertext())
            if !plain.isEmpty { delegate?.connection(self, received: plain) }
            if tls.receivedClose, !isClosed { peerFinishedSending() }
        } catch {
            fail(.tls(error.message))
        }
    }

    private func readClientHello(_ bytes: [UInt8]) {
        helloBytes += bytes.prefix(TLSClientHello.maxBytes - helloBytes.count)
        switch TLSClientHello.read(helloBytes) {
        case .needMore: return
        case let .hello(h): clientHello = h
        case .notClientHello: break
        }
        helloSettled = true
        helloBytes = []
    }

    private func advanceHandshake() {
        guard let tls else { return }
        do {
            let done = try tls.handshake()
            sendRaw(tls.takeCiphertext())
            if done, !isReady {
                isReady = true
                tlsEstablishedAt = EventLoop.nowNanos()
                delegate?.connectionReady(self)
                // Application data may have arrived with the last handshake flight.
                let plain = try tls.readPlaintext()
                sendRaw(tls.takeCiphertext())
                if !plain.isEmpty { delegate?.connection(self, received: plain) }
            }
        } catch {
            sendRaw(tls.takeCiphertext()) // the alert, if any
            fail(.tls(error.message))
        }
    }

    private func fail(_ error: ConnectionError) { finish(error: error, notify: true) }

    private func finish(error: ConnectionError?, notify: Bool) {
        guard !isClosed else { return }
        isClosed = true
        outbox = [] // unsent bytes of a peer that left are freed now, not when the last reference goes
        outboxOffset = 0
        if let registration { loop.deregister(registration) }
        registration = nil
        if fd >= 0 { _ = SystemCall.close(fd) }
        if notify { delegate?.connectionClosed(self, error: error) }
        delegate = nil
    }
}

/// A listening TCP socket that hands each accepted connection's fd to `onAccept`.
public final class Listener: EventHandler {
    public let loop: EventLoop
    public let fd: Int32
    /// The bound address (with the real port when 0 was asked for).
    public let address: HostPort
    private var registration: Registration?
    private let onAccept: (Int32, String) -> Void
    /// Told once each time accepting pauses for lack of file descriptors (the owner logs it).
    public var onBackoff: ((String) -> Void)?
    private var backingOff = false
    /// How long accepting pauses when the process or system is out of file descriptors.
    public static let backoffSeconds = 0.1

    /// Binds and listens (SO_REUSEADDR, backlog 1024). Call on the loop thread, or before `run`.
    public init(loop: EventLoop, address: HostPort, onAccept: @escaping (Int32, String) -> Void) throws(NetError) {
        self.loop = loop
        self.onAccept = onAccept
        let resolved = try ResolvedAddress(address, passive: true)
        let ai = resolved.first
        let fd = Platform.streamSocket(family: ai.ai_family)
        guard fd >= 0 else { throw NetError.errno("socket") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard withExtendedLifetime(resolved, { bind(fd, ai.ai_addr, ai.ai_addrlen) }) == 0 else {
            let e = NetError.errno("bind \(address)")
            _ = SystemCall.close(fd)
            throw e
        }
        guard listen(fd, 1024) == 0 else {
            let e = NetError.errno("listen \(address)")
            _ = SystemCall.close(fd)
            throw e
        }
        self.fd = fd
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let port: UInt16 = withUnsafeMutablePointer(to: &storage) { p in
            _ = p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
            return Listener.port(of: p)
        }
        self.address = HostPort(host: address.host, port: port)
    }

    /// Has the kernel stamp what the accepted connections receive from their first byte on (they inherit SO_TIMESTAMPNS;
    /// each still takes the stamps with `Connection.stampArrivals`). Set on the listener, the kernel's receive timestamps
    /// are on before any client connects (the kernel turns them on system-wide a moment after the first socket asks).
    /// False where the platform has none.
    @discardableResult
    public func stampArrivals() -> Bool { Platform.enableReceiveTimestamps(fd) }

    /// Starts accepting. Call on the loop thread.
    public func start() throws(NetError) {
        registration = try loop.register(fd: fd, handler: self, readable: true, writable: false)
    }

    /// Admits an accepted socket when fewer than `max` connections are open, or when `evictIdle` made room by closing
    /// the connection idle the longest (one that holds no request: a client that connected and sent nothing, or a
    /// kept-alive one between requests), so that idle sockets cannot lock every client out until their idle timeout
    /// (hostile-client helper: 1,100 silent connections held every server's slots for 120 s); otherwise answers it 503
    /// (see `turnAway`) and returns false. Either way tells `log` once a second at most.
    public static func admit(_ fd: Int32, open: Int, max: Int, tls: Bool, throttle: inout LogThrottle, noun: String = "connections",
                             evictIdle: () -> Bool = { false }, log: (String) -> Void) -> Bool {
        guard open >= max else { return true }
        if evictIdle() {
            if throttle.allow(nowNanos: EventLoop.nowNanos()) {
                log("\(max) \(noun) open: closing the one idle the longest for each new one (--max-connections)")
            }
            return true
        }
        turnAway(fd, tls: tls, reason: "too many connections (--max-connections \(max))")
        if throttle.allow(nowNanos: EventLoop.nowNanos()) {
            log("\(max) \(noun) open: turning new ones away with 503 (--max-connections)")
        }
        return false
    }

    /// Of `connections`, the one idle the longest: the smallest `idleKey` (when it became idle, or when its idle deadline
    /// passes, alike for all) of those `isQuiet` still finds quiet, asked in that order (the connection's own state can lag
    /// the kernel: a request that arrived and was not read yet, a TLS handshake under way; hostile-client helper: closing
    /// those reset clients that had sent a whole request); nil when none is idle. What `admit`'s `evictIdle` closes.
    public static func longestIdle<C>(_ connections: some Sequence<C>, idleKey: (C) -> UInt64?, isQuiet: (C) -> Bool = { _ in true }) -> C? {
        var idle: [(connection: C, key: UInt64)] = []
        for c in connections { if let key = idleKey(c) { idle.append((c, key)) } }
        idle.sort { $0.key < $1.key }
        return idle.first { isQuiet($0.connection) }?.connection
    }

    /// Answers an accepted socket that will not be served (a connection cap reached) with a 503 written straight to
    /// it, best effort and without blocking, then closes it. `tls`: the listener speaks TLS, so it only closes.
    public static func turnAway(_ fd: Int32, tls: Bool, reason: String) {
        if !tls {
            let body = "{\"error\":\"\(reason)\"}"
            let bytes = Array(("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"
                               + "Retry-After: 1\r\nConnection: close\r\n\r\n" + body).utf8)
            _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Platform.sendFlags | Int32(MSG_DONTWAIT)) }
        }
        _ = SystemCall.close(fd)
    }

    private func pauseAccepting(reason: String) {
        guard let r = registration else { return }
        loop.deregister(r)
        registration = nil
        if !backingOff { onBackoff?("not accepting on \(address) for \(Int(Listener.backoffSeconds * 1000)) ms at a time: \(reason)") }
        backingOff = true
        loop.schedule(after: Listener.backoffSeconds) { [weak self] in
            guard let self, self.registration == nil, !self.closed else { return }
            self.registration = try? self.loop.register(fd: self.fd, handler: self, readable: true, writable: false)
        }
    }

    private var closed = false

    /// Stops accepting and closes the socket.
    public func close() {
        closed = true
        if let registration { loop.deregister(registration) }
        registration = nil
        _ = SystemCall.close(fd)
    }

    public func handleEvent(readable: Bool, writable: Bool, hangup: Bool) {
        for _ in 0..<64 {
            var storage = sockaddr_storage()
            var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let client = withUnsafeMutablePointer(to: &storage) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { Platform.acceptNonBlocking(fd, $0, &len) }
            }
            if client < 0 {
                let code = errno
                if code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM {
                    // Out of descriptors: the pending connection stays in the backlog and the socket stays readable, so
                    // a level-triggered loop would spin at 100% CPU. Stop watching it for a moment, say so once, retry.
                    pauseAccepting(reason: code == EMFILE ? "the process is out of file descriptors (EMFILE)"
                                   : code == ENFILE ? "the system is out of file descriptors (ENFILE)" : "out of memory for sockets")
                }
                return // EAGAIN: nothing more to accept
            }
            if backingOff {
                backingOff = false
                onBackoff?("accepting again on \(address)")
            }
            let peer = withUnsafeMutablePointer(to: &storage) { Listener.describe($0) }
            onAccept(client, peer)
        }
    }

    /// The local address an accepted socket was reached at, as numeric text (`127.0.0.1`, `::1`), or nil: on a
    /// listener bound to every interface, the one the client chose.
    public static func localHost(of fd: Int32) -> String? {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } } == 0
        guard ok else { return nil }
        let text = withUnsafeMutablePointer(to: &storage) { describe($0) }
        // describe gives host:port ([v6]:port): the host alone.
        guard let colon = text.lastIndex(of: ":") else { return nil }
        let host = text[..<colon]
        return host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : String(host)
    }

    static func port(of p: UnsafeMutablePointer<sockaddr_storage>) -> UInt16 {
        if p.pointee.ss_family == sa_family_t(AF_INET6) {
            return p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
        }
        return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
    }

    static func describe(_ p: UnsafeMutablePointer<sockaddr_storage>) -> String {
        var host = [CChar](repeating: 0, count: 64)
        if p.pointee.ss_family == sa_family_t(AF_INET6) {
            p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { s in
                _ = withUnsafePointer(to: &s.pointee.sin6_addr) { inet_ntop(AF_INET6, $0, &host, 64) }
            }
            return "[\(host.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })]:\(port(of: p))"
        }
        p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { s in
            _ = withUnsafePointer(to: &s.pointee.sin_addr) { inet_ntop(AF_INET, $0, &host, 64) }
        }
        return "\(host.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }):\(port(of: p))"
    }
}
