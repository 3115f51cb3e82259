import TapHTTP

/// The head and body of a forwarded response as the client gets them. The upstream's bytes pass on as they came unless
/// they would mislead the client about its own connection or the body's framing, which are hop-by-hop (RFC 9110 §7.6.1,
/// RFC 9112 §6, §9.3):
/// - a response delimited by the upstream closing (no Content-Length, no Transfer-Encoding) gets a Content-Length: it
///   is whole by now, and the client's connection need not close with the upstream's;
/// - a chunked response to an HTTP/1.0 client goes de-chunked, with a Content-Length (HTTP/1.0 has no chunked coding);
/// - the hop-by-hop fields go (`Keep-Alive`, `Proxy-Connection`, `Upgrade` …, and the fields `Connection` names), and
///   where the upstream's connection options disagree with what 3dstape does with the client's connection (the
///   upstream closes its own, the client's is kept; the client asked for a close, the upstream said keep-alive), the
///   options are 3dstape's: `Connection: close` when it closes after this answer, none on an HTTP/1.1 connection it
///   keeps, `keep-alive` on an HTTP/1.0 one. A `Connection: keep-alive` or `close` that is true of the client's
///   connection passes as it came (most responses carry just that, and are not rewritten);
/// - a de-chunked body's `Trailer` field goes with its chunks;
/// - a 204 (No Content) goes without the Content-Length or Transfer-Encoding a server must not send with it
///   (RFC 9110 §8.6, RFC 9112 §6.1).
/// A head rewritten for any of these, or that came with another version (an HTTP/1.0 upstream's), is written as HTTP/1.1,
/// 3dstape's own version (RFC 9110 §6.2). What the session stores is the
/// upstream's message; only `wire_size` counts the bytes the client got.
struct ClientResponseHead {
    var head: [UInt8]
    var body: [UInt8]
    /// Whether the client's connection can take another request after this answer (the request asked to keep it).
    var keepAlive: Bool

    /// - Parameters:
    ///   - response: the upstream's head (its fields after key substitution: `headers`), `wireHead`/`wireBody` its bytes,
    ///     `body` the body without its transfer coding; `upstreamKeepsAlive` what its version and Connection field say.
    ///   - clientIsHTTP10: the request came as HTTP/1.0; `clientKeepAlive`: it asked to keep the connection.
    ///   - bodyless: the response has no body whatever its fields say (`HTTPParser.responseHasNoBody`).
    init(_ response: HTTPResponseHead, headers: HTTPHeaders, upstreamKeepsAlive: Bool, wireHead: [UInt8], wireBody: [UInt8],
         body: [UInt8], clientIsHTTP10: Bool, clientKeepAlive: Bool, bodyless: Bool) {
        (head, self.body, keepAlive) = (wireHead, wireBody, clientKeepAlive)
        let chunked = headers["Transfer-Encoding"] != nil, hasLength = headers["Content-Length"] != nil
        let closeDelimited = !bodyless && !chunked && !hasLength
        let dechunk = chunked && clientIsHTTP10 && !bodyless
        let optionsDisagree = clientKeepAlive
            ? !upstreamKeepsAlive || (clientIsHTTP10 && !headers.containsToken("Connection", "keep-alive"))
            : !headers.containsToken("Connection", "close")
        let framedNoContent = response.status == 204 && (chunked || hasLength)
        guard closeDelimited || dechunk || optionsDisagree || framedNoContent || response.version != "HTTP/1.1"
                || headers.hasHopByHopBeyondConnectionOptions else { return }
        var out = HTTPResponseHead(status: response.status, reason: response.reason, version: "HTTP/1.1", headers: headers)
        out.headers.removeHopByHop()
        if closeDelimited || dechunk {
            out.headers.remove(anyOf: ["Transfer-Encoding", "Trailer"])
            out.headers.replaceOrAdd("Content-Length", String(body.count))
            self.body = body
        }
        if framedNoContent {
            out.headers.remove(anyOf: ["Transfer-Encoding", "Content-Length", "Trailer"])
            self.body = []
        }
        if !clientKeepAlive {
            out.headers.add("Connection", "close")
        } else if clientIsHTTP10 {
            out.headers.add("Connection", "keep-alive")
        }
        head = out.bytes
    }
}
