import Foundation
import TapCore
import TapStore

/// `3dstape diff`: two sessions' transactions paired by order and shape (never by their IDs), or, when B is a replay of A,
/// each replayed transaction with the recorded one it matched; then compared message by message, ignoring what differs on
/// every run (IDs, keys, signatures, dates, loopback ports).
public struct SessionDiff: Sendable {
    /// One difference, with where it was found on each side.
    public struct Change: Sendable {
        public enum Kind: String, Sendable {
            case added, removed, changed, status, outcome, timing
            case missingTransaction = "missing-transaction", extraTransaction = "extra-transaction"
            case missingMessage = "missing-message", extraMessage = "extra-message"
            case missingExchange = "missing-exchange", extraExchange = "extra-exchange"
        }
        public var kind: Kind
        /// Transaction number on each side (1-based), when paired or present.
        public var transactionA: Int?
        public var transactionB: Int?
        public var exchangeA: Int64?
        public var exchangeB: Int64?
        /// `ARes`, `CRes #2` …
        public var message: String?
        /// JSON pointer of the element.
        public var pointer: String?
        public var before: String?
        public var after: String?

        public var json: JSON {
            func s(_ v: String?) -> JSON { v.map(JSON.string) ?? .null }
            func n(_ v: Int64?) -> JSON { v.map { .number(String($0)) } ?? .null }
            return .object([("kind", .string(kind.rawValue)), ("transaction_a", n(transactionA.map(Int64.init))),
                            ("transaction_b", n(transactionB.map(Int64.init))), ("exchange_a", n(exchangeA)), ("exchange_b", n(exchangeB)),
                            ("message", s(message)), ("element", s(pointer)), ("a", s(before)), ("b", s(after))])
        }
    }

    public struct Options: Sendable {
        /// Elements whose values are not compared (added to `SessionDiff.volatile`).
        public var ignore: Set<String> = []
        /// Durations that differ by more than this (seconds) are reported; nil compares no timings.
        public var timingTolerance: Double? = 0.25
        /// The most steps pairing the transactions (and the plain exchanges) may take; past it `compare` throws
        /// `TooDifferent`. The pairing needs memory linear in the sessions' sizes and time growing with the rows
        /// times the elements left unpaired: this keeps a diff of two unrelated large sessions from running for minutes.
        public var maxPairingSteps = SessionDiff.defaultMaxPairingSteps
        /// How transactions (and plain exchanges) are paired.
        public var pairBy: PairBy = .shape
        public init() {}
    }

    /// How `compare` pairs the two sessions' transactions.
    public enum PairBy: String, Sendable, CaseIterable {
        /// In order, by channel, category, version and first message (`SequenceAlignment`): for any two sessions.
        case shape
        /// B is a replay of A: each of B's transactions with the recorded transaction its exchanges matched
        /// (`replay_matches.recorded_exchange_id`). A's transactions that the replay's client never ran are counted, not
        /// reported as missing: a replay serves what its client asks for.
        case match
    }

    /// Whether the session `b` was written by a replay (its meta says `mode` replay, or it holds replay matches).
    public static func isReplaySession(_ b: SessionReader) -> Bool {
        b.meta["mode"] == "replay" || ((try? b.isReplay) ?? false)
    }

    /// Whether `b` is a replay of the session file at `aPath`: its meta names that file (the same file once both paths
    /// are resolved, symbolic links included).
    public static func isReplay(_ b: SessionReader, of aPath: String) -> Bool {
        guard isReplaySession(b), let replayed = b.meta["replayed_session"], let x = realPath(replayed), let y = realPath(aPath) else { return false }
        return x == y
    }

    /// The pairing `diff` uses when none is asked for: `match` when B is a replay of A, `shape` otherwise.
    public static func defaultPairing(a aPath: String, b: SessionReader) -> PairBy {
        isReplay(b, of: aPath) ? .match : .shape
    }

    static func realPath(_ p: String) -> String? {
        guard let r = realpath(p, nil) else { return nil }
        defer { free(r) }
        return String(cString: r)
    }

