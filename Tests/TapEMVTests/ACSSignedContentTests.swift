import Testing
import TapCore
import TapCrypto
import TapJOSE
@testable import TapEMV

/// The ACS's building blocks, shared by the sandbox, key substitution and the replayer.
@Suite struct ACSSignedContentTests {
    @Test func signedByTheACSVerifiedByTheSDKAndTheChannelAgrees() throws {
        let ca = try CertificateAuthority.selfSigned(commonName: "DS root", key: try PrivateKey.generateP256())
        for (key, alg) in [(try PrivateKey.generateRSA(), SignatureAlgorithm.ps256), (try PrivateKey.generateP256(), .es256)] {
            let cert = try ca.issue(commonName: "ACS", subjectKey: key.publicKey, profile: .signing)
            let sdk = try PrivateKey.generateP256()
            let sdkJWK = JWK(publicKey: sdk.publicKey).json()
            let (acs, acsEphem) = try ACSChannel.open(sdkEphemPubKey: sdkJWK, sdkReferenceNumber: "3DS_LOA_SDK_TEST", acsTransID: "a-1")
            let compact = try ACSSignedContent(acsEphemPubKey: acsEphem, sdkEphemPubKey: sdkJWK, acsURL: "https://acs.test/c")
                .sign(key: key, certificate: cert, algorithm: alg)
            let (content, signer) = try ACSSignedContent.verify(compact, roots: [ca.certificate])
            #expect(signer.subject.contains("ACS") && content.acsURL == "https://acs.test/c" && content.sdkEphemPubKey == sdkJWK)
            var sdkSide = try AppChannelCipher(role: .sdk, privateKey: sdk, peerPublicKey: try JWK(json: content.acsEphemPubKey).publicKey(),
                                               sdkReferenceNumber: "3DS_LOA_SDK_TEST", acsTransID: "a-1", enc: .a128cbcHS256)
            #expect(sdkSide.cek == acs.cek, "both sides derive the same CEK")
            var acsSide = acs
            let creq = try sdkSide.seal(.object([("messageType", .string("CReq"))]))
            #expect(try acsSide.openRequest(creq)["messageType"]?.stringValue == "CReq")
            // Another root, or a flipped bit in the signature: refused.
            let other = try CertificateAuthority.selfSigned(commonName: "Other", key: try PrivateKey.generateP256())
            #expect(throws: JOSEError.self) { _ = try ACSSignedContent.verify(compact, roots: [other.certificate]) }
            var parts = compact.split(separator: ".").map(String.init)
            var sig = Base64URL.decode(parts[2])!
            sig[sig.count / 2] ^= 1
            parts[2] = Base64URL.encode(sig)
            #expect(throws: JOSEError.self) { _ = try ACSSignedContent.verify(parts.joined(separator: "."), roots: [ca.certificate]) }
            #expect(try ACSSignedContent(unverified: parts.joined(separator: ".")).acsURL == "https://acs.test/c")
        }
    }

    @Test func erroCarriesTheIDsOfTheMessageItIsAbout() {
        let about = JSON.object([("threeDSServerTransID", .string("t")), ("acsTransID", .string("a")), ("messageVersion", .string("2.3.1"))])
        let e = Erro.make(.transactionIDNotRecognised, component: "A", description: "Transaction ID not recognised", detail: "acsTransID a",
                          about: about, messageType: "CReq", version: "2.3.1")
        #expect(e.compact == #"{"threeDSServerTransID":"t","acsTransID":"a","errorCode":"301","errorComponent":"A","errorDescription":"Transaction ID not recognised","errorDetail":"acsTransID a","errorMessageType":"CReq","messageType":"Erro","messageVersion":"2.3.1"}"#)
    }
}

/// client-replay verifies thousands of acsSignedContents with one `TrustedCertificates` (the roots' store and the ACS
/// certificates kept): each one is still verified, chain and signature.
@Suite struct ACSSignedContentTrustReuseTests {
    @Test func aKeptStoreStillRefusesWhatTheRootsDoNotSignAndEveryBadSignature() throws {
        let ca = try CertificateAuthority.selfSigned(commonName: "DS root", key: try PrivateKey.generateP256())
        let other = try CertificateAuthority.selfSigned(commonName: "Other", key: try PrivateKey.generateP256())
        let trust = try TrustedCertificates(roots: [ca.certificate])
        let sdkJWK = JWK(publicKey: try PrivateKey.generateP256().publicKey).json()
        let (_, acsEphem) = try ACSChannel.open(sdkEphemPubKey: sdkJWK, sdkReferenceNumber: "3DS_LOA_SDK_TEST", acsTransID: "a-1")
        let key = try PrivateKey.generateRSA()
        let good = try ACSSignedContent(acsEphemPubKey: acsEphem, sdkEphemPubKey: sdkJWK, acsURL: "https://acs.test/c")
            .sign(key: key, certificate: try ca.issue(commonName: "ACS", subjectKey: key.publicKey, profile: .signing), algorithm: .ps256)
        let foreign = try ACSSignedContent(acsEphemPubKey: acsEphem, sdkEphemPubKey: sdkJWK, acsURL: "https://acs.test/c")
            .sign(key: key, certificate: try other.issue(commonName: "ACS", subjectKey: key.publicKey, profile: .signing), algorithm: .ps256)
        var parts = good.split(separator: ".").map(String.init)
        var sig = Base64URL.decode(parts[2])!
        sig[sig.count / 2] ^= 1
        parts[2] = Base64URL.encode(sig)
        let flipped = parts.joined(separator: ".")
        for round in 0..<3 { // the same certificates again and again, from the cache after the first round
            #expect(try ACSSignedContent.verify(good, trust: trust).content.acsURL == "https://acs.test/c", "round \(round)")
            #expect(throws: JOSEError.self, "round \(round)") { _ = try ACSSignedContent.verify(foreign, trust: trust) }
            #expect(throws: JOSEError.self, "round \(round)") { _ = try ACSSignedContent.verify(flipped, trust: trust) }
        }
        #expect(trust.cachedCount == 2, "the two ACS certificates, each parsed once")
    }
}
