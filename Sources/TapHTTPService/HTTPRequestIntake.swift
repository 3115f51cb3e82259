import TapCore
import TapHTTP
import TapNet

/// The server side of one client connection, free of I/O: the bytes a client sends go in, and out comes what to do
/// next: a complete request, a CONNECT to intercept, a `100 Continue` to send, or a refusal to answer before closing
/// (malformed or oversized requests, missing credentials, a CONNECT this server does not take). One copy of these
/// rules for every server 3dstape runs, taken through `ServerConnectionMachine` by `HTTPServer` (the sandbox, the
/// replayer, the web inspector, the client's RReq listener) and by the recording proxy's client side
/// (`ProxySessionMachine`). Deadlines, the memory budget and what a request leads to stay with the machine and its drivers.
public struct HTTPRequestIntake {
    /// What the server accepts.
    public struct Rules: Sendable {
        public var limits: HTTPLimits
        /// Credentials every client must present (`--auth`), or nil.
        public var authorization: ClientAuthorization?
        /// Whether CONNECT is taken (TLS interception is set up); the refusal's text when it is not.
        public var acceptsConnect: Bool
        public var connectRefusal: String

        public init(limits: HTTPLimits, authorization: ClientAuthorization?, acceptsConnect: Bool,
                    connectRefusal: String = "CONNECT is only accepted by a forward proxy, once per connection") {
            self.limits = limits
            self.authorization = authorization
            self.acceptsConnect = acceptsConnect
            self.connectRefusal = connectRefusal
        }
    }

    /// The next thing to do.
    public enum Step {
        /// Nothing complete yet: read more.
        case needMore
        /// Send `HTTP/1.1 100 Continue` (the client waits for it before its body), then ask again.
        case sendContinue
        /// A complete request, and the wall-clock time its first byte arrived.
        case request(HTTPRequest, startedAt: Double)
        /// A CONNECT to intercept: answer `200 Connection established`, then terminate the tunnel's TLS with a leaf
        /// for the host. Requests inside come next, with `tunnel` set.
        case intercept(HostPort)
        /// Answer this error (with these extra headers) and close.
        case refuse(status: Int, message: String, headers: [(String, String)])
    }

    public static let continueBytes = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)
    public static let connectEstablished = Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)

    public let rules: Rules
    private var parser: HTTPParser
    /// The CONNECT target once the connection is an intercepted tunnel.
    public private(set) var tunnel: HostPort?
    private var requestStartedAt: Double?
    private var sentContinue = false

    public init(rules: Rules) {
        self.rules = rules
        parser = HTTPParser(mode: .request, limits: rules.limits)
    }

    /// No partial request is buffered (between requests).
    public var isIdle: Bool { parser.isIdle }
    /// Bytes received and not yet handed out as a request.
    public var bufferedCount: Int { parser.bufferedCount }

    /// Takes what the client sent after its CONNECT (the tunnel's first bytes): for a tunnel passed through, bytes to
    /// forward; for an intercepted one, the start of its TLS stream, which is never parsed as HTTP.
    public mutating func takeTunnelBytes() -> [UInt8] {
        guard tunnel != nil else { return [] }
        return parser.takeBuffered()
    }

    /// Takes bytes from the client; `wallClock` stamps the start of a request that begins with them.
    public mutating func received(_ bytes: [UInt8], wallClock: Double) {
        if parser.isIdle, requestStartedAt == nil { requestStartedAt = wallClock }
        parser.append(bytes)
    }

    /// What to do with what has arrived.
    public mutating func next(wallClock: Double) -> Step {
        let request: HTTPRequest
        do {
            // (peekHeaders parses a complete head first; only then is the parser in the body.)
            if !sentContinue, let headers = try parser.peekHeaders(), headers["Expect"]?.lowercased() == "100-continue", parser.isInBody {
                sentContinue = true
                return .sendContinue
            }
            guard let r = try parser.nextRequest() else { return .needMore }
            request = r
        } catch {
            return .refuse(status: HTTPErrorAnswer.status(for: error.problem), message: error.message, headers: [])
        }
        sentContinue = false
        let startedAt = requestStartedAt ?? wallClock
        requestStartedAt = parser.isIdle ? nil : wallClock
        let head = request.head
        if let auth = rules.authorization, tunnel == nil,
           let refused = auth.refusal(for: head, viaProxy: head.method == "CONNECT" || head.target.contains("://")) {
            return .refuse(status: refused.status, message: "authentication required (3dstape was started with --auth)",
                           headers: [refused.challenge])
        }
        guard head.method == "CONNECT" else { return .request(request, startedAt: startedAt) }
        guard rules.acceptsConnect, tunnel == nil else { return .refuse(status: 405, message: rules.connectRefusal, headers: []) }
        guard !head.target.hasPrefix(":"), let target = HostPort(head.target), !target.host.isEmpty, !target.isShorthandIPv4 else {
            return .refuse(status: 400, message: "CONNECT target '\(head.target.prefix(80))' is not host:port", headers: [])
        }
        tunnel = target
        requestStartedAt = nil
        return .intercept(target)
    }
}
