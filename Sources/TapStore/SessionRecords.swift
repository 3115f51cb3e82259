import TapCompression
import TapCore
import TapEMV

/// What the proxy reports to the session writer. Times are Unix seconds (wall clock, microsecond precision).
public enum SessionEvent: Sendable {
    case connectionOpened(ConnectionRecord)
    /// `alpnOffered`: the client's ALPN offer, in its order (nil: none; `alpn` is what was chosen from it).
    case connectionTLS(id: Int64, version: String, cipher: String?, sni: String?, alpn: String?, alpnOffered: [String]? = nil)
    case connectionClosed(id: Int64, at: Double)
    case exchange(ExchangeRecord)
    case note(at: Double, kind: String, detail: String)
}

extension SessionEvent {
    /// The body bytes an event holds in memory until it is written.
    public var bodyBytes: Int {
        if case let .exchange(x) = self { return x.request.body.count + (x.response?.body.count ?? 0) }
        return 0
    }
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
    /// Decodes gzip/deflate (the forwarded bytes were not touched), masks, and finds the 3DS messages.
    /// `isRequest` names an app-channel JWE body CReq (request) or CRes (response) while it is still encrypted.
    /// `keys` opens app-channel JWE bodies (the recorder's `--keylog`).
    public init(_ captured: CapturedMessage, mask: Bool, isRequest: Bool, keys: (any ChannelKeySource)? = nil) {
        let (decoded, encodingNote) = StoredMessage.decodedBody(captured.body, headers: captured.headers)
        var (stored, messages) = ThreeDSContent.prepare(decoded, mask: mask)
        if messages.isEmpty, let jwe = ThreeDSContent.appChannelJWE(in: stored, isRequest: isRequest) {
            if let plain = captured.plaintext, plain.isObject, keys == nil || captured.plaintextNote != nil {
                let shown = mask ? Masking.mask(plain) : plain
                messages = [ThreeDSContent.Found(location: "jwe", json: shown, summary: MessageSummary(shown),
                                                 decryption: captured.plaintextNote ?? "decrypted: imported in clear from the HAR's _3dstape field")]
            } else {
                messages = [ThreeDSContent.decryptAppChannel(jwe, body: stored, isRequest: isRequest, keys: keys, mask: mask)]
            }
        }
        self.init(headers: mask ? Masking.maskHeaders(captured.headers) : captured.headers, body: stored, contentEncoding: encodingNote,
                  wireSize: captured.wireSize, messages: messages)
    }

    /// At most this many content codings are undone (`gzip, gzip` is two); a body with more is stored as far as they go.
    static let maxContentCodings = 4

    /// The body with its content codings undone, the last applied first (`Content-Encoding: gzip, gzip`, or the header
    /// given twice, is gzip inside gzip), and the note for `content_encoding`: the codings as sent, and what could not be
    /// decoded. A coding that fails part way leaves the bytes it decoded (a body cut short); one that decodes nothing, or
    /// that 3dstape does not know (`br`), leaves the bytes as they were. Either way the writer then masks what is left,
    /// down to the byte scan for card numbers when nothing else can be read in it.
    static func decodedBody(_ body: [UInt8], headers: [(String, String)]) -> (body: [UInt8], note: String?) {
        let values = headers.filter { $0.0.caseInsensitiveEquals("Content-Encoding") }.map(\.1)
        guard !values.isEmpty else { return (body, nil) }
        let asSent = values.joined(separator: ", ").lowercased()
        let codings = asSent.split(separator: ",").map { String($0).trimmingWhitespace }.filter { !$0.isEmpty && $0 != "identity" }
        guard !body.isEmpty, !codings.isEmpty else { return (body, asSent) }
        var decoded = body
        for (done, coding) in codings.reversed().enumerated() {
            func failed(_ why: String) -> (body: [UInt8], note: String?) {
                (decoded, done == 0 ? "\(asSent) (not decoded: \(why))" : "\(asSent) (\(done) of \(codings.count) decoded; then: \(why))")
            }
            guard done < maxContentCodings else { return failed("more than \(maxContentCodings) content codings") }
            let format: Compression.Format
            switch coding {
            case "gzip", "x-gzip": format = .gzip
            case "deflate": format = .zlib
            default: return failed("\(coding) is not supported")
            }
            let (out, error) = Compression.decompressPrefix(decoded, format: format)
            if let error {
                guard !out.isEmpty else { return failed(error.message) }
                decoded = out
                return failed("\(error.message); the \(out.count) bytes decoded before it are stored")
            }
            decoded = out
        }
        return (decoded, asSent)
    }

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

/// One side of an exchange as captured on the network loop: headers and the body as received (chunk
/// framing removed, still content-encoded). Decoding, masking and 3DS extraction happen on the writer thread.
public struct CapturedMessage: Sendable {
    public var headers: [(String, String)]
    public var body: [UInt8]
    public var wireSize: Int
    /// An app-channel message's plaintext that the source already held in clear (a 3dstape HAR export's `_3dstape`
    /// field, on `import`; the replayer, which opened the CReq and sealed the CRes itself): stored as the message,
    /// masked, instead of decrypting the body again.
    public var plaintext: JSON?
    /// How the source came to hold `plaintext` (the message's `decryption` note). With a note, the plaintext is stored
    /// even when the writer has keys of its own; without one (an import), keys go first.
    public var plaintextNote: String?

