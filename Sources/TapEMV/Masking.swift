#if canImport(Glibc)
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#endif
import TapCore

/// Masks card and secret data in 3DS JSON before it is stored or shown (emv3ds.md §4, "Sensitive data").
public enum Masking {
    /// Fields replaced entirely: OTP entries, CAVV, and the names card forms and payment APIs use for security
    /// codes, PINs and passwords (in the spellings seen in the wild).
    static let secretFields: Set<String> = [
        "challengeDataEntry", "challengeDataEntryTwo", "challengeHTMLDataEntry", "authenticationValue",
        "cardSecurityCode", "cvv", "CVV", "cvv2", "CVV2", "cvc", "CVC", "cvc2", "CVC2", "cvn", "CVN", "csc", "CSC",
        "securityCode", "SecurityCode", "security_code", "card_cvv", "cardCvv", "cardCVV", "cvd",
        "password", "Password", "passwd", "passcode", "otp", "OTP", "pin", "PIN", "securitycode",
    ]

    /// Form fields (any case) that carry what a cardholder types into a challenge page: the JSON names above and the
    /// names HTML challenge forms use for codes (`answer` is the sandbox's).
    static let secretFormFields: Set<String> = Set(secretFields.map { $0.lowercased() }).union([
        "answer", "smscode", "sms_code", "otpcode", "otp_code", "verificationcode", "verification_code", "onetimepassword",
        "one_time_password", "challengedataentry",
    ])

    /// Whether a form field's value is masked whole.
    public static func isSecretFormField(_ name: String) -> Bool { secretFormFields.contains(name.lowercased()) }

    /// Whether masking replaces this JSON element's whole value (`authenticationValue`, the OTP entries …).
    public static func isSecretElement(_ name: String) -> Bool { secretFields.contains(name) }

    /// Header fields whose value is a credential: stored as `***` (an `Authorization` keeps its scheme).
    static let credentialHeaders: Set<String> = ["authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key"]

    /// The lengths of `credentialHeaders`' names as bits (all are shorter than 64 bytes): a header name of another length is
    /// no credential, told without walking the set (the writer asks this of every header it stores).
    static let credentialHeaderLengths: UInt64 = credentialHeaders.reduce(0) { $0 | 1 << UInt64($1.utf8.count) }

    /// The fields of a 3DS browser form that carry a message as base64url JSON.
    static let threeDSFormFields: Set<String> = ["creq", "cres", "threeDSMethodData"]

    /// How many encodings deep the masking looks (a JWT in a form field in a JSON string is three): a layer beyond is
    /// masked by the byte scan alone, as a body that cannot be decoded is.
    static let maxDepth = 8

    /// Headers as stored: credentials redacted; card numbers masked in every value, also inside a JWT or base64url JSON.
    public static func maskHeaders(_ headers: [(String, String)]) -> [(String, String)] {
        // Most header sets hold nothing to mask: kept as they are, without a copy.
        func isCredential(_ name: String) -> Bool {
            let length = name.utf8.count
            guard length < 64, credentialHeaderLengths >> UInt64(length) & 1 == 1 else { return false }
            return credentialHeaders.contains { name.caseInsensitiveEquals($0) }
        }
        // A card number or a token, told in one look at the value's bytes.
        func mayHoldCardOrToken(_ value: String) -> Bool {
            var v = value
            return v.withUTF8 { u in nextTokenStart(u, from: 0) != nil || !ThreeDSContent.luhnRuns(u).isEmpty }
        }
        guard headers.contains(where: { isCredential($0.0) || mayHoldCardOrToken($0.1) }) else { return headers }
        return headers.map { name, value in
            if isCredential(name) {
                let scheme = name.lowercased().hasSuffix("authorization") ? value.split(separator: " ").first.map { "\($0) " } ?? "" : ""
                return (name, scheme + "***")
            }
            let bytes = Array(value.utf8)
            return (name, String(decoding: ThreeDSContent.maskLuhnRuns(maskedTokens(bytes, depth: 0) ?? bytes), as: UTF8.self))
        }
    }

