import Foundation
import TapCore
import TapEMV
import TapRecording
import TapReplay
import TapStore

/// What a client did in one replay with a failure scenario, read from the replay's session file, the command's exit
/// status and its `3dstape-result:` line: the facts `ScenarioJudge` holds the expectation's clauses against.
public struct CheckObservation: Sendable {
    /// One 3DS transaction of the replay (by threeDSServerTransID) in which a fault was applied.
    public struct Transaction: Sendable {
        public var serverTransID: String
        /// The faults applied to its answers, as `CRes: bad-counter`.
        public var faults: [String] = []
        /// When its first faulted answer was asked for (the point after which "further CReqs" are counted).
        public var faultedAt: Double?
        /// The Erro codes the client sent (errorComponent C, or any Erro the client posted), in order, with their times.
        public var erros: [(code: String, at: Double)] = []
        /// Every CReq the client sent, with its time and challengeCancel.
        public var creqs: [(at: Double, cancel: String?)] = []
        /// Seconds from asking for a hung answer to giving it up (nil: the client did not give up, or nothing hung).
        public var gaveUpAfter: Double?
        /// A hung answer the client was still waiting for when the command ended.
        public var hungAnswerWaited = false
        /// The final CRes (challengeCompletionInd Y, or the browser's cres) was answered to the client and read.
        public var finalCResRead = false
        /// What became of the ACS's RReq: nil when none was sent.
        public var rreq: RReqDelivery?
        /// Answers asked for again (the same recorded exchange matched more than once).
        public var retries = 0
    }

    /// Whether the RReq reached a 3DS Server that answered it.
    public enum RReqDelivery: Sendable, Equatable {
        case answered
        case notAnswered(String)
    }

    public var transactions: [Transaction] = []
    /// The command's exit status; nil when it did not end by itself (ended at the command timeout, or not started).
    public var exitStatus: Int32?
    /// Why the command has no exit status of its own, when it has none (`timed out after 120 s`, `did not start: …`).
    public var commandProblem: String?
    /// The last `3dstape-result: {json}` line the command printed.
    public var result: JSON?
    /// The command's last line of output, for a reason that needs it (the fault was never reached: why, in its words).
    public var lastOutputLine: String?
    /// Requests nothing in the recording matched.
    public var misses = 0
    /// Seconds from the first request to the last answer.
    public var seconds: Double = 0

    public init() {}

    /// The transaction ID given to faulted gateway calls made before any 3DS transaction.
    public static let beforeAnyTransaction = "(gateway calls before the AReq)"

