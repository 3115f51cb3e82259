import TapCore
import TapCrypto
import TapHTTP
import TapNet

/// The ACS's RReq to the 3DS Server, for every part of 3dstape that acts as an ACS (the sandbox, the replayer): POSTed
/// from the event loop's thread without blocking it, on kept-alive connections to the threeDSServerURL (through a
/// forward proxy when one is set, so that a recorder sees it), the RRes read whole and the outcome handed back once,
/// on the loop. One TLS context serves every RReq.
///
/// `@unchecked Sendable`: as `LoopHTTPClient`, used only on its loop's thread (made there, or before the loop runs).
public final class RReqSender: @unchecked Sendable {
    /// The headers an RReq carries (Host and Content-Length are added when it is sent).
    public static let headers = [("Content-Type", "application/json; charset=utf-8")]

    private let loop: EventLoop
    private let tls: TLSContext
    private let proxy: HostPort?
    private let timeout: Double
    private let pool: LoopHTTPConnectionPool

    /// `timeout`: seconds for the whole exchange (connect, send, the complete RRes).
    public init(loop: EventLoop, tls: TLSContext, proxy: HostPort? = nil, timeout: Double = 10) {
        self.loop = loop
        self.tls = tls
        self.proxy = proxy
        self.timeout = timeout
        pool = LoopHTTPConnectionPool(loop: loop)
    }

    /// RReqs that went on a kept-alive connection so far.
    public var connectionReuses: Int { pool.reuses }

    /// Sends the RReq `body` (a serialised message, built by TapEMV's `ThreeDSMessage.RReq` or replayed) to `url`;
    /// `completion` runs on the loop's thread once, with the 3DS Server's answer or why there is none. Call on the loop.
    public func send(_ body: [UInt8], to url: HTTPURL, completion: @escaping (Result<HTTPResponse, HTTPClientError>) -> Void) {
        LoopHTTPClient.send("POST", url, headers: RReqSender.headers, body: body, tls: tls, timeout: timeout, on: loop, pool: pool,
                            proxy: proxy, completion: completion)
    }

    /// Closes the kept-alive connections (the owner stops). Call on the loop.
    public func closeAll() { pool.closeAll() }

    /// The outcome in a log line's words: the RRes's `resultsStatus`, else the HTTP status (`HTTP 500`), else why the
    /// RReq failed (`RReq failed: connect to 127.0.0.1:9: Connection refused`).
    public static func outcome(_ result: Result<HTTPResponse, HTTPClientError>) -> String {
        switch result {
        case let .success(response):
            let rres = try? JSON.parse(response.body)
            return rres?["resultsStatus"]?.stringValue ?? "HTTP \(response.head.status)"
        case let .failure(error):
            return "RReq failed: \(error)"
        }
    }
}
