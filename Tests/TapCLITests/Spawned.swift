import TapCore
import Foundation
import Synchronization

/// A child process whose output is collected in the background, for end-to-end tests.
final class Spawned: Sendable {
    let process: Process
    private let out = ByteBox()
    private let err = ByteBox()
    private let stdinPipe = Pipe()
    /// How many of the two output pipes have reached end of file (all the process wrote has been collected).
    private let pipesEnded = Locked(0)

    init(_ executable: String, _ args: [String], environment: [String: String] = [:]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = args
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        p.environment = env
        let o = Pipe(), e = Pipe()
        p.standardOutput = o
        p.standardError = e
        p.standardInput = stdinPipe
        process = p
        let outBox = out, errBox = err, ended = pipesEnded
        o.fileHandleForReading.readabilityHandler = { h in
            let d = h.availableData
            if !d.isEmpty { outBox.bytes.withLock { $0 += d } } else { h.readabilityHandler = nil; ended.withLock { $0 += 1 } }
        }
        e.fileHandleForReading.readabilityHandler = { h in
            let d = h.availableData
            if !d.isEmpty { errBox.bytes.withLock { $0 += d } } else { h.readabilityHandler = nil; ended.withLock { $0 += 1 } }
        }
        try ProcessLaunch.run(p)
    }

    var stdout: String { String(decoding: out.bytes.withLock { $0 }, as: UTF8.self) }
    var stderr: String { String(decoding: err.bytes.withLock { $0 }, as: UTF8.self) }

    /// Waits until `predicate` holds for (stdout, stderr), or throws after `timeout` seconds.
    func waitFor(_ what: String, timeout: Double = 20, _ predicate: (String, String) -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if predicate(stdout, stderr) { return }
            if !process.isRunning, !predicate(stdout, stderr) { break }
            usleep(20_000)
        }
        throw SpawnError("timed out waiting for \(what); stdout: \(stdout.suffix(500)) stderr: \(stderr.suffix(800))")
    }

    /// The first match of `prefix` followed by a port number in stdout+stderr.
    func port(after prefix: String) throws -> UInt16 {
        var found: UInt16?
        try waitFor("'\(prefix)<port>'") { o, e in
            for line in (o + "\n" + e).split(separator: "\n") {
                guard let r = line.range(of: prefix) else { continue }
                let digits = line[r.upperBound...].prefix { $0.isNumber }
                if let p = UInt16(digits) { found = p; return true }
            }
            return false
        }
        return found!
    }

    func interrupt() { process.interrupt() }
    func kill9() { kill(process.processIdentifier, SIGKILL) }

    /// Waits for exit and returns the status (after closing stdin).
    @discardableResult
    func wait(timeout: Double = 20) throws -> Int32 {
        try? stdinPipe.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        if process.isRunning {
            kill9()
            throw SpawnError("process did not exit within \(timeout) s")
        }
        // What it wrote last (a summary line) may still be in the pipes: collect it before the caller reads stdout/stderr
        // (under a loaded suite the handlers lagged and a test saw stderr without the recorder's summary).
        let drained = Date().addingTimeInterval(2)
        while pipesEnded.withLock({ $0 }) < 2, Date() < drained { usleep(2_000) }
        return process.terminationStatus
    }

    /// Ends the process however it is, for cleanup.
    func stop() {
        try? stdinPipe.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        for _ in 0..<100 where process.isRunning { usleep(20_000) }
        if process.isRunning { kill9() }
    }
}

/// Starts test processes one at a time: Foundation's Process.run() crashed (SIGSEGV in a memcpy inside it) twice when
/// the suite's parallel tests launched processes at the same moment; the launch is short, the processes still run at once.
enum ProcessLaunch {
    static let lock = NSLock()

    static func run(_ p: Process) throws {
        lock.lock()
        defer { lock.unlock() }
        try p.run()
    }
}

/// Output collected from a pipe's background handler.
final class ByteBox: Sendable {
    let bytes = Locked<[UInt8]>([])
}

struct SpawnError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// Runs a command to completion and returns (status, stdout, stderr).
@discardableResult
func sh(_ args: [String], stdin: String? = nil) throws -> (status: Int32, out: String, err: String) {
    let s = try Spawned("/usr/bin/env", args)
    if let stdin, let h = s.process.standardInput as? Pipe { h.fileHandleForWriting.write(Data(stdin.utf8)) }
    let status = try s.wait(timeout: 60)
    usleep(20_000)
    return (status, s.stdout, s.stderr)
}
