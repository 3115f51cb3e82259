import Foundation
import TapCore
import TapCrypto
import TapEMV
import TapHTTP
import TapHTTPService
import TapJOSE
import TapRecording
import TapStore

extension ReplayEngine {
    // MARK: non-3DS exchanges

    func plain(_ req: LiveRequest) -> ReplayAnswer {
        // Compared as it would have been stored: masked like the recording (card numbers, codes, JWTs in the query).
        let (path, query) = ReplayURL.pathAndQuery(catalog.masked ? Masking.maskText(req.target) : req.target)
        let liveBody = catalog.masked ? ThreeDSContent.prepare(req.body, mask: true).stored : req.body
        var ranked: [(Int, [String])] = []
        for i in catalog.plain {
            let x = catalog.exchanges[i]
            let (rp, rq) = ReplayURL.pathAndQuery(x.url)
            var diff: [String] = []
            if x.method != req.method { diff.append("method: live \(req.method), recorded \(x.method)") }
            if rp != path { diff.append("path: live \(path), recorded \(rp)") }
            if rq != query { diff.append("query: live \(query.isEmpty ? "(none)" : query), recorded \(rq.isEmpty ? "(none)" : rq)") }
            diff += bodyDifferences(live: liveBody, recorded: x.requestBody)
            ranked.append((i, diff))
        }
        let equal = ranked.filter { $0.1.isEmpty }.map(\.0)
        if !equal.isEmpty {
            let key = "\(req.method) \(path)?\(query)#\(equal.first!)"
            let n = plainCursor[key, default: 0]
            var pick: Int?
            if n < equal.count { pick = equal[n] } else {
                switch options.repeatMode {
                case .last: pick = equal.last
                case .cycle: pick = equal[n % equal.count]
                case .miss: pick = nil
                }
            }
            if let i = pick {
                plainCursor[key] = n + 1
                let x = catalog.exchanges[i]
                let type = x.messages.first { $0.messageDirection == .response }?.type
                // path: and exchange: rules reach these answers too, at the transport and HTTP layers and, on a gateway's
                // calls, the gateway actions (the rule check refuses 3DS actions on them before the replay starts).
                let faults = faultsFor(i, type: type, nil)
                var rng = SeededRandom(seed: options.schedule.seed, stream: UInt64(bitPattern: x.id), index: UInt64(served[i]))
                // The live request's own IDs and URLs, where they differ from the recorded request's, are echoed in the answer.
                var echo: [(String, String)] = []
                if let a = ReplayEngine.decodedBody(liveBody), let b = ReplayEngine.decodedBody(x.requestBody) {
                    ReplayEngine.echoPairs(live: a, recorded: b, keys: ReplayEngine.freshFields.union(options.ignoreFields), into: &echo)
                }
                let lf = LiveFlow(flow: -1, map: echo, threeDSServerURL: nil)
                let json = (try? JSON.parse(x.responseBody)).flatMap { $0.isObject ? $0 : nil }
                let body = json.map { rewrite($0, lf, &rng).bytes }
                    ?? (echo.isEmpty ? x.responseBody : Array(rewriteText(String(decoding: x.responseBody, as: UTF8.self), lf, &rng,
                                                                          contentType: x.responseHeaders.first { $0.0.caseInsensitiveEquals("Content-Type") }?.1).utf8))
                var a = answer(i, body: body, type: type, nil, matchedBy: "method, path, query, body (occurrence \(n + 1) of \(equal.count))",
                               headers: ReplayEngine.replayableHeaders(x.responseHeaders), status: x.status ?? 502)
                // A gateway call's own answer first (recorded as applied only where it changed something), then transport.
                let unapplied = applyGateway(faults, to: &a, path: path)
                return applyTransport(faults.filter { !unapplied.contains($0) }, to: a)
            }
        }
        let closest = ranked.sorted { $0.1.count < $1.1.count }.prefix(3)
        let detail = closest.isEmpty ? "the session has no other exchanges"
            : closest.map { "exchange #\(catalog.exchanges[$0.0].id) differs in " + ($0.1.isEmpty ? "nothing but every recording was served (--repeat miss)" : $0.1.joined(separator: "; ")) }
                .joined(separator: " | ")
        return miss(req, detail: "no recorded exchange matches \(req.method) \(path): \(detail)", erroCode: nil, about: nil)
    }

