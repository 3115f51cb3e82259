import Foundation
import TapCore
import TapCrypto
import TapJOSE

extension ClientReplayer.DSIdentity {
    /// The target DS from two PEM files (`--ds-cert PEM --ds-root PEM`), for a DS whose certificates come from
    /// elsewhere than `sandbox certs`: the encryption certificate, its roots, the directoryServerID (needed for an EC
    /// key: it is the deviceData KDF's PartyVInfo) and the JWE `kid` (default: the key's RFC 7638 thumbprint).
    public init(certificatePEM: [UInt8], certificatePath: String, rootsPEM: [UInt8], rootsPath: String, directoryServerID: String?,
                keyID: String? = nil) throws {
        let certificate: Certificate
        do { certificate = try Certificate(pemOrDER: certificatePEM) } catch {
            throw SandboxError("--ds-cert \(certificatePath): not a certificate (\(error))")
        }
        let roots: [Certificate]
        do { roots = try Certificate.parseAll(rootsPEM) } catch { throw SandboxError("--ds-root \(rootsPath): \(error)") }
        guard !roots.isEmpty else { throw SandboxError("--ds-root \(rootsPath): no certificate in it") }
        let key = try certificate.publicKey
        guard key.type == .rsa || directoryServerID != nil else {
            throw SandboxError("--ds-cert \(certificatePath) holds an EC key: give --ds-id with the DS's directoryServerID (the deviceData KDF uses it)")
        }
        self.certificate = certificate
        self.roots = roots
        self.directoryServerID = directoryServerID ?? ""
        self.keyID = keyID ?? JWK(publicKey: key).thumbprint
    }
}