    /// A few seconds of pairing on one core (two sessions of 20 000 transactions with 25 000 of them unpaired).
    public static let defaultMaxPairingSteps = 1_000_000_000

    /// Two sessions too different to pair within `Options.maxPairingSteps`.
    public struct TooDifferent: Error, CustomStringConvertible, Sendable {
        /// `transactions` or `plain exchanges`.
        public var what: String
        public var countA: Int
        public var countB: Int
        /// Elements of both sides that no pairing could match, at least.
        public var unpairedAtLeast: Int
        public var limit: Int

        public var description: String {
            "the sessions are too different to pair: \(countA) \(what) in A and \(countB) in B, of which at least "
                + "\(unpairedAtLeast) have no counterpart; pairing them would take more than the limit of \(limit) steps"
        }
    }

    /// Values that differ on every run: transaction IDs, the SDK's app ID and keys, signatures, encrypted data, dates.
    public static let volatile: Set<String> = [
        "threeDSServerTransID", "dsTransID", "acsTransID", "sdkTransID", "sdkAppID", "sdkEncData", "sdkEphemPubKey", "acsSignedContent",
        "purchaseDate", "authenticationValue", "deviceInfo", "threeDSSessionData", "threeDSMethodData", "acsHTML",
    ]

    public var changes: [Change]
    public var pairedTransactions: Int
    public var transactionsA: Int
    public var transactionsB: Int
    /// How the transactions were paired.
    public var pairedBy: PairBy = .shape
    /// With `match`: A's transactions that no transaction of the replay matched (not compared).
    public var unreplayedTransactions = 0

    public var isEmpty: Bool { changes.isEmpty }

    public static func compare(_ a: [StoredExchange], _ b: [StoredExchange], options: Options = Options()) throws(TooDifferent) -> SessionDiff {
        let ta = ThreeDSTransaction.group(a), tb = ThreeDSTransaction.group(b)
        let xa = Dictionary(a.map { ($0.id, $0) }, uniquingKeysWith: { x, _ in x })
        let xb = Dictionary(b.map { ($0.id, $0) }, uniquingKeysWith: { x, _ in x })
        var changes: [Change] = []
        let pairs = options.pairBy == .match ? matchPairs(ta, tb, xb) : try pair(ta.map(signature), tb.map(signature), what: "transactions",
                                                                                        maxSteps: options.maxPairingSteps)
        var paired = 0, unreplayed = 0
        for p in pairs {
            switch p {
            case let .both(i, j):
                paired += 1
                changes += compareTransactions(ta[i], tb[j], i + 1, j + 1, xa, xb, options)
            case let .onlyA(i) where options.pairBy == .match:
                _ = i
                unreplayed += 1
            case let .onlyA(i):
                changes.append(Change(kind: .missingTransaction, transactionA: i + 1, exchangeA: ta[i].messages.first?.exchangeID,
                                      message: ta[i].shape.joined(separator: " "), before: ta[i].outcome))
            case let .onlyB(j):
                changes.append(Change(kind: .extraTransaction, transactionB: j + 1, exchangeB: tb[j].messages.first?.exchangeID,
                                      message: tb[j].shape.joined(separator: " "), after: tb[j].outcome))
            }
        }
        changes += try compareOtherExchanges(a, b, ta, tb, maxSteps: options.maxPairingSteps, byMatch: options.pairBy == .match)
        return SessionDiff(changes: changes, pairedTransactions: paired, transactionsA: ta.count, transactionsB: tb.count, pairedBy: options.pairBy,
                           unreplayedTransactions: unreplayed)
    }

