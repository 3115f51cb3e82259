import Testing
import TapCore
@testable import TapCrypto

/// `PublicKey` and `PrivateKey` take a key from OpenSSL through one checked init (`CheckedKeyType`): P-256 and RSA are
/// kept with their type, anything else is refused as an invalid key with one message, from either side.
@Suite struct KeyTypeTests {
    // Throwaway keys made for this test with `openssl genpkey` (P-384 and Ed25519: parsed by OpenSSL, not supported here).
    static let p384Private = """
        -----BEGIN PRIVATE KEY-----
        MIG2AgEAMBAGByqGSM49AgEGBSuBBAAiBIGeMIGbAgEBBDDkcFb8IB0QE2XdVqqc
        P/n7We5YDgSVJN6ivES4Z6AnXVhmPFD+sDght1Pn5gGcIbuhZANiAAQ7hPJrNo6m
        ixXGgB+l0O2DgzO6FxEEzKf3CXW1fQjWGyTzKSGOCcY8paOUAX9VEOTbmsPrAIc6
        fFeJzZAWB0DMbLU3QQO0yktHl5q5Vrzk1zr09yhqORRMXyjVV0rzEbg=
        -----END PRIVATE KEY-----
        """
    static let p384Public = """
        -----BEGIN PUBLIC KEY-----
        MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEO4TyazaOposVxoAfpdDtg4MzuhcRBMyn
        9wl1tX0I1hsk8ykhjgnGPKWjlAF/VRDk25rD6wCHOnxXic2QFgdAzGy1N0EDtMpL
        R5eauVa85Nc69PcoajkUTF8o1VdK8xG4
        -----END PUBLIC KEY-----
        """
    static let ed25519Private = """
        -----BEGIN PRIVATE KEY-----
        MC4CAQAwBQYDK2VwBCIEIDESuNyiUEM6+ZTi3vumyqdqBiLtprc1qbTMrjSccHqL
        -----END PRIVATE KEY-----
        """
    static let ed25519Public = """
        -----BEGIN PUBLIC KEY-----
        MCowBQYDK2VwAyEAnDDTdkO6cmuayEJ/gK6WJ3UdK3M2XyGvoJ61/Ko6n1k=
        -----END PUBLIC KEY-----
        """

    @Test(arguments: [p384Private, ed25519Private, p384Public, ed25519Public])
    func aKeyOfAnotherTypeIsRefused(_ pem: String) {
        let bytes = Array(pem.utf8)
        #expect {
            if pem.contains("PRIVATE KEY") { _ = try PrivateKey(pemOrDER: bytes) } else { _ = try PublicKey(pemOrDER: bytes) }
        } throws: { error in
            guard let e = error as? CryptoError else { return false }
            return e.kind == .invalidKey && e.message.contains("unsupported key type (only EC P-256 and RSA are supported)")
        }
    }

    @Test func p256AndRSAKeepTheirTypeThroughPEM() throws {
        for key in [try PrivateKey.generateP256(), try PrivateKey.generateRSA()] {
            let parsed = try PrivateKey(pemOrDER: Array(try key.pem().utf8))
            #expect(parsed.type == key.type)
            let pub = try PublicKey(pemOrDER: try key.publicKey.derSPKI())
            #expect(pub.type == key.type && pub == key.publicKey)
        }
    }
}
