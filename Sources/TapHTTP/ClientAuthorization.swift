import TapCore

/// The credentials clients must present when 3dstape listens beyond loopback (`--auth USER:PASSWORD`): HTTP Basic,
/// in `Proxy-Authorization` from clients using 3dstape as a proxy (absolute-form requests and CONNECT; 407 otherwise),
/// in `Authorization` from clients pointed at it directly (401 otherwise).
public struct ClientAuthorization: Sendable, Equatable {
    /// The header value expected: `Basic <base64(user:password)>`.
    public let expected: String

    /// From `USER:PASSWORD`; nil when there is no colon or the user is empty.
    public init?(_ userColonPassword: String) {
        guard let colon = userColonPassword.firstIndex(of: ":"), colon != userColonPassword.startIndex else { return nil }
        expected = "Basic " + Base64URL.encodeStandard(Array(userColonPassword.utf8))
    }

    /// What the request lacks, or nil when it may pass. `viaProxy`: absolute-form or CONNECT.
    public func refusal(for head: HTTPRequestHead, viaProxy: Bool) -> (status: Int, challenge: (String, String))? {
        let field = viaProxy ? "Proxy-Authorization" : "Authorization"
        if let v = head.headers[field], ClientAuthorization.constantTimeEquals(v, expected) { return nil }
        return viaProxy ? (407, ("Proxy-Authenticate", "Basic realm=\"3dstape\"")) : (401, ("WWW-Authenticate", "Basic realm=\"3dstape\""))
    }

    static func constantTimeEquals(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
