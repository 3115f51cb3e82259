import Foundation
import TapCore
import TapEMV
import TapInspect
import TapSandbox
import TapStore

/// What one client-replayed transaction came to, held against the recording.
public struct ClientReplayOutcome: Sendable {
    public var transaction: Int
    /// 0 for the first pass over the transactions, 1 for the first `--repeat` …
    public var pass: Int
    public var recordedOutcome: String
    public var liveOutcome: String
    /// Element differences, as `diff` words them: message, element, recorded value, live value.
    public var differences: [(message: String, element: String, recorded: String, live: String)]
    public var failure: String?
    public var notes: [String]
    /// Milliseconds per exchange, by the type of the message sent (`AReq`, `CReq` …; `RReq` for the wait on it).
    public var latencies: [(String, Double)]
    public var totalMs: Double

    public var matches: Bool { failure == nil && differences.isEmpty && recordedOutcome == liveOutcome }

    /// The `--json` object.
    public var json: JSON {
        .object([("transaction", .number(String(transaction))), ("pass", .number(String(pass))), ("match", .bool(matches)),
                 ("recorded", .string(recordedOutcome)), ("live", .string(liveOutcome)),
                 ("differences", .array(differences.map { d in
                     .object([("message", .string(d.message)), ("element", .string(d.element)), ("recorded", .string(d.recorded)), ("live", .string(d.live))])
                 })),
                 ("failure", failure.map(JSON.string) ?? .null), ("notes", .array(notes.map(JSON.string))),
                 ("total_ms", .number(String(format: "%.1f", totalMs)))])
    }
}

/// Runs a plan's transactions against live servers (at once, paced, repeated), compares each with the recording as it
/// completes, and writes the live exchanges as a session.
public final class ClientReplayRunner: Sendable {
    /// How hard to drive the target.
    public struct Load: Sendable {
        public var concurrency = 1
        /// New transactions per second (nil: as fast as the workers go).
        public var rate: Double?
        /// Keeps the recorded gaps between transactions divided by this (nil: no gaps).
        public var speed: Double?
        public var repeats = 1
        public init() {}
    }

    let plan: ClientReplayPlan
    let replayer: ClientReplayer
    let writer: SessionWriter?
    let nextConnection = Locked<Int64>(0)

    public init(plan: ClientReplayPlan, replayer: ClientReplayer, writer: SessionWriter?) {
        self.plan = plan
        self.replayer = replayer
        self.writer = writer
    }

    /// Elements a live run sends differently by design (the URLs of its own listener and of the live servers).
    public static let ignored: Set<String> = ["threeDSServerURL", "notificationURL", "acsURL", "acsReferenceNumber", "dsReferenceNumber"]

    /// Runs every transaction `load.repeats` times; `report` is called (on the worker's thread, one call at a time)
    /// as each completes. Returns the tally: counts and bounded latency samples, not every outcome, so that a long
    /// `--repeat` runs in constant memory (the work is numbered, not listed: a million passes over 16 transactions held
    /// 260 MB in a list before the first was sent).
    public func run(load: Load, report: @escaping @Sendable (ClientReplayOutcome, _ done: Int, _ total: Int) -> Void) -> ClientReplayTally {
        let perPass = plan.transactions.count
        let (product, overflow) = max(1, load.repeats).multipliedReportingOverflow(by: perPass)
        let jobCount = overflow ? Int.max : product
        let firstStart = plan.transactions.map(\.startedAt).min() ?? 0
        let span = (plan.transactions.map(\.startedAt).max() ?? 0) - firstStart
        let next = Locked(0)
        let results = Locked(ClientReplayTally())
        let started = Date()
        let workers = max(1, min(load.concurrency, jobCount))
        let group = DispatchGroup()
        for w in 0..<workers {
            let thread = Thread { [self] in
                while true {
                    let k = next.withLock { n -> Int in defer { n += 1 }; return n }
                    guard k < jobCount, perPass > 0 else { break }
                    let (pass, index) = k.quotientAndRemainder(dividingBy: perPass)
                    let t = plan.transactions[index]
                    var due: Double = 0
                    if let rate = load.rate { due = Double(k) / rate }
                    if let speed = load.speed { due = max(due, (Double(pass) * (span + 1) + t.startedAt - firstStart) / speed) }
                    let wait = due - Date().timeIntervalSince(started)
                    if wait > 0 { usleep(UInt32(Checked.clampedInt(min(wait, 3600) * 1_000_000))) }
                    let outcome = self.play(t, pass: pass)
                    results.withLock { r in
                        r.add(outcome)
                        report(outcome, r.count, jobCount)
                    }
                }
                group.leave()
            }
            thread.name = "creplay-\(w)"
            group.enter()
            thread.start()
        }
        group.wait()
        return results.withLock { $0 }
    }

