import Testing
import TapCore
import TapCrypto
@testable import TapJOSE

/// Vectors made by Python's jwcrypto and cryptography (tools/interop/jose_interop.py make), checked here.
@Suite struct PythonInteropTests {
    func expectPlaintext(_ got: [UInt8], _ c: JSON) throws {
        #expect(try JSON.parse(got) == (try JSON.parse(c["expect"]!.stringValue!)), "\(c["name"]!.compact)")
    }

    @Test func asymmetricJWS() throws {
        let cases = try Fixtures.cases(kind: "jws")
        #expect(cases.count == 3)
        for c in cases {
            let jws = try JWS(compact: c["compact"]!.stringValue!)
            try jws.verify(with: try Fixtures.key(c["key"]!.stringValue!).publicKey())
            try expectPlaintext(jws.payload, c)
        }
    }

    @Test func hs256JWSAndJWT() throws {
        let secret = Array(try Fixtures.python["keys"]!["secret"]!.stringValue!.utf8)
        for c in try Fixtures.cases(kind: "jws-hs256") {
            try JWS(compact: c["compact"]!.stringValue!).verifyHS256(secret: secret)
        }
        let jwtCases = try Fixtures.cases(kind: "jwt")
        #expect(jwtCases.count == 1)
        for c in jwtCases {
            let jwt = try JWT(compact: c["compact"]!.stringValue!)
            try jwt.verify(secret: secret)
            #expect(jwt.claims["iss"]?.stringValue == "merchant")
            #expect(throws: JOSEError.self) { try jwt.verify(secret: Array("nope".utf8)) }
        }
    }

    @Test func x5cChains() throws {
        let cases = try Fixtures.cases(kind: "jws-x5c")
        #expect(cases.count == 2)
        for c in cases {
            let jws = try JWS(compact: c["compact"]!.stringValue!)
            try jws.verifyWithX5C(roots: [try Fixtures.root(c["root"]!.stringValue!)])
            try expectPlaintext(jws.payload, c)
            // The other chain's root does not anchor it.
            let other = c["root"]!.stringValue! == "ec" ? "rsa" : "ec"
            #expect(throws: JOSEError.self) { try jws.verifyWithX5C(roots: [try Fixtures.root(other)]) }
        }
    }

    @Test func rsaOAEP256JWE() throws {
        let cases = try Fixtures.cases(kind: "jwe-rsa")
        #expect(cases.count == 2)
        for c in cases {
            let jwe = try JWE(compact: c["compact"]!.stringValue!)
            try expectPlaintext(try jwe.decrypt(rsaKey: try Fixtures.key("rsa").privateKey()), c)
            #expect(throws: JOSEError.self) { try jwe.decrypt(rsaKey: try PrivateKey.generateRSA()) }
        }
    }

    @Test func directJWE() throws {
        let cases = try Fixtures.cases(kind: "jwe-dir")
        #expect(cases.count == 2)
        for c in cases {
            let jwe = try JWE(compact: c["compact"]!.stringValue!)
            try expectPlaintext(try jwe.decrypt(cek: Hex.decode(c["cek"]!.stringValue!)!), c)
        }
    }

    @Test func emvDeviceDataECDH() throws {
        let cases = try Fixtures.cases(kind: "jwe-ec")
        #expect(cases.count == 4)
        let key = try Fixtures.key("ec").privateKey()
        for c in cases {
            let jwe = try JWE(compact: c["compact"]!.stringValue!)
            try expectPlaintext(try jwe.decrypt(ecKey: key, directoryServerID: c["dsID"]!.stringValue!), c)
            #expect(throws: JOSEError.self) { try jwe.decrypt(ecKey: key, directoryServerID: "A000000003") }
        }
    }

    @Test func thumbprintsMatchJwcrypto() throws {
        for name in ["rsa", "ec", "sdk", "acs"] {
            #expect(try Fixtures.key(name).thumbprint == Fixtures.python["thumbprints"]![name]!.stringValue!)
        }
    }
}