    /// A line of text as stored or printed (a URL, a log line, an error): card numbers masked, also written with spaces
    /// or dashes, inside a JWT or base64url JSON, or percent-encoded in a query; the values of secret query fields
    /// (`otp=`, `pin=` …) masked whole. Text with nothing to mask is returned as it is.
    public static func maskText(_ text: String) -> String {
        var t = text
        let clean = t.withUTF8 { u in !mayHoldStructure(u) && ThreeDSContent.luhnRuns(u).isEmpty }
        if clean { return text }
        return String(decoding: ThreeDSContent.maskBody(Array(text.utf8), depth: 0), as: UTF8.self)
    }

    /// Masks `acctNumber` to its first 6 and last 4 digits and replaces secret entries with `"***"`,
    /// at any depth. Returns the value unchanged where nothing matches.
    public static func mask(_ json: JSON) -> JSON { masking(json).0 }

    /// Like `mask`, and whether anything was masked (so callers can keep the original bytes).
    public static func masking(_ json: JSON) -> (JSON, Bool) { masking(json, depth: 0) }

    /// The masking walk, one rule for every container: `acctNumber` (a string or a number) to its first 6 and last 4
    /// digits; a secret field's value (a string, a number, an array or an object) to `"***"`; a number that holds a
    /// card number to the masked number as a string (the byte scan would leave a number that is not JSON); and each
    /// string's encodings (`maskedString`: a JWT, base64url JSON, a form or query, JSON text), `depth` encodings deep.
    /// Card numbers in a string's own text are left to the byte scan that ends every stored body.
    static func masking(_ json: JSON, depth: Int) -> (JSON, Bool) {
        switch json {
        case let .object(members):
            // Whether this object is a 3DS message, asked once and only when a member is masked: its hidden elements keep
            // their format verdict in the mask (`MaskVerdict`).
            var isMessage: Bool?
            func problem(_ key: String, _ value: JSON) -> String? {
                guard let format = MaskedFormat.byElement[key] else { return nil }
                if isMessage == nil {
                    isMessage = members.first { $0.0 == "messageType" }?.1.stringValue.map(MaskedFormat.messageTypes.contains) ?? false
                }
                return isMessage == true ? format.problem(value) : nil
            }
            let changed = json.changingMembers { key, value -> (String, JSON)? in
                if key == "acctNumber", let pan = value.stringValue ?? value.numberValue {
                    if value.stringValue != nil, MaskVerdict.isMaskedPANWithVerdict(pan) { return nil } // masked before, with its verdict
                    let m = MaskVerdict.mask(maskPAN(pan), problem: problem(key, value))
                    return m != pan || value.stringValue == nil ? (key, .string(m)) : nil
                }
                if secretFields.contains(key), secretValue(value) != nil {
                    return value.stringValue.map(MaskVerdict.isSecretMask) == true ? nil
                        : (key, .string(MaskVerdict.mask("***", problem: problem(key, value))))
                }
                let (inner, c) = masking(value, depth: depth)
                return c ? (key, inner) : nil
            }
            return changed.map { ($0, true) } ?? (json, false)
        case .array:
            let changed = json.changingItems { item in
                let (inner, c) = masking(item, depth: depth)
                return c ? inner : nil
            }
            return changed.map { ($0, true) } ?? (json, false)
        case let .string(text):
            guard let masked = maskedString(text, depth: depth) else { return (json, false) }
            return (.string(masked), true)
        case let .number(n) where n.utf8.count >= 13 && ThreeDSContent.hasLuhnRun(n):
            return (.string(ThreeDSContent.maskLuhnRuns(n)), true)
        default:
            return (json, false)
        }
    }

