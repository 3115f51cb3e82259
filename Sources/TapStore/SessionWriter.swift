import Dispatch
import Foundation
import Synchronization
import TapCompression
import TapCore
import TapSQLite

/// Writes session events into a new session file from its own thread, in batched transactions, so that
/// a slow disk never stalls the network loop. `submit` never blocks on I/O. Each exchange goes through the writer's
/// `ExchangeStage`s, on its thread, before it is stored; the writer itself only stores.
public final class SessionWriter: Sendable {
    public let path: String
    private let queue = Locked<[SessionEvent]>([])
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let stopping = Atomic<Bool>(false)
    private let discarding = Atomic<Bool>(false)
    private let written = Atomic<Int>(0)
    private let queued = Atomic<Int>(0)
    private let queuedBytes = Atomic<Int>(0)
    private let failure = Locked<String?>(nil)
    /// Bodies larger than this are stored zlib-compressed (flag column `*_body_compressed`).
    public static let compressAbove = 8 * 1024

    private let onExchange: (@Sendable (ExchangeLine) -> Void)?
    private let stages: [any ExchangeStage]
    /// Told, once, when recording stops before `close` (disk full, the file deleted, an I/O error), and when the file
    /// is locked by another process and when it is released. Called on the writer thread.
    private let onProblem: (@Sendable (String) -> Void)?
    private let dropped = Atomic<Int>(0)
    /// The file's identity (device, inode) when created: a file deleted or replaced under the recorder is noticed.
    private let identity: (Int, Int)?

    /// Creates an empty file readable by its owner only (0600), refusing one that exists and any symlink
    /// (O_EXCL|O_NOFOLLOW), so that SQLite then opens it, and its WAL and shared-memory files take its mode.
    static func createPrivateFile(_ path: String) throws {
        do { try SecureFile.create(path, contents: [], mode: 0o600) } catch {
            throw SessionFileError(error.description.replacingOccurrences(of: "remove it or use --force", with: "choose another --session or remove it"))
        }
    }

    /// Creates the file (refusing to overwrite one that exists) and starts the writer thread.
    /// `onExchange` is called on the writer thread for each exchange, once prepared (the live view).
    /// The metadata of a session written by a replay of the session at `path` (`web` links the two by it).
    public static func replayMeta(of path: String, label: String? = nil) -> [(String, String)] {
        [("created_at", ISO8601DateFormatter().string(from: Date())), ("mode", "replay"), ("label", label ?? "replay of \(path)"),
         ("replayed_session", path), ("masked", "yes")]
    }

