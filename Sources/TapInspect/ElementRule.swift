import Foundation
import TapCore
import TapEMV

/// One element of one message type, as the specification's data-element table describes it.
public struct ElementRule: Sendable {
    /// `AReq.acctNumber`.
    public let id: String
    public let message: MessageKind
    /// The element, typed: a transaction ID or another field.
    public let member: MessageMember
    /// The element's name as the specification (and the wire) spells it: `acctNumber`.
    public var element: String { member.name }
    public let presence: Presence
    public let format: Format
    /// The first version that defines the element (nil: all of 2.1.0, 2.2.0, 2.3.1).
    public let since: MessageVersion?

    public init(_ message: MessageKind, member: MessageMember, _ presence: Presence, _ format: Format, since: MessageVersion? = nil) {
        self.id = "\(message.rawValue).\(member.name)"
        self.message = message
        self.member = member
        self.presence = presence
        self.format = format
        self.since = since
    }

    /// A rule for a field other than a transaction ID: `ElementRule(.aReq, .acctNumber, …)`.
    public init(_ message: MessageKind, _ field: EMVField, _ presence: Presence, _ format: Format, since: MessageVersion? = nil) {
        self.init(message, member: .field(field), presence, format, since: since)
    }

    /// A rule for a transaction ID: `ElementRule(.aRes, .dsTransID, …)`.
    public init(_ message: MessageKind, _ id: TransactionIDField, _ presence: Presence, _ format: Format, since: MessageVersion? = nil) {
        self.init(message, member: .id(id), presence, format, since: since)
    }

    /// When the element must be present.
    public enum Presence: Sendable {
        case required
        case optional
        /// Required when the condition holds, optional otherwise.
        case when(Condition)
    }

    /// A condition on the message or its transaction.
    public indirect enum Condition: Sendable, CustomStringConvertible {
        /// The transaction's deviceChannel (01 app, 02 browser, 03 3RI) is one of these.
        case channel(Set<DeviceChannel>)
        /// The transaction's messageCategory (01 payment, 02 non-payment) is one of these.
        case category(Set<MessageCategory>)
        /// The message's own element has one of these values.
        case field(EMVField, Set<String>)
        /// The browser runs JavaScript: always in 2.1.0, `browserJavascriptEnabled` true from 2.2.0.
        case browserJavaScript
        case all([Condition])
        case any([Condition])

        func holds(_ c: MessageContext) -> Bool {
            switch self {
            case let .channel(v): return c.channel.map(v.contains) ?? false
            case let .category(v): return c.category.map(v.contains) ?? false
            case let .field(field, v): return c.json[field]?.stringValue.map(v.contains) ?? false
            case .browserJavaScript:
                if c.version == .v2_1 { return true }
                if case .bool(true)? = c.json[.browserJavascriptEnabled] { return true }
                return false
            case let .all(cs): return cs.allSatisfy { $0.holds(c) }
            case let .any(cs): return cs.contains { $0.holds(c) }
            }
        }

        public var description: String {
            switch self {
            case let .channel(v): return "deviceChannel " + v.map(\.wire).sorted().joined(separator: "/")
            case let .category(v): return "messageCategory " + v.map(\.wire).sorted().joined(separator: "/")
            case let .field(f, v): return "\(f.rawValue) " + v.sorted().joined(separator: "/")
            case .browserJavaScript: return "the browser runs JavaScript"
            case let .all(cs): return cs.map(\.description).joined(separator: " and ")
            case let .any(cs): return cs.map(\.description).joined(separator: " or ")
            }
        }
    }

    /// The value an element must have.
    public enum Format: Sendable {
        /// A 36-character RFC 4122 UUID (canonical form).
        case uuid
        /// One of these strings; `added` lists values that later versions add (version → values).
        case values(Set<String>, added: [String: [String]] = [:])
        /// A string of digits whose length is in the range, optionally with a minimum value.
        case numeric(ClosedRange<Int>, atLeast: Int? = nil)
        /// Digits with an optional leading sign (browserTZ).
        case signedNumeric(ClosedRange<Int>)
        /// A string of 1 to `max` characters.
        case text(max: Int)
        /// An http(s) URL of at most 2048 characters.
        case url
        /// 13–19 digits (or the same masked as first 6 / last 4).
        case cardNumber
        /// YYMM.
        case yearMonth
        /// YYYYMMDDHHMMSS, a real UTC date and time.
        case dateTime
        /// A compact JOSE serialisation with this many parts (3 JWS, 5 JWE).
        case jose(parts: Int)
        /// A P-256 public JWK object (kty EC, crv P-256, x, y).
        case ecPublicJWK
        /// `{acsInterface 01/02, acsUiTemplate 01–07}`.
        case renderingType
        /// A 3-digit counter 000–255.
        case counter
        /// Base64 of this many characters (a CAVV is 28).
        case base64(length: Int)
        case boolean
        case object
        case array

