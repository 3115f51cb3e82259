import Foundation
import Testing
import TapCore
@testable import TapCrypto

private func hex(_ s: String) -> [UInt8] { Hex.decode(s)! }
private func b64u(_ s: String) -> [UInt8] { Base64URL.decode(s)! }

@Suite struct DigestTests {
    @Test func sha256KnownAnswer() {
        #expect(Hex.encode(Digest.sha256(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Hex.encode(Digest.sha256([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func hmacRFC4231Case2() {
        let mac = Digest.hmacSHA256(key: Array("Jefe".utf8), data: Array("what do ya want for nothing?".utf8))
        #expect(Hex.encode(mac) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test func constantTimeEquals() {
        #expect(Digest.constantTimeEquals([1, 2, 3], [1, 2, 3]))
        #expect(!Digest.constantTimeEquals([1, 2, 3], [1, 2, 4]))
        #expect(!Digest.constantTimeEquals([1, 2], [1, 2, 3]))
        #expect(Digest.randomBytes(32) != Digest.randomBytes(32))
        // A version-4 UUID as EMV's transaction IDs are written: 8-4-4-4-12 lowercase hex, version 4, RFC 4122 variant.
        let ids = (0..<64).map { _ in Digest.randomUUID() }
        #expect(Set(ids).count == 64)
        for id in ids {
            let u = Array(id.utf8)
            #expect(u.count == 36 && [8, 13, 18, 23].allSatisfy { u[$0] == UInt8(ascii: "-") }, "\(id)")
            #expect(u.enumerated().allSatisfy { [8, 13, 18, 23].contains($0.offset) || Array("0123456789abcdef".utf8).contains($0.element) }, "\(id)")
            #expect(u[14] == UInt8(ascii: "4") && Array("89ab".utf8).contains(u[19]), "\(id)")
            #expect(UUID(uuidString: id)?.uuidString.lowercased() == id)
        }
    }
}

@Suite struct AESTests {
    @Test func gcmNISTTestCase2() throws {
        let s = try AES128.gcmSeal(key: [UInt8](repeating: 0, count: 16), iv: [UInt8](repeating: 0, count: 12),
                                   plaintext: [UInt8](repeating: 0, count: 16), aad: [])
        #expect(Hex.encode(s.ciphertext) == "0388dace60b6a392f328c2b971b2fe78")
        #expect(Hex.encode(s.tag) == "ab6e47d42cec13bdf53a67b21257bddf")
    }

    @Test func gcmRoundTripsAtManyLengthsAndRejectsTampering() throws {
        let key = Digest.randomBytes(16), iv = Digest.randomBytes(12), aad = Array("aad".utf8)
        for n in [0, 1, 15, 16, 17, 255, 1000] {
            let p = Digest.randomBytes(n)
            let s = try AES128.gcmSeal(key: key, iv: iv, plaintext: p, aad: aad)
            #expect(try AES128.gcmOpen(key: key, iv: iv, ciphertext: s.ciphertext, tag: s.tag, aad: aad) == p)
            var badTag = s.tag
            badTag[0] ^= 1
            #expect(throws: CryptoError(.authenticationFailed, "AES-GCM authentication tag mismatch")) {
                try AES128.gcmOpen(key: key, iv: iv, ciphertext: s.ciphertext, tag: badTag, aad: aad)
            }
            #expect(throws: CryptoError.self) {
                try AES128.gcmOpen(key: key, iv: iv, ciphertext: s.ciphertext, tag: s.tag, aad: Array("other".utf8))
            }
        }
    }

    @Test func cbcRoundTripAndErrors() throws {
        let key = Digest.randomBytes(16), iv = Digest.randomBytes(16)
        for n in [0, 1, 16, 31, 100] {
            let p = Digest.randomBytes(n)
            let c = try AES128.cbcEncrypt(key: key, iv: iv, plaintext: p)
            #expect(c.count == (n / 16 + 1) * 16)
            #expect(try AES128.cbcDecrypt(key: key, iv: iv, ciphertext: c) == p)
        }
        #expect(throws: CryptoError.self) { try AES128.cbcDecrypt(key: key, iv: iv, ciphertext: [1, 2, 3]) }
        #expect(throws: CryptoError.self) { try AES128.cbcEncrypt(key: [1], iv: iv, plaintext: []) }
    }
}

