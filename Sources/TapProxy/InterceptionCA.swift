import Foundation
import TapCore
import TapCrypto

/// The per-user directory (`$THREEDSTAPE_HOME` or `~/.3dstape`) and the interception CA kept in it.
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

    public var caCertificatePath: String { (path as NSString).appendingPathComponent("ca/ca-cert.pem") }
    public var caKeyPath: String { (path as NSString).appendingPathComponent("ca/ca-key.pem") }

    /// Loads the interception CA, creating it on first use (key file mode 0600, directory 0700).
    /// Returns whether it was just created.
    /// Creation is serialised with other processes by a lock file beside the CA, so commands started at the same moment
    /// on a fresh home (two `check` runs in CI) share one CA instead of one of them failing on a half-written one.
    public func interceptionCA(create: Bool = true) throws -> (CertificateAuthority, created: Bool) {
        let fm = FileManager.default
        if !create || (fm.fileExists(atPath: caCertificatePath) && fm.fileExists(atPath: caKeyPath)) { return try loadOrCreateCA(create: create) }
        let dir = (caKeyPath as NSString).deletingLastPathComponent
        do {
            try fm.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw CAError("cannot create \(dir): \(error.localizedDescription)")
        }
        do {
            return try SecureFile.withExclusiveLock((dir as NSString).appendingPathComponent(".lock")) { try loadOrCreateCA(create: true) }
        } catch let e as SecureFile.Failure {
            throw CAError(e.description)
        }
    }

    private func loadOrCreateCA(create: Bool) throws -> (CertificateAuthority, created: Bool) {
        let fm = FileManager.default
        if fm.fileExists(atPath: caCertificatePath), fm.fileExists(atPath: caKeyPath) {
            guard let certData = fm.contents(atPath: caCertificatePath), let keyData = fm.contents(atPath: caKeyPath) else {
                throw CAError("cannot read the CA in \(path)/ca")
            }
            do {
                let cert = try Certificate(pemOrDER: [UInt8](certData))
                let key = try PrivateKey(pemOrDER: [UInt8](keyData))
                guard try cert.publicKey == key.publicKey else { throw CAError("\(caKeyPath) does not match \(caCertificatePath)") }
                return (CertificateAuthority(certificate: cert, key: key), false)
            } catch let e as CryptoError {
                throw CAError("the CA in \(path)/ca is unreadable: \(e.message)")
            }
        }
        guard create else { throw CAError("no CA yet in \(path)/ca; run '3dstape ca init'") }
        let dir = (caKeyPath as NSString).deletingLastPathComponent
        try fm.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let key = try PrivateKey.generateP256()
        let ca = try CertificateAuthority.selfSigned(commonName: "3dstape interception CA (testing only)", key: key, days: 3650)
        do {
            try SecureFile.create(caKeyPath, contents: Array(try key.pem().utf8), mode: 0o600)
            try SecureFile.create(caCertificatePath, contents: Array(ca.certificate.pem.utf8), mode: 0o644)
        } catch {
            throw CAError("\(error)")
        }
        return (ca, true)
    }
}

/// A CA file problem, with a message for the user.
public struct CAError: Error, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
