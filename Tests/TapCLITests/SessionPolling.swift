import Foundation

/// Waits for what a running recorder or replayer has written to its session file, instead of sleeping a fixed time
/// (a fixed sleep is too short on a loaded machine and wasted on an idle one).
enum SessionPolling {
    /// Runs `sql` on `session` with the sqlite3 shell every 20 ms until it prints `expected`, or `seconds` pass;
    /// whether it did.
    static func until(_ session: String, _ sql: String, prints expected: String, within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        repeat {
            if let r = try? sh(["sqlite3", session, sql]), r.out.trimmingCharacters(in: .whitespacesAndNewlines) == expected { return true }
            usleep(20_000)
        } while Date() < deadline
        return false
    }

    /// Whether the replayer's RReq (sent after the final CRes, or after the SDK's Erro, at its recorded offset) is in its
    /// session within `seconds`.
    static func rreqRecorded(in session: String, within seconds: Double = 5) -> Bool {
        until(session, "SELECT count(*) > 0 FROM messages WHERE message_type = 'RReq'", prints: "1", within: seconds)
    }
}