@Suite struct KeyTests {
    /// emv3ds.md §6: the EMVCo ECDH known answer (SDK key and DS EC key), and the KDF over it.
    @Test func emvcoECDHKnownAnswer() throws {
        let sdk = try PrivateKey(p256D: b64u("iyn--IbkBeNoPu8cN245L6pOQWt2lTH8V0Ds92jQmWA"),
                                 x: b64u("C1PL42i6kmNkM61aupEAgLJ4gF1ZRzcV7lqo1TG0mL4"),
                                 y: b64u("cNToWLSdcFQKG--PGVEUQrIHP8w6TcRyj0pyFx4-ZMc"))
        let ds = try PublicKey(p256X: b64u("2_v-MuNZccqwM7PXlakW9oHLP5XyrjMG1UVS8OxYrgA"),
                               y: b64u("rm1ktLmFIsP2R0YyJGXtsCbaTUesUK31Xc04tHJRolc"))
        let z = try sdk.sharedSecret(with: ds)
        #expect(Hex.encode(z) == "5c32bc13f8eceb148abaf2a6b9dd1f6891bb2a80ab09347c64068231a59e8ca2")
        #expect(Hex.encode(ConcatKDF.emv(z: z, partyV: "F155545342")) ==
                "f7c4ee20a0fceb6d1b2cd5da9dcbde07e64396ce5f7d72fb5a793f7d7f4f9f9a")
    }

    @Test func rejectsPointsOffTheCurveAndMismatchedPairs() throws {
        #expect(throws: CryptoError.self) { try PublicKey(p256X: [UInt8](repeating: 1, count: 32), y: [UInt8](repeating: 2, count: 32)) }
        let a = try PrivateKey.generateP256(), b = try PrivateKey.generateP256()
        let (x, y) = b.publicKey.p256Coordinates!
        #expect(throws: CryptoError.self) { try PrivateKey(p256D: a.p256D!, x: x, y: y) }
    }

    @Test func ecdhAgreesBothWays() throws {
        let a = try PrivateKey.generateP256(), b = try PrivateKey.generateP256()
        #expect(try a.sharedSecret(with: b.publicKey) == b.sharedSecret(with: a.publicKey))
    }

    /// Keys generated and points imported on the shared P-256 parameters are whole keys: the pair passes OpenSSL's
    /// pairwise check, the point read from the private key is its public key's, and an imported point agrees in ECDH.
    @Test func generatedKeysAndImportedPointsAreConsistent() throws {
        for _ in 0..<20 {
            let a = try PrivateKey.generateP256(), b = try PrivateKey.generateP256()
            let (x, y) = try #require(a.p256Coordinates)
            #expect(a.publicKey.p256Coordinates! == (x, y))
            #expect(try PrivateKey(p256D: a.p256D!, x: x, y: y).type == .p256)
            let imported = try PublicKey(p256X: x, y: y)
            #expect(imported.type == .p256)
            #expect(try b.sharedSecret(with: imported) == a.sharedSecret(with: b.publicKey))
        }
    }

    @Test(arguments: SignatureAlgorithm.allCases)
    func signAndVerify(alg: SignatureAlgorithm) throws {
        let key = alg == .es256 ? try PrivateKey.generateP256() : try PrivateKey.generateRSA()
        let data = Array("payload".utf8)
        let sig = try key.sign(data, algorithm: alg)
        if alg == .es256 { #expect(sig.count == 64) }
        #expect(key.publicKey.verify(sig, of: data, algorithm: alg))
        #expect(!key.publicKey.verify(sig, of: Array("other".utf8), algorithm: alg))
        var bad = sig
        bad[bad.count - 1] ^= 1
        #expect(!key.publicKey.verify(bad, of: data, algorithm: alg))
        #expect(!key.publicKey.verify(Array(sig.prefix(10)), of: data, algorithm: alg))
    }

    /// A signer prepared once signs many messages, each as `PrivateKey.sign` would (verified the same way), and refuses
    /// a key of the other type.
    @Test(arguments: SignatureAlgorithm.allCases)
    func preparedSignerSignsManyMessages(alg: SignatureAlgorithm) throws {
        let key = alg == .es256 ? try PrivateKey.generateP256() : try PrivateKey.generateRSA()
        let signer = try PreparedSigner(key: key, algorithm: alg)
        for n in [0, 1, 100, 5000] {
            let data = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let sig = try signer.sign(data)
            #expect(sig.count == (alg == .es256 ? 64 : 256))
            #expect(key.publicKey.verify(sig, of: data, algorithm: alg), "\(alg) \(n) bytes")
            #expect(!key.publicKey.verify(sig, of: data + [1], algorithm: alg))
            if alg == .rs256 {
                let direct = try key.sign(data, algorithm: alg)
                #expect(sig == direct, "PKCS#1 v1.5 is deterministic: the same signature")
            }
        }
        let other = alg == .es256 ? try PrivateKey.generateRSA() : try PrivateKey.generateP256()
        #expect(throws: CryptoError.self) { try PreparedSigner(key: other, algorithm: alg) }
    }

    @Test func rsaOAEP256RoundTripAndWrongKey() throws {
        let k = try PrivateKey.generateRSA(), other = try PrivateKey.generateRSA()
        let c = try k.publicKey.rsaOAEP256Encrypt(Array("cek".utf8))
        #expect(try k.rsaOAEP256Decrypt(c) == Array("cek".utf8))
        #expect(throws: CryptoError.self) { try other.rsaOAEP256Decrypt(c) }
        #expect(throws: CryptoError.self) { try k.rsaOAEP256Decrypt(Array(c.dropLast())) }
    }

    @Test func pemRoundTrips() throws {
        for key in [try PrivateKey.generateP256(), try PrivateKey.generateRSA()] {
            let pem = try key.pem()
            #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
            let back = try PrivateKey(pemOrDER: Array(pem.utf8))
            #expect(back.publicKey == key.publicKey)
            let pub = try PublicKey(pemOrDER: Array(try key.publicKey.pem().utf8))
            #expect(pub == key.publicKey)
            #expect(try PublicKey(pemOrDER: try key.publicKey.derSPKI()) == key.publicKey)
        }
        #expect(throws: CryptoError.self) { try PrivateKey(pemOrDER: Array("-----BEGIN PRIVATE KEY-----\nAAAA\n".utf8)) }
        #expect(throws: CryptoError.self) { try PrivateKey(pemOrDER: [0x30, 0x03, 0x01]) }
    }

    @Test func rsaComponentsRoundTrip() throws {
        let k = try PrivateKey.generateRSA()
        let c = k.rsaComponents!
        let back = try PrivateKey(rsa: c)
        let sig = try back.sign([1, 2, 3], algorithm: .ps256)
        #expect(k.publicKey.verify(sig, of: [1, 2, 3], algorithm: .ps256))
    }
}

