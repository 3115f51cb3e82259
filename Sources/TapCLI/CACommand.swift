import Foundation
import TapCore
import TapArguments
import TapCrypto
import TapIdentity

/// `3dstape ca`: the interception CA that clients trust for recording HTTPS.
struct CACommand: Command {
    let spec = CommandSpec(name: "ca", abstract: "Create, show or export the interception CA (init | show | export)",
                           usage: "init|show|export [--format pem|der|base64|mobileconfig] [--out FILE]",
                                  "export --ds DIR [--ds-key rsa|ec]",
                           maxPositionals: 1, usesUserKeys: true, options: [format.spec, out.spec, ds.spec, dsKey.spec, force.spec])
    /// The export formats of the CA certificate.
    enum Format: String, Sendable, CaseIterable { case pem, der, base64, mobileconfig }
    static let format = Option("format", "pem|der|base64|mobileconfig",
                               ChoiceValue<Format>(refusal: { "--\($0) \($1): expected pem, der, base64 or mobileconfig" }), default: .pem,
                               help: "export format (default pem); base64 is DER in one line, as SDKs take root certificates; "
                                   + "mobileconfig is an iOS/macOS configuration profile that installs the CA")
    static let out = Option("out", "FILE", PathValue(), help: "write the export to FILE instead of standard output")
    static let ds = Option("ds", "DIR", PathValue(), help: "export 3dstape's test DS identity for key substitution (ds-root.pem/.der, ds-cert.pem, ds.json)")
    static let dsKey = Option("ds-key", "rsa|ec", SandboxCommand.dsKeyChoice, default: .rsa,
                              help: "with --ds: the DS key type the client encrypts deviceData to (default rsa)")
    static let force = Flag("force", help: "replace files that exist (a symlink is replaced, never followed)")

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        let home = UserHome.resolve()
        let action = args.positionals.first ?? "show"
        switch action {
        case "init":
            let (ca, created) = try home.interceptionCA()
            io.out(created ? "created the interception CA in \(home.path)/ca" : "the interception CA already exists in \(home.path)/ca")
            describe(ca.certificate, home: home, io: io)
        case "show":
            let (ca, created) = try home.interceptionCA()
            if created { io.err("created the interception CA in \(home.path)/ca") }
            describe(ca.certificate, home: home, io: io)
        case "export" where args.given(Self.ds):
            let dir = try args.value(Self.ds) ?? ""
            // --ds writes the DS identity, not the CA: a --format or --out given with it would be ignored, so refuse it.
            if let other = [Self.format.name, Self.out.name].first(where: { args.value($0) != nil }) {
                throw InvalidArguments("--ds DIR exports the test DS identity, --\(other) the CA: give one or the other")
            }
            let type = try args.value(Self.dsKey, default: .rsa)
            if !args.has(Self.force) { try refuseExistingClientCertificates(in: dir) }
            try substitutionKeys().writeClientCertificates(to: dir, dsKeyType: type, replace: args.has(Self.force))
            io.out("wrote 3dstape's test DS identity (\(type.rawValue)) to \(TerminalText.escaped(dir)): give it to the client as its DS certificate and root, "
                   + "and record with --decrypt substitute")
        case "export":
            let format = try args.value(Self.format, default: .pem), out = try args.value(Self.out)
            if let out, !args.has(Self.force) { try refuseExisting(out, "\(out) already exists; remove it or use --force") }
            let (ca, _) = try home.interceptionCA()
            let bytes: [UInt8]
            switch format {
            case .pem: bytes = Array(ca.certificate.pem.utf8)
            case .der: bytes = ca.certificate.der
            case .base64: bytes = Array((Data(ca.certificate.der).base64EncodedString() + "\n").utf8)
            case .mobileconfig: bytes = Array(ConfigurationProfile(rootCertificate: ca.certificate).xml.utf8)
            }
            if let out {
                do { try SecureFile.create(out, contents: bytes, mode: 0o644, replace: args.has(Self.force)) } catch {
                    throw CommandFailure(error.description)
                }
                io.err("wrote \(TerminalText.escaped(out))")
            } else {
                StandardStreams.out(Data(bytes))
            }
        default:
            throw InvalidArguments("unknown action '\(action)'; expected init, show or export")
        }
        return 0
    }

    func describe(_ cert: Certificate, home: UserHome, io: Terminal) {
        io.out("subject:     \(cert.subject)")
        if let nb = cert.notBefore, let na = cert.notAfter { io.out("valid:       \(nb) to \(na)") }
        io.out("sha256:      \(cert.sha256Fingerprint)")
        io.out("certificate: \(home.caCertificatePath)")
        io.out("key:         \(home.caKeyPath) (mode 0600)")
    }
}
