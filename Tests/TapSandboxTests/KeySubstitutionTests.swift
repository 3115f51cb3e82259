import Foundation
import TapIdentity
import Testing
import TapCore
import TapCrypto
import TapJOSE
import TapSandbox
import TapStore

/// The client, through the proxy in key-substitution mode, to the sandbox: the same outcomes as direct,
/// and every CReq/CRes in the session in clear.
@Suite(.serialized) struct KeySubstitutionTests {
    func recorded(_ h: SandboxHarness) throws -> [StoredExchange] {
        let path = h.sessionPath
        h.stop(keepFiles: true)
        defer { try? FileManager.default.removeItem(at: h.dir) }
        return try SessionReader(path: path).exchanges()
    }

    @Test(arguments: [DSKeyType.rsa, .ec])
    func everyChallengeTypeEncAndVersion(dsKey: DSKeyType) throws {
        let h = try SandboxHarness(dsKey: dsKey, signing: dsKey == .ec ? .es256 : .ps256, substitute: true)
        var flows = 0
        for version in ["2.1.0", "2.2.0", "2.3.1"] {
            for card in TestCard.all where card.behaviour != .acsNeverAnswers {
                guard case .challenge = card.behaviour else { continue }
                for enc in ContentEncryption.allCases {
                    var o = h.options(card: card.pan, version: version)
                    o.enc = enc
                    SandboxHarness.passing(card, &o)
                    let r = try h.run(o)
                    #expect(SandboxFlowTests.outcome(r) == SandboxFlowTests.expected(card, version, browser: false),
                            "\(card.summary) \(version) \(enc.rawValue) via substitution: \(r.json.compact)")
                    flows += 1
                }
            }
        }
        let xs = try recorded(h)
        let channel = xs.flatMap(\.messages).filter { $0.location == "jwe" }
        #expect(channel.count >= flows * 2)
        #expect(channel.allSatisfy { $0.decryption == "decrypted: key substitution" }, "\(channel.compactMap(\.decryption).prefix(3))")
        let creqs = channel.filter { $0.direction == "request" }.compactMap(\.json)
        #expect(creqs.contains { $0["challengeDataEntry"]?.stringValue == "***" }, "OTP entries are masked in the plaintexts")
        #expect(creqs.allSatisfy { $0["messageType"]?.stringValue == "CReq" })
    }

    @Test func tamperedSignedContentFromUpstreamReachesTheSDKUnchanged() throws {
        let h = try SandboxHarness(substitute: true) { $0.badSignature = true }
        var o = h.options(card: "4000000000001067")
        o.answer = TestCard.otp
        let r = try h.run(o)
        #expect(r.error?["message"]?.stringValue?.contains("acsSignedContent rejected") == true, "\(r.json.compact)")
        let path = h.sessionPath
        h.stop(keepFiles: true)
        defer { try? FileManager.default.removeItem(at: h.dir) }
        let notes = try sqlite(path, "SELECT detail FROM events WHERE kind = 'substitution'")
        #expect(notes.contains("does not verify against the upstream DS root"), "\(notes)")
    }

    @Test func aClientThatDoesNotTrustTheTestRootFailsAsARealSDKWould() throws {
        let h = try SandboxHarness(substitute: true)
        // The client encrypts to 3dstape's DS key but trusts only the sandbox's root.
        try SandboxHarness.keys.root.certificate.pem.write(toFile: (h.certs as NSString).appendingPathComponent("ds-root.pem"),
                                                            atomically: true, encoding: .utf8)
        var o = h.options(card: "4000000000001067")
        o.answer = TestCard.otp
        let r = try h.run(o)
        #expect(r.error?["message"]?.stringValue?.contains("acsSignedContent rejected: certificate chain") == true, "\(r.json.compact)")
        let path = h.sessionPath
        h.stop(keepFiles: true)
        defer { try? FileManager.default.removeItem(at: h.dir) }
        #expect(try sqlite(path, "SELECT count(*) FROM messages WHERE location = 'jwe'") == "0", "no CReq was sent")
        #expect(try sqlite(path, "SELECT detail FROM events WHERE kind = 'substitution'").contains("re-signed with 3dstape's ACS certificate"))
    }

    @Test func aClientWithTheRealDSKeyPassesThroughUnchanged() throws {
        // A client given the sandbox's own DS certificate: substitution cannot open its deviceData and steps aside.
        let h = try SandboxHarness(substitute: true)
        try SandboxHarness.keys.writeClientCertificates(to: h.certs, dsKeyType: .rsa, replace: true)
        var o = h.options(card: "4000000000001067")
        o.answer = TestCard.otp
        #expect(try h.run(o).transStatus == "Y")
        let path = h.sessionPath
        h.stop(keepFiles: true)
        defer { try? FileManager.default.removeItem(at: h.dir) }
        #expect(try sqlite(path, "SELECT detail FROM events WHERE kind = 'substitution'").contains("passed unchanged"))
        #expect(try sqlite(path, "SELECT DISTINCT decryption FROM messages WHERE location = 'jwe'").hasPrefix("encrypted: no key substitution key"))
    }

    func sqlite(_ path: String, _ sql: String) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["sqlite3", path, sql]
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        return out.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
