import Testing
import TapCore
import TapCrypto
@testable import TapJOSE

/// RFC 7515 A.1–A.3, RFC 7516 A.2 (content layer) and RFC 7518 B.1, from Fixtures/rfc-vectors.json.
@Suite struct RFCVectorTests {
    @Test func rfc7515A1HS256() throws {
        let v = try Fixtures.rfc["rfc7515_A1"]!
        let secret = Base64URL.decode(v["key"]!["k"]!.stringValue!)!
        let jws = try JWS(compact: v["compact"]!.stringValue!)
        try jws.verifyHS256(secret: secret)
        // HS256 is deterministic: re-signing the same input gives the RFC's signature.
        #expect(Digest.hmacSHA256(key: secret, data: jws.signingInput) == jws.signature)
        #expect(throws: JOSEError.self) { try jws.verifyHS256(secret: Array("wrong".utf8)) }
    }

    @Test func rfc7515A2RS256() throws {
        let v = try Fixtures.rfc["rfc7515_A2"]!
        let jwk = try JWK(json: v["key"]!)
        let jws = try JWS(compact: v["compact"]!.stringValue!)
        try jws.verify(with: try jwk.publicKey())
        // RS256 (PKCS#1 v1.5) is deterministic too.
        #expect(try jwk.privateKey().sign(jws.signingInput, algorithm: .rs256) == jws.signature)
    }

    @Test func rfc7515A3ES256() throws {
        let v = try Fixtures.rfc["rfc7515_A3"]!
        let jwk = try JWK(json: v["key"]!)
        let jws = try JWS(compact: v["compact"]!.stringValue!)
        try jws.verify(with: try jwk.publicKey())
        var tampered = jws.signature
        tampered[5] ^= 0x40
        #expect(!(try jwk.publicKey().verify(tampered, of: jws.signingInput, algorithm: .es256)))
    }

    @Test func rfc7516A2ContentLayer() throws {
        let v = try Fixtures.rfc["rfc7516_A2"]!
        let jwe = try JWE(compact: v["compact"]!.stringValue!)
        let plaintext = try jwe.decrypt(cek: Hex.decode(v["cek"]!.stringValue!)!)
        #expect(String(decoding: plaintext, as: UTF8.self) == v["plaintext"]!.stringValue!)
    }

    @Test func rfc7518B1AES128CBCHS256() throws {
        let v = try Fixtures.rfc["rfc7518_B1"]!
        func h(_ k: String) -> [UInt8] { Hex.decode(v[k]!.stringValue!)! }
        let (ct, tag) = try ContentEncryption.a128cbcHS256.seal(cek: h("k"), iv: h("iv"), plaintext: h("p"), aad: h("a"))
        #expect(ct == h("e"))
        #expect(Hex.encode(tag) == "652c3fa36b0a7c5b3219fab3a30bc1c4")
        #expect(try ContentEncryption.a128cbcHS256.open(cek: h("k"), iv: h("iv"), ciphertext: ct, tag: tag, aad: h("a")) == h("p"))
    }
}
