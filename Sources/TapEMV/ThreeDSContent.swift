import TapCore
import TapJOSE

/// Finds EMV 3DS messages in HTTP bodies and masks card data before anything is stored.
public enum ThreeDSContent {
    /// A message found in a body: where (`body`, `form:creq`, `form:cres`, `form:threeDSMethodData`, `jwe`) and its JSON.
    public struct Found: Sendable {
        public let location: MessageLocation
        /// The message; for one that is the whole stored body and was found by the recorder's scan, parsed from
        /// that body when first asked for (the recorder itself never needs it).
        public var json: JSON { parsed ?? source.flatMap { try? JSON.parse($0) } ?? .null }
        private let parsed: JSON?
        private let source: [UInt8]?
        public let summary: MessageSummary?
        /// For app-channel JWE: how it was decrypted, or why it is still encrypted.
        public var decryption: String?

        public init(location: MessageLocation, json: JSON, summary: MessageSummary?, decryption: String? = nil) {
            self.location = location
            self.parsed = json
            self.source = nil
            self.summary = summary
            self.decryption = decryption
        }

        /// A message that is the whole (stored) body, its JSON left unparsed.
        init(body: [UInt8], summary: MessageSummary) {
            location = .body
            parsed = nil
            source = body
            self.summary = summary
        }

        func with(decryption: String) -> Found {
            var f = self
            f.decryption = decryption
            return f
        }
    }

    /// Whether `bytes` hold a JSON `\u` escape (a backslash, then `u`).
    static func hasUnicodeEscape(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { b in
            guard ByteScan.contains(b, byte: UInt8(ascii: "\\")), b.count > 1 else { return false }
            for k in 0..<(b.count - 1) where b[k] == UInt8(ascii: "\\") && b[k + 1] == UInt8(ascii: "u") { return true }
            return false
        }
    }

    /// Prepares a body for storage in one pass: masked (when `mask` is set, as `maskBody` does) and the 3DS
    /// messages found in the result, parsing a JSON body only once.
    /// `scan: false` always takes the full parse (the fuzzer compares the two paths).
    public static func prepare(_ body: [UInt8], mask: Bool, scan: Bool = true) -> (stored: [UInt8], messages: [Found]) {
        let first = body.firstNonWhitespace
        if scan, first == UInt8(ascii: "{"), mask, let fast = JSONBodyScan.scan(body) {
            // The common case, without building a tree (see JSONBodyScan); the same masking as below.
            let stored = maskLuhnRuns(fast.stored, mayHoldNUL: false)
            return (stored, fast.summary.map { [Found(body: stored, summary: $0)] } ?? [])
        }
        if first == UInt8(ascii: "{"), let json = try? JSON.parse(body) {
            guard mask else { return (body, MessageSummary(json).map { [Found(location: .body, json: json, summary: $0)] } ?? []) }
            let (walked, changed) = Masking.masking(json)
            var masked = walked
            var stored = maskLuhnRuns(changed ? walked.bytes : body)
            // Digits written as JSON escapes (`\u0034…`), or split by an escaped NUL, hide a card number from the byte scan:
            // where the body holds a \u escape, the decoded text of the tree already parsed is scanned as well.
            if hasUnicodeEscape(body) {
                let (clean, found) = Masking.maskingCardNumbersInText(walked)
                if found {
                    masked = clean
                    stored = maskLuhnRuns(clean.bytes)
                }
            }
            let summary = MessageSummary(masked)
            return (stored, summary.map { [Found(location: .body, json: masked, summary: $0)] } ?? [])
        }
        let stored = mask ? maskBody(body) : body
        return (stored, messages(in: stored))
    }

    /// An app-channel CReq/CRes still encrypted: a compact JWE with `alg: dir` and a `kid` (the acsTransID).
    /// Recorded as the message type with `location` `jwe` and the protected header as its JSON, until a key
    /// decrypts it.
    public static func appChannelJWE(in body: [UInt8], isRequest: Bool) -> Found? {
        // Told on the bytes, as the JOSE parser splits a token, with only the header decoded: no text is made of the
        // body (the writer asks this of every CReq and CRes it stores).
        guard body.count < 1 << 20, let header = try? JWE.protectedHeader(ofCompact: body),
              header["alg"]?.stringValue == "dir", let kid = header["kid"]?.stringValue else { return nil }
        let summaryJSON = JSON.object([("messageType", .string(isRequest ? "CReq" : "CRes")), ("acsTransID", .string(kid))])
        return Found(location: .jwe, json: header, summary: MessageSummary(summaryJSON))
    }

    /// The 3DS messages in a (decoded, already masked) body: a JSON object with `messageType`, or the
    /// base64url JSON form fields of the browser flow.
    public static func messages(in body: [UInt8]) -> [Found] {
        guard let first = body.firstNonWhitespace else { return [] }
        if first == UInt8(ascii: "{") {
            guard let json = try? JSON.parse(body), let s = MessageSummary(json) else { return [] }
            return [Found(location: .body, json: json, summary: s)]
        }
        guard body.count < 1 << 20, body.contains(UInt8(ascii: "=")), let text = String(validating: body, as: UTF8.self),
              let fields = FormBody.parse(text.trimmingWhitespace) else { return [] }
        var out: [Found] = []
        for (name, value) in fields where ["creq", "cres", "threeDSMethodData"].contains(name) {
            guard let bytes = Base64URL.decode(value.trimmingWhitespace), let json = try? JSON.parse(bytes), json.isObject else { continue }
            out.append(Found(location: .form(field: name), json: json, summary: MessageSummary(json)))
        }
        return out
    }
}
