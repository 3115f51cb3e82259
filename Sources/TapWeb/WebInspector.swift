import Dispatch
import Foundation
import TapHTTP
import TapHTTPService
import TapNet

/// `3dstape web`: the inspector's HTTP server. Serves the single-page app from assets compiled into the binary and
/// the JSON API of `WebAPI`; read-only (GET only). Queries run on one serial queue off the event loop, so a slow
/// one (validating a large session) never stalls the sockets.
public final class WebInspector: @unchecked Sendable {
    // Safe: `server` and its connections are used only on `loop`'s thread; `api` only on `queries`.
    public let loop: EventLoop
    let server: HTTPServer
    let api: WebAPI
    let queries = DispatchQueue(label: "3dstape.web.queries")
    /// Host names a request may carry (with the bound port): a page on another site that resolves its own name to
    /// 127.0.0.1 (DNS rebinding) is refused. Empty when listening beyond loopback (only with `--allow-remote`).
    var allowedHosts: Set<String> = []

    /// Headers on every answer: nothing but the app's own script and style runs; no framing, no sniffing, no caching.
    static let securityHeaders: [(String, String)] = [
        ("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
            + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
        ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"), ("Cache-Control", "no-store"),
        ("X-Frame-Options", "DENY"),
    ]

    /// `log` takes the whole text of failures whose answer says only what failed (see `WebAPI.publicMessage`).
    public init(catalog: SessionCatalog, loop: EventLoop, log: (@Sendable (String) -> Void)? = nil) {
        self.loop = loop
        self.api = WebAPI(catalog: catalog, log: log)
        let box = Weak()
        self.server = HTTPServer(loop: loop) { request, _, respond in
            box.inspector?.serve(request, respond) ?? respond(HTTPReply(status: 503))
        }
        box.inspector = self
    }

    /// A weak reference the server's handler holds (the inspector owns the server).
    final class Weak: @unchecked Sendable {
        // Safe: set once in `init`, before the server starts, and read on the loop thread after.
        weak var inspector: WebInspector?
    }

    /// Binds and starts serving; returns the bound address (numeric: a name is resolved once, and what it resolves
    /// to is both bound and judged). On a loopback address, requests must name it, `localhost` or another loopback
    /// literal, with the port, in their Host header.
    @discardableResult
    public func start(on address: HostPort) throws -> HostPort {
        let checked = try ListenAddress(address)
        let bound = try server.start(on: checked.bound)
        if checked.isLoopback {
            allowedHosts = ["127.0.0.1:\(bound.port)", "localhost:\(bound.port)", "[::1]:\(bound.port)", bound.description]
        }
        return bound
    }

    public func stop() { server.stop() }

    /// The answer to `respond`, carried to the query queue and back; called on the loop thread only.
    struct Responder: @unchecked Sendable {
        // Safe: `respond` is called only inside `loop.execute`, on the loop thread, as HTTPServer requires.
        let respond: (HTTPReply) -> Void
    }

    func serve(_ request: HTTPRequest, _ respond: @escaping (HTTPReply) -> Void) {
        func reply(_ status: Int, _ type: String, _ body: [UInt8]) -> HTTPReply {
            HTTPReply(status: status, headers: [("Content-Type", type)] + Self.securityHeaders, body: body)
        }
        let head = request.head
        guard head.method == "GET" else {
            return respond(reply(405, "text/plain; charset=utf-8", Array("the inspector is read-only: GET only\n".utf8)))
        }
        if !allowedHosts.isEmpty, !allowedHosts.contains(head.headers["Host"] ?? "") {
            return respond(reply(421, "text/plain; charset=utf-8", Array("unexpected Host header\n".utf8)))
        }
        let (path, query) = Self.split(head.target)
        if let asset = WebAssets.file(path) { return respond(reply(200, asset.type, asset.body)) }
        guard path.hasPrefix("/api/") else { return respond(reply(404, "text/plain; charset=utf-8", Array("not found\n".utf8))) }
        let responder = Responder(respond: respond)
        let api = self.api, loop = self.loop
        queries.async {
            let r = api.handle(path: path, query: query)
            loop.execute {
                var headers = [("Content-Type", r.contentType)] + Self.securityHeaders
                if let name = r.attachment {
                    // The name comes from the catalog (a file name); quotes and controls are dropped all the same.
                    let safe = String(name.unicodeScalars.filter { $0.value >= 0x20 && $0 != "\"" && $0 != "\\" && $0.isASCII })
                    headers.append(("Content-Disposition", "attachment; filename=\"\(safe)\""))
                }
                responder.respond(HTTPReply(status: r.status, headers: headers, body: r.body))
            }
        }
    }

    /// A request target's path (still percent-encoded) and its decoded query parameters.
    static func split(_ target: String) -> (String, [String: String]) {
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        var query: [String: String] = [:]
        if parts.count == 2 {
            for pair in parts[1].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                func decode(_ s: Substring) -> String { String(s).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(s) }
                query[decode(kv[0])] = kv.count == 2 ? decode(kv[1]) : ""
            }
        }
        return (String(parts[0]), query)
    }
}