    /// The pairing of a replay's transactions (B) with the recording's (A): each of B's with the transaction of A that
    /// most of its exchanges matched (the first such on a tie); one B transaction per A transaction, later ones extra.
    /// In B's order, then A's unmatched transactions.
    static func matchPairs(_ ta: [ThreeDSTransaction], _ tb: [ThreeDSTransaction], _ xb: [Int64: StoredExchange]) -> [Pairing] {
        var transactionOfA: [Int64: Int] = [:]
        for (i, t) in ta.enumerated() { for m in t.messages where transactionOfA[m.exchangeID] == nil { transactionOfA[m.exchangeID] = i } }
        var taken = Set<Int>()
        var out: [Pairing] = []
        for (j, t) in tb.enumerated() {
            var votes: [Int: Int] = [:]
            for id in t.exchangeIDs {
                if let recorded = xb[id]?.replay?.recordedExchangeID, let i = transactionOfA[recorded] { votes[i, default: 0] += 1 }
            }
            let best = votes.max { $0.value != $1.value ? $0.value < $1.value : $0.key > $1.key }?.key
            if let i = best, taken.insert(i).inserted { out.append(.both(i, j)) } else { out.append(.onlyB(j)) }
        }
        for i in ta.indices where !taken.contains(i) { out.append(.onlyA(i)) }
        return out
    }

    /// What pairs transactions: channel, category and version. The shape may differ (a missing CRes is a finding).
    static func signature(_ t: ThreeDSTransaction) -> String {
        "\(t.deviceChannel ?? "?")|\(t.messageCategory ?? "?")|\(t.version ?? "?")|\(t.shape.first ?? "?")"
    }

    typealias Pairing = SequenceAlignment.Step

    /// The pairing of two key lists, in order (`SequenceAlignment`: a longest common subsequence in linear memory).
    static func pair(_ a: [String], _ b: [String], what: String, maxSteps: Int) throws(TooDifferent) -> [Pairing] {
        do {
            return try SequenceAlignment.pair(a, b, maxSteps: maxSteps)
        } catch {
            throw TooDifferent(what: what, countA: a.count, countB: b.count, unpairedAtLeast: error.unpairedAtLeast, limit: error.limit)
        }
    }

    static func compareTransactions(_ a: ThreeDSTransaction, _ b: ThreeDSTransaction, _ na: Int, _ nb: Int,
                                    _ xa: [Int64: StoredExchange], _ xb: [Int64: StoredExchange], _ options: Options) -> [Change] {
        var out: [Change] = []
        if a.outcome != b.outcome {
            out.append(Change(kind: .outcome, transactionA: na, transactionB: nb, message: "transaction", before: a.outcome, after: b.outcome))
        }
        // Messages align by type and occurrence: the second CRes of one side with the second CRes of the other.
        let ma = labelled(a.messages), mb = labelled(b.messages)
        let labelsB = Set(mb.map(\.0))
        let labelsA = Set(ma.map(\.0))
        let byLabelB = Dictionary(mb.map { ($0.0, $0.1) }, uniquingKeysWith: { x, _ in x })
        var comparedExchanges = Set<[Int64]>()
        for (label, m) in ma {
            guard let other = byLabelB[label] else {
                out.append(Change(kind: .missingMessage, transactionA: na, transactionB: nb, exchangeA: m.exchangeID, message: label))
                continue
            }
            out += compareJSON(m.json, other.json, ignoring: volatile.union(options.ignore)).map { c in
                var c = c
                c.transactionA = na; c.transactionB = nb; c.exchangeA = m.exchangeID; c.exchangeB = other.exchangeID; c.message = label
                return c
            }
            guard comparedExchanges.insert([m.exchangeID, other.exchangeID]).inserted,
                  let ea = xa[m.exchangeID], let eb = xb[other.exchangeID] else { continue }
            if ea.status != eb.status || (ea.error == nil) != (eb.error == nil) {
                out.append(Change(kind: .status, transactionA: na, transactionB: nb, exchangeA: ea.id, exchangeB: eb.id, message: label,
                                  before: ea.status.map { String($0) } ?? ea.error ?? "no response",
                                  after: eb.status.map { String($0) } ?? eb.error ?? "no response"))
            }
            if let tolerance = options.timingTolerance, let da = ea.durationMs, let db = eb.durationMs, abs(da - db) > tolerance * 1000 {
                out.append(Change(kind: .timing, transactionA: na, transactionB: nb, exchangeA: ea.id, exchangeB: eb.id, message: label,
                                  before: String(format: "%.1f ms", da), after: String(format: "%.1f ms", db)))
            }
        }
        for (label, m) in mb where !labelsA.contains(label) {
            out.append(Change(kind: .extraMessage, transactionA: na, transactionB: nb, exchangeB: m.exchangeID, message: label))
        }
        _ = labelsB
        return out
    }

