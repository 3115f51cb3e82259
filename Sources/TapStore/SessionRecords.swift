import TapEMV

/// What the proxy reports to the session writer. Times are Unix seconds (wall clock, microsecond precision).
public enum SessionEvent: Sendable {
    case connectionOpened(ConnectionRecord)
    case connectionTLS(id: Int64, version: String, cipher: String?, sni: String?, alpn: String?)
    case connectionClosed(id: Int64, at: Double)
    case exchange(ExchangeRecord)
    case note(at: Double, kind: String, detail: String)
}

/// A client connection to the proxy.
public struct ConnectionRecord: Sendable {
    public var id: Int64
    public var clientAddress: String
    public var acceptedAt: Double
    /// `forward` or `reverse`.
    public var mode: String
    public var upstream: String?

    public init(id: Int64, clientAddress: String, acceptedAt: Double, mode: String, upstream: String?) {
        self.id = id
        self.clientAddress = clientAddress
        self.acceptedAt = acceptedAt
        self.mode = mode
        self.upstream = upstream
    }
}

/// One side of an exchange as stored: headers, body (decoded from gzip/deflate and masked), wire size.
public struct StoredMessage: Sendable {
    public var headers: [(String, String)]
    public var body: [UInt8]
    public var contentEncoding: String?
    public var wireSize: Int
    /// 3DS messages found in the body.
    public var messages: [ThreeDSContent.Found]

    public init(headers: [(String, String)], body: [UInt8], contentEncoding: String?, wireSize: Int, messages: [ThreeDSContent.Found]) {
        self.headers = headers
        self.body = body
        self.contentEncoding = contentEncoding
        self.wireSize = wireSize
        self.messages = messages
    }
}

/// One request and its response (or the error in its place), with timings.
public struct ExchangeRecord: Sendable {
    public var connectionID: Int64
    public var seq: Int
    public var method: String
    public var url: String
    public var host: String?
    public var path: String?
    public var upstream: String?
    public var request: StoredMessage
    public var status: Int?
    public var response: StoredMessage?
    public var requestStart: Double
    public var upstreamConnect: Double?
    public var tlsDone: Double?
    public var requestSent: Double?
    public var firstByte: Double?
    public var done: Double?
    public var error: String?
    public var clientAbortAt: Double?

    public init(connectionID: Int64, seq: Int, method: String, url: String, host: String?, path: String?, upstream: String?,
                request: StoredMessage, requestStart: Double) {
        self.connectionID = connectionID
        self.seq = seq
        self.method = method
        self.url = url
        self.host = host
        self.path = path
        self.upstream = upstream
        self.request = request
        self.requestStart = requestStart
    }
}