    /// One transaction: played live, stored, compared.
    func play(_ t: ClientReplayPlan.Transaction, pass: Int) -> ClientReplayOutcome {
        let t0 = Date()
        let recordedOutcome = Self.outcome(t.recorded)
        if let why = t.unplayable {
            return ClientReplayOutcome(transaction: t.number, pass: pass, recordedOutcome: recordedOutcome, liveOutcome: "-", differences: [],
                                       failure: why, notes: [], latencies: [], totalMs: 0)
        }
        let run = replayer.run(t.script)
        store(run)
        var live: [ClientReplayMessage] = []
        var latencies: [(String, Double)] = []
        for x in run.exchanges {
            for (json, status) in [(x.request, nil), (x.response, x.status)] {
                guard let json, let type = json["messageType"]?.stringValue else { continue }
                live.append(ClientReplayMessage(type: type, json: plan.masked ? Masking.mask(json) : json, httpStatus: status))
            }
            if let done = x.done, let type = x.request?["messageType"]?.stringValue {
                latencies.append((type, (done - x.started) * 1000))
            }
        }
        let liveOutcome = run.failure == nil ? Self.outcome(live) : "failed"
        var differences = Self.compare(t.recorded, live)
        differences += Self.callDifferences(run, masked: plan.masked)
        for x in run.exchanges where x.call != nil { if let done = x.done { latencies.append((x.call!.label, (done - x.started) * 1000)) } }
        if recordedOutcome != liveOutcome, run.failure == nil {
            differences.insert(("transaction", "outcome", recordedOutcome, liveOutcome), at: 0)
        }
        return ClientReplayOutcome(transaction: t.number, pass: pass, recordedOutcome: recordedOutcome, liveOutcome: liveOutcome,
                                   differences: differences, failure: run.failure, notes: run.notes, latencies: latencies,
                                   totalMs: Date().timeIntervalSince(t0) * 1000)
    }

    /// The transaction's result as `show` words it: the RReq's transStatus, else the last CRes's, else the ARes's; an Erro's code.
    static func outcome(_ messages: [ClientReplayMessage]) -> String {
        if let e = messages.last(where: { $0.kind == .erro }) { return "Erro \(e.json?["errorCode"]?.stringValue ?? "?")" }
        for kind in [MessageKind.rReq, .cRes, .aRes] {
            if let s = messages.last(where: { $0.kind == kind && $0.json?["transStatus"] != nil })?.json?["transStatus"]?.stringValue { return s }
        }
        return "-"
    }

    /// Messages paired by type and occurrence (the second CRes with the second CRes), element by element as `diff` does.
    static func compare(_ recorded: [ClientReplayMessage], _ live: [ClientReplayMessage]) -> [(message: String, element: String, recorded: String, live: String)] {
        func labelled(_ ms: [ClientReplayMessage]) -> [(String, ClientReplayMessage)] {
            var seen: [String: Int] = [:]
            return ms.map { m in
                seen[m.type, default: 0] += 1
                return (seen[m.type] == 1 ? m.type : "\(m.type) #\(seen[m.type]!)", m)
            }
        }
        let a = labelled(recorded), b = labelled(live)
        let byLabel = Dictionary(b.map { ($0.0, $0.1) }, uniquingKeysWith: { x, _ in x })
        var out: [(String, String, String, String)] = []
        for (label, m) in a {
            guard let other = byLabel[label] else {
                out.append((label, "", "present", "missing"))
                continue
            }
            if let a = m.httpStatus, let b = other.httpStatus, a != b { out.append((label, "HTTP status", String(a), String(b))) }
            for c in SessionDiff.messageDifferences(m.json, other.json, ignoring: ignored) {
                out.append((label, c.pointer ?? "", c.before ?? "absent", c.after ?? "absent"))
            }
        }
        let labelsA = Set(a.map(\.0))
        for (label, _) in b where !labelsA.contains(label) { out.append((label, "", "missing", "present")) }
        return out
    }

