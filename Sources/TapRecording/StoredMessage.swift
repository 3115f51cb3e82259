import TapCompression
import TapCore
import TapEMV
import TapStore

/// One side of an exchange as 3dstape stores it: headers, body (decoded from gzip/deflate and masked), wire size, and
/// the 3DS messages found in it. The recorder's stages (`RecordingStages`) make the same from a captured side, step by
/// step; this composes their steps for a single side.
public struct StoredMessage: Sendable {
    /// Decodes gzip/deflate (the forwarded bytes were not touched), masks, and finds the 3DS messages.
    /// `isRequest` names an app-channel JWE body CReq (request) or CRes (response) while it is still encrypted.
    /// `keys` opens app-channel JWE bodies (the recorder's `--keylog`).
    public init(_ captured: CapturedMessage, mask: Bool, isRequest: Bool, keys: (any ChannelKeySource)? = nil) {
        let (decoded, encodingNote) = StoredMessage.decodedBody(captured.body, headers: captured.headers)
        var (stored, messages) = ThreeDSContent.prepare(decoded, mask: mask)
        if messages.isEmpty, let message = StoredMessage.appChannelMessage(in: stored, captured: captured, isRequest: isRequest, keys: keys,
                                                                           mask: mask) {
            messages = [message]
        }
        self.init(headers: mask ? Masking.maskHeaders(captured.headers) : captured.headers, body: stored, contentEncoding: encodingNote,
                  wireSize: captured.wireSize, messages: messages)
    }

    /// The app-channel CReq (request) or CRes (response) that `stored` holds as a JWE, if it does: the plaintext the
    /// source handed over (`captured.plaintext`), or what `keys` open, masked when asked; else the JWE's header with why
    /// it stays encrypted.
    static func appChannelMessage(in stored: [UInt8], captured: CapturedMessage, isRequest: Bool, keys: (any ChannelKeySource)?,
                                  mask: Bool) -> ThreeDSContent.Found? {
        guard let jwe = ThreeDSContent.appChannelJWE(in: stored, isRequest: isRequest) else { return nil }
        if let plain = captured.plaintext, plain.isObject, keys == nil || captured.plaintextNote != nil {
            let shown = mask ? Masking.mask(plain) : plain
            return ThreeDSContent.Found(location: .jwe, json: shown, summary: MessageSummary(shown),
                                        decryption: captured.plaintextNote ?? "\(DecryptionState.importedPrefix) in clear from the HAR's _3dstape field")
        }
        return ThreeDSContent.decryptAppChannel(jwe, body: stored, isRequest: isRequest, keys: keys, mask: mask)
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

extension MessageRecord {
    /// A found 3DS message as the `messages` table stores it; one that is the whole body keeps no JSON of its own
    /// (the reader takes it from the body, and it is never parsed here).
    init(_ found: ThreeDSContent.Found) {
        self.init(location: found.location.stored, json: found.location == .body ? nil : found.json,
                  fields: found.summary?.fields ?? MessageFields(), decryption: found.decryption)
    }
}