    /// `CRes #2` for the second CRes; the first of a type keeps its plain name.
    static func labelled(_ messages: [InspectedMessage]) -> [(String, InspectedMessage)] {
        var seen: [String: Int] = [:]
        return messages.map { m in
            seen[m.type, default: 0] += 1
            let n = seen[m.type]!
            return (n == 1 ? m.type : "\(m.type) #\(n)", m)
        }
    }

    /// Element-level differences between two messages, as `diff` finds them: IDs, keys, signatures and dates ignored
    /// (`volatile` and `ignoring`), loopback ports compared without the port (for `client-replay`).
    public static func messageDifferences(_ a: JSON?, _ b: JSON?, ignoring: Set<String> = []) -> [Change] {
        compareJSON(a, b, ignoring: volatile.union(ignoring))
    }

    /// Element-level differences between two messages (nil JSON: still encrypted, compared as equal).
    /// Equal subtrees are passed over whole (normalisation only makes more values equal, so two equal values never
    /// differ), pointers are written only for a change, and a large object's members are found by name: client
    /// replay compares every live message with its recording, where this walk was 7% of a flow's CPU.
    static func compareJSON(_ a: JSON?, _ b: JSON?, ignoring: Set<String>) -> [Change] {
        guard let a, let b else { return [] }
        var out: [Change] = []
        var path: [String] = [] // escaped pointer tokens down to the value being compared
        func pointer(_ last: String? = nil) -> String {
            var p = ""
            for t in path { p += "/" + t }
            if let last { p += "/" + last }
            return p
        }
        func walk(_ x: JSON?, _ y: JSON?, _ name: String) {
            if ignoring.contains(name) { return }
            switch (x, y) {
            case (nil, nil): return
            case let (nil, y?): out.append(Change(kind: .added, pointer: pointer(), after: render(y)))
            case let (x?, nil): out.append(Change(kind: .removed, pointer: pointer(), before: render(x)))
            case let (x?, y?) where x == y: return
            case let (.object(mx)?, .object(my)?):
                var names: [String] = mx.map(\.0)
                let small = mx.count <= 8 && my.count <= 8
                let inX: Set<String> = small ? [] : Set(names)
                for (k, _) in my where small ? !names.contains(k) : !inX.contains(k) { names.append(k) }
                let firstX: [String: JSON] = small ? [:] : Dictionary(mx.map { ($0.0, $0.1) }, uniquingKeysWith: { first, _ in first })
                let firstY: [String: JSON] = small ? [:] : Dictionary(my.map { ($0.0, $0.1) }, uniquingKeysWith: { first, _ in first })
                for k in names {
                    path.append(escape(k))
                    if small { walk(mx.first { $0.0 == k }?.1, my.first { $0.0 == k }?.1, k) } else { walk(firstX[k], firstY[k], k) }
                    path.removeLast()
                }
            case let (.array(ax)?, .array(ay)?):
                for i in 0..<max(ax.count, ay.count) {
                    path.append(String(i))
                    walk(i < ax.count ? ax[i] : nil, i < ay.count ? ay[i] : nil, name)
                    path.removeLast()
                }
            case let (x?, y?):
                if normalised(x) != normalised(y) { out.append(Change(kind: .changed, pointer: pointer(), before: render(x), after: render(y))) }
            }
        }
        walk(a, b, "")
        return out
    }

    /// Loopback URLs compare without their port: the sandbox and the replayer listen on a new port every run.
    static func normalised(_ v: JSON) -> JSON {
        guard let s = v.stringValue else { return v }
        return .string(withoutLoopbackPort(s))
    }

