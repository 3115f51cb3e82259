import TapCore

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

/// One step of preparing a captured exchange for storage, run on the writer thread, in order, on every exchange before it
/// is stored (as mitmproxy's addons): the writer only stores what the stages leave. 3dstape's own stages (content
/// decoding, 3DS extraction and masking, app-channel decryption) are in TapRecording.
public protocol ExchangeStage: Sendable {
    /// Changes the exchange as it will be stored (bodies, headers, found messages, URL, error …).
    func prepare(_ exchange: inout PreparedExchange)
    /// Text quoted from a client that is stored outside an exchange's sides (a note's detail, a tunnel's SNI, ALPN names).
    func prepare(clientText: String) -> String
}

extension ExchangeStage {
    public func prepare(clientText: String) -> String { clientText }
}

/// An exchange on its way to the file: the record as captured, with each side as it will be stored. The stages change it;
/// the writer stores `record`'s fields and the two sides.
public struct PreparedExchange: Sendable {
    public var record: ExchangeRecord
    public var request: PreparedMessage
    public var response: PreparedMessage?

    /// The exchange as captured: each side's headers and body as they came, no messages found.
    public init(_ record: ExchangeRecord) {
        self.record = record
        request = PreparedMessage(record.request)
        response = record.response.map(PreparedMessage.init)
    }

    /// Calls `body` with each side (the request, then the response if any).
    public mutating func eachSide(_ body: (inout PreparedMessage) -> Void) {
        body(&request)
        if var r = response {
            response = nil // `r` the only reference while it changes
            body(&r)
            response = r
        }
    }

    /// Calls `body` with each side (the request, then the response if any), the side as captured, and whether it is
    /// the request.
    public mutating func eachSide(_ body: (inout PreparedMessage, CapturedMessage, Bool) -> Void) {
        body(&request, record.request, true)
        if var r = response, let captured = record.response {
            response = nil // `r` the only reference while it changes
            body(&r, captured, false)
            response = r
        }
    }
}

/// One side of an exchange as stored: headers, body, the note for `content_encoding`, wire size, and the messages the
/// stages found in it.
public struct PreparedMessage: Sendable {
    public var headers: [(String, String)]
    public var body: [UInt8]
    public var contentEncoding: String?
    public var wireSize: Int
    public var messages: [MessageRecord]

    /// The side as captured: nothing decoded, nothing found.
    public init(_ captured: CapturedMessage) {
        headers = captured.headers
        body = captured.body
        contentEncoding = nil
        wireSize = captured.wireSize
        messages = []
    }
}

/// A row of the `messages` table: a message found in a body, where it was found, the identifiers it carries, and, for
/// an app-channel message, how it was decrypted or why not.
public struct MessageRecord: Sendable, HasMessageFields {
    /// `body`, `form:creq` …, or `jwe`.
    public var location: String
    /// The message; nil for one that is the whole stored body (the reader takes it from the body).
    public var json: JSON?
    /// The columns messageType, messageVersion, the IDs, transStatus and errorCode, read as the record's own (`m.messageType`).
    public var fields: MessageFields
    public var decryption: String?

    public init(location: String, json: JSON?, fields: MessageFields, decryption: String? = nil) {
        self.location = location
        self.json = json
        self.fields = fields
        self.decryption = decryption
    }

    public init(location: String, json: JSON?, messageType: String? = nil, messageVersion: String? = nil, threeDSServerTransID: String? = nil,
                dsTransID: String? = nil, acsTransID: String? = nil, sdkTransID: String? = nil, transStatus: String? = nil,
                errorCode: String? = nil, decryption: String? = nil) {
        self.location = location
        self.json = json
        fields = MessageFields()
        fields.messageType = messageType
        fields.messageVersion = messageVersion
        fields.threeDSServerTransID = threeDSServerTransID
        fields.dsTransID = dsTransID
        fields.acsTransID = acsTransID
        fields.sdkTransID = sdkTransID
        fields.transStatus = transStatus
        fields.errorCode = errorCode
        self.decryption = decryption
    }
}

/// One side of an exchange as captured on the network loop: headers and the body as received (chunk
/// framing removed, still content-encoded). Decoding, masking and 3DS extraction happen on the writer thread (the
/// writer's `ExchangeStage`s).
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

/// When each step of an exchange happened (seconds since 1970) and how it ended early, if it did: the `exchanges` columns
/// that the recorder writes, the reader reads back and the timeline shows, declared once for the three of them.
public struct ExchangeTimeline: Sendable, Equatable {
    public var requestStart: Double
    public var upstreamConnect: Double?
    public var tlsDone: Double?
    public var requestSent: Double?
    public var firstByte: Double?
    public var done: Double?
    public var error: String?
    public var clientAbortAt: Double?

    public init(requestStart: Double, upstreamConnect: Double? = nil, tlsDone: Double? = nil, requestSent: Double? = nil,
                firstByte: Double? = nil, done: Double? = nil, error: String? = nil, clientAbortAt: Double? = nil) {
        self.requestStart = requestStart
        self.upstreamConnect = upstreamConnect
        self.tlsDone = tlsDone
        self.requestSent = requestSent
        self.firstByte = firstByte
        self.done = done
        self.error = error
        self.clientAbortAt = clientAbortAt
    }
}

/// An exchange that carries an `ExchangeTimeline` and reads and sets its members as its own (`exchange.firstByte`), each
/// through its key path into `timeline`. The accessors are always inlined, so at a use the optimizer folds the
/// key path into a plain stored-property access (a call to the key-path runtime otherwise, in the session writer's loop).
@dynamicMemberLookup
public protocol HasExchangeTimeline {
    var timeline: ExchangeTimeline { get set }
}

extension HasExchangeTimeline {
    @inlinable public subscript<Value>(dynamicMember member: WritableKeyPath<ExchangeTimeline, Value>) -> Value {
        @inline(__always) get { timeline[keyPath: member] }
        @inline(__always) set { timeline[keyPath: member] = newValue }
    }
}

/// One request and its response (or the error in its place), with timings.
public struct ExchangeRecord: Sendable, HasExchangeTimeline {
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
    public var timeline: ExchangeTimeline
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
        self.timeline = ExchangeTimeline(requestStart: requestStart)
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

/// How an ALPN offer is stored (`tunnels.alpn_offered`, `connections.alpn_offered`): a JSON array of the names (the writer
/// makes each printable as notes are, they are the client's bytes), so a name holding a comma stays one name. A value that is not
/// a JSON array of strings is read as the comma-separated form the first v4 builds wrote.
public enum ALPNOffer {
    public static func stored(_ names: [String]) -> String {
        JSON.array(names.map { .string($0) }).compact
    }

    public static func read(_ text: String) -> [String] {
        if text.hasPrefix("["), case let .array(items)? = try? JSON.parse(text) {
            let names = items.compactMap { item -> String? in if case let .string(s) = item { return s }; return nil }
            if names.count == items.count { return names }
        }
        return text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
    }
}
