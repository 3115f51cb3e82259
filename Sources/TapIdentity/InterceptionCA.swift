import Foundation
import TapCore
import TapCrypto

extension UserHome {
    /// The interception CA's certificate and key: `<home>/ca/ca-cert.pem` and `ca-key.pem`.
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
            throw IdentityError("cannot create \(dir): \(error.localizedDescription)")
        }
        do {
            return try SecureFile.withExclusiveLock((dir as NSString).appendingPathComponent(".lock")) { try loadOrCreateCA(create: true) }
        } catch let e as SecureFile.Failure {
            throw IdentityError(e.description)
        }
    }

    private func loadOrCreateCA(create: Bool) throws -> (CertificateAuthority, created: Bool) {
        let fm = FileManager.default
        if fm.fileExists(atPath: caCertificatePath), fm.fileExists(atPath: caKeyPath) {
            guard let certData = fm.contents(atPath: caCertificatePath), let keyData = fm.contents(atPath: caKeyPath) else {
                throw IdentityError("cannot read the CA in \(path)/ca")
            }
            do {
                let cert = try Certificate(pemOrDER: [UInt8](certData))
                let key = try PrivateKey(pemOrDER: [UInt8](keyData))
                guard try cert.publicKey == key.publicKey else { throw IdentityError("\(caKeyPath) does not match \(caCertificatePath)") }
                return (CertificateAuthority(certificate: cert, key: key), false)
            } catch let e as CryptoError {
                throw IdentityError("the CA in \(path)/ca is unreadable: \(e.message)")
            }
        }
        guard create else { throw IdentityError("no CA yet in \(path)/ca; run '3dstape ca init'") }
        let dir = (caKeyPath as NSString).deletingLastPathComponent
        try fm.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let key = try PrivateKey.generateP256()
        let ca = try CertificateAuthority.selfSigned(commonName: "3dstape interception CA (testing only)", key: key, days: 3650)
        do {
            try SecureFile.create(caKeyPath, contents: Array(try key.pem().utf8), mode: 0o600)
            try SecureFile.create(caCertificatePath, contents: Array(ca.certificate.pem.utf8), mode: 0o644)
        } catch {
            throw IdentityError("\(error)")
        }
        return (ca, true)
    }
}
