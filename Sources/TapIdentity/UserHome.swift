import Foundation

/// The per-user directory (`$THREEDSTAPE_HOME` or `~/.3dstape`): the interception CA (`ca/`), 3dstape's test DS identity
/// for key substitution (`ca/ds/`) and the sandbox's keys (`sandbox/`), each made on first use.
public struct UserHome: Sendable {
    public let path: String

    /// `$THREEDSTAPE_HOME`, else `~/.3dstape`.
    public static func resolve(environment: [String: String] = ProcessInfo.processInfo.environment) -> UserHome {
        if let h = environment["THREEDSTAPE_HOME"], !h.isEmpty { return UserHome(path: h) }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return UserHome(path: (home as NSString).appendingPathComponent(".3dstape"))
    }

    public init(path: String) { self.path = path }

    /// What in this directory others could read: private files (keys, key logs) that are not 0600, and directories
    /// holding such files that are not 0700, each as one warning line. Certificates are public and may be readable.
    public func permissionWarnings() -> [String] {
        let fm = FileManager.default
        guard fm.fileExists(atPath: path) else { return [] }
        var out: [String] = []
        func mode(_ p: String) -> Int? { (try? fm.attributesOfItem(atPath: p)[.posixPermissions] as? NSNumber)?.intValue }
        func visit(_ dir: String, depth: Int) {
            guard depth < 4, let names = try? fm.contentsOfDirectory(atPath: dir) else { return }
            var holdsPrivate = false
            var lines: [String] = []
            for name in names.sorted() {
                let p = (dir as NSString).appendingPathComponent(name)
                var isDir: ObjCBool = false
                guard fm.fileExists(atPath: p, isDirectory: &isDir) else { continue }
                if isDir.boolValue { visit(p, depth: depth + 1); continue }
                let lower = name.lowercased()
                guard lower.contains("key") || lower.hasSuffix(".log"), !lower.hasSuffix("-cert.pem") else { continue }
                holdsPrivate = true
                if let m = mode(p), m & 0o077 != 0 { lines.append("\(p) is readable by other users (mode \(String(m, radix: 8))): chmod 600 it") }
            }
            if holdsPrivate, let m = mode(dir), m & 0o077 != 0 {
                out.append("\(dir) is open to other users (mode \(String(m, radix: 8))); it holds private keys: chmod 700 it")
            }
            out += lines
        }
        visit(path, depth: 0)
        return out
    }

    /// The sandbox's keys in `<home>/sandbox`, made on first use.
    public func sandboxKeys() throws -> SandboxKeys {
        try SandboxKeys.loadOrCreate(in: (path as NSString).appendingPathComponent("sandbox"))
    }

    /// 3dstape's own test DS identity in `<home>/ca/ds`, made on first use: what `ca export --ds` hands a client and
    /// `record --decrypt substitute` and `replay` sign and decrypt with.
    public func testDSKeys() throws -> SandboxKeys {
        try SandboxKeys.loadOrCreate(in: (path as NSString).appendingPathComponent("ca/ds"), name: "3dstape Test")
    }
}
