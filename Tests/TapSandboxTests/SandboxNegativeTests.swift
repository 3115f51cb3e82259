import Foundation
import TapIdentity
import Testing
import TapCore
import TapCrypto
import TapEMV
import TapHTTPService
import TapJOSE
import TapNet
import TapSandbox

/// Requests a real DS and ACS would refuse, and the client's failure paths.
@Suite(.serialized) struct SandboxNegativeTests {
    func post(_ h: SandboxHarness, _ path: String, _ body: [UInt8], type: String = "application/json") throws -> JSON {
        let client = BlockingHTTPClient(tls: try TLSContext(clientRoots: []), timeout: 5)
        let r = try client.send("POST", HTTPURL(h.sandbox.baseURL + path)!, headers: [("Content-Type", type)], body: body)
        return try JSON.parse(r.body)
    }

    func browserAReq(_ pan: String = "4000000000001067", version: String = "2.2.0") -> JSON {
        .object([("threeDSServerTransID", .string(UUID().uuidString.lowercased())), ("messageType", .string("AReq")),
                 ("messageVersion", .string(version)), ("deviceChannel", .string("02")), ("messageCategory", .string("02")),
                 ("acctNumber", .string(pan)), ("threeDSServerRefNumber", .string("R")), ("threeDSServerURL", .string("http://127.0.0.1:9/rreq")),
                 ("threeDSRequestorID", .string("r")), ("threeDSRequestorName", .string("n")), ("acquirerBIN", .string("412345")),
                 ("acquirerMerchantID", .string("m")), ("mcc", .string("5999")), ("merchantCountryCode", .string("826")),
                 ("merchantName", .string("shop")), ("notificationURL", .string("http://127.0.0.1:9/notify")),
                 ("browserAcceptHeader", .string("text/html")), ("browserUserAgent", .string("t")), ("browserLanguage", .string("en"))])
    }

    @Test func dsErroCodes() throws {
        let h = try SandboxHarness()
        defer { h.stop() }
        let ok = try post(h, "/ds/areq", browserAReq().bytes)
        #expect(ok["messageType"]?.stringValue == "ARes" && ok["transStatus"]?.stringValue == "C")
        let missing = try post(h, "/ds/areq", browserAReq().removing("acctNumber").removing("notificationURL").bytes)
        #expect(missing["errorCode"]?.stringValue == "201")
        #expect(missing["errorDetail"]?.stringValue == "acctNumber,notificationURL")
        #expect(missing["errorComponent"]?.stringValue == "D" && missing["errorMessageType"]?.stringValue == "AReq")
        let badFormat = try post(h, "/ds/areq", browserAReq().setting("threeDSServerTransID", to: .string("not-a-uuid")).bytes)
        #expect(badFormat["errorCode"]?.stringValue == "203" && badFormat["errorDetail"]?.stringValue == "threeDSServerTransID")
        let version = try post(h, "/ds/areq", browserAReq(version: "2.0.9").bytes)
        #expect(version["errorCode"]?.stringValue == "102")
        let unknown = try post(h, "/ds/areq", browserAReq().setting("messageType", to: .string("XReq")).bytes)
        #expect(unknown["errorCode"]?.stringValue == "101")
        let notJSON = try post(h, "/ds/areq", Array("hello".utf8))
        #expect(notJSON["errorCode"]?.stringValue == "101")
        let preq = try post(h, "/ds/preq", JSON.object([("messageType", .string("PReq")), ("messageVersion", .string("2.2.0")),
                                                        ("threeDSServerTransID", .string(UUID().uuidString.lowercased())),
                                                        ("threeDSServerRefNumber", .string("R"))]).bytes)
        #expect(preq["messageType"]?.stringValue == "PRes")
        guard case let .array(ranges)? = preq["cardRangeData"] else { Issue.record("no cardRangeData"); return }
        #expect(ranges.first?["threeDSMethodURL"]?.stringValue == h.sandbox.baseURL + "/acs/method")
    }

