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
    // MARK: faults

    /// The fault rules that hit this answer, their probabilities drawn from the seed (per rule, recorded exchange and
    /// occurrence, so that the same seed hits the same answers whatever the order of arrival).
    func faultsFor(_ i: Int, type: String?, _ lf: LiveFlow?) -> [FaultAction] {
        guard !options.faults.isEmpty else { return [] }
        let x = catalog.exchanges[i]
        let occurrence = type.map { t in (lf?.typeCounts[t] ?? 0) + 1 } ?? 1
        let a = ScheduledAnswer(recordedExchangeID: x.id, recordedWait: 0, messageType: type, occurrence: occurrence,
                                path: ReplayURL.pathAndQuery(x.url).path, servedBefore: served[i])
        return options.faults.enumerated().filter { n, rule in
            guard rule.match.applies(to: a) else { return false }
            guard rule.probability < 1 else { return true }
            var rng = SeededRandom(seed: options.schedule.seed ^ 0xFA17, stream: UInt64(bitPattern: x.id) &+ UInt64(n) &* 0x9E37, index: UInt64(served[i]))
            return rng.nextUnit() < rule.probability
        }.map(\.1.action)
    }

    /// Applies the transport and HTTP faults to an answer and lists every fault applied.
    func applyTransport(_ faults: [FaultAction], to answer: ReplayAnswer) -> ReplayAnswer {
        guard !faults.isEmpty else { return answer }
        var a = answer
        a.faults = faults.map(\.description) + a.faults
        for f in faults {
            switch f {
            case .hang: a.setFault(.hang)
            case .reset: a.setFault(.reset)
            case .close: a.setFault(.close)
            case let .dribble(d): a.setFault(.dribble(d))
            case let .delay(d): a.delay = d
            case let .status(code):
                a.status = code
                a.headers = [("Content-Type", "application/json")]
                a.body = JSON.object([("error", .string(HTTPResponseHead.reasonPhrase(code))),
                                      ("detail", .string("fault injected by 3dstape replay (status:\(code))"))]).bytes
                a.responsePlaintext = nil
            case let .truncate(n):
                a.setFault(.raw(Array(HTTPReply(status: a.status, headers: a.headers, body: a.body).bytes(keepAlive: false).prefix(n))))
            case .malformed:
                a.setFault(.raw(Array("HTTP/1.1 2OO 0K\r\nContent-Length: x\r\n\r\n".utf8) + a.body.prefix(16)))
            default: break // 3DS faults are applied where the message is built
            }
        }
        return a
    }

    /// The errorDescription an EMV component writes for a code (SPEC Table A.4).
    static func erroDescription(_ code: String) -> String {
        switch code {
        case "101": return "Message received invalid"
        case "102": return "Message version number not supported"
        case "103": return "Sent messages limit exceeded"
        case "201": return "Required data element missing"
        case "202": return "Critical message extension not recognised"
        case "203": return "Format of one or more data elements is invalid"
        case "204": return "Duplicate data element"
        case "301": return "Transaction ID not recognised"
        case "302": return "Data decryption failure"
        case "303": return "Access denied, invalid endpoint"
        case "304": return "ISO code invalid"
        case "305": return "Transaction data not valid"
        case "306": return "Merchant category code (MCC) not valid for payment system"
        case "307": return "Serial number not valid"
        case "402": return "Transaction timed out"
        case "403": return "Transient system failure"
        case "404": return "Permanent system failure"
        case "405": return "System connection failure"
        default: return "Error"
        }
    }

    /// Plans the transaction's RReq on the answer that triggers it, with its faults (`drop-rreq`, `rreq-delay`,
    /// `trans-status`, `challenge-cancel`) and any fields an earlier fault decided (`acs-timeout`).
    func plan(_ answer: inout ReplayAnswer, rreqOf lf: LiveFlow, after trigger: Int, override: [MessageChange] = []) {
        guard let r = catalog.flows[lf.flow].rreq, !lf.rreqPlanned else { return } // one RReq per transaction, whatever ends it
        let faults = faultsFor(r, type: "RReq", nil)
        answer.faults += faults.map(\.description)
        guard let (rreq, after) = planRReq(lf, after: trigger) else { return }
        lf.rreqPlanned = true
        if faults.contains(.dropRReq) {
            answer.rreqDropped = rreq["threeDSServerTransID"]?.stringValue ?? ""
            finish(lf, endedBy: "the RReq dropped by fault")
            return
        }
        var changes = override
        var delay = after
        for f in faults {
            switch f {
            case let .transStatus(st): changes.append(.transStatus(TransStatus(wire: st)))
            case let .challengeCancel(c): changes.append(.challengeCancel(c))
            case let .rreqDelay(d): delay = d
            default: break
            }
        }
        // A failed authentication carries no CAVV.
        let json = ThreeDSMessage.withoutAuthenticationValueUnlessAuthenticated(rreq.applying(changes))
        // Serialised once, with its faults applied.
        let planned = PlannedRReq(url: lf.threeDSServerURL ?? "", body: json.bytes, after: delay, recordedExchangeID: catalog.exchanges[r].id,
                                  threeDSServerTransID: json["threeDSServerTransID"]?.stringValue ?? "")
        answer.rreq = planned
    }

    /// The recorded RReq rewritten for the live transaction, and when to send it (at the recorded offset, subject to
    /// timing); nil when the session has none or the live AReq named no threeDSServerURL to send it to.
    func planRReq(_ lf: LiveFlow, after trigger: Int) -> (json: JSON, after: Double)? {
        let flow = catalog.flows[lf.flow]
        guard let r = flow.rreq, lf.threeDSServerURL != nil,
              let json = catalog.exchanges[r].messages.first(where: { $0.messageDirection == .request && $0.kind == .rReq })?.json else {
            return nil
        }
        let x = catalog.exchanges[r], t = catalog.exchanges[trigger]
        var rng = SeededRandom(seed: options.schedule.seed, stream: UInt64(bitPattern: x.id), index: UInt64(served[r]))
        served[r] += 1
        let offset = max(0, x.requestStart - (t.done ?? t.requestStart))
        let after = options.schedule.delay(for: ScheduledAnswer(recordedExchangeID: x.id, recordedWait: offset, messageType: "RReq", occurrence: 1,
                                                                path: ReplayURL.pathAndQuery(x.url).path, servedBefore: served[r] - 1))
        return (rewrite(json, lf, &rng), after)
    }

    /// Called by the driver once the RReq of a transaction has been answered (or failed): the transaction is over.
    public func rreqDone(for liveServerTransID: String) {
        if let lf = live[liveServerTransID] { finish(lf, endedBy: "the RReq") }
    }

    /// Ends a live transaction: its IDs and origins are no longer live. Its IDs are kept among the ended ones (the most
    /// recent `endedLimit` transactions) so that a conformant client's closing messages are still recognised.
    func finish(_ lf: LiveFlow, endedBy reason: String) {
        if lf.endedBy == nil { lf.endedBy = reason }
        var ids: [String] = []
        for k in lf.keys {
            if k.hasPrefix("origin:") {
                let o = String(k.dropFirst(7))
                liveOrigins[o, default: 1] -= 1
                if liveOrigins[o] == 0 { liveOrigins[o] = nil }
            } else {
                live[k] = nil
                ended[k] = lf
                ids.append(k)
            }
        }
        lf.keys = []
        guard !ids.isEmpty else { return }
        endedOrder.append((ids, lf))
        if endedOrder.count - endedOrderStart > ReplayEngine.endedLimit {
            let oldest = endedOrder[endedOrderStart]
            for k in oldest.ids where ended[k] === oldest.flow { ended[k] = nil }
            endedOrderStart += 1
            if endedOrderStart >= ReplayEngine.endedLimit { // compacted now and then: amortised O(1) per transaction
                endedOrder.removeFirst(endedOrderStart)
                endedOrderStart = 0
            }
        }
    }

    /// Transactions remembered as ended (for tests: bounded by `endedLimit`).
    var endedTransactions: Int { endedOrder.count - endedOrderStart }
}