    /// The non-3DS calls' answers against the recorded ones (labelled `POST /pxp/tokens`, `… #2` for the second), with
    /// the IDs the run learned put in place of the recorded ones and the JWTs opened: the status, then element by element.
    static func callDifferences(_ run: ClientReplayRun, masked: Bool) -> [(message: String, element: String, recorded: String, live: String)] {
        var out: [(String, String, String, String)] = []
        var seen: [String: Int] = [:]
        for x in run.exchanges {
            guard let call = x.call, x.error == nil else { continue }
            seen[call.label, default: 0] += 1
            let label = seen[call.label] == 1 ? call.label : "\(call.label) #\(seen[call.label]!)"
            if let recorded = call.recordedStatus, recorded != x.status {
                out.append((label, "status", String(recorded), x.status.map(String.init) ?? "none"))
            }
            guard let recorded = ClientReplayCallBody.comparable(call.recordedResponse) else { continue }
            guard let answer = ClientReplayCallBody.comparable(x.responseBody) else {
                out.append((label, "body", "JSON or a form", "\(x.responseBody.count) bytes of neither"))
                continue
            }
            for c in SessionDiff.messageDifferences(run.ids.substituted(recorded), masked ? Masking.mask(answer) : answer,
                                                    ignoring: ignored.union(ClientReplayCallBody.jwtTimes)) {
                out.append((label, c.pointer ?? "", c.before ?? "absent", c.after ?? "absent"))
            }
        }
        return out
    }

    /// Hands the run's exchanges to the session writer (one connection each).
    func store(_ run: ClientReplayRun) {
        guard let writer else { return }
        for x in run.exchanges {
            let id = nextConnection.withLock { n -> Int64 in n += 1; return n }
            writer.submit(.connectionOpened(ConnectionRecord(id: id, clientAddress: "client-replay", acceptedAt: x.started, mode: "forward",
                                                             upstream: nil)))
            let note = "decrypted: client-replay's own app-channel keys"
            var record = ExchangeRecord(connectionID: id, seq: 0, method: x.method, url: x.url, host: nil, path: nil, upstream: nil,
                                        request: CapturedMessage(headers: x.requestHeaders, body: x.requestBody, wireSize: x.requestBody.count,
                                                                 plaintext: x.appChannel ? x.request : nil, plaintextNote: x.appChannel ? note : nil),
                                        requestStart: x.started)
            record.status = x.status
            if x.status != nil {
                record.response = CapturedMessage(headers: x.responseHeaders, body: x.responseBody, wireSize: x.responseBody.count,
                                                  plaintext: x.appChannel ? x.response : nil, plaintextNote: x.appChannel ? note : nil)
            }
            record.done = x.done
            record.firstByte = x.done
            record.requestSent = x.started
            record.error = x.error
            writer.submit(.exchange(record))
            writer.submit(.connectionClosed(id: id, at: x.done ?? x.started))
        }
    }

    /// p50, p99 and max milliseconds per message type, for the progress line (over the outcomes it keeps).
    public static func latencyTable(_ outcomes: [ClientReplayOutcome]) -> [(type: String, count: Int, p50: Double, p99: Double, max: Double)] {
        var tally = ClientReplayTally()
        for o in outcomes { tally.add(o) }
        return tally.latencyTable
    }
}

/// What a client-replay run came to, in bounded memory: how many transactions ran and matched, and per message type up to
/// `sampleLimit` latency samples (beyond that a uniform reservoir sample, so p50/p99 stay representative) with exact
/// counts and maxima.
public struct ClientReplayTally: Sendable {
    public static let sampleLimit = 100_000
    public private(set) var count = 0
    public private(set) var matched = 0
    private var samples: [String: [Double]] = [:]
    private var seen: [String: Int] = [:]
    private var maxima: [String: Double] = [:]
    private var order: [String] = []

    public init() {}

    public mutating func add(_ o: ClientReplayOutcome) {
        count += 1
        if o.matches { matched += 1 }
        for (type, ms) in o.latencies { sample(type, ms) }
        sample("transaction", o.totalMs)
    }

    private mutating func sample(_ type: String, _ ms: Double) {
        if seen[type] == nil { order.append(type) }
        let n = seen[type, default: 0] + 1
        seen[type] = n
        maxima[type] = Swift.max(maxima[type] ?? ms, ms)
        if n <= Self.sampleLimit {
            samples[type, default: []].append(ms)
        } else {
            let slot = Int.random(in: 0..<n)
            if slot < Self.sampleLimit { samples[type]![slot] = ms }
        }
    }

    /// p50, p99 and max milliseconds per message type, then `transaction` for whole transactions.
    public var latencyTable: [(type: String, count: Int, p50: Double, p99: Double, max: Double)] {
        func pct(_ v: [Double], _ p: Double) -> Double {
            guard !v.isEmpty else { return 0 }
            let rank = Checked.clampedInt((Double(v.count) * p).rounded(.up)) - 1
            return v[Swift.min(v.count - 1, Swift.max(0, rank))]
        }
        let types = order.filter { $0 != "transaction" } + (order.contains("transaction") ? ["transaction"] : [])
        return types.map { t in
            let v = (samples[t] ?? []).sorted()
            return (t, seen[t] ?? 0, pct(v, 0.5), pct(v, 0.99), maxima[t] ?? 0)
        }
    }
}