    /// Issue 23 item 7: the URLs the ACS's pages post to are http(s) URLs, so that a `javascript:` one never becomes a
    /// form's action; the page's values are escaped by the shared helper.
    @Test func pageURLsThatAreNotHTTPAreRefused() throws {
        let h = try SandboxHarness()
        defer { h.stop() }
        for url in ["javascript:alert(document.domain)", " http://127.0.0.1:9/notify", "data:text/html,<script>1</script>"] {
            let r = try post(h, "/ds/areq", browserAReq().setting("notificationURL", to: .string(url)).bytes)
            #expect(r["errorCode"]?.stringValue == "203" && r["errorDetail"]?.stringValue == "notificationURL", "\(url): \(r.compact)")
        }
        let rreqURL = try post(h, "/ds/areq", browserAReq().setting("threeDSServerURL", to: .string("javascript:x")).bytes)
        #expect(rreqURL["errorCode"]?.stringValue == "203" && rreqURL["errorDetail"]?.stringValue == "threeDSServerURL")
        let data = Base64URL.encode(JSON.object([("threeDSServerTransID", .string(UUID().uuidString.lowercased())),
                                                 ("threeDSMethodNotificationURL", .string("javascript:alert(1)"))]).bytes)
        let client = BlockingHTTPClient(tls: try TLSContext(clientRoots: []), timeout: 5)
        let method = try client.send("POST", HTTPURL(h.sandbox.baseURL + "/acs/method")!, headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                     body: Array("threeDSMethodData=\(data)".utf8))
        #expect(method.head.status == 400 && !String(decoding: method.body, as: UTF8.self).contains("javascript"))
    }