    /// The observation of one replay session.
    /// `commandEndedAt`: when 3dstape ended the command's group (at its timeout or a stop): a hung request closed then
    /// was closed by that, not given up by the client.
    public static func read(_ exchanges: [StoredExchange], commandEndedAt: Double? = nil) -> CheckObservation {
        var o = CheckObservation()
        var byID: [String: Transaction] = [:]
        var order: [String] = []
        var matched: [String: [Int64: Int]] = [:]
        let sorted = exchanges.sorted { $0.requestStart < $1.requestStart }
        if let first = sorted.first { o.seconds = max(0, (sorted.compactMap { $0.done ?? $0.clientAbortAt }.max() ?? first.requestStart) - first.requestStart) }
        var latest: String? // the transaction of the latest exchange that named one: a browser's challenge page posts carry no 3DS message
        for x in sorted {
            if x.replay?.miss != nil { o.misses += 1 }
            let browserCRes = CheckObservation.browserCRes(in: x.responseBody)
            let faulted = !(x.replay?.faults ?? "").isEmpty
            // A faulted gateway call before any 3DS transaction (card tokenisation, a Trust Payments request) stands for the
            // payment's transaction until one is named.
            guard let id = x.messages.lazy.compactMap({ $0.json?["threeDSServerTransID"]?.stringValue }).first
                ?? browserCRes?["threeDSServerTransID"]?.stringValue ?? (x.connectionID == Replayer.rreqConnection ? nil : latest)
                ?? (faulted ? CheckObservation.beforeAnyTransaction : nil) else { continue }
            latest = id
            if byID[id] == nil { byID[id] = Transaction(serverTransID: id); order.append(id) }
            var t = byID[id]!
            let requestType = x.messages.first { $0.messageDirection == .request }?.type
            if let faults = x.replay?.faults, !faults.isEmpty {
                t.faults.append("\(x.messages.first { $0.messageDirection == .response }?.type ?? requestType.map { "answer to \($0)" } ?? "answer"): \(faults)")
                if t.faultedAt == nil { t.faultedAt = x.requestStart }
                if faults.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == "hang" }) {
                    if let abort = x.clientAbortAt, abort < (commandEndedAt ?? .infinity) - 0.01 {
                        t.gaveUpAfter = max(0, abort - x.requestStart)
                    } else {
                        t.hungAnswerWaited = true
                    }
                }
            }
            if let rec = x.replay?.recordedExchangeID, x.connectionID != Replayer.rreqConnection { matched[id, default: [:]][rec, default: 0] += 1 }
            for m in x.messages where m.messageDirection == .request {
                switch m.kind {
                case .erro where x.connectionID != Replayer.rreqConnection:
                    t.erros.append((m.json?["errorCode"]?.stringValue ?? "?", x.requestStart))
                case .cReq:
                    t.creqs.append((x.requestStart, m.json?["challengeCancel"]?.stringValue))
                case .rReq where x.connectionID == Replayer.rreqConnection:
                    if x.status == 200, x.messages.contains(where: { $0.messageDirection == .response && $0.kind == .rRes }) {
                        t.rreq = .answered
                    } else {
                        t.rreq = .notAnswered(x.error ?? x.status.map { "HTTP \($0) without an RRes" } ?? "no answer")
                    }
                default: break
                }
            }
            if x.clientAbortAt == nil, x.status == 200, browserCRes != nil
                || x.messages.contains(where: { $0.messageDirection == .response && $0.kind == .cRes && $0.json?.completesChallenge == true }) {
                t.finalCResRead = true
            }
            byID[id] = t
        }
        for id in order {
            var t = byID[id]!
            t.retries = matched[id]?.values.reduce(0) { $0 + max(0, $1 - 1) } ?? 0
            o.transactions.append(t)
        }
        return o
    }

    /// The last non-empty line of a command's output, at most 200 characters, escaped for a terminal.
    public static func lastLine(in output: [UInt8]) -> String? {
        guard let line = output.split(separator: UInt8(ascii: "\n")).last(where: { !$0.allSatisfy { $0 == 0x20 || $0 == 0x0D || $0 == 0x09 } })
        else { return nil }
        let text = String(decoding: line.prefix(800), as: UTF8.self)
        return TerminalText.escaped(String(text.prefix(200)))
    }

    /// The final CRes of a browser challenge: the base64url JSON of the `cres` field in the ACS's auto-posting form.
    static func browserCRes(in body: [UInt8]) -> JSON? {
        guard body.count < 1 << 20 else { return nil }
        let html = String(decoding: body, as: UTF8.self)
        guard let field = html.range(of: "name=\"cres\""),
              let value = html[field.upperBound...].range(of: "value=\"") else { return nil }
        let text = html[value.upperBound...].prefix { $0 != "\"" }
        guard let bytes = Base64URL.decode(String(text)), let json = try? JSON.parse(bytes), MessageKind(json["messageType"]) == .cRes else { return nil }
        return json
    }

    /// The last `3dstape-result: {json}` line of a command's output (a JSON object), if any.
    /// Only a line that starts with the prefix counts (text that quotes one, a gateway's error message echoed after
    /// `3dstape: client:`, does not), and the last such line decides: when it is not a JSON object, there is no result.
    public static func resultLine(in output: [UInt8]) -> JSON? {
        var last: ArraySlice<UInt8>?
        for line in output.split(separator: UInt8(ascii: "\n")) where line.starts(with: prefix) { last = line }
        guard let line = last, let j = try? JSON.parse(Array(line.dropFirst(prefix.count))), j.isObject else { return nil }
        return j
    }

    static let prefix = Array("3dstape-result:".utf8)

    /// The last result line of a command's log, read in 1 MiB pieces from its start with bounded memory (a command may
    /// print gigabytes after it), a line longer than 64 KiB skipped; and the log's last line (its last MiB).
    public static func scanLog(_ path: String) -> (result: JSON?, lastLine: String?) {
        guard let h = FileHandle(forReadingAtPath: path) else { return (nil, nil) }
        defer { try? h.close() }
        var carry: [UInt8] = []
        var lastResult: [UInt8]?
        var tail: [UInt8] = []
        while let chunk = try? h.read(upToCount: 1 << 20), !chunk.isEmpty {
            var bytes = carry
            bytes.append(contentsOf: chunk)
            var start = bytes.startIndex
            while let nl = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) {
                if bytes[start..<nl].starts(with: prefix) { lastResult = Array(bytes[start..<nl]) }
                start = nl + 1
            }
            carry = bytes.count - start <= 64 << 10 ? Array(bytes[start...]) : []
            tail = Array((tail + chunk).suffix(1 << 20))
        }
        if carry.starts(with: prefix) { lastResult = carry }
        return (lastResult.flatMap { resultLine(in: $0) }, lastLine(in: tail))
    }

    /// The observation as `check --json` prints it.
    public var json: JSON {
        .object([
            ("exitStatus", exitStatus.map { .number(String($0)) } ?? .null),
            ("commandProblem", commandProblem.map(JSON.string) ?? .null),
            ("misses", .number(String(misses))),
            ("result", result ?? .null),
            ("transactions", .array(transactions.map { t in
                .object([
                    ("threeDSServerTransID", .string(t.serverTransID)), ("faults", .array(t.faults.map(JSON.string))),
                    ("erroSent", .array(t.erros.map { .string($0.code) })),
                    ("creqs", .number(String(t.creqs.count))),
                    ("challengeCancel", .array(t.creqs.compactMap(\.cancel).map(JSON.string))),
                    ("gaveUpAfterMs", t.gaveUpAfter.map { .number(String(Checked.milliseconds($0))) } ?? .null),
                    ("finalCResRead", .bool(t.finalCResRead)),
                    ("rreq", {
                        switch t.rreq {
                        case nil: return JSON.string("none sent")
                        case .answered?: return .string("answered")
                        case let .notAnswered(why)?: return .string("not answered: \(why)")
                        }
                    }()),
                    ("retries", .number(String(t.retries))),
                ])
            })),
        ])
    }
}