    /// `stages` prepare each exchange for storage, in order (TapRecording's `RecordingStages.standard`: decoding, 3DS
    /// extraction and masking, app-channel decryption; its `SessionWriter.init(path:meta:keys:…)` passes them).
    /// `maxBytes` caps the file's size (SQLite's `max_page_count`): past it, recording stops as on a full disk.
    /// `onProblem` is told when recording stops early or the file is locked (see the property).
    public init(path: String, meta: [(String, String)], stages: [any ExchangeStage], maxBytes: Int? = nil,
                onProblem: (@Sendable (String) -> Void)? = nil, onExchange: (@Sendable (ExchangeLine) -> Void)? = nil) throws {
        self.onExchange = onExchange
        self.onProblem = onProblem
        self.stages = stages
        let dir = (path as NSString).deletingLastPathComponent
        if !dir.isEmpty { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
        try SessionWriter.createPrivateFile(path)
        self.path = path
        identity = SessionWriter.fileIdentity(path)
        let db = try Database(path: path)
        // WAL while recording. synchronous=OFF: a commit is in the OS page cache when it returns, which is
        // all that a crash or `kill -9` of this process needs (the file stays valid, committed exchanges
        // survive); only a power loss or kernel crash could lose recent ones. Checkpoints therefore never
        // stall the writer on fsync; `close` syncs the file once at the end.
        // 16 KiB pages: a typical exchange row (a few KB of bodies) fits in its leaf page, where 4 KiB pages spilled it
        // into overflow pages (more WAL frames and write calls per exchange; same file size). An earlier trial blamed
        // 16 KiB pages for late replay answers, but a stray process on the benchmark's second core made that noise;
        // with it gone the replayer's timing is the same with either size. 4 KiB pages were tried again: callgrind counted
        // 11 % fewer writer instructions an exchange (smaller WAL frames to checksum), but under load (wrk -c16) the
        // writer's CPU an exchange went from 22 us user + 5 us system to 23-24 us + 10-12 us (twice the WAL frames and
        // write calls, each batch's rows spread over more pages): kept at 16 KiB.
        // Checkpoints every 4 MiB of WAL: the commit that runs one copies the whole WAL into the file, and at 16 MiB
        // such commits took 9-27 ms (against under 1 ms for 256 exchanges), long enough for the replayer's answers to
        // wait up to 11-19 ms for the writer at 28k req/s; at 4 MiB, 4-6 ms. The pages copied are the same in all.
        try db.execute("PRAGMA page_size=\(SessionWriter.pageSize); PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; "
                       + "PRAGMA wal_autocheckpoint=\(SessionWriter.checkpointBytes / SessionWriter.pageSize); PRAGMA foreign_keys=ON;")
        try db.transaction { try SessionSchema.create(in: db, meta: meta) }
        if let maxBytes { try db.execute("PRAGMA max_page_count=\(max(maxBytes / SessionWriter.pageSize, 16))") }
        let box = DatabaseBox(db)
        let thread = Thread { [self] in
            Thread.current.name = "3dstape-writer" // as top -H and perf show it (set from the thread itself on Linux)
            ThreadPriority.lowerCurrent(by: SessionWriter.lowerPriority) // see lowerPriority
            self.runLoop(box.take()) // the connection closes as this returns (the loop held its only reference)
            self.finished.signal() // so `close` returns with the file closed: it can be renamed or removed at once
        }
        thread.start()
    }

    /// Queues an event. Thread-safe; never waits for the disk. The writer wakes every `flushInterval`,
    /// or at once when `batchSize` events are waiting, so that a busy proxy does not pay a thread
    /// wake-up per exchange.
    public func submit(_ event: SessionEvent) {
        queued.add(1, ordering: .relaxed)
        queuedBytes.add(event.bodyBytes, ordering: .relaxed)
        let n = queue.withLock { q -> Int in
            q.append(event)
            return q.count
        }
        if n == 1 || n == SessionWriter.batchSize { wake.signal() }
    }

    /// How much lower than the process's the writer thread's CPU priority is (`ThreadPriority`: its nice value that much
    /// higher, on Linux, where a thread has its own): where the cores are all busy, the network loop runs before the
    /// bookkeeping. Recording under load (tools/bench/proxy.sh's wrk -c16, 2 cores shared with wrk and the upstream), six
    /// alternated rounds: 22,260 req/s at the same priority, 22,740 at +5, 22,500 at +10; p99 3.5-4.3 ms (one round 18)
    /// at the same, 3.0-4.2 at +5. The backlog stays bounded (`WriterBackpressure`): a writer starved for longer slows the
    /// traffic instead. SCHED_IDLE was worse (17,700-19,500 req/s: the writer fell behind and requests were paced).
    static let lowerPriority: Int32 = 5

    /// The session file's page size (see `init`).
    static let pageSize = 16384
    /// WAL bytes after which a commit checkpoints them into the file (see `init`).
    static let checkpointBytes = 4 << 20

    /// Events that wake the writer at once.
    public static let batchSize = 128
    /// The most events one transaction writes.
    static let maxTransaction = 256
    /// How long the writer, woken by a first event after an idle spell, waits for more (or for `batchSize` of them) before
    /// it starts a transaction: a commit costs page writes whatever it holds, and one exchange per commit (traffic just
    /// below the writer's pace) cost twice the writes of a batch.
    static let gatherTime = DispatchTimeInterval.milliseconds(2)
    /// The gather of a writer that has been busy less than a quarter of the time (`BusyMeter`): replaying app challenge
    /// flows (about 2,400 exchanges a second, the writer busy a tenth of the time) it spent 0.16-0.17 ms of CPU per flow
    /// gathering 2 ms and 0.10 gathering 10 (20: no better). A writer near its limit keeps the short gather: recording
    /// at one connection (writer busy 90 %), the long one's larger batches took CPU from the network loop in bursts and
    /// its p99 went from 0.11-0.13 ms to 0.5-1 ms. An exchange reaches the file (and the live view) at most this much later.
    static let idleGatherTime = DispatchTimeInterval.milliseconds(10)
    /// The idle time (ns) after which the writer gathers (see `gatherTime`).
    static let idleBeforeGather: UInt64 = 200_000

    /// The longest an event waits in memory before its transaction starts.
    public static let flushInterval = DispatchTimeInterval.milliseconds(20)

    /// Events submitted and not yet committed. The proxy stops taking new requests while this is high (`WriterBackpressure`),
    /// so that a disk slower than the network bounds memory instead of growing a queue.
    public var backlog: Int { queued.load(ordering: .relaxed) }

    /// Body bytes held by the events in `backlog`: a few large uploads weigh more than many small exchanges.
    public var backlogBytes: Int { queuedBytes.load(ordering: .relaxed) }

    /// Body bytes waiting beyond which the writer counts as behind whatever the event count (hardening: 60 uploads of
    /// 15 MiB once held 1 GB while the event count stayed low).
    public static let backlogByteLimit = 32 << 20

    /// Exchanges committed to the file so far.
    public var exchangesWritten: Int { written.load(ordering: .relaxed) }

    /// The first write error, if any (writing stops at the first one; the file keeps what was committed).
    public var writeError: String? { failure.withLock { $0 } }

    /// Exchanges that were not written because recording had stopped.
    public var exchangesDropped: Int { dropped.load(ordering: .relaxed) }

    static func fileIdentity(_ path: String) -> (Int, Int)? {
        guard let a = try? FileManager.default.attributesOfItem(atPath: path),
              let dev = (a[.systemNumber] as? NSNumber)?.intValue, let ino = (a[.systemFileNumber] as? NSNumber)?.intValue else { return nil }
        return (dev, ino)
    }

    /// Stops recording: the reason kept and told once; what is queued is let go (so the proxy's backpressure ends).
    private func stop(_ reason: String) {
        let first = failure.withLock { f -> Bool in
            guard f == nil else { return false }
            f = reason
            return true
        }
        if first {
            onProblem?("recording stopped: \(reason); the session file keeps the \(exchangesWritten) exchanges already written and stays valid; "
                       + "traffic keeps flowing, unrecorded")
        }
    }

    /// Lets a batch go without writing it (recording has stopped), keeping the counters that backpressure reads right.
    private func drop(_ batch: [SessionEvent]) {
        dropped.add(SessionWriter.exchanges(in: batch), ordering: .relaxed)
        countOff(batch)
    }

    /// Takes these events off the backlog counters (written or dropped).
    private func countOff(_ events: some Collection<SessionEvent>) {
        queued.subtract(events.count, ordering: .relaxed)
        queuedBytes.subtract(events.reduce(0) { $0 + $1.bodyBytes }, ordering: .relaxed)
    }

    /// How many of these events are exchanges.
    static func exchanges(in events: some Sequence<SessionEvent>) -> Int {
        events.reduce(0) { if case .exchange = $1 { return $0 + 1 }; return $0 }
    }

    /// Everything queued, the queue left empty.
    private func takeQueued() -> [SessionEvent] {
        queue.withLock { q in
            defer { q.removeAll(keepingCapacity: true) }
            return q
        }
    }

    /// Writes everything queued, checkpoints the WAL into the main file, and stops the thread.
    public func close() {
        guard !stopping.exchange(true, ordering: .sequentiallyConsistent) else { return }
        wake.signal()
        finished.wait()
    }

    /// Stops at once and removes the file with its WAL and shared-memory files: what is queued is dropped and the
    /// closing indexes are not built. For a session that must appear whole or not at all (`stagingPath`) when its
    /// writing is abandoned (an import stopped by a signal or a bad entry). Safe after `close`.
    public func discard() {
        discarding.store(true, ordering: .sequentiallyConsistent)
        close()
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
    }

    /// A hidden name beside `path`, `.NAME.partial-PID-RANDOM`, where a session that must appear whole or not at all is
    /// written, to be `publish`ed to `path` once complete: `ls`, `web` and `replay` look for `*.3dstape` files and do not
    /// see it, and a process killed outright leaves a file that says what it is.
    public static func stagingPath(for path: String) -> String {
        let dir = (path as NSString).deletingLastPathComponent, name = (path as NSString).lastPathComponent
        let hidden = ".\(name).partial-\(getpid())-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
        return dir.isEmpty ? hidden : (dir as NSString).appendingPathComponent(hidden)
    }

    /// Closes the session and gives it the name `destination` (in the same directory as a `stagingPath`), never over an
    /// existing file: a hard link that fails if the name is taken, then the staging name removed (a rename, after a
    /// check, where the file system has no hard links).
    public func publish(as destination: String) throws {
        close()
        if let failure = writeError { throw SessionFileError("\(destination): \(failure)") }
        if link(path, destination) == 0 {
            unlink(path)
            return
        }
        let linkError = errno
        let taken = SessionFileError("\(destination) already exists; choose another --session or remove it")
        guard linkError != EEXIST else { throw taken }
        var st = stat()
        guard lstat(destination, &st) != 0 else { throw taken }
        guard rename(path, destination) == 0 else {
            throw SessionFileError("cannot move \(path) to \(destination): \(String(cString: strerror(errno)))")
        }
    }

    private func runLoop(_ db: Database) {
        var statements: Statements?
        do { statements = try Statements(db, stages: stages, wantsLines: onExchange != nil) } catch { stop("\(error)") }
        var lastIdentityCheck = Date()
        var locked = false
        var load = BusyMeter()
        while true {
            let idleFrom = DispatchTime.now().uptimeNanoseconds
            _ = wake.wait(timeout: .now() + SessionWriter.flushInterval)
            if discarding.load(ordering: .sequentiallyConsistent) {
                drop(takeQueued())
                break
            }
            // Woken after an idle spell by its first event: let the events right behind it (the rest of a 3DS flow) join
            // the same transaction. Not when busy: a writer that pauses with work waiting makes the network loop wait.
            if DispatchTime.now().uptimeNanoseconds - idleFrom > SessionWriter.idleBeforeGather,
               queue.withLock({ (1..<SessionWriter.batchSize).contains($0.count) }) {
                _ = wake.wait(timeout: .now() + (load.isLight ? SessionWriter.idleGatherTime : SessionWriter.gatherTime))
            }
            if let identity, Date().timeIntervalSince(lastIdentityCheck) >= 1, failure.withLock({ $0 }) == nil {
                lastIdentityCheck = Date()
                if let now = SessionWriter.fileIdentity(path) {
                    if now != identity { stop("\(path) was replaced by another file while recording") }
                } else {
                    stop("\(path) was deleted while recording (what was written is gone with it)")
                }
            }
            let batch = takeQueued()
            let started = DispatchTime.now().uptimeNanoseconds
            if !batch.isEmpty {
                if let s = statements, failure.withLock({ $0 }) == nil { write(batch, with: s, in: db, locked: &locked) } else { drop(batch) }
            }
            let ended = DispatchTime.now().uptimeNanoseconds
            load.add(busy: ended - started, at: ended)
            if stopping.load(ordering: .sequentiallyConsistent), queue.withLock({ $0.isEmpty }) { break }
        }
        statements = nil
        guard !discarding.load(ordering: .sequentiallyConsistent) else { return } // the file is about to be removed
        // The indexes that recording does without (see SessionSchema.closingIndexes), built once over the whole file.
        if failure.withLock({ $0 }) == nil { try? db.execute(SessionSchema.closingIndexes) }
        try? db.execute("PRAGMA synchronous=FULL; PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE;")
    }

    /// Writes a batch in transactions of at most `maxTransaction` events, each counted off the backlog as it commits,
    /// so that a large backlog shrinks in steps and the proxy's backpressure eases step by step. On a lock held by
    /// another process the rest stays queued; on any other error recording stops.
    /// Writes `part` one event per transaction until one fails; returns how many were written (and counted).
    private func writeOneByOne(_ part: ArraySlice<SessionEvent>, with s: Statements, in db: Database) -> Int {
        var kept = 0
        for event in part {
            var line: ExchangeLine?
            do { try db.transaction { line = try s.write(event) } } catch { break }
            if let onExchange, let line { onExchange(line) }
            written.add(SessionWriter.exchanges(in: [event]), ordering: .relaxed)
            countOff([event])
            kept += 1
        }
        return kept
    }

    private func write(_ batch: [SessionEvent], with s: Statements, in db: Database, locked: inout Bool) {
        do {
            var start = 0
            while start < batch.count {
                let part = batch[start..<min(batch.count, start + SessionWriter.maxTransaction)]
                var lines: [ExchangeLine] = []
                do {
                    try db.transaction { for e in part { if let l = try s.write(e) { lines.append(l) } } }
                } catch let e as SQLiteError where e.isFull && part.count > 1 {
                    // One exchange that does not fit fails the whole transaction: keep those before it, written one
                    // at a time, then stop below (a 64KiB cap lost the whole first batch).
                    let kept = writeOneByOne(part, with: s, in: db)
                    queue.withLock { $0.insert(contentsOf: batch[(start + kept)...], at: 0) }
                    throw e
                } catch {
                    // What was not committed goes back to the queue's front, for the handlers below.
                    queue.withLock { $0.insert(contentsOf: batch[start...], at: 0) }
                    throw error
                }
                if let onExchange { lines.forEach(onExchange) }
                written.add(SessionWriter.exchanges(in: part), ordering: .relaxed)
                countOff(part)
                start += part.count
            }
            if locked {
                locked = false
                onProblem?("the session file is writable again; \(batch.count) waiting events written")
            }
        } catch let e as SQLiteError where e.isBusy && !stopping.load(ordering: .sequentiallyConsistent) {
            // Another process holds the file's lock: the events stay queued (backpressure slows the traffic); try again.
            if !locked {
                locked = true
                onProblem?("the session file is locked by another process (\(e.message)); events wait in memory and are written when it is released")
            }
        } catch let e as SQLiteError where e.isFull {
            // The cap (max_page_count) counts the file's pages, not the WAL: the frames of the transaction that did
            // not fit stay in the WAL until a checkpoint truncates it; do that now rather than at close, and before
            // the stop is visible (`writeError`), so that whoever sees it sees the WAL already cut.
            try? db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            stop("the session file is full (\(e.message))")
            drop(takeQueued())
        } catch {
            stop("\(error)")
            drop(takeQueued())
        }
    }
}

/// Moves the connection into the writer thread (its single owner from then on).
private final class DatabaseBox: @unchecked Sendable {
    // Safe: the box is created on the caller's thread and emptied once, by the writer thread, before any
    // other use; the Database is never touched by two threads.
    private var db: Database?
    init(_ db: Database) { self.db = db }
    func take() -> Database {
        defer { db = nil }
        return db!
    }
}

/// The writer's inserts and updates, one per kind of event; each names its columns beside their values.
private final class Statements {
    let connection, connectionTLS, connectionClosed, exchange, message, note, replay, tunnel: RowWrite
    let db: Database
    let stages: [any ExchangeStage]
    /// Whether anyone reads the live-view lines (without a reader, none is made).
    let wantsLines: Bool