        /// Why `value` does not fit, or nil. `version` selects the enumeration values defined so far (nil: the latest's).
        func problem(_ value: JSON, version: MessageVersion?) -> String? {
            switch self {
            case .uuid:
                guard let s = value.stringValue else { return "expected a UUID string" }
                return Format.isUUID(s) ? nil : "'\(Format.short(s))' is not a 36-character UUID"
            case let .values(base, added):
                guard let s = value.stringValue else { return "expected a string" }
                let v = version ?? .v2_3
                let allowed = added.filter { MessageVersion(wire: $0.key) <= v }.reduce(base) { $0.union($1.value) }
                if allowed.contains(s) { return nil }
                if let later = Format.byVersion(added).first(where: { $0.value.contains(s) }) { return "'\(s)' is defined from \(later.key), not in \(v)" }
                return "'\(Format.short(s))' is not one of " + allowed.sorted().joined(separator: ", ")
            case let .numeric(lengths, atLeast):
                guard let s = value.stringValue else { return "expected a string of digits" }
                guard !s.isEmpty, s.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return "'\(Format.short(s))' is not numeric" }
                guard lengths.contains(s.count) else { return "\(s.count) digits, expected \(Format.range(lengths))" }
                if let atLeast, let n = Int(s), n < atLeast { return "\(n) is below the minimum \(atLeast)" }
                return nil
            case let .signedNumeric(lengths):
                guard let s = value.stringValue else { return "expected a string" }
                let digits = s.hasPrefix("-") || s.hasPrefix("+") ? String(s.dropFirst()) : s
                guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), lengths.contains(digits.count) else {
                    return "'\(Format.short(s))' is not a signed number of \(Format.range(lengths)) digits"
                }
                return nil
            case let .text(max):
                guard let s = value.stringValue else { return "expected a string" }
                if s.isEmpty { return "empty" }
                return s.count <= max ? nil : "\(s.count) characters, at most \(max) allowed"
            case .url:
                guard let s = value.stringValue else { return "expected a URL string" }
                guard s.count <= 2048, s.hasPrefix("https://") || s.hasPrefix("http://"), URL(string: s)?.host != nil else {
                    return "'\(Format.short(s))' is not an http(s) URL"
                }
                return nil
            case .cardNumber:
                // The check masking makes before it hides the value (its verdict is what `validate` reads then).
                return MaskedFormat.cardNumber.problem(value)
            case .yearMonth:
                guard let s = value.stringValue, s.count == 4, let m = Int(s.suffix(2)), Int(s.prefix(2)) != nil, (1...12).contains(m) else {
                    return "expected YYMM"
                }
                return nil
            case .dateTime:
                guard let s = value.stringValue, s.count == 14, s.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return "expected YYYYMMDDHHMMSS" }
                let f = DateFormatter()
                f.locale = Locale(identifier: "en_US_POSIX")
                f.timeZone = TimeZone(identifier: "UTC")
                f.dateFormat = "yyyyMMddHHmmss"
                f.isLenient = false
                return f.date(from: s) == nil ? "'\(s)' is not a date and time" : nil
            case let .jose(parts):
                guard let s = value.stringValue else { return "expected a compact JOSE string" }
                let p = s.split(separator: ".", omittingEmptySubsequences: false)
                guard p.count == parts else { return "\(p.count) dot-separated parts, expected \(parts) (\(parts == 3 ? "JWS" : "JWE"))" }
                guard let header = Base64URL.decode(p[0]), (try? JSON.parse(header))?.isObject == true else { return "the protected header is not base64url JSON" }
                return nil
            case .ecPublicJWK:
                guard value.isObject else { return "expected a JWK object" }
                guard value["kty"]?.stringValue == "EC", value["crv"]?.stringValue == "P-256" else { return "expected kty EC, crv P-256" }
                for c in ["x", "y"] where (value[c]?.stringValue).flatMap({ Base64URL.decode($0) })?.count != 32 {
                    return "'\(c)' is not 32 bytes of base64url"
                }
                return value["d"] == nil ? nil : "holds a private key ('d')"
            case .renderingType:
                guard value.isObject else { return "expected an object {acsInterface, acsUiTemplate}" }
                if let p = Format.values(["01", "02"]).problem(value[.acsInterface] ?? .null, version: version) { return "acsInterface: \(p)" }
                if let p = ValidationRules.uiType.problem(value[.acsUiTemplate] ?? .null, version: version) { return "acsUiTemplate: \(p)" }
                return nil
            case .counter:
                guard let s = value.stringValue else { return "expected a 3-digit string" }
                guard s.count == 3, let n = Int(s), (0...255).contains(n) else { return "'\(Format.short(s))' is not 000–255" }
                return nil
            case let .base64(length):
                return MaskedFormat.base64(length: length).problem(value)
            case .boolean:
                if case .bool = value { return nil }
                return "expected true or false"
            case .object: return value.isObject ? nil : "expected an object"
            case .array:
                if case .array = value { return nil }
                return "expected an array"
            }
        }

        /// What is worth a warning in a value that fits: a UUID of a version or variant RFC 4122 does not define (placeholders
        /// such as `12341234-1234-1234-1234-123412341234` and the nil UUID are the usual cause).
        func warning(_ value: JSON) -> String? {
            guard case .uuid = self, let s = value.stringValue, Format.isUUID(s) else { return nil }
            return Format.rfc4122Problem(s)
        }

        /// Why a well-shaped UUID is not one of RFC 4122's (versions 1–5, variant bits 10x), or nil.
        static func rfc4122Problem(_ s: String) -> String? {
            let u = Array(s.utf8)
            if u.allSatisfy({ $0 == UInt8(ascii: "0") || $0 == UInt8(ascii: "-") }) { return "the nil UUID (all zeros), a placeholder" }
            let version = u[14], variant = u[19] | 0x20 // lower-case hex
            if !(UInt8(ascii: "1")...UInt8(ascii: "5")).contains(version) {
                return "version \(Character(Unicode.Scalar(version))) is not one of RFC 4122's (1–5); a placeholder?"
            }
            if ![UInt8(ascii: "8"), UInt8(ascii: "9"), UInt8(ascii: "a"), UInt8(ascii: "b")].contains(variant) {
                return "variant digit \(Character(Unicode.Scalar(u[19]))) is not RFC 4122's (8, 9, a or b); a placeholder?"
            }
            return nil
        }

        static func isUUID(_ s: String) -> Bool {
            let u = Array(s.utf8)
            guard u.count == 36 else { return false }
            for (i, c) in u.enumerated() {
                if [8, 13, 18, 23].contains(i) { if c != UInt8(ascii: "-") { return false } } else if !c.isHexDigit { return false }
            }
            return true
        }

        static func short(_ s: String) -> String { s.count > 40 ? String(s.prefix(37)) + "…" : s }
        static func range(_ r: ClosedRange<Int>) -> String { r.lowerBound == r.upperBound ? "\(r.lowerBound)" : "\(r.lowerBound)–\(r.upperBound)" }
    }
}

