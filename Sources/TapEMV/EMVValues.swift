import TapCore

/// An EMV 3DS code element read from the wire (a version, a device channel, a transStatus …): the string exactly as it
/// came, with the values the specification defines as named constants. Parsing never fails on an unknown value: a 3DS
/// tool shows what it got, and `isKnown` says whether the specification defines it.
public protocol EMVCode: Hashable, Sendable, CustomStringConvertible {
    /// The value as it is written on the wire.
    var wire: String { get }
    /// Takes any wire string, known or not.
    init(wire: String)
    /// The values the specification defines (all versions 3dstape speaks).
    static var known: [Self] { get }
}

extension EMVCode {
    public var description: String { wire }
    /// Whether the specification defines this value.
    public var isKnown: Bool { Self.known.contains(self) }
    /// The value as a JSON string, for a message being built.
    public var json: JSON { .string(wire) }

    /// The checked parser for a member of a message: nil when the member is absent or not a JSON string; any string,
    /// known or not, is kept.
    public init?(_ member: JSON?) {
        guard let s = member?.stringValue else { return nil }
        self.init(wire: s)
    }
}

/// `messageVersion`, ordered by its numbers (2.1.0 < 2.2.0 < 2.3.1 < 2.10.0), so a rule reads `version >= .v2_2`.
/// A version that is not dotted decimal numbers is kept as it came and sorts before every numbered one.
public struct MessageVersion: EMVCode, Comparable {
    public let wire: String
    /// The dotted numbers, or nil when the wire string is not made of them.
    public let numbers: [Int]?

    public init(wire: String) {
        self.wire = wire
        let parts = wire.split(separator: ".", omittingEmptySubsequences: false)
        let numbers = parts.compactMap { p -> Int? in
            guard !p.isEmpty, p.count <= 6, p.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
            return Int(p)
        }
        self.numbers = numbers.count == parts.count ? numbers : nil
    }

    public static let v2_1 = MessageVersion(wire: "2.1.0")
    public static let v2_2 = MessageVersion(wire: "2.2.0")
    public static let v2_3 = MessageVersion(wire: "2.3.1")
    /// The versions 3dstape speaks, oldest first.
    public static let known: [MessageVersion] = [.v2_1, .v2_2, .v2_3]

    public static func < (a: MessageVersion, b: MessageVersion) -> Bool {
        switch (a.numbers, b.numbers) {
        case let (x?, y?): return x == y ? a.wire < b.wire : x.lexicographicallyPrecedes(y)
        case (nil, _?): return true
        case (_?, nil): return false
        case (nil, nil): return a.wire < b.wire
        }
    }
}

/// `deviceChannel`: app-based (01), browser-based (02), 3DS Requestor Initiated (03).
public struct DeviceChannel: EMVCode {
    public let wire: String
    public init(wire: String) { self.wire = wire }
    public static let app = DeviceChannel(wire: "01")
    public static let browser = DeviceChannel(wire: "02")
    public static let requestorInitiated = DeviceChannel(wire: "03")
    public static let known: [DeviceChannel] = [.app, .browser, .requestorInitiated]

    /// The channel in a word, as a diagram's transaction note names it (app, browser, 3RI); nil for a value the
    /// specification does not define.
    public var shortName: String? {
        switch self {
        case .app: "app"
        case .browser: "browser"
        case .requestorInitiated: "3RI"
        default: nil
        }
    }
}

/// `acsUiType` of a challenge CRes, the template of `acsRenderingType` (01–05; 06 and 07 from 2.3.1).
public struct ACSUIType: EMVCode {
    public let wire: String
    public init(wire: String) { self.wire = wire }
    public static let text = ACSUIType(wire: "01")
    public static let singleSelect = ACSUIType(wire: "02")
    public static let multiSelect = ACSUIType(wire: "03")
    public static let oob = ACSUIType(wire: "04")
    public static let html = ACSUIType(wire: "05")
    public static let htmlOOB = ACSUIType(wire: "06")
    public static let information = ACSUIType(wire: "07")
    public static let known: [ACSUIType] = [.text, .singleSelect, .multiSelect, .oob, .html, .htmlOOB, .information]

    /// `acsInterface` of `acsRenderingType` for this template: 02 HTML for the HTML templates, 01 native for the others.
    public var acsInterface: String { self == .html || self == .htmlOOB ? "02" : "01" }
}

