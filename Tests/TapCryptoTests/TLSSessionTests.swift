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

    /// Issue 23 item 14: a client that reaches an intercepting server by IP address sends no SNI; it gets the leaf for
    /// the fallback names (the address it reached and localhost), which it verifies against the address. With no
    /// fallback, such a client gets no certificate at all (alert 40, the defect).
    @Test func aClientWithoutSNIGetsTheFallbackLeaf() throws {
        let ca = try CertificateAuthority.selfSigned(commonName: "Intercept CA", key: try PrivateKey.generateP256())
        let leaves = try LeafCertificateCache(authority: ca)
        let server = try TLSContext(interceptingWith: leaves)
        let client = try TLSContext(clientRoots: [ca.certificate])
        for reached in ["127.0.0.1", "::1"] {
            let c = try TLSSession(context: client, serverName: reached) // an IP: verified, not sent as SNI
            let s = try TLSSession(context: server, serverName: nil, fallbackNames: [reached, "localhost"])
            try pump(c, s)
            #expect(s.serverName == nil, "no SNI was sent")
        }
        let byName = try TLSSession(context: client, serverName: "localhost")
        try pump(byName, try TLSSession(context: server, serverName: nil, fallbackNames: ["127.0.0.1", "localhost"]))
        #expect(throws: TLSError.self, "another address than the leaf's is refused") {
            try pump(try TLSSession(context: client, serverName: "127.0.0.2"),
                     try TLSSession(context: server, serverName: nil, fallbackNames: ["127.0.0.1", "localhost"]))
        }
        #expect(throws: TLSError.self, "no fallback: no certificate") {
            try pump(try TLSSession(context: client, serverName: "127.0.0.1"), try TLSSession(context: server, serverName: nil))
        }
        #expect(leaves.count == 3, "one leaf per set of names, cached (127.0.0.1+localhost, ::1+localhost, the SNI localhost): \(leaves.count)")
    }
}