/// What a rule needs to know about a message beyond its JSON.
struct MessageContext {
    var json: JSON
    var channel: DeviceChannel?
    var category: MessageCategory?
    /// The message's version (else its transaction's); nil when neither names one.
    var version: MessageVersion?

    /// The version the rules read: a message without one is read as the latest (2.3.1), as the rules always have.
    var versionOrLatest: MessageVersion { version ?? .v2_3 }
}

extension UInt8 {
    var isHexDigit: Bool { (self >= 48 && self <= 57) || (self >= 65 && self <= 70) || (self >= 97 && self <= 102) }
}

extension ElementRule.Format {
    /// The format as `validate --rules` lists it, in words: `one of 01, 02; from 2.2.0 also 03`, `UUID …`, `digits, 1–3
    /// long`. A `values` set and the versions of `added` are sorted (a Set's and a Dictionary's own order changes from run
    /// to run).
    public var listing: String {
        switch self {
        case .uuid: return "UUID (RFC 4122, 36 characters)"
        case let .values(base, added):
            let later = Self.byVersion(added).map { "from \($0.key) also " + $0.value.sorted().joined(separator: ", ") }
            return (["one of " + base.sorted().joined(separator: ", ")] + later).joined(separator: "; ")
        case let .numeric(lengths, atLeast): return "digits, \(Self.range(lengths)) long" + (atLeast.map { ", at least \($0)" } ?? "")
        case let .signedNumeric(lengths): return "digits with an optional sign, \(Self.range(lengths)) long"
        case let .text(max): return "text, 1–\(max) characters"
        case .url: return "http(s) URL, at most 2048 characters"
        case .cardNumber: return "13–19 digits (or masked: first 6, last 4)"
        case .yearMonth: return "YYMM"
        case .dateTime: return "YYYYMMDDHHMMSS, UTC"
        case let .jose(parts): return parts == 3 ? "compact JWS (3 parts)" : parts == 5 ? "compact JWE (5 parts)" : "compact JOSE (\(parts) parts)"
        case .ecPublicJWK: return "P-256 public JWK (kty EC, crv P-256, x, y)"
        case .renderingType: return "{acsInterface: one of 01, 02; acsUiTemplate: \(ValidationRules.uiType.listing)}"
        case .counter: return "counter, 3 digits, 000–255"
        case let .base64(length): return "base64, \(length) characters"
        case .boolean: return "true or false"
        case .object: return "JSON object"
        case .array: return "JSON array"
        }
    }

    /// `added`'s versions, oldest first.
    static func byVersion(_ added: [String: [String]]) -> [(key: String, value: [String])] {
        added.sorted { MessageVersion(wire: $0.key) < MessageVersion(wire: $1.key) }
    }
}