/// `challengeCancel` of a CReq or an RReq: why the challenge ended before it completed (SPEC Table A.1; 03 from 2.2.0,
/// 09 and 10 from 2.3.1).
public struct ChallengeCancel: EMVCode {
    public let wire: String
    public init(wire: String) { self.wire = wire }
    /// The cardholder selected Cancel.
    public static let cardholderCancelled = ChallengeCancel(wire: "01")
    /// Decoupled authentication timed out.
    public static let decoupledTimeout = ChallengeCancel(wire: "03")
    /// The ACS timed out (other timeouts).
    public static let acsTimeout = ChallengeCancel(wire: "04")
    /// The ACS timed out: the first CReq was not received.
    public static let firstCReqNotReceived = ChallengeCancel(wire: "05")
    /// Transaction error.
    public static let transactionError = ChallengeCancel(wire: "06")
    /// Unknown.
    public static let unknown = ChallengeCancel(wire: "07")
    /// The SDK timed out.
    public static let sdkTimeout = ChallengeCancel(wire: "08")
    /// An Erro after a CRes (09) or a CReq (10).
    public static let erroAfterCRes = ChallengeCancel(wire: "09")
    public static let erroAfterCReq = ChallengeCancel(wire: "10")
    public static let known: [ChallengeCancel] = [.cardholderCancelled, .decoupledTimeout, .acsTimeout, .firstCReqNotReceived,
                                                  .transactionError, .unknown, .sdkTimeout, .erroAfterCRes, .erroAfterCReq]
}

/// `messageCategory`: payment authentication (01) or non-payment authentication (02).
public struct MessageCategory: EMVCode {
    public let wire: String
    public init(wire: String) { self.wire = wire }
    public static let payment = MessageCategory(wire: "01")
    public static let nonPayment = MessageCategory(wire: "02")
    public static let known: [MessageCategory] = [.payment, .nonPayment]
}

/// `transStatus` of an ARes, CRes or RReq (SPEC Table A.1; D and I from 2.2.0, S from 2.3.1).
public struct TransStatus: EMVCode {
    public let wire: String
    public init(wire: String) { self.wire = wire }
    /// Authenticated.
    public static let authenticated = TransStatus(wire: "Y")
    /// Not authenticated.
    public static let notAuthenticated = TransStatus(wire: "N")
    /// Authentication could not be performed.
    public static let couldNotPerform = TransStatus(wire: "U")
    /// Attempts processing performed.
    public static let attempted = TransStatus(wire: "A")
    /// Challenge required.
    public static let challenge = TransStatus(wire: "C")
    /// Rejected.
    public static let rejected = TransStatus(wire: "R")
    /// Decoupled authentication confirmed.
    public static let decoupled = TransStatus(wire: "D")
    /// Informational only.
    public static let informational = TransStatus(wire: "I")
    /// Challenge using SPC.
    public static let spcChallenge = TransStatus(wire: "S")
    public static let known: [TransStatus] = [.authenticated, .notAuthenticated, .couldNotPerform, .attempted, .challenge, .rejected,
                                              .decoupled, .informational, .spcChallenge]

    /// Y or A: the statuses that carry an authentication value (the CAVV) and that a gateway authorises after.
    public var isAuthentication: Bool { self == .authenticated || self == .attempted }
    /// N or R: the ACS did not authenticate the cardholder, or rejected the transaction.
    public var isRefusal: Bool { self == .notAuthenticated || self == .rejected }
}

/// A Y/N indicator of the specification: `challengeCompletionInd`, `resendChallenge`, `challengeNoEntry` …
public struct YesNoIndicator: EMVCode {
    public let wire: String
    public init(wire: String) { self.wire = wire }
    public static let yes = YesNoIndicator(wire: "Y")
    public static let no = YesNoIndicator(wire: "N")
    public static let known: [YesNoIndicator] = [.yes, .no]
}

/// `oobContinue` of a CReq from 2.3.1 (in 2.1.0 and 2.2.0 the member is the JSON value true).
public struct OOBContinue: EMVCode {
    public let wire: String
    public init(wire: String) { self.wire = wire }
    /// The cardholder selected the continue button.
    public static let clicked = OOBContinue(wire: "01")
    /// The app continued by itself (the OOB app returned).
    public static let automatic = OOBContinue(wire: "02")
    public static let known: [OOBContinue] = [.clicked, .automatic]

