import Foundation
import TapCore
import TapCrypto
import TapEMV
import TapJOSE
import TapNet
import TapReplay
import TapSandbox
import TapRecording
import TapStore

/// A recorded session's 3DS transactions made ready for `client-replay`: one script per transaction, with the URLs
/// rewritten (`--target`, `--map`), the masked card numbers and entries resolved, deviceData decrypted where a DS key
/// given opens it, and the recorded messages each live answer is compared with.
public struct ClientReplayPlan: Sendable {
    /// One recorded transaction.
    public struct Transaction: Sendable {
        /// 1-based, in the recording's order (as `show` and `diff` number them).
        public var number: Int
        public var script: ClientReplayScript
        /// The recorded 3DS messages of the transaction, in order (as stored: masked when the session is).
        public var recorded: [ClientReplayMessage]
        /// When the recorded AReq started (Unix seconds), for `--speed`.
        public var startedAt: Double
        /// Why this transaction cannot be re-sent (an entry still encrypted, a masked card without `--card`), or nil.
        public var unplayable: String?
    }

    public var path: String
    public var masked: Bool
    public var transactions: [Transaction]

    /// What the user tells the plan beyond the session.
    public struct Inputs: Sendable {
        /// Replaces the origin of the recorded DS (the host the first AReq went to).
        public var target: HTTPURL?
        /// Other recorded origins (`host:port`) and their live URL.
        public var map: [(host: String, url: HTTPURL)] = []
        /// Full card numbers for acctNumbers the recording masked (matched by first 6, last 4 and length).
        public var cards: [String] = []
        /// What replaces a masked challenge entry: per transaction number, and for any transaction (key 0).
        public var secrets: [Int: String] = [:]
        /// DS private keys that may open the recorded deviceData (3dstape's own: key substitution, the sandbox).
        public var deviceDataKeys: [(rsa: PrivateKey?, ec: PrivateKey?, directoryServerID: String)] = []
        public init() {}
    }

    /// Reads the session's transactions and prepares each (the ones in `only`, when it is not empty).
    public static func load(path: String, inputs: Inputs, only: Set<Int> = []) throws -> ClientReplayPlan {
        let catalog = try ReplayCatalog.load(path: path)
        let exchanges = catalog.exchanges
        let dsOrigin = catalog.flows.first.flatMap { ClientReplayPlan.origin(exchanges[$0.areq].url) }
        var out: [Transaction] = []
        let calls = ClientReplayCallPlan.assign(catalog)
        for (i, flow) in catalog.flows.enumerated() where only.isEmpty || only.contains(i + 1) {
            let areqExchange = exchanges[flow.areq]
            var unplayable: String?
            var dsURL = HTTPURL(areqExchange.url) ?? HTTPURL(tls: false, address: HostPort(host: "127.0.0.1", port: 0))
            if let live = liveURL(areqExchange.url, dsOrigin: dsOrigin, inputs: inputs) { dsURL = live } else {
                unplayable = "the recorded AReq URL \(Masking.maskText(areqExchange.url)) is not an http(s) URL"
            }
            var areq = flow.areqJSON
            var testCard: TestCard?
            if let pan = areq["acctNumber"]?.stringValue, !pan.allSatisfy(\.isNumber) {
                func fits(_ full: String) -> Bool { full.count == pan.count && full.prefix(6) == pan.prefix(6) && full.suffix(4) == pan.suffix(4) }
                if let full = inputs.cards.first(where: fits) {
                    areq = areq.setting("acctNumber", to: .string(full))
                } else if let card = TestCard.all.first(where: { fits($0.pan) }) {
                    // One of 3dstape's own test cards (public test PANs): the sandbox's sessions replay without --card.
                    areq = areq.setting("acctNumber", to: .string(card.pan))
                    testCard = card
                } else {
                    unplayable = unplayable ?? "the recording masked acctNumber (\(pan)); give --card with the full number"
                }
            } else if let pan = areq["acctNumber"]?.stringValue {
                testCard = TestCard.find(pan)
            }
            var script = ClientReplayScript(areq: areq, dsURL: dsURL)
            script.recordedIDs = Set(flow.ids.values)
            script.recordedIDsByName = flow.ids
            for (indices, before) in [(calls[i].before, true), (calls[i].after, false)] {
                for c in indices {
                    let (call, why) = ClientReplayCallPlan.call(exchanges[c], dsOrigin: dsOrigin, inputs: inputs)
                    if let call { if before { script.callsBefore.append(call) } else { script.callsAfter.append(call) } }
                    if let why { unplayable = unplayable ?? why }
                }
            }
            script.secret = inputs.secrets[i + 1] ?? inputs.secrets[0]
            script.expectsRReq = flow.rreq != nil
            if DeviceChannel(areq["deviceChannel"]) == .app {
                (script.deviceData, script.deviceDataNote) = deviceData(areq["sdkEncData"]?.stringValue, keys: inputs.deviceDataKeys)
            }
            var recorded: [ClientReplayMessage] = []
            var indices = [flow.areq] + flow.followUps
            if let r = flow.rreq { indices.append(r) }
            var creqSeen = false
            for x in indices.sorted().map({ exchanges[$0] }) {
                for m in x.messages {
                    guard let type = m.type else { continue }
                    recorded.append(ClientReplayMessage(type: type, json: m.json, encrypted: m.isEncrypted,
                                                        httpStatus: m.messageDirection == .response ? x.status : nil))
                }
                guard x.id != areqExchange.id else { continue }
                let request = x.messages.first { $0.messageDirection == .request }
                if request?.kind == .cReq, request?.messageLocation == .jwe {
                    guard request?.isDecrypted == true, let json = request?.json else {
                        unplayable = unplayable ?? "CReq #\(script.creqEntries.count + 1) is still encrypted in the recording "
                            + "(record with --decrypt substitute or a key log)"
                        continue
                    }
                    script.creqEntries.append((json.objectMembers ?? []).filter { !ClientReplayPlan.creqBase.contains($0.0) })
                    if script.creqEncryption == nil, let jwe = try? JWE(compact: x.requestBody),
                       let enc = jwe.header["enc"]?.stringValue.flatMap(ContentEncryption.init(rawValue:)) {
                        script.creqEncryption = enc
                    }
                } else if request?.kind == .cReq, request?.messageLocation == .form(field: "creq") {
                    script.browserCReq = request?.json
                    creqSeen = true
                } else if creqSeen, request == nil, x.method == "POST",
                          let form = FormBody.parse(String(decoding: x.requestBody, as: UTF8.self)) {
                    script.browserForms.append(form)
                }
            }
            if script.secret == nil, let testCard {
                script.secret = sandboxAnswer(testCard, recordedOutcome: ClientReplayRunner.outcome(recorded))
            }
            out.append(Transaction(number: i + 1, script: script, recorded: recorded, startedAt: areqExchange.requestStart, unplayable: unplayable))
        }
        for n in only where n < 1 || n > catalog.flows.count {
            throw SandboxError("--transaction \(n): the session holds \(catalog.flows.count) transactions (1 to \(catalog.flows.count))")
        }
        for n in inputs.secrets.keys where n != 0 && (n < 1 || n > catalog.flows.count) {
            throw SandboxError("--secret \(n)=…: the session holds \(catalog.flows.count) transactions (1 to \(catalog.flows.count))")
        }
        return ClientReplayPlan(path: path, masked: catalog.masked, transactions: out)
    }