    /// `json` with the card numbers in its keys' and strings' decoded text masked (`luhnRuns`, across NULs too), and
    /// whether there was one: what the byte scan of the stored body cannot see when JSON escapes write the digits
    /// (`\u0034000…`) or put an escaped NUL between them (`4000\u0000000…`).
    static func maskingCardNumbersInText(_ json: JSON) -> (JSON, Bool) {
        func text(_ s: String) -> String { String(decoding: ThreeDSContent.maskLuhnRuns(Array(s.utf8)), as: UTF8.self) }
        switch json {
        case .object:
            let changed = json.changingMembers { key, value -> (String, JSON)? in
                let maskedKey = text(key)
                let (inner, c) = maskingCardNumbersInText(value)
                return c || maskedKey != key ? (maskedKey, inner) : nil
            }
            return changed.map { ($0, true) } ?? (json, false)
        case .array:
            let changed = json.changingItems { item in
                let (inner, c) = maskingCardNumbersInText(item)
                return c ? inner : nil
            }
            return changed.map { ($0, true) } ?? (json, false)
        case let .string(s):
            let masked = text(s)
            return masked == s ? (json, false) : (.string(masked), true)
        default:
            return (json, false)
        }
    }

    /// A secret field's value as text to compare with `***`: a string as it is, any number, array or object as something
    /// that is not `***` (all are masked whole); nil for null and booleans, which hold nothing.
    static func secretValue(_ value: JSON) -> String? {
        switch value {
        case let .string(s): return s
        case .number, .array, .object: return ""
        case .null, .bool: return nil
        }
    }

    /// A JSON string's content masked (a JWT or base64url JSON anywhere in it, a form or a URL's query, JSON text), or
    /// nil when nothing in it needs masking. The JSON scan of the recorder calls this too, on the strings
    /// `mayHoldStructure` points at, so both paths mask alike.
    static func maskedString(_ text: String, depth: Int) -> String? {
        var t = text
        guard t.withUTF8({ mayHoldStructure($0) }) else { return nil }
        return maskedStringContent(Array(t.utf8), depth: depth).map { String(decoding: $0, as: UTF8.self) }
    }

    /// `maskedString` on the bytes of a string that `mayHoldStructure` has pointed at (the recorder's JSON scan tells it
    /// while reading the string, and calls this).
    static func maskedStringContent(_ bytes: [UInt8], depth: Int) -> [UInt8]? { maskedText(bytes, depth: depth + 1) }

    /// Whether `maskedText` may find anything in `u`: JSON text (`{` or `[` first), `=` (a form, a query), or `e` followed
    /// by `y` or `w` (how the base64url of a JSON object starts).
    static func mayHoldStructure(_ u: UnsafeBufferPointer<UInt8>) -> Bool {
        if let first = u.firstNonWhitespace, first == UInt8(ascii: "{") || first == UInt8(ascii: "[") { return true }
        var i = 0
        while i < u.count {
            i = ByteScan.jsonStringStopOrHint(u, from: i)
            guard i < u.count else { return false }
            if u[i] == UInt8(ascii: "=") { return true }
            if u[i] == UInt8(ascii: "e"), i + 1 < u.count, u[i + 1] == UInt8(ascii: "y") || u[i + 1] == UInt8(ascii: "w") { return true }
            i += 1
        }
        return false
    }

    /// The structure in a text, masked: JSON (the walk), a form or a URL's query (`maskedForm`), and otherwise compact
    /// JOSE and base64url JSON anywhere (`maskedTokens`). Nil when nothing changed. Card numbers in the text's own bytes
    /// are left to the caller's byte scan (`ThreeDSContent.maskBody` is this and the scan).
    static func maskedText(_ b: [UInt8], depth: Int) -> [UInt8]? {
        guard depth < maxDepth, let first = b.firstNonWhitespace else { return nil }
        // JSON found inside something else is read to a nesting of 32 (a body itself, as the full parse reads it): the walk
        // recurses once a level and once an encoding, and both stay bounded.
        if first == UInt8(ascii: "{") || first == UInt8(ascii: "["), let json = try? JSON.parse(b, maxDepth: depth == 0 ? 256 : 32) {
            let (masked, changed) = masking(json, depth: depth)
            return changed ? masked.bytes : nil
        }
        let hasEquals = b.withUnsafeBufferPointer { u in memchr(u.baseAddress!, Int32(UInt8(ascii: "=")), u.count) != nil }
        if hasEquals, let form = maskedForm(b, depth: depth) { return form.changed ? form.bytes : nil }
        return maskedTokens(b, depth: depth)
    }

