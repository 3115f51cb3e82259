import Foundation
import TapCore
import TapCrypto
import TapEMV
import TapHTTP
import TapHTTPService
import TapJOSE
import TapNet

/// A recorded exchange of a transaction that is no 3DS message of its own (a gateway API call such as PXP's tokens,
/// pre-initiate and transactions or a Trust Payments JWT request, a 3DS Method post), re-sent in its place with the
/// live IDs substituted.
public struct ClientReplayCall: Sendable {
    public var method: String
    /// Where it goes now (`--target` / `--map` applied).
    public var url: HTTPURL
    /// The recorded path, for the comparison's labels (`POST /pxp/tokens`).
    public var label: String
    public var contentType: String?
    /// The recorded request body (masked card numbers already resolved with `--card`).
    public var body: [UInt8]
    public var recordedStatus: Int?
    public var recordedResponse: [UInt8]

    public init(method: String, url: HTTPURL, label: String, contentType: String?, body: [UInt8], recordedStatus: Int?, recordedResponse: [UInt8]) {
        self.method = method
        self.url = url
        self.label = label
        self.contentType = contentType
        self.body = body
        self.recordedStatus = recordedStatus
        self.recordedResponse = recordedResponse
    }
}

/// What the live run learned about IDs: each recorded ID (threeDSServerTransID, acsTransID, a gateway's token or
/// transaction reference) and the value the live servers gave in its place, learned from the answers as they come.
public struct ClientReplayIDMap: Sendable {
    public private(set) var live: [String: String] = [:]
    public init() {}

    public mutating func learn(recorded: String?, live value: String?) {
        guard let recorded, let value, !recorded.isEmpty, recorded != value else { return }
        live[recorded] = value
    }

    /// Learns every pair of differing fresh-looking strings at the same place in a recorded and a live answer.
    public mutating func learn(recorded: JSON, live value: JSON) {
        switch (recorded, value) {
        case let (.object(a), .object(b)):
            for (k, v) in a { if let w = b.first(where: { $0.0 == k })?.1 { learn(recorded: v, live: w) } }
        case let (.array(a), .array(b)):
            for (v, w) in zip(a, b) { learn(recorded: v, live: w) }
        case let (.string(a), .string(b)) where ClientReplayIDMap.looksFresh(a, b):
            learn(recorded: a, live: b)
        default: break
        }
    }

    /// Two values that are the same kind of generated ID (a UUID, a token, a reference such as `3-9-676a49c5`): six
    /// characters or more, one with a digit, the same length, the separators at the same places, all else letters and
    /// digits. A status, a code of another length or a text never is.
    static func looksFresh(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count >= 6, x.count == y.count, x.count <= 512, x.contains(where: isDigit) || y.contains(where: isDigit) else { return false }
        for (c, d) in zip(x, y) {
            let cs = separators.contains(c), ds = separators.contains(d)
            if cs != ds || (cs && c != d) { return false }
            if !cs && !(isAlnum(c) && isAlnum(d)) { return false }
        }
        return true
    }

    /// A UUID in its 8-4-4-4-12 hex form.
    static func isUUID(_ s: String) -> Bool {
        let b = Array(s.utf8)
        guard b.count == 36 else { return false }
        for (i, c) in b.enumerated() {
            if [8, 13, 18, 23].contains(i) { if c != UInt8(ascii: "-") { return false } } else if !(isDigit(c) || (c | 0x20 >= 0x61 && c | 0x20 <= 0x66)) {
                return false
            }
        }
        return true
    }

    static let separators: Set<UInt8> = Set("-_:.".utf8)
    static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
    static func isAlnum(_ c: UInt8) -> Bool { isDigit(c) || (c | 0x20 >= 0x61 && c | 0x20 <= 0x7A) }

    /// `json` with every recorded ID the map knows replaced by its live value (whole strings only).
    public func substituted(_ json: JSON) -> JSON {
        switch json {
        case .object(let m): return .object(m.map { ($0.0, substituted($0.1)) })
        case .array(let a): return .array(a.map(substituted))
        case .string(let s): return .string(live[s] ?? s)
        default: return json
        }
    }
}

/// How a non-3DS call's body is read for substitution and comparison: a JSON body whose HS256/JWS string members are
/// opened to their payload, or a form whose base64url JSON fields (threeDSMethodData) are opened.
public enum ClientReplayCallBody {
    /// The body as the comparison sees it (nil: neither JSON nor a form; compared by status only).
    public static func comparable(_ bytes: [UInt8]) -> JSON? {
        let first = bytes.first { !($0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09) }
        if first == UInt8(ascii: "{") || first == UInt8(ascii: "[") { return (try? JSON.parse(bytes)).map(openJWTs) }
        guard bytes.count < 1 << 20, bytes.contains(UInt8(ascii: "=")), let fields = FormBody.parse(String(decoding: bytes, as: UTF8.self)) else { return nil }
        return .object(fields.map { name, value in
            if value.count > 8, let b = Base64URL.decode(value), let j = try? JSON.parse(b), j.isObject { return (name, j) }
            return (name, .string(value))
        })
    }

