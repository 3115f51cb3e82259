import Foundation
import Testing
import TapCore
import TapCrypto
import TapIdentity

/// What the per-user directory holds and what its readers say when something is wrong, pinned: moving the home, the CA,
/// the test keys and the DS reader into TapIdentity (issue 26) kept the files, their modes and the messages as they were.
@Suite struct UserHomeLayoutTests {
    static func temporaryHome() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-home-\(UUID().uuidString)").path
    }

    static func mode(_ path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue
    }

    @Test func resolvesTheHomeFromTheEnvironment() {
        #expect(UserHome.resolve(environment: ["THREEDSTAPE_HOME": "/x/h", "HOME": "/home/u"]).path == "/x/h")
        #expect(UserHome.resolve(environment: ["THREEDSTAPE_HOME": "", "HOME": "/home/u"]).path == "/home/u/.3dstape")
    }

    @Test func theCAAndBothKeySetsLandWhereTheyDidWithTheirModes() throws {
        let home = UserHome(path: Self.temporaryHome())
        defer { try? FileManager.default.removeItem(atPath: home.path) }
        #expect(throws: IdentityError.self) { try home.interceptionCA(create: false) }
        do { _ = try home.interceptionCA(create: false) } catch {
            #expect("\(error)" == "no CA yet in \(home.path)/ca; run '3dstape ca init'")
        }
        let (ca, created) = try home.interceptionCA()
        #expect(created && home.caCertificatePath == home.path + "/ca/ca-cert.pem" && home.caKeyPath == home.path + "/ca/ca-key.pem")
        #expect(Self.mode(home.caKeyPath) == 0o600 && Self.mode(home.caCertificatePath) == 0o644 && Self.mode(home.path + "/ca") == 0o700)
        #expect(try ca.certificate.publicKey == PrivateKey(pemOrDER: [UInt8](FileManager.default.contents(atPath: home.caKeyPath)!)).publicKey)

        let test = try home.testDSKeys()
        let sandbox = try home.sandboxKeys()
        for (dir, keys, name) in [(home.path + "/ca/ds", test, "3dstape Test"), (home.path + "/sandbox", sandbox, "3dstape Sandbox")] {
            #expect(Self.mode(dir) == 0o700)
            for file in ["ds-root", "ds-rsa", "ds-ec", "acs-rsa", "acs-ec", "tls"] {
                #expect(Self.mode("\(dir)/\(file)-key.pem") == 0o600, "\(dir)/\(file)-key.pem")
                #expect(Self.mode("\(dir)/\(file).pem") == 0o644, "\(dir)/\(file).pem")
            }
            // Read again from disk: the same root.
            #expect(try SandboxKeys.loadOrCreate(in: dir, name: name).root.certificate.der == keys.root.certificate.der)
        }
        #expect(test.root.certificate.der != sandbox.root.certificate.der)
        #expect(home.permissionWarnings().isEmpty)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: home.path + "/sandbox/tls-key.pem")
        #expect(home.permissionWarnings() == ["\(home.path)/sandbox/tls-key.pem is readable by other users (mode 644): chmod 600 it"])
    }

    /// The client's side as `sandbox certs` / `ca export --ds` writes it, read back by the one reader of a --certs directory;
    /// a second write without --force and a directory without ds.json name the file, as before.
    @Test func aDirectoryOfClientCertificatesReadsBack() throws {
        let home = UserHome(path: Self.temporaryHome())
        defer { try? FileManager.default.removeItem(atPath: home.path) }
        let keys = try home.testDSKeys()
        let out = home.path + "/client-ec"
        try keys.writeClientCertificates(to: out, dsKeyType: .ec)
        let ds = try DSIdentity(directory: out)
        #expect(ds.directoryServerID == "A999999999" && ds.keyID == "3dstape-sandbox-ds-ec-1")
        #expect(ds.certificate.der == keys.dsKeys[.ec]!.cert.der && ds.roots.map(\.der) == [keys.root.certificate.der])
        do { try keys.writeClientCertificates(to: out, dsKeyType: .ec); Issue.record("a second write replaced the files") } catch {
            #expect("\(error)" == "\(out)/ds-root.pem already exists; use --force to replace the files in \(out)")
        }
        try keys.writeClientCertificates(to: out, dsKeyType: .rsa, replace: true)
        #expect(try DSIdentity(directory: out).keyID == "3dstape-sandbox-ds-rsa-1")
        do { _ = try DSIdentity(directory: home.path + "/none"); Issue.record("a missing directory was read") } catch {
            #expect("\(error)" == "\(home.path)/none/ds.json is missing; give --certs a directory written by '3dstape sandbox certs --out DIR' or '3dstape ca export --ds DIR'")
        }
    }

    /// `--ds-cert PEM --ds-root PEM`: an EC certificate needs the directoryServerID; the `kid` defaults to the thumbprint.
    @Test func aDSFromTwoPEMFiles() throws {
        let home = UserHome(path: Self.temporaryHome())
        defer { try? FileManager.default.removeItem(atPath: home.path) }
        let keys = try home.sandboxKeys()
        let ec = Array(keys.dsKeys[.ec]!.cert.pem.utf8), rsa = Array(keys.dsKeys[.rsa]!.cert.pem.utf8), root = Array(keys.root.certificate.pem.utf8)
        do { _ = try DSIdentity(certificatePEM: ec, certificatePath: "c.pem", rootsPEM: root, rootsPath: "r.pem", directoryServerID: nil) } catch {
            #expect("\(error)" == "--ds-cert c.pem holds an EC key: give --ds-id with the DS's directoryServerID (the deviceData KDF uses it)")
        }
        let id = try DSIdentity(certificatePEM: rsa, certificatePath: "c.pem", rootsPEM: root, rootsPath: "r.pem", directoryServerID: nil)
        #expect(id.directoryServerID == "" && id.keyID.count == 43 && id.roots.count == 1)
        #expect(throws: IdentityError.self) {
            try DSIdentity(certificatePEM: rsa, certificatePath: "c.pem", rootsPEM: [], rootsPath: "r.pem", directoryServerID: "X")
        }
    }
}
