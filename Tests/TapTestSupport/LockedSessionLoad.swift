import Foundation
import TapCore
import TapCrypto
import TapHTTP
import TapHTTPService
import TapNet
import TapSQLite

/// Load on a server whose session writer cannot commit, for the backpressure tests of the recorder and the replayer:
/// another connection holds the session file's exclusive lock while POSTs go to the server one after another; once
/// the answers stop coming (the writer's backlog past the server's limit, the next one waiting), the lock is released
/// and the rest complete.
public struct LockedSessionLoad {
    /// Each request's status (0 when it failed), in order.
    public var statuses: [Int]
    /// How many were answered before the answers stopped coming.
    public var answeredWhileLocked: Int
    /// Whether all were answered within 30 s of the lock's release.
    public var completed: Bool

    /// Sends `count` POSTs of `body(i)` to `url` while the file at `sessionPath` is locked, as above. A stall counts
    /// once `minimumBeforeStall` answers came (a slow start under ThreadSanitizer is no stall) and then none for a
    /// second (the file stays locked while one waits, so the second costs nothing but time).
    public static func run(sessionPath: String, url: HTTPURL, count: Int, minimumBeforeStall: Int,
                           body: @escaping @Sendable (Int) -> [UInt8]) throws -> LockedSessionLoad {
        let other = try Database(path: sessionPath)
        try other.execute("BEGIN EXCLUSIVE")
        let done = DispatchSemaphore(value: 0)
        let statuses = Locked<[Int]>([])
        let client = BlockingHTTPClient(tls: try TLSContext(clientRoots: []), timeout: 30)
        // A thread of its own rather than the global queue, whose few threads other tests that wait may all hold.
        let sender = Thread {
            for i in 0..<count {
                let status = (try? client.send("POST", url, headers: [("Content-Type", "application/json")], body: body(i)).head.status) ?? 0
                statuses.withLock { $0.append(status) }
            }
            done.signal()
        }
        sender.start()
        var seen = 0
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            Thread.sleep(forTimeInterval: 1)
            let now = statuses.withLock { $0.count }
            if now >= minimumBeforeStall, now == seen { break }
            seen = now
        }
        try other.execute("COMMIT")
        let completed = done.wait(timeout: .now() + 30) == .success
        return LockedSessionLoad(statuses: statuses.withLock { $0 }, answeredWhileLocked: seen, completed: completed)
    }
}
