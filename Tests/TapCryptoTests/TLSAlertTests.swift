import Testing
@testable import TapCrypto

/// The alert a peer ends a handshake with, as the intercepting side learns it (issue 27 §2: the hint that a client
/// refused 3dstape's certificate).
@Suite struct TLSAlertTests {
    /// Runs the handshake until one side throws; returns the server's error once the client's last flight reached it.
    func serverFailure(client: TLSSession, server: TLSSession) -> TLSError? {
        for _ in 0..<20 {
            do { _ = try client.handshake() } catch {}
            server.feed(client.takeCiphertext())
            do { _ = try server.handshake() } catch { return error }
            client.feed(server.takeCiphertext())
        }
        return nil
    }

    @Test func aClientThatDoesNotTrustTheCAEndsWithUnknownCA() throws {
        let ca = try CertificateAuthority.selfSigned(commonName: "Intercept CA", key: try PrivateKey.generateP256())
        let other = try CertificateAuthority.selfSigned(commonName: "Other", key: try PrivateKey.generateP256())
        let server = try TLSSession(context: try TLSContext(interceptingWith: try LeafCertificateCache(authority: ca)), serverName: nil,
                                    fallbackNames: ["acs.example.test"])
        let client = try TLSSession(context: try TLSContext(clientRoots: [other.certificate]), serverName: "acs.example.test")
        let error = try #require(serverFailure(client: client, server: server))
        #expect(error.peerAlert == TLSAlert(code: 48))
        #expect(server.receivedAlert?.description == "unknown_ca (48)")
        #expect(server.receivedAlert?.refusesCertificate == true)
        #expect(error.message.contains("unknown ca"), "OpenSSL's reason stays in the message: \(error.message)")
    }

    @Test func aHandshakeThatSucceedsHasNoAlert() throws {
        let ca = try CertificateAuthority.selfSigned(commonName: "Intercept CA", key: try PrivateKey.generateP256())
        let server = try TLSSession(context: try TLSContext(interceptingWith: try LeafCertificateCache(authority: ca)), serverName: nil)
        let client = try TLSSession(context: try TLSContext(clientRoots: [ca.certificate]), serverName: "acs.example.test")
        #expect(serverFailure(client: client, server: server) == nil)
        #expect(client.isEstablished && server.isEstablished && server.receivedAlert == nil)
    }

    @Test func namesAndTheCertificateClass() {
        #expect(TLSAlert(code: 42).name == "bad_certificate" && TLSAlert(code: 46).name == "certificate_unknown")
        #expect(TLSAlert(code: 45).refusesCertificate && TLSAlert(code: 42).refusesCertificate && TLSAlert(code: 46).refusesCertificate)
        #expect(!TLSAlert(code: 40).refusesCertificate, "handshake_failure (no shared cipher or version) is not a certificate refusal")
        #expect(!TLSAlert(code: 120).refusesCertificate && !TLSAlert(code: 0).refusesCertificate)
        #expect(TLSAlert(code: 200).name == "alert 200")
    }
}