    init(_ db: Database, stages: [any ExchangeStage], wantsLines: Bool = true) throws {
        self.db = db
        self.stages = stages
        self.wantsLines = wantsLines
        connection = RowWrite(.insert, into: ConnectionsTable.table, db)
        connectionTLS = RowWrite(.update(key: ConnectionsTable.id), into: ConnectionsTable.table, db)
        connectionClosed = RowWrite(.update(key: ConnectionsTable.id), into: ConnectionsTable.table, db)
        exchange = RowWrite(.insert, into: ExchangesTable.table, db)
        message = RowWrite(.insert, into: MessagesTable.table, db)
        note = RowWrite(.insert, into: EventsTable.table, db)
        replay = RowWrite(.insert, into: ReplayMatchesTable.table, db)
        tunnel = RowWrite(.insert, into: TunnelsTable.table, db)
    }

    /// Writes one event; for an exchange, returns its live-view line.
    func write(_ event: SessionEvent) throws -> ExchangeLine? {
        typealias C = ConnectionsTable
        typealias N = EventsTable
        switch event {
        case let .connectionOpened(c):
            try connection.insert([(C.id, .integer(c.id)), (C.clientAddr, .text(c.clientAddress)), (C.acceptedAt, .real(c.acceptedAt)),
                                   (C.mode, .text(c.mode)), (C.upstream, opt(c.upstream))])
        case let .connectionTLS(id, version, cipher, sni, alpn, alpnOffered):
            try connectionTLS.update([(C.tlsVersion, .text(version)), (C.tlsCipher, opt(cipher)), (C.sni, opt(sni)), (C.alpn, opt(alpn)),
                                      (C.alpnOffered, opt(alpnOffered.map { ALPNOffer.stored($0.map(clientText)) }))], key: .integer(id))
        case let .connectionClosed(id, at):
            try connectionClosed.update([(C.closedAt, .real(at))], key: .integer(id))
        case let .note(at, kind, detail):
            // Notes quote what clients sent (a rejected target with a card number in it): the stages mask them like URLs, always.
            try note.insert([(N.at, .real(at)), (N.kind, .text(kind)), (N.detail, .text(clientText(detail)))])
        case let .exchange(captured):
            return try writeExchange(captured)
        }
        return nil
    }

