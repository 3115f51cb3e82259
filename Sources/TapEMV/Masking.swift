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

    /// Header fields whose value is a credential: stored as `***` (an `Authorization` keeps its scheme).
    static let credentialHeaders: Set<String> = ["authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key"]

    /// Headers as stored: credentials redacted, card numbers (Luhn-valid 13–19 digit runs) masked in every value.
    public static func maskHeaders(_ headers: [(String, String)]) -> [(String, String)] {
        // Most header sets hold nothing to mask: kept as they are, without a copy.
        func isCredential(_ name: String) -> Bool { credentialHeaders.contains { name.caseInsensitiveEquals($0) } }
        guard headers.contains(where: { isCredential($0.0) || ThreeDSContent.hasLuhnRun($0.1) }) else { return headers }
        return headers.map { name, value in
            if isCredential(name) {
                let scheme = name.lowercased().hasSuffix("authorization") ? value.split(separator: " ").first.map { "\($0) " } ?? "" : ""
                return (name, scheme + "***")
            }
            return (name, ThreeDSContent.maskLuhnRuns(value))
        }
    }

    /// Masks `acctNumber` to its first 6 and last 4 digits and replaces secret entries with `"***"`,
    /// at any depth. Returns the value unchanged where nothing matches.
    public static func mask(_ json: JSON) -> JSON { masking(json).0 }

    /// Like `mask`, and whether anything was masked (so callers can keep the original bytes).
    public static func masking(_ json: JSON) -> (JSON, Bool) {
        switch json {
        case let .object(members):
            // Copied only once a member changes: most objects (the writer masks every message it stores) have nothing
            // to mask, and building a new array for each of them was most of the cost.
            var out: [(String, JSON)]?
            for (i, (key, value)) in members.enumerated() {
                let replaced: JSON?
                if key == "acctNumber", let pan = value.stringValue {
                    let m = maskPAN(pan)
                    replaced = m != pan ? .string(m) : nil
                } else if secretFields.contains(key), let v = value.stringValue {
                    replaced = v != "***" ? .string("***") : nil
                } else {
                    let (inner, c) = masking(value)
                    replaced = c ? inner : nil
                }
                if let replaced {
                    if out == nil { out = members }
                    out?[i].1 = replaced
                }
            }
            return out.map { (.object($0), true) } ?? (json, false)
        case let .array(items):
            var changed = false
            let out = items.map { item -> JSON in
                let (inner, c) = masking(item)
                if c { changed = true }
                return inner
            }
            return changed ? (.array(out), true) : (json, false)
        case let .string(text) where text.utf8.starts(with: "eyJ".utf8):
            guard let masked = maskedJWS(text) else { return (json, false) }
            return (.string(masked), true)
        default:
            return (json, false)
        }
    }

    /// A compact JWS (a JWT) whose JSON payload holds something to mask: the payload masked and the signature left
    /// out (`header.payload.`), since it no longer covers the payload; nil when there is nothing to mask. Base64url
    /// would otherwise carry a card number or a code past the masking.
    static func maskedJWS(_ text: String) -> String? {
        guard text.utf8.count < 1 << 20 else { return nil }
        // Split on the UTF-8 bytes (a JWS is ASCII; no grapheme breaking over kilobytes of base64url).
        let parts = text.pieces(separatedBy: UInt8(ascii: "."))
        guard parts.count == 3 else { return nil }
        let (header, payloadText) = (parts[0], parts[1])
        guard let payloadBytes = Base64URL.decode(payloadText), let payload = try? JSON.parse(payloadBytes), payload.isObject else {
            return nil
        }
        let (masked, changed) = masking(payload)
        let maskedBytes = ThreeDSContent.maskLuhnRuns(changed ? masked.bytes : payloadBytes)
        guard changed || maskedBytes != payloadBytes else { return nil }
        return "\(header).\(Base64URL.encode(maskedBytes))."
    }

    /// `maskPAN` on an ASCII value's bytes (the recorder's scan, which has checked that they are ASCII).
    static func maskedPAN(ascii u: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        var out = [UInt8](repeating: UInt8(ascii: "*"), count: u.count)
        guard u.count >= 13 else { return out }
        for k in 0..<6 { out[k] = u[k] }
        for k in u.count - 4..<u.count { out[k] = u[k] }
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