    static func withoutLoopbackPort(_ s: String) -> String {
        // On the bytes: most values hold no URL, and those that do are searched once, left to right, for
        // "://127.0.0.1:", "://localhost:" or "://[::1]:" (Foundation's range(of:) for each of the three was most of
        // the comparison's time in client replay).
        var utf8 = s.utf8.makeIterator()
        var previous: (UInt8, UInt8) = (0, 0), url = false
        while let b = utf8.next() {
            if previous == (0x3A, 0x2F), b == 0x2F { url = true; break }
            previous = (previous.1, b)
        }
        guard url else { return s }
        let b = Array(s.utf8)
        var out: [UInt8] = []
        var copied = 0, i = 0, changed = false
        while i + 3 <= b.count {
            guard b[i] == 0x3A, b[i + 1] == 0x2F, b[i + 2] == 0x2F,
                  let host = loopbackHosts.first(where: { b.count - (i + 3) >= $0.count && b[(i + 3)..<(i + 3 + $0.count)].elementsEqual($0) }) else {
                i += 1
                continue
            }
            let portStart = i + 3 + host.count
            var end = portStart
            while end < b.count, b[end] >= 0x30, b[end] <= 0x39 { end += 1 }
            out += b[copied..<portStart]
            if end > portStart { out += Array("PORT".utf8) }
            copied = end
            changed = true
            i = end
        }
        guard changed else { return s }
        out += b[copied...]
        return String(decoding: out, as: UTF8.self)
    }

    /// The loopback hosts whose ports `withoutLoopbackPort` writes as PORT, each with the ':' that starts the port.
    private static let loopbackHosts: [[UInt8]] = ["127.0.0.1:", "localhost:", "[::1]:"].map { Array($0.utf8) }

    static func render(_ v: JSON) -> String {
        let s = v.stringValue ?? v.compact
        return s.count > 80 ? String(s.prefix(77)) + "…" : s
    }

    static func escape(_ k: String) -> String {
        guard k.utf8.contains(where: { $0 == 0x7E || $0 == 0x2F }) else { return k }
        return k.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
    }

    /// Exchanges outside any 3DS transaction (plain HTTP), paired by method and loopback-normalised URL in order.
    static func compareOtherExchanges(_ a: [StoredExchange], _ b: [StoredExchange], _ ta: [ThreeDSTransaction], _ tb: [ThreeDSTransaction],
                                      maxSteps: Int, byMatch: Bool = false) throws(TooDifferent) -> [Change] {
        let inA = Set(ta.flatMap { $0.messages.map(\.exchangeID) }), inB = Set(tb.flatMap { $0.messages.map(\.exchangeID) })
        let oa = a.filter { !inA.contains($0.id) }, ob = b.filter { !inB.contains($0.id) }
        func key(_ x: StoredExchange) -> String { x.method + " " + withoutLoopbackPort(x.url) }
        var out: [Change] = []
        let pairs: [Pairing]
        if byMatch { // each replayed exchange with the one it matched; A's exchanges never asked for are not compared
            let indexOfA = Dictionary(oa.enumerated().map { ($0.element.id, $0.offset) }, uniquingKeysWith: { x, _ in x })
            var taken = Set<Int>()
            pairs = ob.indices.map { j in
                if let id = ob[j].replay?.recordedExchangeID, let i = indexOfA[id], taken.insert(i).inserted { return .both(i, j) }
                return .onlyB(j)
            }
        } else {
            pairs = try pair(oa.map(key), ob.map(key), what: "plain exchanges", maxSteps: maxSteps)
        }
        for p in pairs {
            switch p {
            case let .both(i, j):
                if oa[i].status != ob[j].status {
                    out.append(Change(kind: .status, exchangeA: oa[i].id, exchangeB: ob[j].id, message: key(oa[i]),
                                      before: oa[i].status.map { String($0) } ?? "no response", after: ob[j].status.map { String($0) } ?? "no response"))
                }
            case let .onlyA(i): out.append(Change(kind: .missingExchange, exchangeA: oa[i].id, message: key(oa[i])))
            case let .onlyB(j): out.append(Change(kind: .extraExchange, exchangeB: ob[j].id, message: key(ob[j])))
            }
        }
        return out
    }
}