    /// Members a JWT's payload carries that are fresh on every run (when it was signed).
    public static let jwtTimes: Set<String> = ["iat", "exp", "nbf", "jti"]

    /// Every string member that is a compact JWS with a JSON payload, replaced by that payload.
    static func openJWTs(_ json: JSON) -> JSON {
        switch json {
        case .object(let m): return .object(m.map { ($0.0, openJWTs($0.1)) })
        case .array(let a): return .array(a.map(openJWTs))
        case .string(let s):
            guard s.utf8.count > 20, s.hasPrefix("eyJ"), let jws = try? JWS(compact: s), let p = jws.payloadJSON, p.isObject else { return json }
            return openJWTs(p)
        default: return json
        }
    }
}

extension ClientReplayer {
    /// The live value of a recorded URL the 3DS Server owns (a 3DS Method notification): this replayer's listener.
    static let listenerFields: [EMVField: String] = [.threeDSMethodNotificationURL: "/3ds/method", .notificationURL: "/3ds/notify",
                                                     .threeDSServerURL: "/3ds/rreq"]

    /// Sends recorded non-3DS calls in order, with the IDs learned so far substituted (and JWTs re-signed with
    /// `--jwt-secret`), and learns the IDs each answer gives in place of the recorded ones (into `run.ids`).
    func send(_ calls: [ClientReplayCall], _ run: inout ClientReplayRun) throws {
        for call in calls {
            let body = live(call.body, &run)
            let headers = call.contentType.map { [("Content-Type", $0)] } ?? []
            var x = ClientReplayExchange(method: call.method, url: call.url.description, requestHeaders: headers, requestBody: body, request: nil,
                                         started: Date().timeIntervalSince1970)
            x.call = call
            do {
                let r = try http.send(call.method, call.url, headers: headers, body: body)
                x.status = r.head.status
                x.responseHeaders = r.head.headers.fields.map { ($0.name, $0.value) }
                x.responseBody = r.body
                x.done = Date().timeIntervalSince1970
                run.exchanges.append(x)
            } catch {
                x.error = error.message
                x.done = Date().timeIntervalSince1970
                run.exchanges.append(x)
                throw Stop(message: "\(call.label): \(error.message)")
            }
            if let recorded = ClientReplayCallBody.comparable(call.recordedResponse), let answer = ClientReplayCallBody.comparable(x.responseBody) {
                run.ids.learn(recorded: recorded, live: answer)
            }
        }
    }

    /// A recorded call's body as sent now: JSON members and base64url JSON form fields with the live IDs and this
    /// replayer's URLs; a JWT's payload substituted and signed again with the `--jwt-secret` (else sent as recorded).
    func live(_ body: [UInt8], _ run: inout ClientReplayRun) -> [UInt8] {
        let first = body.first { !($0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09) }
        if first == UInt8(ascii: "{") || first == UInt8(ascii: "["), let json = try? JSON.parse(body) {
            return rewrite(json, &run).bytes
        }
        if body.contains(UInt8(ascii: "=")), body.count < 1 << 20, let fields = FormBody.parse(String(decoding: body, as: UTF8.self)) {
            return FormBody.encode(fields.map { name, value in
                if value.count > 8, let b = Base64URL.decode(value), let j = try? JSON.parse(b), j.isObject {
                    return (name, Base64URL.encode(rewrite(j, &run).bytes))
                }
                return (name, run.ids.live[value] ?? value)
            })
        }
        return body
    }

    func rewrite(_ json: JSON, _ run: inout ClientReplayRun) -> JSON {
        switch json {
        case .object(let m):
            return .object(m.map { k, v in
                if let path = EMVField(rawValue: k).flatMap({ Self.listenerFields[$0] }), v.stringValue != nil { return (k, .string(listenerURL + path)) }
                return (k, rewrite(v, &run))
            })
        case .array(let a): return .array(a.map { rewrite($0, &run) })
        case .string(let s):
            if let l = run.ids.live[s] { return .string(l) }
            if ClientReplayIDMap.isUUID(s) { // an ID the client made (a merchant transaction ID): a fresh one, the same all through the run
                let fresh = Digest.randomUUID()
                run.ids.learn(recorded: s, live: fresh)
                return .string(fresh)
            }
            guard s.utf8.count > 20, s.hasPrefix("eyJ"), let jws = try? JWS(compact: s), jws.algorithm == "HS256" else { return json }
            guard let secret = options.jwtSecret else {
                if !run.notes.contains(Self.jwtNote) { run.notes.append(Self.jwtNote) }
                return json
            }
            guard let payload = jws.payloadJSON, payload.isObject else { return json }
            var fresh = rewrite(payload, &run)
            if fresh["iat"]?.numberValue != nil { fresh = fresh.setting("iat", to: .number(String(Int(Date().timeIntervalSince1970)))) }
            let extra = (jws.header.objectMembers ?? []).filter { $0.0 != "alg" }
            return (try? JWS.signHS256(payload: fresh.bytes, secret: secret, extraHeader: extra)).map { .string($0.compact) } ?? json
        default: return json
        }
    }

    static let jwtNote = "an HS256 JWT was re-sent as recorded (its IDs and time unchanged); give --jwt-secret to sign it again"
}