    /// Text quoted from a client, as the stages store it (masked and printable).
    func clientText(_ text: String) -> String {
        stages.reduce(text) { $1.prepare(clientText: $0) }
    }

    func writeExchange(_ captured: ExchangeRecord) throws -> ExchangeLine? {
            var prepared = PreparedExchange(captured)
            for stage in stages { stage.prepare(&prepared) }
            let x = prepared.record, request = prepared.request, resp = prepared.response
            let (url, path, error) = (x.url, x.path, x.error)
            let (reqBody, reqZ) = Statements.storedBody(request.body)
            let (respBody, respZ) = resp.map { Statements.storedBody($0.body) } ?? (.null, false)
            typealias E = ExchangesTable
            typealias R = ReplayMatchesTable
            typealias T = TunnelsTable
            try exchange.insert { row in
                row.set(E.connectionID, .integer(x.connectionID)); row.set(E.seq, .integer(Int64(x.seq))); row.set(E.method, .text(x.method))
                row.set(E.url, .text(url)); row.set(E.host, opt(x.host)); row.set(E.path, opt(path))
                row.set(E.requestHeaders, .text(headersJSON(request.headers))); row.set(E.requestBody, reqBody)
                row.set(E.requestBodyCompressed, .integer(reqZ ? 1 : 0)); row.set(E.requestContentEncoding, opt(request.contentEncoding))
                row.set(E.requestWireSize, .integer(Int64(request.wireSize))); row.set(E.status, x.status.map { .integer(Int64($0)) } ?? .null)
                row.set(E.responseHeaders, resp.map { .text(headersJSON($0.headers)) } ?? .null); row.set(E.responseBody, respBody)
                row.set(E.responseBodyCompressed, .integer(respZ ? 1 : 0)); row.set(E.responseContentEncoding, opt(resp?.contentEncoding))
                row.set(E.responseWireSize, .integer(Int64(resp?.wireSize ?? 0))); row.set(E.upstream, opt(x.upstream))
                row.set(E.tRequestStart, .real(x.requestStart)); row.set(E.tUpstreamConnect, optReal(x.upstreamConnect))
                row.set(E.tTLSDone, optReal(x.tlsDone)); row.set(E.tRequestSent, optReal(x.requestSent)); row.set(E.tFirstByte, optReal(x.firstByte))
                row.set(E.tDone, optReal(x.done)); row.set(E.error, opt(error)); row.set(E.clientAbortAt, optReal(x.clientAbortAt))
            }
            let exchangeID = db.lastInsertRowID
            if let r = x.replay {
                try replay.insert([(R.exchangeID, .integer(exchangeID)), (R.recordedExchangeID, r.recordedExchangeID.map { .integer($0) } ?? .null),
                                   (R.matchedBy, opt(r.matchedBy)), (R.miss, opt(r.miss)),
                                   (R.scheduledDelayMs, optReal(r.scheduledDelayMs)), (R.actualDelayMs, optReal(r.actualDelayMs)),
                                   (R.faults, opt(r.faults)), (R.outcome, opt(r.outcome))])
            }
            if let t = x.tunnel {
                // The SNI and ALPN names are the client's bytes: stored printable, as notes are.
                try tunnel.insert([(T.exchangeID, .integer(exchangeID)), (T.host, .text(t.host)), (T.port, .integer(Int64(t.port))),
                                   (T.sni, opt(t.sni.map(clientText))), (T.alpnOffered, opt(t.alpnOffered.map { ALPNOffer.stored($0.map(clientText)) })),
                                   (T.bytesUp, .integer(Int64(t.bytesUp))), (T.bytesDown, .integer(Int64(t.bytesDown))),
                                   (T.ended, opt(t.ended)), (T.decidedBy, opt(t.decidedBy))])
            }
            // Each side's messages written where they are (no array of (direction, message) pairs made per exchange).
            for m in request.messages { try writeMessage(m, direction: "request", exchangeID: exchangeID) }
            for m in resp?.messages ?? [] { try writeMessage(m, direction: "response", exchangeID: exchangeID) }
            guard wantsLines else { return nil }
            return ExchangeLine(at: x.requestStart, method: x.method, url: url, status: x.status,
                                requestTypes: request.messages.compactMap { $0.messageType },
                                responseTypes: resp?.messages.compactMap { $0.messageType } ?? [],
                                durationMs: ((x.done ?? x.requestStart) - x.requestStart) * 1000, error: error)
    }

