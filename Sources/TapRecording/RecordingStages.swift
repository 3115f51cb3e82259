import TapCore
import TapEMV
import TapStore

/// Undoes each side's content codings (gzip, deflate: `StoredMessage.decodedBody`), noting them for `content_encoding`.
/// The bytes forwarded were not touched; only the stored copy is decoded.
public struct ContentDecodingStage: ExchangeStage {
    public init() {}

    public func prepare(_ exchange: inout PreparedExchange) {
        exchange.eachSide { side in
            (side.body, side.contentEncoding) = StoredMessage.decodedBody(side.body, headers: side.headers)
        }
    }
}

/// Finds the 3DS messages in each (decoded) body and, unless the exchange says `mask = false`, masks card numbers, OTP
/// entries and secrets in the bodies, the headers, the URL and path, the error and the replay miss. Text quoted from
/// clients (notes, a tunnel's SNI and ALPN names) is masked and made printable always.
public struct ThreeDSMaskingStage: ExchangeStage {
    public init() {}

    public func prepare(_ exchange: inout PreparedExchange) {
        let mask = exchange.record.mask
        exchange.eachSide { side in
            let (stored, found) = ThreeDSContent.prepare(side.body, mask: mask)
            side.body = stored
            side.messages = found.map(MessageRecord.init)
            if mask { side.headers = Masking.maskHeaders(side.headers) }
        }
        guard mask else { return }
        // URLs are masked as bodies are: card numbers (also percent-encoded or with separators), a JWT or base64url
        // JSON anywhere, the values of secret query fields.
        // Each field changed in place (a copy of the whole record cost the writer 7,000 instructions an exchange).
        exchange.record.url = Masking.maskText(exchange.record.url)
        if let path = exchange.record.path { exchange.record.path = Masking.maskText(path) }
        if let error = exchange.record.error { exchange.record.error = Masking.maskText(error) } // an imported HAR's _error is anyone's text
        if let miss = exchange.record.replay?.miss { exchange.record.replay?.miss = Masking.maskText(miss) }
    }

    public func prepare(clientText: String) -> String { ThreeDSContent.printable(clientText) }
}

/// Stores an app-channel CReq/CRes (a JWE body where no other 3DS message was found) as its plaintext: the one the
/// source handed over, or what `keys` (a key log) open, masked unless the exchange says `mask = false`; else its header
/// with why it stays encrypted.
public struct AppChannelDecryptionStage: ExchangeStage {
    let keys: (any ChannelKeySource)?

    public init(keys: (any ChannelKeySource)?) { self.keys = keys }

    public func prepare(_ exchange: inout PreparedExchange) {
        let mask = exchange.record.mask
        exchange.eachSide { side, captured, isRequest in
            guard side.messages.isEmpty, let message = StoredMessage.appChannelMessage(in: side.body, captured: captured, isRequest: isRequest,
                                                                                       keys: keys, mask: mask) else { return }
            side.messages = [MessageRecord(message)]
        }
    }
}

/// The stages 3dstape runs on every recorded exchange before storing it, in this order.
public enum RecordingStages {
    /// Decode the content codings, find and mask the 3DS messages, open app-channel messages with `keys`.
    public static func standard(keys: (any ChannelKeySource)? = nil) -> [any ExchangeStage] {
        [ContentDecodingStage(), ThreeDSMaskingStage(), AppChannelDecryptionStage(keys: keys)]
    }
}

extension SessionWriter {
    /// A writer that stores exchanges as 3dstape records them (`RecordingStages.standard`): bodies decoded, 3DS messages
    /// found and masked (unless an exchange says `mask = false`), app-channel messages opened with `keys` (a key log).
    /// `maxBytes` caps the file's size; `onProblem` is told when recording stops early or the file is locked.
    public convenience init(path: String, meta: [(String, String)], keys: (any ChannelKeySource)? = nil, maxBytes: Int? = nil,
                            onProblem: (@Sendable (String) -> Void)? = nil, onExchange: (@Sendable (ExchangeLine) -> Void)? = nil) throws {
        try self.init(path: path, meta: meta, stages: RecordingStages.standard(keys: keys), maxBytes: maxBytes, onProblem: onProblem,
                      onExchange: onExchange)
    }
}
