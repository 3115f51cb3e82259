import Foundation
import Testing
import TapCrypto
@testable import TapIdentity

/// The iOS/macOS configuration profile that installs the interception CA (`ca export --format mobileconfig`), read back
/// with Foundation's property-list parser.
@Suite struct ConfigurationProfileTests {
    func parse(_ xml: String) throws -> [String: Any] {
        let plist = try PropertyListSerialization.propertyList(from: Data(xml.utf8), options: [], format: nil)
        return try #require(plist as? [String: Any])
    }

    @Test func holdsTheCertificateInARootPayload() throws {
        let ca = try CertificateAuthority.selfSigned(commonName: "3dstape interception CA (testing only)", key: try PrivateKey.generateP256())
        let profile = ConfigurationProfile(rootCertificate: ca.certificate)
        let top = try parse(profile.xml)
        #expect(top["PayloadType"] as? String == "Configuration")
        #expect((top["PayloadVersion"] as? NSNumber)?.intValue == 1)
        #expect(top["PayloadDisplayName"] as? String == "3dstape interception CA (testing only)")
        #expect(top["PayloadUUID"] as? String == profile.profileUUID && UUID(uuidString: profile.profileUUID) != nil)
        let payloads = try #require(top["PayloadContent"] as? [[String: Any]])
        #expect(payloads.count == 1)
        let root = payloads[0]
        #expect(root["PayloadType"] as? String == "com.apple.security.root")
        #expect((root["PayloadVersion"] as? NSNumber)?.intValue == 1)
        #expect(root["PayloadContent"] as? Data == Data(ca.certificate.der))
        #expect(root["PayloadUUID"] as? String == profile.payloadUUID && UUID(uuidString: profile.payloadUUID) != nil)
        #expect(profile.payloadUUID != profile.profileUUID)
        #expect((root["PayloadIdentifier"] as? String)?.hasPrefix(profile.identifier + ".") == true)
    }

    @Test func theSameCAGivesTheSameProfileAndAnotherCAAnother() throws {
        let key = try PrivateKey.generateP256()
        let ca = try CertificateAuthority.selfSigned(commonName: "CA", key: key)
        let again = try Certificate(pemOrDER: Array(ca.certificate.pem.utf8))
        #expect(ConfigurationProfile(rootCertificate: ca.certificate).xml == ConfigurationProfile(rootCertificate: again).xml)
        let other = ConfigurationProfile(rootCertificate: try CertificateAuthority.selfSigned(commonName: "CA", key: key).certificate)
        let first = ConfigurationProfile(rootCertificate: ca.certificate)
        #expect(other.profileUUID != first.profileUUID && other.payloadUUID != first.payloadUUID && other.identifier != first.identifier)
    }

    /// A CA whose name holds markup characters (a user's own CA file) still gives a well-formed profile that says the same name.
    @Test func markupInTheNameIsEscaped() throws {
        let name = #"QA <CA> & "tests" 'x'"#
        let ca = try CertificateAuthority.selfSigned(commonName: name, key: try PrivateKey.generateP256())
        let profile = ConfigurationProfile(rootCertificate: ca.certificate)
        #expect(!profile.xml.contains("<CA>"))
        let top = try parse(profile.xml)
        #expect(top["PayloadDisplayName"] as? String == name)
    }
}