    /// Stores one found message of the exchange `exchangeID` (a row of `messages`).
    func writeMessage(_ m: MessageRecord, direction: String, exchangeID: Int64) throws {
        typealias M = MessagesTable
        try message.insert { row in
            row.set(M.exchangeID, .integer(exchangeID)); row.set(M.direction, .text(direction)); row.set(M.location, .text(m.location))
            row.set(M.messageType, opt(m.messageType)); row.set(M.messageVersion, opt(m.messageVersion))
            row.set(M.threeDSServerTransID, opt(m.threeDSServerTransID)); row.set(M.dsTransID, opt(m.dsTransID))
            row.set(M.acsTransID, opt(m.acsTransID)); row.set(M.sdkTransID, opt(m.sdkTransID)); row.set(M.transStatus, opt(m.transStatus))
            row.set(M.errorCode, opt(m.errorCode))
            // A message that is the whole (stored) body is not stored twice; v_messages and the reader join it back.
            row.set(M.json, m.json.map { .text($0.compact) } ?? .null); row.set(M.decryption, opt(m.decryption))
        }
    }

    func opt(_ s: String?) -> SQLiteValue { s.map { .text($0) } ?? .null }
    func optReal(_ d: Double?) -> SQLiteValue { d.map { .real($0) } ?? .null }

