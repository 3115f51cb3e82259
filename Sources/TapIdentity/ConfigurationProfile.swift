import Foundation
import TapCore
import TapCrypto

/// An Apple configuration profile (`.mobileconfig`, a property list) that installs one root certificate on iOS,
/// iPadOS or macOS: a `com.apple.security.root` payload holding the certificate's DER. Its identifiers and UUIDs are
/// derived from the certificate, so the same CA always gives the same profile (installing it again replaces the
/// first instead of adding a second), and another CA gives another.
public struct ConfigurationProfile: Sendable {
    public let certificate: Certificate

    public init(rootCertificate: Certificate) { certificate = rootCertificate }

    /// The name the device shows for the profile and for its certificate: the certificate's common name.
    public var displayName: String { certificate.commonName ?? "3dstape interception CA" }

    /// `local.3dstape.interception-ca.<the first 16 hex digits of the certificate's SHA-256>`.
    public var identifier: String {
        "local.3dstape.interception-ca." + Digest.sha256(certificate.der).prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// The profile's UUID and its payload's: name-based (RFC 9562 version 8, from SHA-256 over a label and the DER).
    public var profileUUID: String { Self.uuid(label: "profile", der: certificate.der) }
    public var payloadUUID: String { Self.uuid(label: "root payload", der: certificate.der) }

    static func uuid(label: String, der: [UInt8]) -> String {
        var b = Array(Digest.sha256(Array("3dstape mobileconfig \(label)\u{0}".utf8) + der).prefix(16))
        b[6] = (b[6] & 0x0F) | 0x80 // version 8: custom, name-based
        b[8] = (b[8] & 0x3F) | 0x80 // the RFC variant
        func hex(_ r: Range<Int>) -> String { b[r].map { String(format: "%02X", $0) }.joined() }
        return [hex(0..<4), hex(4..<6), hex(6..<8), hex(8..<10), hex(10..<16)].joined(separator: "-")
    }

    /// The profile as plist XML (UTF-8). Every string is escaped by `MarkupText`; the certificate is base64 in 52-column lines.
    public var xml: String {
        func string(_ key: String, _ value: String, indent: String) -> String {
            "\(indent)<key>\(MarkupText.escaped(key))</key>\n\(indent)<string>\(MarkupText.escaped(value))</string>\n"
        }
        let base64 = Data(certificate.der).base64EncodedString()
        var lines: [Substring] = []
        var rest = Substring(base64)
        while !rest.isEmpty {
            lines.append(rest.prefix(52))
            rest = rest.dropFirst(52)
        }
        let inner = "\t\t\t"
        var payload = "\t\t<dict>\n"
        payload += string("PayloadCertificateFileName", "3dstape-ca.cer", indent: inner)
        payload += "\(inner)<key>PayloadContent</key>\n\(inner)<data>\n"
        payload += lines.map { "\(inner)\($0)\n" }.joined()
        payload += "\(inner)</data>\n"
        payload += string("PayloadDescription", "Adds the 3dstape interception CA as a trusted root", indent: inner)
        payload += string("PayloadDisplayName", displayName, indent: inner)
        payload += string("PayloadIdentifier", identifier + ".root", indent: inner)
        payload += string("PayloadType", "com.apple.security.root", indent: inner)
        payload += string("PayloadUUID", payloadUUID, indent: inner)
        payload += "\(inner)<key>PayloadVersion</key>\n\(inner)<integer>1</integer>\n"
        payload += "\t\t</dict>\n"

        var out = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">
            <dict>
            \t<key>PayloadContent</key>
            \t<array>

            """
        out += payload
        out += "\t</array>\n"
        out += string("PayloadDescription", "Trusts 3dstape's interception CA for recording this device's HTTPS traffic. "
                      + "For testing only: remove it when you are done.", indent: "\t")
        out += string("PayloadDisplayName", displayName, indent: "\t")
        out += string("PayloadIdentifier", identifier, indent: "\t")
        out += "\t<key>PayloadRemovalDisallowed</key>\n\t<false/>\n"
        out += string("PayloadType", "Configuration", indent: "\t")
        out += string("PayloadUUID", profileUUID, indent: "\t")
        out += "\t<key>PayloadVersion</key>\n\t<integer>1</integer>\n"
        out += "</dict>\n</plist>\n"
        return out
    }
}