    /// Fields that are fresh on every run and never decide a match: the transaction IDs and the requestor's own URLs
    /// (in JSON bodies and in the base64url JSON of form fields such as threeDSMethodData), and the gateways' own
    /// per-payment IDs and merchant JWTs (PXP's token, merchant transaction and authentication IDs; a Trust Payments
    /// request's HS256 JWT, which carries the time it was signed).
    static let freshFields: Set<String> = ["threeDSServerTransID", "dsTransID", "acsTransID", "sdkTransID", "threeDSMethodNotificationURL",
                                           "notificationURL", "threeDSServerURL", "gatewayTokenId", "merchantTransactionId", "authenticationId", "jwt"]

    /// The authentication result a gateway call carries from the live flow (PXP's threeDSecureData, a Trust Payments AUTH):
    /// a replay whose faults changed it (`challenge-completed-a`, `challenge-rejected`) still matches the recorded call.
    /// Ignored for matching only, never echoed into the answer (a `Y` is no ID to substitute).
    static let liveOutcomeFields: Set<String> = ["transStatus", "transStatusReason", "eci", "authenticationValue", "challengeCancel", "threedresponse"]

    /// Structural differences between two bodies: JSON (and forms, with base64url JSON values decoded) compared member by
    /// member, ignoring the fresh fields and `--ignore-field`; anything else compared as bytes.
    func bodyDifferences(live: [UInt8], recorded: [UInt8]) -> [String] {
        if live == recorded { return [] }
        if let a = ReplayEngine.decodedBody(live), let b = ReplayEngine.decodedBody(recorded) {
            var out: [String] = []
            ReplayEngine.jsonDiff(a, b, path: "body", ignore: options.ignoreFields.union(ReplayEngine.freshFields).union(ReplayEngine.liveOutcomeFields),
                                  into: &out)
            return out
        }
        if live.isEmpty && recorded.isEmpty { return [] }
        return ["body: \(live.count) bytes live, \(recorded.count) recorded, not equal"]
    }

    /// A body as JSON: a JSON body, or a form whose fields become members (base64url JSON values decoded).
    static func decodedBody(_ bytes: [UInt8]) -> JSON? {
        let first = bytes.firstNonWhitespace
        if first == UInt8(ascii: "{") || first == UInt8(ascii: "[") { return try? JSON.parse(bytes) }
        guard bytes.count < 1 << 20, bytes.contains(UInt8(ascii: "=")), let fields = FormBody.parse(String(decoding: bytes, as: UTF8.self)) else { return nil }
        return .object(fields.map { name, value in
            if value.count > 8, let b = Base64URL.decode(value), let j = try? JSON.parse(b), j.isObject { return (name, j) }
            return (name, .string(value))
        })
    }

    /// The (recorded, live) string pairs at the same place in two bodies, for the given member names.
    static func echoPairs(live: JSON, recorded: JSON, keys: Set<String>, into out: inout [(String, String)]) {
        guard let lm = live.objectMembers, recorded.isObject else { return }
        for (k, lv) in lm {
            guard let rv = recorded[k] else { continue }
            if keys.contains(k), let l = lv.stringValue, let r = rv.stringValue, l != r, !r.isEmpty, !out.contains(where: { $0.0 == r }) {
                out.append((r, l))
            } else if lv.isObject {
                echoPairs(live: lv, recorded: rv, keys: keys, into: &out)
            }
        }
    }

    static func jsonDiff(_ a: JSON, _ b: JSON, path: String, ignore: Set<String>, into out: inout [String]) {
        guard out.count < 8 else { return }
        if let am = a.objectMembers, let bm = b.objectMembers {
            let keys = (am.map(\.0) + bm.map(\.0).filter { k in !am.contains { $0.0 == k } })
            for k in keys where !ignore.contains(k) {
                let av = a[k], bv = b[k]
                switch (av, bv) {
                case let (x?, y?): jsonDiff(x, y, path: path + "." + k, ignore: ignore, into: &out)
                case (nil, _): out.append("\(path).\(k): missing live")
                case (_, nil): out.append("\(path).\(k): not recorded")
                }
            }
            return
        }
        if case let .array(ax) = a, case let .array(bx) = b {
            if ax.count != bx.count { out.append("\(path): \(ax.count) items live, \(bx.count) recorded"); return }
            for (n, (x, y)) in zip(ax, bx).enumerated() { jsonDiff(x, y, path: "\(path)[\(n)]", ignore: ignore, into: &out) }
            return
        }
        if a != b { out.append("\(path): live \(a.compact.prefix(40)), recorded \(b.compact.prefix(40))") }
    }
}