    static func storedBody(_ body: [UInt8]) -> (SQLiteValue, Bool) {
        if body.isEmpty { return (.null, false) }
        if body.count > SessionWriter.compressAbove, let z = try? Compression.compress(body, format: .zlib), z.count < body.count {
            return (.blob(z), true)
        }
        return (.blob(body), false)
    }

    /// The bytes `headersJSON` writes, kept between calls for their capacity: an array made and freed per call cost the
    /// writer ~1,300 instructions an exchange (two calls).
    private var headersBytes: [UInt8] = []

    /// `[["name","value"],…]`, written straight from the pairs (the same text as the JSON tree's `compact`).
    func headersJSON(_ headers: [(String, String)]) -> String {
        var out = headersBytes
        headersBytes = [] // `out` the only reference while it grows
        defer { headersBytes = out }
        out.removeAll(keepingCapacity: true)
        out.reserveCapacity(headers.reduce(2) { $0 + $1.0.utf8.count + $1.1.utf8.count + 8 })
        out.append(0x5B)
        for (n, (name, value)) in headers.enumerated() {
            if n > 0 { out.append(0x2C) }
            out.append(0x5B)
            JSON.writeString(name, into: &out)
            out.append(0x2C)
            JSON.writeString(value, into: &out)
            out.append(0x5D)
        }
        out.append(0x5D)
        return String(decoding: out, as: UTF8.self)
    }
}

/// How busy the session writer has been: the share of wall time spent writing over the last complete window of
/// `window` ns (a quarter of a second). Light means under a quarter; a writer that has not yet measured a window
/// counts as busy (it gathers briefly until it knows).
struct BusyMeter {
    static let window: UInt64 = 250_000_000
    private var windowStart: UInt64?
    private var busyInWindow: UInt64 = 0
    /// The busy share of the last complete window, if there has been one.
    private(set) var lastShare: Double?

    var isLight: Bool { (lastShare ?? 1) < 0.25 }

    /// Counts `busy` ns of writing that ended at `now` (monotonic ns).
    mutating func add(busy: UInt64, at now: UInt64) {
        guard let start = windowStart else {
            windowStart = now
            busyInWindow = 0
            return
        }
        busyInWindow += busy
        if now - start >= BusyMeter.window {
            lastShare = Double(busyInWindow) / Double(now - start)
            windowStart = now
            busyInWindow = 0
        }
    }
}
