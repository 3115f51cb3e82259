import Foundation
import TapCore
import TapCrypto
import TapEMV
import TapHTTP
import TapHTTPService
import TapJOSE
import TapStore

/// What the replayer answers when nothing recorded matches a live request.
public enum MissAnswer: Sendable, Equatable {
    /// 404 with a JSON body naming the closest recorded exchanges and the fields that differed.
    case notFound
    /// The Erro a DS or ACS would send (305 for an AReq, 301 for a message of an unknown transaction), same detail.
    case erro
    /// Forward the request to this base URL; the new exchange is recorded (VCR's new_episodes).
    case forward(String)
}

/// What to do when identical requests outnumber their recordings.
public enum RepeatMode: String, Sendable, CaseIterable {
    /// Serve the last recording again.
    case last
    /// Start again from the first.
    case cycle
    /// Treat as a miss.
    case miss
}

/// Everything that shapes a replay besides the session.
public struct ReplayOptions: Sendable {
    public var schedule = ReplaySchedule()
    public var onMiss: MissAnswer = .notFound
    public var repeatMode: RepeatMode = .last
    /// Fields ignored when comparing JSON bodies of non-3DS requests.
    public var ignoreFields: Set<String> = []
    /// The replayer's address as written into acsURL and similar fields for clients pointed at it directly.
    public var publicURL: String?
    /// Faults injected into matching answers (`--fault`, `--faults`, `--scenario`).
    public var faults: [FaultRule] = []
    /// The HS256 secret Trust Payments-style answers are signed again with when a fault changes them (`--jwt-secret`;
    /// by default the sandbox's documented test secret).
    public var jwtSecret = "3dstape-sandbox-gateway-secret"
    public init() {}
}

/// The certificate the replayer signs acsSignedContent with, as the ACS (chained to the test DS root the client trusts).
public struct ReplayACSIdentity: Sendable {
    public let key: PrivateKey
    public let certificate: Certificate
    public let signing: SignatureAlgorithm
    /// The encoded protected header (alg and the certificate's x5c), made once.
    let protectedHeader: String
    public init(key: PrivateKey, certificate: Certificate, signing: SignatureAlgorithm) {
        self.key = key
        self.certificate = certificate
        self.signing = signing
        protectedHeader = ACSSignedContent.protectedHeader(certificate: certificate, algorithm: signing)
    }
}

/// A live request as the engine sees it.
public struct LiveRequest: Sendable {
    public var method: String
    /// As received: absolute-form from a proxy client (or inside an intercepted tunnel), origin-form from a direct client.
    public var target: String
    public var headers: [(String, String)]
    public var body: [UInt8]
    public init(method: String, target: String, headers: [(String, String)] = [], body: [UInt8]) {
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
    }
    /// True when the client uses the replayer as a proxy.
    public var viaProxy: Bool { ReplayURL.schemeEnd(Array(target.utf8)) != nil }
}

/// An RReq the replayer sends as the ACS, after the answer that completes the challenge.
public struct PlannedRReq: Sendable {
    public var url: String
    public var body: [UInt8]
    /// Seconds after the triggering answer is sent.
    public var after: Double
    public var recordedExchangeID: Int64
    /// The live transaction's threeDSServerTransID, which the RReq carries (the transaction ends when it is answered).
    public var threeDSServerTransID: String
}

/// What the replayer does with a live request.
public enum ReplayAction: Sendable, Equatable {
    /// Send the answer (status, headers, body) once its delay has passed.
    case answer
    /// Forward the live request to this absolute URL instead of answering (a live endpoint, or `--on-miss forward:`).
    case forward(to: String)
    /// A transport fault instead of (or while) answering.
    case fault(ReplayTransportFault)
}

/// A failure at the TCP or HTTP layer instead of (or while) sending an answer (`--fault`): the replay stage applies it to
/// the connection the server hands over (`Replayer.deliver`).
public enum ReplayTransportFault: Sendable, Equatable {
    /// Never answer (the connection stays open until the client gives up).
    case hang
    /// Close the connection without answering.
    case close
    /// Close with a TCP reset.
    case reset
    /// Send these bytes instead of the answer (a truncated or malformed answer), then close.
    case raw([UInt8])
    /// Send the answer's bytes spread over this many seconds, in small pieces.
    case dribble(Double)
}

/// The engine's decision for one live request.
public struct ReplayAnswer: Sendable {
    /// The answer's status (meaningless for a forward).
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]
    public var recordedExchangeID: Int64?
    public var matchedBy: String?
    /// Why nothing matched (closest exchanges and differing fields).
    public var miss: String?
    /// Seconds to wait before the first byte.
    public var delay: Double
    public var rreq: PlannedRReq?
    /// Answer, forward, or a transport fault.
    public var action: ReplayAction = .answer
    /// The app-channel CReq as the engine opened it and the CRes as it sealed it (so the writer does not decrypt them again).
    public var requestPlaintext: JSON? = nil
    public var responsePlaintext: JSON? = nil
    /// The faults applied to this answer (and to the RReq it triggers), as written on the command line.
    public var faults: [String] = []
    /// The client's own closing traffic after a fault or the end of its transaction (an SDK's Erro, a challengeCancel CReq
    /// after it), answered as an ACS would: expected of a conformant client, counted apart from answers and misses.
    public var closing = false
    /// The live threeDSServerTransID whose RReq a `drop-rreq` fault dropped with this answer (the session notes it).
    public var rreqDropped: String? = nil

    /// A forward of the live request to `url` (no answer of the replayer's own).
    static func forward(to url: String, matchedBy: String? = nil, miss: String? = nil) -> ReplayAnswer {
        ReplayAnswer(status: 0, headers: [], body: [], matchedBy: matchedBy, miss: miss, delay: 0, action: .forward(to: url))
    }

    /// Sets a transport fault; a hang stays a hang (nothing is sent whatever else was asked).
    mutating func setFault(_ fault: ReplayTransportFault) {
        if action == .fault(.hang) { return }
        action = .fault(fault)
    }
}

/// A replay problem with a message for the user.
public struct ReplayError: Error, CustomStringConvertible {
    public let description: String
    public init(_ d: String) { description = d }
}
