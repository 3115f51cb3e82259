import Foundation
import TapCore
import TapCrypto
import TapJOSE

/// A DS as a client sees it: the encryption certificate deviceData is sealed to, the roots the ACS's signature must
/// reach, the directoryServerID and the JWE `kid`. Read from a directory that `sandbox certs` / `ca export --ds` writes,
/// or from two PEM files; used by `3dstape client` and `client-replay`.
public struct DSIdentity: Sendable {
    public var certificate: Certificate
    public var roots: [Certificate]
    public var directoryServerID: String
    public var keyID: String

    /// Reads ds-cert.pem, ds-root.pem and ds.json from `directory`.
    public init(directory: String) throws {
        func file(_ name: String) throws -> [UInt8] {
            let path = (directory as NSString).appendingPathComponent(name)
            guard let d = FileManager.default.contents(atPath: path) else {
                throw IdentityError("\(path) is missing; give --certs a directory written by '3dstape sandbox certs --out DIR' or '3dstape ca export --ds DIR'")
            }
            return [UInt8](d)
        }
        let ds = try JSON.parse(try file("ds.json"))
        guard let id = ds["directoryServerID"]?.stringValue, let kid = ds["keyID"]?.stringValue else {
            throw IdentityError("\(directory)/ds.json needs directoryServerID and keyID")
        }
        directoryServerID = id
        keyID = kid
        certificate = try Certificate(pemOrDER: try file("ds-cert.pem"))
        roots = try Certificate.parseAll(try file("ds-root.pem"))
    }

    /// The target DS from two PEM files (`--ds-cert PEM --ds-root PEM`), for a DS whose certificates come from
    /// elsewhere than `sandbox certs`: the encryption certificate, its roots, the directoryServerID (needed for an EC
    /// key: it is the deviceData KDF's PartyVInfo) and the JWE `kid` (default: the key's RFC 7638 thumbprint).
    public init(certificatePEM: [UInt8], certificatePath: String, rootsPEM: [UInt8], rootsPath: String, directoryServerID: String?,
                keyID: String? = nil) throws {
        let certificate: Certificate
        do { certificate = try Certificate(pemOrDER: certificatePEM) } catch {
            throw IdentityError("--ds-cert \(certificatePath): not a certificate (\(error))")
        }
        let roots: [Certificate]
        do { roots = try Certificate.parseAll(rootsPEM) } catch { throw IdentityError("--ds-root \(rootsPath): \(error)") }
        guard !roots.isEmpty else { throw IdentityError("--ds-root \(rootsPath): no certificate in it") }
        let key = try certificate.publicKey
        guard key.type == .rsa || directoryServerID != nil else {
            throw IdentityError("--ds-cert \(certificatePath) holds an EC key: give --ds-id with the DS's directoryServerID (the deviceData KDF uses it)")
        }
        self.certificate = certificate
        self.roots = roots
        self.directoryServerID = directoryServerID ?? ""
        self.keyID = keyID ?? JWK(publicKey: key).thumbprint
    }
}
