import TapCore

/// The format of a 3DS element that masking hides (`acctNumber`, `authenticationValue`, the OTP entries), judged on the
/// value before it is hidden: once stored, `validate` can no longer see the value, so a malformed one keeps its verdict in
/// the mask text (`MaskVerdict`). The formats are those of the validator's rules for the same elements (SPEC Table A.1),
/// which a test holds equal.
public enum MaskedFormat: Sendable, Equatable {
    /// 13–19 ASCII digits (`*` counts as a digit: a value masked already).
    case cardNumber
    /// Standard base64 of exactly this many characters (a CAVV is 28).
    case base64(length: Int)
    /// A string of 1 to `max` characters.
    case text(max: Int)

    /// The elements masking hides whose format `validate` checks, by name (the same format in every message carrying one).
    public static let byElement: [String: MaskedFormat] = [
        "acctNumber": .cardNumber,
        "authenticationValue": .base64(length: 28),
        "challengeDataEntry": .text(max: 45),
        "challengeHTMLDataEntry": .text(max: 256),
    ]

    /// The 3DS messages whose top-level members get a verdict (a payment API's own `acctNumber` is masked as before).
    static let messageTypes: Set<String> = ["AReq", "ARes", "CReq", "CRes", "RReq", "RRes", "Erro", "PReq", "PRes"]

    /// Why `value` does not fit, as a fixed sentence that quotes nothing of the value (it is stored beside the mask), or nil.
    public func problem(_ value: JSON) -> String? {
        guard let s = value.stringValue else { return Self.notAString }
        var t = s
        return t.withUTF8 { u in
            switch self {
            case .cardNumber:
                return Self.isCardNumber(u) ? nil : Self.notCardNumber
            case let .base64(length):
                return Self.isBase64(u, length: length) ? nil : Self.notBase64(length)
            case let .text(max):
                if u.isEmpty { return Self.empty }
                // A character is at least one byte: most values are told by their byte count alone.
                return u.count <= max || s.count <= max ? nil : Self.tooLong(max)
            }
        }
    }

    /// Whether the bytes of a JSON string's raw content (escapes not decoded) are certainly well-formed: what the recorder's
    /// scan asks before it writes a plain mask. False sends the body to the full walk, which decides.
    func certainlyFits(rawContent u: UnsafeBufferPointer<UInt8>, escaped: Bool) -> Bool {
        switch self {
        case .cardNumber: return !escaped && Self.isCardNumber(u)
        case let .base64(length): return !escaped && Self.isBase64(u, length: length)
        case let .text(max): return !u.isEmpty && u.count <= max // an escape only makes the raw text longer
        }
    }

    static func isCardNumber(_ u: UnsafeBufferPointer<UInt8>) -> Bool {
        (13...19).contains(u.count) && u.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: "*") }
    }

    /// Standard base64 (RFC 4648 §4) of `length` characters: the alphabet, `=` padding at the end only, whole quanta.
    public static func isBase64(_ u: UnsafeBufferPointer<UInt8>, length: Int) -> Bool {
        guard u.count == length, length % 4 == 0 else { return false }
        var padding = 0
        for c in u {
            if c == UInt8(ascii: "=") { padding += 1; continue }
            guard padding == 0 else { return false }
            switch c {
            case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, UInt8(ascii: "+"), UInt8(ascii: "/"): continue
            default: return false
            }
        }
        return padding <= 2
    }

    static let notAString = "expected a string"
    static let notCardNumber = "not 13–19 digits"
    static let empty = "empty"
    static func notBase64(_ length: Int) -> String { "expected \(length) characters of base64" }
    static func tooLong(_ max: Int) -> String { "more than \(max) characters" }

    /// Every sentence `problem` can answer for the elements of `byElement`: a stored verdict is read back only if it is one.
    static let allProblems: Set<String> = {
        var out: Set<String> = [notAString, notCardNumber, empty]
        for f in byElement.values {
            switch f {
            case .cardNumber: break
            case let .base64(length): out.insert(notBase64(length))
            case let .text(max): out.insert(tooLong(max))
            }
        }
        return out
    }()
}

/// A masked value with the format verdict judged before masking: `***` or `400000******1091` when the value was
/// well-formed (as masks have always been written), `*** (malformed: expected 28 characters of base64)` when it was not.
/// The mask text is the whole record, so the verdict survives the session file, export and import with nothing beside it,
/// and sessions written before carry plain masks (format unknown, as before).
public enum MaskVerdict {
    static let opening = " (malformed: "

    /// `mask`, with `problem` appended when there is one.
    public static func mask(_ mask: String, problem: String?) -> String {
        guard let problem else { return mask }
        return mask + opening + problem + ")"
    }

    /// The problem a stored mask carries, nil for a plain mask or any other text. Only the sentences `MaskedFormat` writes
    /// are read, after a mask of `*` (and, for a card number, its first 6 and last 4 characters).
    public static func problem(in stored: String) -> String? {
        split(stored)?.problem
    }

    /// A stored mask with a verdict taken apart: the mask and the problem.
    static func split(_ stored: String) -> (mask: Substring, problem: String)? {
        guard stored.hasSuffix(")") else { return nil }
        for problem in MaskedFormat.allProblems {
            let tail = opening + problem + ")"
            guard stored.hasSuffix(tail) else { continue }
            let mask = stored.dropLast(tail.count)
            return mask.isEmpty || mask.contains("*") ? (mask, problem) : nil
        }
        return nil
    }

    /// Whether a secret's stored value is a mask already (`***`, with or without a verdict): masking keeps it as it is.
    public static func isSecretMask(_ s: String) -> Bool {
        if s == "***" { return true }
        guard let (mask, _) = split(s) else { return false }
        return mask == "***"
    }

    /// Whether a card number's stored value is a mask with a verdict already: masking keeps it as it is.
    static func isMaskedPANWithVerdict(_ s: String) -> Bool {
        guard let (mask, _) = split(s) else { return false }
        return Masking.maskPAN(String(mask)) == mask
    }
}
