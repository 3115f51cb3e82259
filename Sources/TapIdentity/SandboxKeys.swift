import Foundation
import TapCore
import TapCrypto
import TapJOSE

/// Which key the sandbox DS decrypts deviceData with (and so which JWE the SDK must make).
public enum DSKeyType: String, Sendable, CaseIterable {
    case rsa, ec
}

/// The sandbox's key material: a DS root CA, DS encryption keys (RSA and EC), ACS signing keys (RSA for
/// PS256, EC for ES256) certified by the DS root, and a TLS certificate for `--tls`. Created once in the
/// per-user directory (`<home>/sandbox`, keys mode 0600), so restarts keep the same root.
public struct SandboxKeys: Sendable {
    public static let directoryServerID = "A999999999"
    /// The directoryServerID clients are given for these keys.
    public var directoryServerID = SandboxKeys.directoryServerID
    public static let keyIDs: [DSKeyType: String] = [.rsa: "3dstape-sandbox-ds-rsa-1", .ec: "3dstape-sandbox-ds-ec-1"]

    public let root: CertificateAuthority
    public let dsKeys: [DSKeyType: (key: PrivateKey, cert: Certificate)]
    public let acsRSA: (key: PrivateKey, cert: Certificate)
    public let acsEC: (key: PrivateKey, cert: Certificate)
    public let tls: (key: PrivateKey, cert: Certificate)

    /// Loads the keys from `directory`, creating any that are missing. `name` goes into the certificates'
    /// common names ("3dstape Sandbox", or "3dstape Test" for the key-substitution identity).
    /// Creation is serialised with other processes by a lock file in `directory` (a sandbox and a client started at once
    /// on a fresh home would otherwise both make keys and one would fail, or read a half-written file); a directory
    /// that already holds every file is only read, so a read-only one works.
    public static func loadOrCreate(in directory: String, name: String = "3dstape Sandbox") throws -> SandboxKeys {
        let names = ["ds-root-key.pem", "ds-root.pem"] + ["ds-rsa", "ds-ec", "acs-rsa", "acs-ec", "tls"].flatMap { ["\($0)-key.pem", "\($0).pem"] }
        if names.allSatisfy({ FileManager.default.fileExists(atPath: (directory as NSString).appendingPathComponent($0)) }) {
            return try load(in: directory, name: name)
        }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return try SecureFile.withExclusiveLock((directory as NSString).appendingPathComponent(".lock")) { try load(in: directory, name: name) }
    }

    private static func load(in directory: String, name: String) throws -> SandboxKeys {
        let store = PEMStore(directory: directory)
        let rootKey = try store.key("ds-root-key.pem") { try PrivateKey.generateP256() }
        let rootCert = try store.certificate("ds-root.pem") {
            try CertificateAuthority.selfSigned(commonName: "\(name) DS Root (testing only)", key: rootKey).certificate
        }
        let root = CertificateAuthority(certificate: rootCert, key: rootKey)
        func leaf(_ name: String, _ cn: String, _ profile: CertificateProfile, rsa: Bool) throws -> (PrivateKey, Certificate) {
            let key = try store.key("\(name)-key.pem") { rsa ? try PrivateKey.generateRSA() : try PrivateKey.generateP256() }
            let cert = try store.certificate("\(name).pem") { try root.issue(commonName: cn, subjectKey: key.publicKey, profile: profile) }
            return (key, cert)
        }
        let dsRSA = try leaf("ds-rsa", "\(name) DS encryption (RSA)", .encryption, rsa: true)
        let dsEC = try leaf("ds-ec", "\(name) DS encryption (EC)", .encryption, rsa: false)
        let acsRSA = try leaf("acs-rsa", "\(name) ACS signing (RSA)", .signing, rsa: true)
        let acsEC = try leaf("acs-ec", "\(name) ACS signing (EC)", .signing, rsa: false)
        let tls = try leaf("tls", "localhost", .tlsServer(names: ["localhost", "127.0.0.1"]), rsa: false)
        return SandboxKeys(root: root, dsKeys: [.rsa: dsRSA, .ec: dsEC], acsRSA: acsRSA, acsEC: acsEC, tls: tls)
    }

    /// The files `writeClientCertificates` writes.
    public static let clientCertificateFiles = ["ds-root.pem", "ds-root.der", "ds-cert.pem", "ds.json"]

    /// The refusal naming the first of those files that exists in `directory` (a symlink, even dangling, counts), or nil.
    public static func existingClientCertificate(in directory: String) -> String? {
        guard let existing = clientCertificateFiles.first(where: { FileManager.default.fileExists(atPath: (directory as NSString).appendingPathComponent($0))
            || (try? FileManager.default.destinationOfSymbolicLink(atPath: (directory as NSString).appendingPathComponent($0))) != nil }) else { return nil }
        return "\((directory as NSString).appendingPathComponent(existing)) already exists; use --force to replace the files in \(directory)"
    }

    /// Writes what a client must be given: ds-root.pem/.der, ds-cert.pem and ds.json. Files there already are an
    /// error unless `replace` (never followed through a symlink either way).
    public func writeClientCertificates(to directory: String, dsKeyType: DSKeyType, replace: Bool = false) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let ds = dsKeys[dsKeyType]!
        if !replace, let refusal = SandboxKeys.existingClientCertificate(in: directory) { throw IdentityError(refusal) }
        func put(_ name: String, _ data: [UInt8]) throws {
            try SecureFile.create((directory as NSString).appendingPathComponent(name), contents: data, mode: 0o644, replace: replace)
        }
        try put("ds-root.pem", Array(root.certificate.pem.utf8))
        try put("ds-root.der", root.certificate.der)
        try put("ds-cert.pem", Array(ds.cert.pem.utf8))
        let json = JSON.object([
            ("directoryServerID", .string(directoryServerID)),
            ("keyID", .string(SandboxKeys.keyIDs[dsKeyType]!)),
            ("keyType", .string(dsKeyType.rawValue)),
            ("certificateString", .string(Data(ds.cert.der).base64EncodedString())),
            ("rootCertificateStrings", .array([.string(Data(root.certificate.der).base64EncodedString())])),
        ])
        try put("ds.json", Array((json.pretty + "\n").utf8))
    }
}

/// PEM files in one directory: read if present, else made and written (private keys 0600).
struct PEMStore {
    let directory: String

    func path(_ name: String) -> String { (directory as NSString).appendingPathComponent(name) }

    func key(_ name: String, make: () throws -> PrivateKey) throws -> PrivateKey {
        if let d = FileManager.default.contents(atPath: path(name)) { return try PrivateKey(pemOrDER: [UInt8](d)) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let k = try make()
        try SecureFile.create(path(name), contents: Array(try k.pem().utf8), mode: 0o600)
        return k
    }

    func certificate(_ name: String, make: () throws -> Certificate) throws -> Certificate {
        if let d = FileManager.default.contents(atPath: path(name)) { return try Certificate(pemOrDER: [UInt8](d)) }
        let c = try make()
        try SecureFile.create(path(name), contents: Array(c.pem.utf8), mode: 0o644)
        return c
    }
}