@Suite struct CertificateTests {
    @Test func issuesAndVerifiesAChain() throws {
        let rootKey = try PrivateKey.generateP256()
        let root = try CertificateAuthority.selfSigned(commonName: "Test DS Root", key: rootKey)
        let interKey = try PrivateKey.generateRSA()
        let interCert = try root.issue(commonName: "Test Intermediate", subjectKey: interKey.publicKey, profile: .authority)
        let inter = CertificateAuthority(certificate: interCert, key: interKey)
        let leafKey = try PrivateKey.generateP256()
        let leaf = try inter.issue(commonName: "acs.test", subjectKey: leafKey.publicKey, profile: .tlsServer(names: ["acs.test", "127.0.0.1"]))
        try Certificate.verifyChain(leaf: leaf, intermediates: [interCert], roots: [root.certificate])
        #expect(leaf.commonName == "acs.test")
        #expect(leaf.issuer.contains("Test Intermediate"))
        #expect(try leaf.publicKey == leafKey.publicKey)
        #expect(leaf.notAfter! > Date())

        // Missing intermediate, wrong root, expired at a given time.
        #expect(throws: CryptoError.self) { try Certificate.verifyChain(leaf: leaf, intermediates: [], roots: [root.certificate]) }
        let otherRoot = try CertificateAuthority.selfSigned(commonName: "Other", key: try PrivateKey.generateP256())
        #expect(throws: CryptoError.self) { try Certificate.verifyChain(leaf: leaf, intermediates: [interCert], roots: [otherRoot.certificate]) }
        #expect(throws: CryptoError.self) {
            try Certificate.verifyChain(leaf: leaf, intermediates: [interCert], roots: [root.certificate], at: Date().addingTimeInterval(86400 * 4000))
        }
    }

    @Test func pemAndDERRoundTrip() throws {
        let ca = try CertificateAuthority.selfSigned(commonName: "Round Trip", key: try PrivateKey.generateRSA())
        let der = ca.certificate.der
        #expect(try Certificate(der: der).der == der)
        let bundle = ca.certificate.pem + ca.certificate.pem
        #expect(try Certificate.parseAll(Array(bundle.utf8)).count == 2)
        #expect(throws: CryptoError.self) { try Certificate(der: Array(der.prefix(50))) }
        #expect(throws: CryptoError.self) { try Certificate.parseAll(Array("not a cert".utf8)) }
    }

    /// The chain 3dstape issues is accepted by an independent verifier (openssl verify).
    @Test func opensslVerifyAcceptsOurChain() throws {
        let root = try CertificateAuthority.selfSigned(commonName: "Interop Root", key: try PrivateKey.generateP256())
        let leaf = try root.issue(commonName: "localhost", subjectKey: try PrivateKey.generateP256().publicKey,
                                  profile: .tlsServer(names: ["localhost"]))
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-x509-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try root.certificate.pem.write(to: dir.appendingPathComponent("root.pem"), atomically: true, encoding: .utf8)
        try leaf.pem.write(to: dir.appendingPathComponent("leaf.pem"), atomically: true, encoding: .utf8)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = ["verify", "-purpose", "sslserver", "-CAfile", dir.appendingPathComponent("root.pem").path,
                       dir.appendingPathComponent("leaf.pem").path]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
    }

    /// Hardening defects 6 and 10: a 100-character host gets a leaf (no CN, the SAN carries it) that openssl accepts
    /// for that name; EC leaves do not claim keyEncipherment (RFC 5480), RSA leaves still do.
    @Test func longHostNamesAndECKeyUsage() throws {
        let root = try CertificateAuthority.selfSigned(commonName: "Interop Root", key: try PrivateKey.generateP256())
        let host = String(repeating: "a", count: 50) + "." + String(repeating: "b", count: 45) + ".test"
        let cache = try LeafCertificateCache(authority: root)
        let leaf = try cache.certificate(for: host)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-x509-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try root.certificate.pem.write(to: dir.appendingPathComponent("root.pem"), atomically: true, encoding: .utf8)
        try leaf.pem.write(to: dir.appendingPathComponent("leaf.pem"), atomically: true, encoding: .utf8)
        func openssl(_ args: [String]) throws -> (Int32, String) {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            p.arguments = args
            let out = Pipe()
            p.standardOutput = out
            p.standardError = FileHandle.nullDevice
            try p.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            return (p.terminationStatus, String(decoding: data, as: UTF8.self))
        }
        #expect(try openssl(["verify", "-purpose", "sslserver", "-verify_hostname", host, "-CAfile", dir.appendingPathComponent("root.pem").path,
                             dir.appendingPathComponent("leaf.pem").path]).0 == 0)
        let text = try openssl(["x509", "-noout", "-text", "-in", dir.appendingPathComponent("leaf.pem").path]).1
        #expect(text.contains("DNS:\(host)") && !text.contains("keyEncipherment") && !text.contains("Key Encipherment"), "\(text)")
        let rsaLeaf = try root.issue(commonName: "rsa.test", subjectKey: try PrivateKey.generateRSA().publicKey, profile: .tlsServer(names: ["rsa.test"]))
        try rsaLeaf.pem.write(to: dir.appendingPathComponent("rsa.pem"), atomically: true, encoding: .utf8)
        #expect(try openssl(["x509", "-noout", "-text", "-in", dir.appendingPathComponent("rsa.pem").path]).1.contains("Key Encipherment"))
    }
}

