import Testing
import TapCore
import TapCrypto
@testable import TapJOSE

@Suite struct JOSETests {
    let payload = Array(#"{"messageType":"AReq"}"#.utf8)

    @Test(arguments: SignatureAlgorithm.allCases)
    func jwsRoundTripAndTamper(alg: SignatureAlgorithm) throws {
        let key = alg == .es256 ? try PrivateKey.generateP256() : try PrivateKey.generateRSA()
        let jws = try JWS.sign(payload: payload, algorithm: alg, key: key)
        try JWS(compact: jws.compact).verify(with: key.publicKey)
        var parts = jws.compact.split(separator: ".").map(String.init)
        parts[1] = Base64URL.encode(Array(#"{"messageType":"ARes"}"#.utf8))
        #expect(throws: JOSEError(.badSignature, "JWS \(alg.rawValue) signature does not verify")) {
            try JWS(compact: parts.joined(separator: ".")).verify(with: key.publicKey)
        }
    }

    /// Compact serialisations are split on their bytes: whitespace around a token is allowed, and a malformed one is
    /// refused naming its part count or the first part with a character outside base64url.
    @Test func compactTokensAreSplitOnTheirBytesAndRefusedNamingThePart() throws {
        let key = try PrivateKey.generateP256()
        let jws = try JWS.sign(payload: payload, algorithm: .es256, key: key)
        let spaced = try JWS(compact: "\r\n " + jws.compact + "\n")
        #expect(spaced.compact == jws.compact && spaced.signingInput == jws.signingInput && spaced.payload == payload)
        try spaced.verify(with: key.publicKey)
        let cek = Array(repeating: UInt8(7), count: 32)
        let jwe = try JWE.encrypt(plaintext: payload, cek: cek, header: .object([("alg", .string("dir")), ("enc", .string("A128CBC-HS256")), ("kid", .string("k"))]))
        let fromBytes = try JWE(compact: Array((" " + jwe.compact + "\r\n").utf8))
        let opened = try fromBytes.decrypt(cek: cek)
        #expect(fromBytes.compact == jwe.compact && fromBytes.keyID == "k" && opened == payload)
        let p = jws.compact.split(separator: ".").map(String.init)
        #expect(throws: JOSEError(.malformed, "JWS must have 3 dot-separated parts, found 2")) { try JWS(compact: p[0] + "." + p[1]) }
        #expect(throws: JOSEError(.malformed, "JWS must have 3 dot-separated parts, found 4")) { try JWS(compact: jws.compact + ".") }
        #expect(throws: JOSEError(.malformed, "JWS part 2 contains characters outside base64url")) { try JWS(compact: p[0] + ".a+b.c/d") }
        #expect(throws: JOSEError(.malformed, "JWS part 1 contains characters outside base64url")) { try JWS(compact: "é." + p[1] + "." + p[2]) }
        #expect(throws: JOSEError(.malformed, "JWE must have 5 dot-separated parts, found 1")) { try JWE(compact: Array("{\"a\":1}".utf8)) }
    }

    @Test func x5cChainValidation() throws {
        let root = try CertificateAuthority.selfSigned(commonName: "DS Root", key: try PrivateKey.generateRSA())
        let acsKey = try PrivateKey.generateP256()
        let acsCert = try root.issue(commonName: "ACS", subjectKey: acsKey.publicKey, profile: .signing)
        let x5c = JWS.x5cHeader([acsCert])
        let jws = try JWS.sign(payload: payload, algorithm: .es256, key: acsKey, extraHeader: [("x5c", x5c)])
        let leaf = try jws.verifyWithX5C(roots: [root.certificate])
        #expect(leaf.commonName == "ACS")
        let stranger = try CertificateAuthority.selfSigned(commonName: "Stranger", key: try PrivateKey.generateP256())
        #expect { try jws.verifyWithX5C(roots: [stranger.certificate]) } throws: { ($0 as? JOSEError)?.kind == .untrustedChain }
        // Signed by a key other than the certified one.
        let forged = try JWS.sign(payload: payload, algorithm: .es256, key: try PrivateKey.generateP256(), extraHeader: [("x5c", x5c)])
        #expect { try forged.verifyWithX5C(roots: [root.certificate]) } throws: { ($0 as? JOSEError)?.kind == .badSignature }
        // No x5c.
        let bare = try JWS.sign(payload: payload, algorithm: .es256, key: acsKey)
        #expect { try bare.verifyWithX5C(roots: [root.certificate]) } throws: { ($0 as? JOSEError)?.kind == .missingKey }
        // A protected header encoded once and signed under many times: the same header as one made per signature.
        let header = JWS.protectedHeader(algorithm: .es256, extraHeader: [("x5c", x5c)])
        for _ in 0..<2 {
            let reused = try JWS(compact: try JWS.signCompact(payload: payload, algorithm: .es256, key: acsKey, protectedHeader: header))
            #expect(reused.compact.hasPrefix(jws.compact.prefix { $0 != "." } + "."), "the header part is the per-signature one")
            #expect(try reused.verifyWithX5C(roots: [root.certificate]).commonName == "ACS" && reused.payload == payload)
            let prepared = try JWS(compact: try JWS.signCompact(payload: payload, signer: try PreparedSigner(key: acsKey, algorithm: .es256),
                                                                protectedHeader: header))
            let signerName = try prepared.verifyWithX5C(roots: [root.certificate]).commonName
            #expect(prepared.compact.hasPrefix(header + ".") && signerName == "ACS")
        }
    }

    @Test(arguments: ContentEncryption.allCases)
    func jweRSAAndEMVECRoundTrips(enc: ContentEncryption) throws {
        let rsa = try PrivateKey.generateRSA()
        let a = try JWE.encryptRSAOAEP256(plaintext: payload, recipient: rsa.publicKey, enc: enc, keyID: "k1")
        #expect(try JWE(compact: a.compact).decrypt(rsaKey: rsa) == payload)
        #expect(a.keyID == "k1")

        let ds = try PrivateKey.generateP256()
        for alg in ["ECDH-ES", "dir"] {
            let b = try JWE.encryptEMVECDH(plaintext: payload, recipient: ds.publicKey, directoryServerID: "A000000003", enc: enc, algName: alg)
            #expect(try JWE(compact: b.compact).keyManagement == .emvECDH)
            #expect(try JWE(compact: b.compact).decrypt(ecKey: ds, directoryServerID: "A000000003") == payload)
            #expect(throws: JOSEError.self) { try JWE(compact: b.compact).decrypt(ecKey: ds, directoryServerID: "A000000004") }
            #expect(throws: JOSEError.self) { try JWE(compact: b.compact).decrypt(ecKey: try PrivateKey.generateP256(), directoryServerID: "A000000003") }
        }
    }

    @Test(arguments: ContentEncryption.allCases)
    func jweNegativeCases(enc: ContentEncryption) throws {
        let cek = Digest.randomBytes(enc.keyLength)
        let header = JSON.object([("alg", .string("dir")), ("enc", .string(enc.rawValue))])
        let jwe = try JWE.encrypt(plaintext: payload, cek: cek, header: header)
        var parts = jwe.compact.split(separator: ".", omittingEmptySubsequences: false).map(String.init)

        var tag = Base64URL.decode(parts[4])!
        tag[0] ^= 1
        parts[4] = Base64URL.encode(tag)
        #expect { try JWE(compact: parts.joined(separator: ".")).decrypt(cek: cek) } throws: {
            ($0 as? JOSEError)?.kind == .authenticationFailed
        }
        #expect { try jwe.decrypt(cek: Digest.randomBytes(enc.keyLength)) } throws: { ($0 as? JOSEError)?.kind == .authenticationFailed }
        #expect { try jwe.decrypt(cek: [1, 2, 3]) } throws: { ($0 as? JOSEError)?.kind == .wrongKey }
        #expect { try JWE(compact: String(jwe.compact.dropLast(30))).decrypt(cek: cek) } throws: { $0 is JOSEError }
        #expect { try JWE(compact: "a.b.c") } throws: { ($0 as? JOSEError)?.kind == .malformed }
        #expect { try JWE(compact: "e30..AAAA.AAAA.AA+A") } throws: { ($0 as? JOSEError)?.kind == .malformed }
        let unsupported = Base64URL.encode(Array(#"{"alg":"A128KW","enc":"A256GCM"}"#.utf8)) + "..AAAA.AAAA.AAAA"
        #expect { try JWE(compact: unsupported).keyManagement } throws: { ($0 as? JOSEError)?.kind == .unsupported }
    }

    @Test func jwkParsesEmitsAndRejects() throws {
        let k = try PrivateKey.generateP256()
        let jwk = JWK(privateKey: k, keyID: "sdk")
        let back = try JWK(json: try JSON.parse(jwk.json(includePrivate: true).compact))
        #expect(back == jwk)
        #expect(jwk.json()["d"] == nil)
        #expect(try back.privateKey().publicKey == k.publicKey)
        #expect { try JWK(json: try JSON.parse(#"{"kty":"EC","crv":"P-384","x":"AA","y":"AA"}"#)) } throws: {
            ($0 as? JOSEError)?.kind == .unsupported
        }
        #expect { try JWK(json: try JSON.parse(#"{"kty":"EC","crv":"P-256","x":"AA"}"#)) } throws: { ($0 as? JOSEError)?.kind == .malformed }
        #expect { try JWK(json: try JSON.parse(#"{"kty":"oct","k":"AA"}"#)) } throws: { ($0 as? JOSEError)?.kind == .unsupported }
        #expect { try JWK(json: .array([])) } throws: { ($0 as? JOSEError)?.kind == .malformed }
    }

    @Test func jwtTimeClaims() throws {
        let secret = Array("s".utf8)
        let expired = try JWT.signHS256(claims: try JSON.parse(#"{"exp":1000}"#), secret: secret)
        #expect { try expired.verify(secret: secret) } throws: { ($0 as? JOSEError)?.kind == .invalidClaims }
        let fine = try JWT.signHS256(claims: try JSON.parse(#"{"exp":99999999999}"#), secret: secret)
        try fine.verify(secret: secret)
        #expect(fine.jws.header["typ"]?.stringValue == "JWT")
    }
}