    /// A form body or a URL with a query, each value decoded and masked as a body is (`ThreeDSContent.maskBody`, one
    /// encoding deeper), the values of secret fields masked whole. A form that `FormBody` reads is stored re-encoded
    /// field by field when anything in it changed, and a 3DS browser form always (as the recorder always stored them);
    /// anything else (a URL, a query with other characters) keeps its bytes but for the values that changed. Nil when the
    /// text is not one (a space inside).
    static func maskedForm(_ b: [UInt8], depth: Int) -> (bytes: [UInt8], changed: Bool)? {
        let trimmed = b.trimmingWhitespaceBytes
        guard !trimmed.contains(0x20) else { return nil }
        if let text = String(validating: trimmed, as: UTF8.self), let fields = FormBody.parse(text) {
            let threeDS = fields.contains { threeDSFormFields.contains($0.0) }
            var changed = false
            var parts: [String] = []
            for (name, value) in fields {
                var v = value
                if isSecretFormField(name) {
                    if v != "***" { v = "***"; changed = true }
                } else {
                    let bytes = Array(value.utf8)
                    let masked = ThreeDSContent.maskBody(bytes, depth: depth + 1)
                    if masked != bytes { v = String(decoding: masked, as: UTF8.self); changed = true }
                }
                parts.append("\(FormBody.percentEncode(name))=\(FormBody.percentEncode(v))")
            }
            guard threeDS || changed else { return (b, false) }
            let rebuilt = Array(parts.joined(separator: "&").utf8)
            return (rebuilt, rebuilt != b)
        }
        // A URL (its path and `?` kept, tokens in them masked) or a loose query: piece by piece, raw where unchanged.
        var out: [UInt8] = []
        out.reserveCapacity(b.count)
        var changed = false
        var start = 0
        if let eq = b.firstIndex(of: UInt8(ascii: "=")), let q = b[..<eq].firstIndex(of: UInt8(ascii: "?")) {
            let head = Array(b[...q])
            if let m = maskedTokens(head, depth: depth) { out += m; changed = true } else { out += head }
            start = q + 1
        }
        for (n, piece) in b[start...].split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false).enumerated() {
            if n > 0 { out.append(UInt8(ascii: "&")) }
            guard let eq = piece.firstIndex(of: UInt8(ascii: "=")) else {
                if let m = maskedTokens(Array(piece), depth: depth) { out += m; changed = true } else { out += piece }
                continue
            }
            let name = piece[..<eq], value = piece[(eq + 1)...]
            out += name
            out.append(UInt8(ascii: "="))
            if let decodedName = percentDecoded(name), isSecretFormField(String(decoding: decodedName, as: UTF8.self)) {
                if percentDecoded(value).map({ $0 != Array("***".utf8) }) ?? true {
                    out += Array("***".utf8)
                    changed = true
                } else {
                    out += value
                }
            } else if let decoded = percentDecoded(value) {
                let masked = ThreeDSContent.maskBody(decoded, depth: depth + 1)
                if masked != decoded { out += queryEncoded(masked); changed = true } else { out += value }
            } else if let m = maskedTokens(Array(value), depth: depth) { // a malformed escape: the bytes as they are
                out += m
                changed = true
            } else {
                out += value
            }
        }
        return (changed ? out : b, changed)
    }

    /// `%XX` and `+` decoded; nil on a malformed escape.
    static func percentDecoded(_ s: ArraySlice<UInt8>) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(s.count)
        var i = s.startIndex
        while i < s.endIndex {
            let c = s[i]
            if c == UInt8(ascii: "+") {
                out.append(0x20)
            } else if c == UInt8(ascii: "%") {
                guard i + 2 < s.endIndex, let h = hexValue(s[i + 1]), let l = hexValue(s[i + 2]) else { return nil }
                out.append(h << 4 | l)
                i += 2
            } else {
                out.append(c)
            }
            i += 1
        }
        return out
    }

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x41...0x46: return c - 0x41 + 10
        case 0x61...0x66: return c - 0x61 + 10
        default: return nil
        }
    }

    /// A changed query value percent-encoded: unreserved characters and `*` (what masking writes) kept.
    static func queryEncoded(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for c in bytes {
            switch c {
            case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, 0x2D, 0x2E, 0x5F, 0x7E, 0x2A: out.append(c)
            default: out += [UInt8(ascii: "%"), hex[Int(c >> 4)], hex[Int(c & 0xF)]]
            }
        }
        return out
    }

    /// Compact JOSE and base64url JSON anywhere in `b` (a body, a form value, a URL, a header), masked: a JWS (a JWT)
    /// whose payload holds something to mask is stored as `header.maskedPayload.`, its signature left out since it no
    /// longer covers the payload (that empty signature is what says 3dstape changed it); base64url JSON (`creq`, a JWT
    /// payload on its own) is re-encoded masked. A JWE's parts are ciphertext (the app channel's plaintext is masked
    /// when it is decrypted) and protected headers are JOSE's own parameters: both are kept. Nil when nothing changed.
    static func maskedTokens(_ b: [UInt8], depth: Int) -> [UInt8]? {
        guard depth < maxDepth else { return nil }
        return b.withUnsafeBufferPointer { u -> [UInt8]? in
            var out: [UInt8]?
            var copied = 0
            var i = 0
            while let s = nextTokenStart(u, from: i) {
                let j = ByteScan.base64URLRunEnd(u, from: s)
                let dots = dotCount(UnsafeBufferPointer(rebasing: u[s..<j]), upTo: 3)
                var end = j
                if dots == 0 { while end < u.count, end - j < 2, u[end] == UInt8(ascii: "=") { end += 1 } }
                if let masked = maskedToken(UnsafeBufferPointer(rebasing: u[s..<end]), dots: dots, depth: depth) {
                    if out == nil { out = []; out!.reserveCapacity(u.count) }
                    out! += UnsafeBufferPointer(rebasing: u[copied..<s])
                    out! += masked
                    copied = end
                }
                i = end
            }
            guard var result = out else { return nil }
            result += UnsafeBufferPointer(rebasing: u[copied...])
            return result
        }
    }

    /// Where the next token may start at or after `from`: `e` then `y` or `w`, not inside another base64url run.
    static func nextTokenStart(_ u: UnsafeBufferPointer<UInt8>, from: Int) -> Int? {
        guard let base = u.baseAddress else { return nil }
        var i = from
        while i + 1 < u.count {
            guard let hit = memchr(base + i, Int32(UInt8(ascii: "e")), u.count - 1 - i) else { return nil }
            let e = UnsafePointer<UInt8>(hit.assumingMemoryBound(to: UInt8.self)) - base
            let next = u[e + 1]
            if next == UInt8(ascii: "y") || next == UInt8(ascii: "w"),
               e == 0 || !(Base64URL.isAlphabetByte(u[e - 1]) || u[e - 1] == UInt8(ascii: ".")) {
                return e
            }
            i = e + 1
        }
        return nil
    }

    /// One token masked, or nil: `dots` 0 is base64url JSON, 2 a JWS; anything else is kept.
    static func maskedToken(_ t: UnsafeBufferPointer<UInt8>, dots: Int, depth: Int) -> [UInt8]? {
        guard t.count < 1 << 20, t.count >= 8 else { return nil }
        switch dots {
        case 0:
            guard let bytes = Base64URL.decode(bytes: t), bytes.firstNonWhitespace == UInt8(ascii: "{") else { return nil }
            let masked = ThreeDSContent.maskBody(bytes, depth: depth + 1)
            return masked != bytes ? Array(Base64URL.encode(masked).utf8) : nil
        case 2:
            // Split on the bytes (a JWS is ASCII).
            let dots = dotOffsets(t, upTo: 2)
            let (d1, d2) = (dots[0], dots[1])
            guard let payload = Base64URL.decode(bytes: UnsafeBufferPointer(rebasing: t[(d1 + 1)..<d2])), !payload.isEmpty else { return nil }
            let masked = ThreeDSContent.maskBody(payload, depth: depth + 1)
            guard masked != payload else { return nil }
            return Array(t[...d1]) + Array(Base64URL.encode(masked).utf8) + [UInt8(ascii: ".")]
        default:
            return nil
        }
    }

    /// How many dots `t` holds, counted up to `limit` (memchr).
    static func dotCount(_ t: UnsafeBufferPointer<UInt8>, upTo limit: Int) -> Int {
        guard let base = t.baseAddress else { return 0 }
        var n = 0, at = 0
        while n < limit, at < t.count, let hit = memchr(base + at, Int32(UInt8(ascii: ".")), t.count - at) {
            n += 1
            at = UnsafePointer<UInt8>(hit.assumingMemoryBound(to: UInt8.self)) - base + 1
        }
        return n
    }

    /// Whether `u` is one compact serialisation that `maskedText` keeps as it is, told without copying it: it starts as a
    /// token does, is all base64url and dots, and has neither 0 nor 2 dots (a JWE: the recorder's scan meets one in every
    /// AReq, sdkEncData).
    static func isOpaqueToken(_ u: UnsafeBufferPointer<UInt8>) -> Bool {
        guard u.count >= 2, u[0] == UInt8(ascii: "e"), u[1] == UInt8(ascii: "y") || u[1] == UInt8(ascii: "w"),
              ByteScan.base64URLRunEnd(u, from: 0) == u.count else { return false }
        let dots = dotCount(u, upTo: 3)
        return dots != 0 && dots != 2
    }

    /// Where the first `limit` dots of `t` are (memchr: a JWS header with a certificate chain is kilobytes long).
    static func dotOffsets(_ t: UnsafeBufferPointer<UInt8>, upTo limit: Int) -> [Int] {
        guard let base = t.baseAddress else { return [] }
        var out: [Int] = []
        var at = 0
        while out.count < limit, at < t.count, let hit = memchr(base + at, Int32(UInt8(ascii: ".")), t.count - at) {
            let k = UnsafePointer<UInt8>(hit.assumingMemoryBound(to: UInt8.self)) - base
            out.append(k)
            at = k + 1
        }
        return out
    }

    /// `maskPAN` on an ASCII value's bytes (the recorder's scan, which has checked that they are ASCII).
    static func maskedPAN(ascii u: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        // Reserved and appended, not `[UInt8](repeating:count:)`: that one looks up its array type's metadata at run time
        // (about 650 instructions, the recorder's scan calls this for every acctNumber).
        var out: [UInt8] = []
        out.reserveCapacity(u.count)
        guard u.count >= 13 else {
            out.append(contentsOf: repeatElement(UInt8(ascii: "*"), count: u.count))
            return out
        }
        out.append(contentsOf: UnsafeBufferPointer(rebasing: u[0..<6]))
        out.append(contentsOf: repeatElement(UInt8(ascii: "*"), count: u.count - 10))
        out.append(contentsOf: UnsafeBufferPointer(rebasing: u[(u.count - 4)...]))
        return out
    }

    /// `4000000000001091` → `400000******1091`; short values are masked whole.
    public static func maskPAN(_ pan: String) -> String {
        let u = Array(pan.utf8)
        if u.allSatisfy({ $0 < 0x80 }) { // card numbers are ASCII: work on bytes, no grapheme breaking
            return u.withUnsafeBufferPointer { String(decoding: maskedPAN(ascii: $0), as: UTF8.self) }
        }
        let chars = Array(pan)
        guard chars.count >= 13 else { return String(repeating: "*", count: chars.count) }
        return String(chars.prefix(6)) + String(repeating: "*", count: chars.count - 10) + String(chars.suffix(4))
    }
}

extension Array<UInt8> {
    /// The bytes without the whitespace `trimmingWhitespace` skips at either end.
    var trimmingWhitespaceBytes: ArraySlice<UInt8> {
        var start = startIndex, end = endIndex
        while start < end, Base64URL.isWhitespaceByte(self[start]) { start += 1 }
        while end > start, Base64URL.isWhitespaceByte(self[end - 1]) { end -= 1 }
        return self[start..<end]
    }
}
