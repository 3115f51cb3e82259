import TapCore
import TapJOSE

/// Finds EMV 3DS messages in HTTP bodies and masks card data before anything is stored.
public enum ThreeDSContent {
    /// A message found in a body: where (`body`, `form:creq`, `form:cres`, `form:threeDSMethodData`) and its JSON.
    public struct Found: Sendable {
        public let location: String
        /// The message; for one that is the whole stored body and was found by the recorder's scan, parsed from
        /// that body when first asked for (the recorder itself never needs it).
        public var json: JSON { parsed ?? source.flatMap { try? JSON.parse($0) } ?? .null }
        private let parsed: JSON?
        private let source: [UInt8]?
        public let summary: MessageSummary?
        /// For app-channel JWE: how it was decrypted, or why it is still encrypted.
        public var decryption: String?

        public init(location: String, json: JSON, summary: MessageSummary?, decryption: String? = nil) {
            self.location = location
            self.parsed = json
            self.source = nil
            self.summary = summary
            self.decryption = decryption
        }

        /// A message that is the whole (stored) body, its JSON left unparsed.
        init(body: [UInt8], summary: MessageSummary) {
            location = "body"
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

    /// Prepares a body for storage in one pass: masked (when `mask` is set, as `maskBody` does) and the 3DS
    /// messages found in the result, parsing a JSON body only once.
    /// `scan: false` always takes the full parse (the fuzzer compares the two paths).
    public static func prepare(_ body: [UInt8], mask: Bool, scan: Bool = true) -> (stored: [UInt8], messages: [Found]) {
        let first = body.firstNonWhitespace
        if scan, first == UInt8(ascii: "{"), mask, let fast = JSONBodyScan.scan(body) {
            // The common case, without building a tree (see JSONBodyScan); the same masking as below.
            let stored = maskLuhnRuns(fast.stored)
            return (stored, fast.summary.map { [Found(body: stored, summary: $0)] } ?? [])
        }
        if first == UInt8(ascii: "{"), let json = try? JSON.parse(body) {
            guard mask else { return (body, MessageSummary(json).map { [Found(location: "body", json: json, summary: $0)] } ?? []) }
            let (masked, changed) = Masking.masking(json)
            let stored = maskLuhnRuns(changed ? masked.bytes : body)
            let summary = MessageSummary(masked)
            return (stored, summary.map { [Found(location: "body", json: masked, summary: $0)] } ?? [])
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
        return Found(location: "jwe", json: header, summary: MessageSummary(summaryJSON))
    }

    /// The 3DS messages in a (decoded, already masked) body: a JSON object with `messageType`, or the
    /// base64url JSON form fields of the browser flow.
    public static func messages(in body: [UInt8]) -> [Found] {
        guard let first = body.firstNonWhitespace else { return [] }
        if first == UInt8(ascii: "{") {
            guard let json = try? JSON.parse(body), let s = MessageSummary(json) else { return [] }
            return [Found(location: "body", json: json, summary: s)]
        }
        guard body.count < 1 << 20, body.contains(UInt8(ascii: "=")), let text = String(validating: body, as: UTF8.self),
              let fields = FormBody.parse(text.trimmingWhitespace) else { return [] }
        var out: [Found] = []
        for (name, value) in fields where ["creq", "cres", "threeDSMethodData"].contains(name) {
            guard let bytes = Base64URL.decode(value.trimmingWhitespace), let json = try? JSON.parse(bytes), json.isObject else { continue }
            out.append(Found(location: "form:\(name)", json: json, summary: MessageSummary(json)))
        }
        return out
    }

    /// Masks a body for storage: JSON bodies field by field (acctNumber, OTP entries, CAVV), form fields
    /// holding base64url JSON likewise (re-encoded), and then any 13–19 digit run that passes the Luhn
    /// check anywhere in the text (PANs in HTML, query strings, free text) to its first 6 and last 4.
    public static func maskBody(_ body: [UInt8]) -> [UInt8] {
        guard !body.isEmpty else { return body }
        let first = body.firstNonWhitespace
        // Neither JSON nor a form (a JWE, HTML, plain text): only card numbers to mask, found on the bytes.
        guard first == UInt8(ascii: "{") || first == UInt8(ascii: "[") || body.contains(UInt8(ascii: "=")) else { return maskLuhnRuns(body) }
        guard let text = String(validating: body, as: UTF8.self) else { return body }
        let trimmed = text.trimmingWhitespace
        if first == UInt8(ascii: "{") || first == UInt8(ascii: "["), let json = try? JSON.parse(body) {
            let (masked, changed) = Masking.masking(json)
            return maskLuhnRuns(changed ? masked.bytes : body)
        }
        if trimmed.utf8.contains(UInt8(ascii: "=")), !trimmed.utf8.contains(0x20), let fields = FormBody.parse(trimmed) {
            // Any form: what the cardholder typed (an OTP posted to an HTML challenge page) is masked whole; a 3DS
            // form's base64url JSON fields are masked inside.
            let threeDS = fields.contains(where: { ["creq", "cres", "threeDSMethodData"].contains($0.0) })
            var changed = false
            var parts: [String] = []
            for (name, value) in fields {
                var v = value
                if Masking.isSecretFormField(name) {
                    if v != "***" { v = "***"; changed = true }
                } else if threeDS, let bytes = Base64URL.decode(value), let json = try? JSON.parse(bytes), json.isObject {
                    let (masked, c) = Masking.masking(json)
                    if c { v = Base64URL.encode(masked.bytes); changed = true }
                }
                parts.append("\(FormBody.percentEncode(name))=\(FormBody.percentEncode(v))")
            }
            if threeDS || changed { return maskLuhnRuns(Array(parts.joined(separator: "&").utf8)) }
        }
        return maskLuhnRuns(body)
    }

    /// Replaces each run of 13–19 ASCII digits that passes the Luhn check with first 6, `*`s, last 4.
    /// `maskLuhnRuns` for text (URLs, header values, log lines).
    public static func maskLuhnRuns(_ text: String) -> String {
        var text = text
        let runs = text.withUTF8 { luhnRuns($0) }
        return runs.isEmpty ? text : String(decoding: maskingRuns(Array(text.utf8), runs), as: UTF8.self)
    }

    /// Whether `text` holds a run `maskLuhnRuns` would mask.
    static func hasLuhnRun(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { !luhnRuns($0).isEmpty }
    }

    /// Text from the network made safe to print on a terminal or in a log: card numbers masked and control
    /// characters (terminal escape sequences included) escaped as `TerminalText` shows them.
    public static func printable(_ text: String) -> String {
        TerminalText.escaped(maskLuhnRuns(text))
    }

    public static func maskLuhnRuns(_ bytes: [UInt8]) -> [UInt8] {
        // Find the runs to mask without copying; copy only when there is one (most bodies have none).
        let runs = bytes.withUnsafeBufferPointer { luhnRuns($0) }
        return runs.isEmpty ? bytes : maskingRuns(bytes, runs)
    }

    /// The maximal runs of 13–19 ASCII digits that pass the Luhn check. A run of 13 or more holds eight digits in a row
    /// starting at any of its first six bytes, so only every sixth 8-byte window is tested until one is all digits, and
    /// then the run around it is measured: the short digit runs of UUIDs, amounts and dates are never visited one by one.
    static func luhnRuns(_ b: UnsafeBufferPointer<UInt8>) -> [Range<Int>] {
        var runs: [Range<Int>] = []
        let n = b.count
        var p = 0
        while p + 8 <= n {
            guard ByteScan.eightDigits(b, at: p) else {
                p += 6
                continue
            }
            var i = p
            while i > 0, b[i - 1] &- 0x30 <= 9 { i -= 1 }
            var j = p + 8
            while j < n, b[j] &- 0x30 <= 9 { j += 1 }
            if (13...19).contains(j - i), luhn(UnsafeBufferPointer(rebasing: b[i..<j])) { runs.append(i..<j) }
            p = j + 1 // b[j] is not a digit: the next run starts after it
        }
        return runs
    }

    /// `bytes` with each run kept to its first 6 and last 4 digits, `*` between.
    static func maskingRuns(_ bytes: [UInt8], _ runs: [Range<Int>]) -> [UInt8] {
        var out = bytes
        for r in runs {
            for k in (r.lowerBound + 6)..<(r.upperBound - 4) { out[k] = UInt8(ascii: "*") }
        }
        return out
    }

    /// The Luhn (mod 10) check over ASCII digits.
    public static func luhn(_ digits: some Collection<UInt8>) -> Bool {
        var sum = 0
        for (n, c) in digits.reversed().enumerated() {
            var d = Int(c - 0x30)
            if n % 2 == 1 { d *= 2; if d > 9 { d -= 9 } }
            sum += d
        }
        return sum % 10 == 0
    }
}

extension FormBody {
    /// Percent-encodes everything but unreserved characters (RFC 3986).
    public static func percentEncode(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            switch b {
            case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, 0x2D, 0x2E, 0x5F, 0x7E: out.unicodeScalars.append(Unicode.Scalar(b))
            default: out += "%" + String(format2: b)
            }
        }
        return out
    }
}

extension String {
    init(format2 b: UInt8) {
        let d = Array("0123456789ABCDEF")
        self = String([d[Int(b >> 4)], d[Int(b & 0xF)]])
    }
}