    public init(headers: [(String, String)], body: [UInt8], wireSize: Int, plaintext: JSON? = nil,
                plaintextNote: String? = nil) {
        self.headers = headers
        self.body = body
        self.wireSize = wireSize
        self.plaintext = plaintext
        self.plaintextNote = plaintextNote
    }
}

/// A finished exchange, for the live view (called from the writer thread once it is stored).
public struct ExchangeLine: Sendable {
    public var at: Double
    public var method: String
    public var url: String
    public var status: Int?
    public var requestTypes: [String]
    public var responseTypes: [String]
    public var durationMs: Double
    public var error: String?
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
    public var request: CapturedMessage
    public var status: Int?
    public var response: CapturedMessage?
    /// Mask PANs and OTP entries before storing.
    public var mask = true
    public var requestStart: Double
    public var upstreamConnect: Double?
    public var tlsDone: Double?
    public var requestSent: Double?
    public var firstByte: Double?
    public var done: Double?
    public var error: String?
    public var clientAbortAt: Double?
    /// For an exchange served by the replayer: what it matched and when it was answered.
    public var replay: ReplayAnnotation?
    /// For a CONNECT tunnelled without interception: what was seen of it (the exchange's method is `CONNECT`).
    public var tunnel: TunnelAnnotation?

    public init(connectionID: Int64, seq: Int, method: String, url: String, host: String?, path: String?, upstream: String?,
                request: CapturedMessage, requestStart: Double) {
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

/// What the replayer did with one live request: the recorded exchange it matched (or why none did), and the
/// delay it scheduled and actually gave before the first response byte.
public struct ReplayAnnotation: Sendable {
    public var recordedExchangeID: Int64?
    /// How it matched, e.g. `AReq: version, channel, category, card, order` or `transaction: CReq #2`.
    public var matchedBy: String?
    /// Why nothing matched, with the closest recorded exchanges and the fields that differed.
    public var miss: String?
    public var scheduledDelayMs: Double?
    public var actualDelayMs: Double?
    /// The faults injected into this answer, as the rules name them (`bad-counter`, `erro:402`, `hang` …).
    public var faults: String?
    /// What became of it: `answered`, `client gave up after 2001.2 ms`, `forwarded`, `RReq delivered`,
    /// `RReq not delivered (client gone)`, `RReq failed: …` (the replayer's live line; NULL in sessions before it was kept).
    public var outcome: String?

    public init(recordedExchangeID: Int64?, matchedBy: String?, miss: String?, scheduledDelayMs: Double?, actualDelayMs: Double?,
                faults: String? = nil, outcome: String? = nil) {
        self.recordedExchangeID = recordedExchangeID
        self.matchedBy = matchedBy
        self.miss = miss
        self.scheduledDelayMs = scheduledDelayMs
        self.actualDelayMs = actualDelayMs
        self.faults = faults
        self.outcome = outcome
    }
}

/// A CONNECT that 3dstape tunnelled byte for byte without interception (`--pass-through`): what could be seen of it
/// without decrypting anything. Stored as an exchange (method `CONNECT`, the target as URL, request and response wire
/// sizes the bytes each way) and a row of `tunnels`.
public struct TunnelAnnotation: Sendable, Equatable {
    public var host: String
    public var port: Int
    /// The server name of the client's TLS ClientHello (nil when it sent none, or the tunnel did not carry TLS).
    public var sni: String?
    /// The ALPN protocols the ClientHello offered, in its order (nil: no ALPN extension, or no ClientHello). A name may
    /// hold a comma: stored as a JSON array (`ALPNOffer`).
    public var alpnOffered: [String]?
    /// Bytes from the client to the upstream, and back.
    public var bytesUp: Int
    public var bytesDown: Int
    /// How it ended: `client closed`, `upstream closed`, `idle timeout`, `upstream unreachable: …`.
    public var ended: String?
    /// The pattern or rule that sent it through (`--pass-through *.example.com`, `matches no --intercept pattern`).
    public var decidedBy: String?

    public init(host: String, port: Int, sni: String?, alpnOffered: [String]?, bytesUp: Int, bytesDown: Int, ended: String?,
                decidedBy: String?) {
        self.host = host
        self.port = port
        self.sni = sni
        self.alpnOffered = alpnOffered
        self.bytesUp = bytesUp
        self.bytesDown = bytesDown
        self.ended = ended
        self.decidedBy = decidedBy
    }
}

/// How an ALPN offer is stored (`tunnels.alpn_offered`, `connections.alpn_offered`): a JSON array of the names, each
/// printable as notes are (they are the client's bytes), so a name holding a comma stays one name. A value that is not
/// a JSON array of strings is read as the comma-separated form the first v4 builds wrote.
public enum ALPNOffer {
    public static func stored(_ names: [String]) -> String {
        JSON.array(names.map { .string(ThreeDSContent.printable($0)) }).compact
    }

    public static func read(_ text: String) -> [String] {
        if text.hasPrefix("["), case let .array(items)? = try? JSON.parse(text) {
            let names = items.compactMap { item -> String? in if case let .string(s) = item { return s }; return nil }
            if names.count == items.count { return names }
        }
        return text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
    }
}