    /// Whether a CReq's `oobContinue` member says the cardholder went on: true (2.1.0, 2.2.0) or a 2.3.1 code.
    public static func continues(_ member: JSON?) -> Bool {
        if case .bool(true)? = member { return true }
        return OOBContinue(member).map { $0 == .clicked || $0 == .automatic } ?? false
    }
}

/// `infoContinueIndicator` of a CReq (2.3.1, the information template): 01, the cardholder selected continue.
public struct InfoContinueIndicator: EMVCode {
    public let wire: String
    public init(wire: String) { self.wire = wire }
    public static let continued = InfoContinueIndicator(wire: "01")
    public static let known: [InfoContinueIndicator] = [.continued]
}

/// The four transaction identifiers a 3DS message can carry, named as on the wire, in the order messages carry them.
public enum TransactionIDField: String, Sendable, CaseIterable {
    case threeDSServerTransID, dsTransID, acsTransID, sdkTransID
}

/// A transaction identifier as it came (3dstape keeps a malformed one to show it); `isWellFormed` checks the
/// specification's 36-character canonical UUID form.
public struct TransactionID: Hashable, Sendable, CustomStringConvertible {
    public let wire: String
    public init(wire: String) { self.wire = wire }
    public var description: String { wire }

    /// The checked parser for a member of a message: nil when absent or not a JSON string.
    public init?(_ member: JSON?) {
        guard let s = member?.stringValue else { return nil }
        wire = s
    }

    /// 8-4-4-4-12 hexadecimal digits (either case), as SPEC Table A.1 defines a transaction ID.
    public var isWellFormed: Bool {
        let u = Array(wire.utf8)
        guard u.count == 36 else { return false }
        for (i, c) in u.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != UInt8(ascii: "-") { return false }
            } else if !((c >= 48 && c <= 57) || (c | 0x20 >= 97 && c | 0x20 <= 102)) {
                return false
            }
        }
        return true
    }
}

/// Where in an exchange a 3DS message was found, as session files store it: the JSON body (`body`), an app-channel
/// JWE (`jwe`), or a browser form field (`form:creq`, `form:cres`, `form:threeDSMethodData` …).
public enum MessageLocation: Hashable, Sendable, CustomStringConvertible {
    case body
    case jwe
    /// A field of an HTML form (application/x-www-form-urlencoded), named as on the wire.
    case form(field: String)
    /// A stored value this version does not write, kept as it came.
    case other(String)

    /// The checked parser for a stored location: any string, known or not, is kept.
    public init(stored: String) {
        switch stored {
        case "body": self = .body
        case "jwe": self = .jwe
        default:
            if stored.hasPrefix("form:") { self = .form(field: String(stored.dropFirst(5))) } else { self = .other(stored) }
        }
    }

    /// The location as session files store it.
    public var stored: String {
        switch self {
        case .body: "body"
        case .jwe: "jwe"
        case let .form(field): "form:" + field
        case let .other(s): s
        }
    }

    public var description: String { stored }
    /// Whether the message came in a browser form field.
    public var isForm: Bool { if case .form = self { true } else { false } }
}

/// Which way a message went in an exchange: the request, or the response to it (as session files store it).
public enum MessageDirection: String, Sendable, CaseIterable {
    case request, response
}

extension MessageKind {
    /// The checked parser for `messageType` as the specification spells it (the UL harness names are not mapped here:
    /// `init?(messageType:)` does that); nil for any other value, which the caller still holds as a string.
    public init?(_ member: JSON?) {
        guard let s = member?.stringValue, let k = MessageKind(rawValue: s) else { return nil }
        self = k
    }
}

extension JSON {
    /// This message's `messageType`, as the specification spells it; nil when absent or unknown.
    public var messageKind: MessageKind? { MessageKind(self[.messageType]) }
    /// This message's `messageVersion`; nil when absent or not a string.
    public var messageVersion: MessageVersion? { MessageVersion(self[.messageVersion]) }
    /// This message's `transStatus`; nil when absent or not a string.
    public var transStatus: TransStatus? { TransStatus(self[.transStatus]) }
    /// Whether this message's `challengeCompletionInd` is Y: a CRes that ends the challenge.
    public var completesChallenge: Bool { YesNoIndicator(self[.challengeCompletionInd]) == .yes }
}
