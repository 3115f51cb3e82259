import TapCore

/// Masks card and secret data in 3DS JSON before it is stored or shown (emv3ds.md §4, "Sensitive data").
public enum Masking {
    /// Fields replaced entirely (OTPs, passwords, CAVV).
    static let secretFields: Set<String> = [
        "challengeDataEntry", "challengeDataEntryTwo", "challengeHTMLDataEntry", "authenticationValue",
        "cardSecurityCode",
    ]

    /// Masks `acctNumber` to its first 6 and last 4 digits and replaces secret entries with `"***"`,
    /// at any depth. Returns the value unchanged where nothing matches.
    public static func mask(_ json: JSON) -> JSON {
        switch json {
        case let .object(members):
            return .object(members.map { key, value in
                if key == "acctNumber", let pan = value.stringValue { return (key, .string(maskPAN(pan))) }
                if secretFields.contains(key), value.stringValue != nil { return (key, .string("***")) }
                return (key, mask(value))
            })
        case let .array(items):
            return .array(items.map(mask))
        default:
            return json
        }
    }

    /// `4000000000001091` → `400000******1091`; short values are masked whole.
    public static func maskPAN(_ pan: String) -> String {
        let chars = Array(pan)
        guard chars.count >= 13 else { return String(repeating: "*", count: chars.count) }
        return String(chars.prefix(6)) + String(repeating: "*", count: chars.count - 10) + String(chars.suffix(4))
    }
}