/// `TrustedCertificates`: the roots' store made once and certificates parsed once per DER, verifying as
/// `Certificate.verifyChain` does.
@Suite struct TrustedCertificatesTests {
    @Test func verifiesAsVerifyChainDoesAndKeepsItsCacheBounded() throws {
        let root = try CertificateAuthority.selfSigned(commonName: "Test DS Root", key: try PrivateKey.generateP256())
        let interKey = try PrivateKey.generateP256()
        let interCert = try root.issue(commonName: "Test Intermediate", subjectKey: interKey.publicKey, profile: .authority)
        let leaf = try CertificateAuthority(certificate: interCert, key: interKey)
            .issue(commonName: "acs.test", subjectKey: try PrivateKey.generateP256().publicKey, profile: .signing)
        let trust = try TrustedCertificates(roots: [root.certificate], maxCached: 2)
        for _ in 0..<3 {
            try trust.verifyChain(leaf: try trust.certificate(der: leaf.der), intermediates: [try trust.certificate(der: interCert.der)])
            #expect(throws: CryptoError.self) { try trust.verifyChain(leaf: leaf, intermediates: []) }
            #expect(throws: CryptoError.self) { try trust.verifyChain(leaf: leaf, intermediates: [interCert], at: Date().addingTimeInterval(86400 * 4000)) }
        }
        #expect(try trust.certificate(der: leaf.der).sha256Fingerprint == leaf.sha256Fingerprint)
        #expect(trust.cachedCount == 2)
        _ = try trust.certificate(der: root.certificate.der) // a third: the cache starts again rather than grow
        #expect(trust.cachedCount == 1)
        #expect(throws: CryptoError.self) { _ = try trust.certificate(der: [0x30, 0x03, 0x02, 0x01, 0x01]) }
        #expect(throws: CryptoError.self) { _ = try TrustedCertificates(roots: []) }
        let otherRoot = try CertificateAuthority.selfSigned(commonName: "Other", key: try PrivateKey.generateP256())
        #expect(throws: CryptoError.self) {
            try TrustedCertificates(roots: [otherRoot.certificate]).verifyChain(leaf: leaf, intermediates: [interCert])
        }
    }

    /// A chain that verified is remembered with the span in which its certificates are all valid: inside it, it
    /// verifies again without OpenSSL; outside it (before the leaf's notBefore, after its notAfter) OpenSSL decides
    /// again and refuses; a chain that failed is never remembered.
    @Test func aVerifiedChainIsRememberedOnlyInsideItsValiditySpan() throws {
        let root = try CertificateAuthority.selfSigned(commonName: "Test DS Root", key: try PrivateKey.generateP256())
        let leaf = try root.issue(commonName: "acs.test", subjectKey: try PrivateKey.generateP256().publicKey, profile: .signing, days: 30)
        let trust = try TrustedCertificates(roots: [root.certificate])
        #expect(throws: CryptoError.self) { try trust.verifyChain(leaf: leaf, intermediates: [], at: Date().addingTimeInterval(86400 * 31)) }
        #expect(trust.verifiedCount == 0, "a failed chain is not remembered")
        try trust.verifyChain(leaf: leaf, intermediates: [])
        #expect(trust.verifiedCount == 1)
        try trust.verifyChain(leaf: leaf, intermediates: [], at: Date().addingTimeInterval(86400 * 29))
        #expect(throws: CryptoError.self) { try trust.verifyChain(leaf: leaf, intermediates: [], at: Date().addingTimeInterval(86400 * 31)) }
        #expect(throws: CryptoError.self) { try trust.verifyChain(leaf: leaf, intermediates: [], at: Date().addingTimeInterval(-86400 * 2)) }
        // The same leaf with a stranger as intermediate is another chain: checked by OpenSSL, which builds it anyway.
        let other = try CertificateAuthority.selfSigned(commonName: "Other", key: try PrivateKey.generateP256())
        try trust.verifyChain(leaf: leaf, intermediates: [other.certificate])
        #expect(trust.verifiedCount == 2)
        // Another root set does not see this one's memory.
        #expect(throws: CryptoError.self) { try TrustedCertificates(roots: [other.certificate]).verifyChain(leaf: leaf, intermediates: []) }
    }
}