    /// What the sandbox's cardholder types on a test card's challenge screen (its masked entries in a recording): the
    /// passing answer when the recording ended Y, a failing one otherwise, so that the recorded outcome is reproduced.
    static func sandboxAnswer(_ card: TestCard, recordedOutcome: String) -> String? {
        guard case let .challenge(uiType) = card.behaviour else { return nil }
        let pass = TransStatus(wire: recordedOutcome) == .authenticated
        switch uiType {
        case .text, .html: return pass ? TestCard.otp : "0000"
        case .singleSelect: return pass ? TestCard.singleSelectAnswer : "1"
        case .multiSelect: return pass ? TestCard.multiSelectAnswer : "2"
        default: return nil
        }
    }

    /// The members of a CReq that every round has (the rest are what the cardholder did).
    static let creqBase: Set<String> = ["threeDSServerTransID", "acsTransID", "messageType", "messageVersion", "sdkTransID", "sdkCounterStoA"]

    /// `scheme://host:port` of a URL (the port made explicit).
    static func origin(_ url: String) -> String? {
        guard let u = HTTPURL(url) else { return nil }
        return "\(u.tls ? "https" : "http")://\(u.address)"
    }

    /// A recorded URL as the live run sends it: the DS origin replaced by `--target`, a `--map`ped host by its URL.
    static func liveURL(_ url: String, dsOrigin: String?, inputs: Inputs) -> HTTPURL? {
        guard var u = HTTPURL(url) else { return nil }
        if let target = inputs.target, origin(url) == dsOrigin {
            let path = target.path == "/" ? u.path : target.path
            u = target
            u.path = path
        } else if let m = inputs.map.first(where: { $0.host == u.address.description || $0.host == u.address.host }) {
            let path = m.url.path == "/" ? u.path : m.url.path
            u = m.url
            u.path = path
        }
        return u
    }

    /// The recorded deviceData in clear, when one of the keys opens it; else nil and why.
    static func deviceData(_ compact: String?, keys: [(rsa: PrivateKey?, ec: PrivateKey?, directoryServerID: String)]) -> (JSON?, String) {
        guard let compact, let jwe = try? JWE(compact: compact) else { return (nil, "deviceData: the recording has no sdkEncData JWE; sent a minimal one") }
        for k in keys {
            if let plain = try? jwe.decryptDeviceData(rsaKey: k.rsa, ecKey: k.ec, directoryServerID: k.directoryServerID),
               let json = try? JSON.parse(plain), json.isObject {
                return (json, "")
            }
        }
        return (nil, "deviceData: the recorded sdkEncData does not open with this home's DS keys (another machine's sandbox, or a real DS); sent a minimal one")
    }
}

/// A 3DS message of a transaction, recorded or live, as the comparison sees it.
public struct ClientReplayMessage: Sendable {
    public var type: String
    /// `type` typed (nil for one the specification does not name).
    public var kind: MessageKind? { MessageKind(rawValue: type) }
    /// Nil when still encrypted (then compared as equal, as `diff` does).
    public var json: JSON?
    public var encrypted = false
    /// The HTTP status of the response that carried it (nil for a request): compared too, so the recorded body sent
    /// back with a 500 is not "as recorded".
    public var httpStatus: Int?

    public init(type: String, json: JSON?, encrypted: Bool = false, httpStatus: Int? = nil) {
        self.type = type
        self.json = json
        self.encrypted = encrypted
        self.httpStatus = httpStatus
    }
}
