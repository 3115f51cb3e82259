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
