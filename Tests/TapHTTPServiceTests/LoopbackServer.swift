import TapCrypto
import TapHTTPService
import TapNet

/// An `HTTPServer` for a test, on a background loop of its own, listening on `host` at a port the system picks (plain,
/// or HTTPS with `tls`); `stop` ends the server and its loop.
struct LoopbackServer {
    let stack: ServiceStack
    let address: HostPort

    init(_ name: String, host: String = "127.0.0.1", tls: TLSContext? = nil, handler: @escaping HTTPHandler) throws {
        stack = try ServiceStack.background(name)
        let server = HTTPServer(loop: stack.loop, tls: tls, handler: handler)
        address = try server.start(on: HostPort(host: host, port: 0))
        stack.onStop { server.stop() }
        stack.start()
    }

    func stop() { stack.stop() }
}