    @Test func acsErroCodes() throws {
        let h = try SandboxHarness()
        defer { h.stop() }
        // An app-channel challenge set up by hand, to send what a broken SDK would.
        let sdkKey = try PrivateKey.generateP256()
        let ref = "3DS_LOA_SDK_TEST"
        let keys = SandboxHarness.keys
        let deviceData = try JWE.encryptRSAOAEP256(plaintext: Array(#"{"DV":"1.6"}"#.utf8), recipient: keys.dsKeys[.rsa]!.cert.publicKey,
                                                   enc: .a128cbcHS256).compact
        let sdkTransID = UUID().uuidString.lowercased()
        var areq = browserAReq().removing("notificationURL").setting("deviceChannel", to: .string("01"))
        for (k, v) in [("sdkAppID", JSON.string("app")), ("sdkEncData", .string(deviceData)), ("sdkEphemPubKey", JWK(publicKey: sdkKey.publicKey).json()),
                       ("sdkMaxTimeout", .string("05")), ("sdkReferenceNumber", .string(ref)), ("sdkTransID", .string(sdkTransID)),
                       ("deviceRenderOptions", .object([("sdkInterface", .string("03"))]))] {
            areq = areq.setting(k, to: v)
        }
        let ares = try post(h, "/ds/areq", areq.bytes)
        try #require(ares["transStatus"]?.stringValue == "C", "\(ares.compact)")
        let content = try JWS(compact: try #require(ares["acsSignedContent"]?.stringValue))
        try content.verifyWithX5C(roots: [keys.root.certificate])
        let acsKey = try JWK(json: content.payloadJSON!["acsEphemPubKey"]!).publicKey()
        let acsTransID = ares["acsTransID"]!.stringValue!
        var cipher = try AppChannelCipher(role: .sdk, privateKey: sdkKey, peerPublicKey: acsKey, sdkReferenceNumber: ref,
                                          acsTransID: acsTransID, enc: .a128gcm)
        let creq = JSON.object([("threeDSServerTransID", ares["threeDSServerTransID"]!), ("acsTransID", .string(acsTransID)),
                                ("messageType", .string("CReq")), ("messageVersion", .string("2.2.0")), ("sdkTransID", .string(sdkTransID))])
        let first = try cipher.seal(creq)
        let client = BlockingHTTPClient(tls: try TLSContext(clientRoots: []), timeout: 5)
        let url = HTTPURL(h.sandbox.baseURL + "/acs/challenge")!
        let r1 = try client.send("POST", url, headers: [("Content-Type", "application/jose")], body: Array(first.utf8))
        let cres = try cipher.open(String(decoding: r1.body, as: UTF8.self))
        #expect(cres["acsUiType"]?.stringValue == "01" && cres["acsCounterAtoS"]?.stringValue == "000")
        // A resend shows the screen again, with the next counters.
        let resend = try cipher.seal(creq.setting("resendChallenge", to: .string("Y")).setting("challengeNoEntry", to: .string("Y")))
        let r2 = try client.send("POST", url, headers: [("Content-Type", "application/jose")], body: Array(resend.utf8))
        let again = try cipher.open(String(decoding: r2.body, as: UTF8.self))
        #expect(again["challengeCompletionInd"]?.stringValue == "N" && again["acsCounterAtoS"]?.stringValue == "001")
        #expect(again["challengeInfoText"]?.stringValue?.contains("A new code was sent") == true)
        // The same CReq again: its counter is now wrong.
        let replay = try post(h, "/acs/challenge", Array(first.utf8), type: "application/jose")
        #expect(replay["errorCode"]?.stringValue == "302" && replay["errorComponent"]?.stringValue == "A")
        #expect(replay["errorDetail"]?.stringValue?.contains("Counters are not equal") == true)
        // A CReq for a transaction the ACS does not know.
        var stranger = AppChannelCipher(role: .sdk, cek: Digest.randomBytes(32), acsTransID: UUID().uuidString.lowercased(), enc: .a128gcm)
        let unknown = try post(h, "/acs/challenge", Array(try stranger.seal(creq).utf8), type: "application/jose")
        #expect(unknown["errorCode"]?.stringValue == "301")
        // A CReq encrypted with the wrong key for a known transaction.
        var wrongKey = AppChannelCipher(role: .sdk, cek: Digest.randomBytes(32), acsTransID: acsTransID, enc: .a128gcm)
        let undecryptable = try post(h, "/acs/challenge", Array(try wrongKey.seal(creq).utf8), type: "application/jose")
        #expect(undecryptable["errorCode"]?.stringValue == "302")
    }

    @Test func clientRejectsUntrustedAndTamperedSignedContent() throws {
        // The client trusts another root: the chain does not reach it.
        let h = try SandboxHarness()
        defer { h.stop() }
        let other = try CertificateAuthority.selfSigned(commonName: "Not the DS root", key: try PrivateKey.generateP256())
        try other.certificate.pem.write(toFile: (h.certs as NSString).appendingPathComponent("ds-root.pem"), atomically: true, encoding: .utf8)
        var o = h.options(card: "4000000000001067")
        o.answer = TestCard.otp
        let r = try h.run(o)
        #expect(r.error?["message"]?.stringValue?.contains("acsSignedContent rejected: certificate chain") == true, "\(r.json.compact)")
        #expect(r.transStatus == "C", "the challenge was not attempted")

        // A signature that does not verify.
        let bad = try SandboxHarness { $0.badSignature = true }
        defer { bad.stop() }
        var b = bad.options(card: "4000000000001067")
        b.answer = TestCard.otp
        let rb = try bad.run(b)
        #expect(rb.error?["message"]?.stringValue?.contains("signature does not verify") == true, "\(rb.json.compact)")
    }

    /// The client force-unwrapped threeDSServerTransID (and, in a browser, acsTransID) of a challenge ARes: a DS that left
    /// one out trapped the whole process. Now, on both channels, the run stops with an error that names the member.
    @Test func aChallengeAResWithoutItsIDsStopsTheClientWithAnErrorNotATrap() throws {
        let h = try SandboxHarness()
        defer { h.stop() }
        // A DS in front of the sandbox that drops members from the sandbox's ARes.
        let ds = try ServiceStack.background("3dstape-test-stripping-ds")
        let forward = BlockingHTTPClient(tls: try TLSContext(clientRoots: []), timeout: 5)
        let target = HTTPURL(h.sandbox.baseURL + "/ds/areq")!
        let server = HTTPServer(loop: ds.loop) { req, _, respond in
            // Blocking this loop is fine here: the sandbox answers on its own loop.
            guard let r = try? forward.send("POST", target, headers: [("Content-Type", "application/json")], body: req.body),
                  let ares = try? JSON.parse(r.body) else { return respond(HTTPReply(status: 502)) }
            let drop = req.head.target.hasPrefix("/both") ? ["threeDSServerTransID", "acsTransID"] : ["threeDSServerTransID"]
            respond(.json(drop.reduce(ares) { $0.removing($1) }.bytes))
        }
        let address = try server.start(on: HostPort(host: "127.0.0.1", port: 0))
        ds.onStop { server.stop() }
        ds.start()
        defer { ds.stop() }

        for (browser, path) in [(false, "/one"), (true, "/one"), (true, "/both")] {
            var o = h.options(card: "4000000000001067", browser: browser)
            o.dsURL = HTTPURL("http://\(address)\(path)")!
            o.answer = TestCard.otp
            let r = try h.run(o)
            #expect(r.transStatus == "C", "the ARes was taken as it came")
            let message = r.error?["message"]?.stringValue ?? ""
            #expect(message.hasPrefix("ARes without threeDSServerTransID"), "\(browser) \(path): \(r.json.compact)")
            #expect(r.failure == .aresRejected)
        }
    }

    @Test func clientTimeoutCancelsWith08AndErroCardFails() throws {
        let h = try SandboxHarness()
        defer { h.stop() }
        var o = h.options(card: "4000000000001158")
        o.timeout = 1
        let started = Date()
        let r = try h.run(o)
        #expect(Date().timeIntervalSince(started) < 4)
        #expect(r.error?["message"]?.stringValue?.contains("challengeCancel 08") == true, "\(r.json.compact)")
        let e = try h.run(h.options(card: "4000000000001166"))
        #expect(e.error?["errorCode"]?.stringValue == "305")
        let delayed = try h.run(h.options(card: "4000000000001141"))
        #expect(delayed.transStatus == "Y")
        #expect((delayed.timings.first { $0.0 == "ares_ms" }?.1 ?? 0) >= 300)
    }

    @Test func testCardsAreLuhnValidAndDistinct() {
        #expect(Set(TestCard.all.map(\.pan)).count == TestCard.all.count)
        for c in TestCard.all { #expect(ThreeDSContent.luhn(Array(c.pan.utf8)), "\(c.pan)") }
    }
}

/// HTTPS, the key log and the 3DS Method.
@Suite(.serialized) struct SandboxServiceTests {
    @Test func httpsWithTheSandboxRootAndAKeyLog() throws {
        let keylog = FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-keylog-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: keylog) }
        let h = try SandboxHarness(tls: true) { $0.keylog = keylog }
        defer { h.stop() }
        #expect(h.sandbox.baseURL.hasPrefix("https://127.0.0.1:"))
        var o = h.options(card: "4000000000001067")
        o.answer = TestCard.otp
        // Without the sandbox root the TLS handshake fails; with it the flow completes.
        let refused = try h.run(o)
        #expect(refused.error?["message"]?.stringValue?.contains("TLS") == true, "\(refused.json.compact)")
        o.extraRoots = [SandboxHarness.keys.root.certificate]
        #expect(try h.run(o).transStatus == "Y")
        let lines = try String(contentsOfFile: keylog, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 1, "one challenge reached the ACS")
        let parts = lines.last!.split(separator: " ")
        #expect(parts.count == 3 && parts[0] == "CEK" && parts[2].count == 64)
        #expect(FileManager.default.fileExists(atPath: keylog))
        let mode = try FileManager.default.attributesOfItem(atPath: keylog)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test func threeDSMethodPostsBackToTheNotificationURL() throws {
        let h = try SandboxHarness()
        defer { h.stop() }
        let id = UUID().uuidString.lowercased()
        let data = Base64URL.encode(JSON.object([("threeDSServerTransID", .string(id)),
                                                 ("threeDSMethodNotificationURL", .string("https://merchant.test/method-done"))]).bytes)
        let client = BlockingHTTPClient(tls: try TLSContext(clientRoots: []), timeout: 5)
        let r = try client.send("POST", HTTPURL(h.sandbox.baseURL + "/acs/method")!, headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                body: Array("threeDSMethodData=\(data)".utf8))
        let html = String(decoding: r.body, as: UTF8.self)
        #expect(html.contains("action=\"https://merchant.test/method-done\""))
        let value = try #require(html.components(separatedBy: "name=\"threeDSMethodData\" value=\"").last?.split(separator: "\"").first)
        #expect(try JSON.parse(Base64URL.decode(String(value))!)["threeDSServerTransID"]?.stringValue == id)
    }
}
