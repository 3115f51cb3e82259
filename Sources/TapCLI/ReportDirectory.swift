import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TapArguments
import TapCore

/// The directory a command writes its report into (`check --report`, `timeouts --report`): one that holds no earlier
/// report, so that two runs never mix their files.
enum ReportDirectory {
    /// `path` when given: created, or refused (exit 2) when it is not a directory or not empty (a run's sessions and logs
    /// must never replace a file there: a recorded session, an earlier report). Without one, `defaultStem`, or
    /// `defaultStem-2`, `-3` … when a run in the same second took it.
    static func create(_ path: String?, defaultStem: String) throws -> String {
        let files = FileManager.default
        if let path {
            var isDirectory: ObjCBool = false
            if files.fileExists(atPath: path, isDirectory: &isDirectory) {
                guard isDirectory.boolValue else { throw InvalidArguments("--report \(path) is a file; give a new or empty directory") }
                let entries = (try? files.contentsOfDirectory(atPath: path)) ?? []
                if entries.contains("report.json") {
                    throw InvalidArguments("--report \(path) already holds a report (report.json): give a new directory, or remove that one")
                }
                if !entries.isEmpty { throw InvalidArguments("--report \(path) is not empty; give a new or empty directory") }
            }
            try files.createDirectory(atPath: path, withIntermediateDirectories: true)
            return path
        }
        try files.createDirectory(atPath: (defaultStem as NSString).deletingLastPathComponent.isEmpty ? "." : (defaultStem as NSString).deletingLastPathComponent,
                                  withIntermediateDirectories: true)
        for n in 1...1000 {
            let candidate = n == 1 ? defaultStem : "\(defaultStem)-\(n)"
            // Made, not looked for: of two runs in the same second, one makes the directory and the other moves on.
            do { try files.createDirectory(atPath: candidate, withIntermediateDirectories: false) } catch {
                if files.fileExists(atPath: candidate) { continue }
                throw error
            }
            return candidate
        }
        throw CommandFailure("\(defaultStem): a thousand reports of the same second are there already")
    }

    /// Writes a report file that nothing else may be at: never through a symlink, never over a file that is there.
    static func write(_ text: String, to path: String) throws {
        do { try SecureFile.create(path, contents: Array(text.utf8), mode: 0o644) } catch { throw CommandFailure(error.description) }
    }

    /// Checks, before anything runs, that `--junit FILE` can be written and replaces nothing it must not: not a
    /// directory, not a session file (the one being checked, or any other), in a directory that exists.
    static func checkJUnitPath(_ path: String) throws {
        var st = stat()
        if lstat(path, &st) == 0 {
            if st.st_mode & S_IFMT == S_IFDIR { throw InvalidArguments("--junit \(path) is a directory") }
            if let h = FileHandle(forReadingAtPath: path), let head = try? h.read(upToCount: 16), head == Data("SQLite format 3\u{0}".utf8) {
                throw InvalidArguments("--junit \(path) is a session file; JUnit XML goes to a file of its own")
            }
        }
        let dir = (path as NSString).deletingLastPathComponent
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dir.isEmpty ? "." : dir, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw InvalidArguments("--junit \(path): the directory \(dir) does not exist")
        }
    }

    /// Writes the JUnit file: an existing entry at `path` (a file, or a planted symlink, never its target) is replaced.
    static func writeJUnit(_ text: String, to path: String) throws {
        do { try SecureFile.create(path, contents: Array(text.utf8), mode: 0o644, replace: true) } catch { throw CommandFailure(error.description) }
    }
}
