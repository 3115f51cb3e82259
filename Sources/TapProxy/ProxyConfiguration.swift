import Foundation
import TapCrypto
import TapHTTP
import TapHTTPService
import TapNet

/// An upstream URL: `http(s)://host[:port][/base]`.
public struct UpstreamURL: Sendable, Equatable, CustomStringConvertible {
    public var tls: Bool
    public var address: HostPort
    /// A path prefix to put before each request path (without trailing slash), or "".
    public var basePath: String

    public init?(_ text: String) {
        guard let url = HTTPURL(text) else { return nil }
        tls = url.tls
        address = url.address
        var base = url.path.split(separator: "?").first.map(String.init) ?? ""
        while base.hasSuffix("/") { base.removeLast() }
        basePath = base
    }

    public init(tls: Bool, address: HostPort, basePath: String = "") {
        self.tls = tls
        self.address = address
        self.basePath = basePath
    }

    public var description: String { "\(tls ? "https" : "http")://\(address)\(basePath)" }

    /// The Host header value (port omitted when it is the scheme's default).
    public var hostHeader: String { HTTPURL(tls: tls, address: address).hostHeader }
}

/// How the proxy runs.
public struct ProxyConfiguration: Sendable {
    public enum Mode: Sendable {
        /// A plain HTTP proxy: absolute-form requests, and CONNECT with TLS interception.
        case forward
        /// Every request goes to one upstream.
        case reverse(UpstreamURL)
    }

    public var mode: Mode
    /// The client context used toward upstreams (verification, client certificate).
    public var upstreamTLS: TLSContext
    /// The intercepting server context for CONNECT (forward mode).
    public var interceptTLS: TLSContext?
    public var limits = HTTPLimits()
    /// Seconds a client may take to send a request head once it has started one.
    public var headerTimeout: Double = 30
    /// Seconds a keep-alive client connection may sit idle.
    public var idleTimeout: Double = 120
    /// Seconds to wait for the upstream's complete response.
    public var upstreamTimeout: Double = 60
    /// The client side's deadlines and read-ahead, as every 3dstape server connection's (`ConnectionPolicy`).
    var clientPolicy: ConnectionPolicy { ConnectionPolicy(headerTimeout: headerTimeout, idleTimeout: idleTimeout) }
    /// Mask PANs and OTP entries before storing.
    public var mask = true
    /// Active app-channel decryption (`--decrypt substitute`), or nil to pass 3DS traffic unchanged.
    public var substitution: KeySubstitution?
    /// Client connections served at once; more are answered 503 and closed (with a log line).
    public var maxConnections = 1024
    /// Request bytes held in memory across all connections (`--max-buffered`); past it a connection asking for more gets 503.
    public var maxBufferedBytes = 512 << 20
    /// Credentials every client must present (`--auth`), or nil on loopback.
    public var authorization: ClientAuthorization?
    /// Which CONNECT targets are intercepted and which are tunnelled untouched (`--intercept`, `--pass-through`).
    public var routing = HostRouting()

    public init(mode: Mode, upstreamTLS: TLSContext, interceptTLS: TLSContext?) {
        self.mode = mode
        self.upstreamTLS = upstreamTLS
        self.interceptTLS = interceptTLS
    }

    public var modeName: String {
        if case .forward = mode { return "forward" }
        return "reverse"
    }

    /// Whether CONNECT is taken: a forward proxy with TLS interception set up.
    var takesConnect: Bool {
        if case .forward = mode { return interceptTLS != nil }
        return false
    }
}

/// Wall-clock seconds since 1970 with microsecond precision.
func wallNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Converts a monotonic instant (ns) into wall-clock seconds.
func wall(fromMonotonic mono: UInt64) -> Double {
    let now = EventLoop.nowNanos()
    return wallNow() - Double(Int64(now) - Int64(mono)) / 1e9
}
