import Foundation

/// The directory a command writes its report into (`check --report`, `timeouts --report`): one that holds no earlier
/// report, so that two runs never mix their files.
enum ReportDirectory {
    /// `path` when given: created, or refused (exit 2) when it already holds a `report.json`. Without one, `defaultStem`,
    /// or `defaultStem-2`, `-3` … when a run in the same second took it.
    static func create(_ path: String?, defaultStem: String) throws -> String {
        let files = FileManager.default
        if let path {
            if files.fileExists(atPath: (path as NSString).appendingPathComponent("report.json")) {
                throw InvalidArguments("--report \(path) already holds a report (report.json): give a new directory, or remove that one")
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
}
