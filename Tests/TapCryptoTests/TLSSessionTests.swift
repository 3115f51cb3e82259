import Testing
@testable import TapCrypto

/// TLS handshakes between two in-memory sessions (no sockets): the interception path and verification.
@Suite struct TLSSessionTests {
    /// Shuttles ciphertext between the two sides until both are established or one fails.
    func pump(_ client: TLSSession, _ server: TLSSession) throws {
        for _ in 0..<20 {
            let c = try client.handshake()
            server.feed(client.takeCiphertext())
            let s = try server.handshake()
            client.feed(server.takeCiphertext())
            if c && s { return }
        }
        Issue.record("handshake did not finish")
    }

    @Test func interceptingServerMintsALeafPerSNIName() throws {
        let ca = try CertificateAuthority.selfSigned(commonName: "Intercept CA", key: try PrivateKey.generateP256())
        let leaves = try LeafCertificateCache(authority: ca)
        let server = try TLSContext(interceptingWith: leaves)
        let client = try TLSContext(clientRoots: [ca.certificate])
        for host in ["acs.example.test", "ds.example.test", "acs.example.test"] {
            let c = try TLSSession(context: client, serverName: host)
            let s = try TLSSession(context: server, serverName: "fallback.invalid")
            try pump(c, s)
            #expect(c.protocolVersion == "TLSv1.3")
            #expect(c.alpn == "http/1.1" && s.alpn == "http/1.1")
            #expect(s.serverName == host)
            try c.writePlaintext(Array("GET / HTTP/1.1\r\n\r\n".utf8))
            s.feed(c.takeCiphertext())
            #expect(try s.readPlaintext() == Array("GET / HTTP/1.1\r\n\r\n".utf8))
        }
        #expect(leaves.count == 3, "acs, ds and the fallback name, each minted once")
    }

    @Test func clientRejectsAnUntrustedServerAndAWrongName() throws {
        let ca = try CertificateAuthority.selfSigned(commonName: "CA", key: try PrivateKey.generateP256())
        let other = try CertificateAuthority.selfSigned(commonName: "Other", key: try PrivateKey.generateP256())
        let server = try TLSContext(interceptingWith: try LeafCertificateCache(authority: ca))
        let untrusting = try TLSContext(clientRoots: [other.certificate])
        #expect { try pump(try TLSSession(context: untrusting, serverName: "a.test"), try TLSSession(context: server, serverName: nil)) } throws: {
            ($0 as? TLSError)?.message.contains("certificate") == true
        }
        // A fixed-certificate server presenting a leaf for another name.
        let leafKey = try PrivateKey.generateP256()
        let leaf = try ca.issue(commonName: "right.test", subjectKey: leafKey.publicKey, profile: .tlsServer(names: ["right.test"]))
        let fixed = try TLSContext(serverCertificate: leaf, key: leafKey)
        let trusting = try TLSContext(clientRoots: [ca.certificate])
        #expect(throws: TLSError.self) { try pump(try TLSSession(context: trusting, serverName: "wrong.test"), try TLSSession(context: fixed, serverName: nil)) }
        try pump(try TLSSession(context: trusting, serverName: "right.test"), try TLSSession(context: fixed, serverName: nil))
        // Verification off accepts anything.
        let insecure = try TLSContext(clientRoots: [], verify: false)
        try pump(try TLSSession(context: insecure, serverName: "wrong.test"), try TLSSession(context: fixed, serverName: nil))
    }
}
