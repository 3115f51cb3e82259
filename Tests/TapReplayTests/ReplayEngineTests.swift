import Foundation
import Testing
import TapCore
import TapCrypto
import TapEMV
import TapJOSE
@testable import TapReplay
@testable import TapStore

/// The engine without sockets: live requests in, answers out, against the checked-in demo sessions.
@Suite struct ReplayEngineTests {
    static let sessions = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../sessions").standardized

    /// A copy of a sample session (opening a session may recover its WAL, so the checked-in file is never opened).
    static func catalog(_ name: String) throws -> ReplayCatalog {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("replay-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let copy = dir.appendingPathComponent(name)
        try FileManager.default.copyItem(at: sessions.appendingPathComponent(name), to: copy)
        defer { try? FileManager.default.removeItem(at: dir) }
        return try ReplayCatalog.load(path: copy.path)
    }

    struct Trust {
        let root: Certificate
        let identity: ReplayACSIdentity
        init() throws {
            let ca = try CertificateAuthority.selfSigned(commonName: "Replay Test DS Root", key: try PrivateKey.generateP256())
            let key = try PrivateKey.generateP256()
            let cert = try ca.issue(commonName: "Replay Test ACS", subjectKey: key.publicKey, profile: .signing)
            root = ca.certificate
            identity = ReplayACSIdentity(key: key, certificate: cert, signing: .es256)
        }
    }

    /// A live AReq for the recorded flow of `card`/`version`/`channel`, with fresh IDs and this SDK's key.
    func liveAReq(_ catalog: ReplayCatalog, pan: String, version: String, channel: String = "01", sdkKey: PrivateKey) throws -> JSON {
        let flow = try #require(catalog.flows.first { $0.maskedCard == Masking.maskPAN(pan) && $0.messageVersion == version && $0.deviceChannel == channel })
        var a = flow.areqJSON.setting("threeDSServerTransID", to: .string(UUID().uuidString.lowercased()))
            .setting("acctNumber", to: .string(pan)).setting("threeDSServerURL", to: .string("http://127.0.0.1:9/3ds/rreq"))
        if channel == "01" {
            a = a.setting("sdkTransID", to: .string(UUID().uuidString.lowercased())).setting("sdkEphemPubKey", to: JWK(publicKey: sdkKey.publicKey).json())
        }
        return a
    }

    struct Outcome {
        var ares: JSON
        var cres: [JSON]
        var delays: [Double]
        var rreq: JSON?
    }

    /// An app challenge, played as an SDK would: AReq, then CReqs until the final CRes.
    func appChallenge(_ engine: ReplayEngine, _ trust: Trust, pan: String, version: String, entries: [[(String, JSON)]],
                      enc: ContentEncryption = .a128cbcHS256) throws -> Outcome {
        let sdkKey = try PrivateKey.generateP256()
        let areq = try liveAReq(engine.catalog, pan: pan, version: version, sdkKey: sdkKey)
        let a = engine.handle(LiveRequest(method: "POST", target: "http://ds.test/ds/areq", body: areq.bytes), selfURL: "http://127.0.0.1:1")
        #expect(a.miss == nil, "\(a.miss ?? "")")
        let ares = try JSON.parse(a.body)
        #expect(ares["threeDSServerTransID"] == areq["threeDSServerTransID"] && ares["sdkTransID"] == areq["sdkTransID"])
        let jws = try JWS(compact: try #require(ares["acsSignedContent"]?.stringValue))
        _ = try jws.verifyWithX5C(roots: [trust.root])
        let content = try #require(jws.payloadJSON)
        #expect(content["sdkEphemPubKey"] == areq["sdkEphemPubKey"], "the live SDK's key, not the recorded one")
        let acsTransID = try #require(ares["acsTransID"]?.stringValue)
        var cipher = try AppChannelCipher(role: .sdk, privateKey: sdkKey, peerPublicKey: try JWK(json: content["acsEphemPubKey"]!).publicKey(),
                                          sdkReferenceNumber: areq["sdkReferenceNumber"]!.stringValue!, acsTransID: acsTransID, enc: enc)
        var out = Outcome(ares: ares, cres: [], delays: [a.delay])
        let base: [(String, JSON)] = [("threeDSServerTransID", ares["threeDSServerTransID"]!), ("acsTransID", .string(acsTransID)),
                                      ("messageType", .string("CReq")), ("messageVersion", .string(version)), ("sdkTransID", ares["sdkTransID"]!)]
        for extra in entries {
            let sealed = try cipher.seal(.object(base + extra))
            let r = engine.handle(LiveRequest(method: "POST", target: "http://acs.test/acs/challenge", body: Array(sealed.utf8)), selfURL: "")
            #expect(r.miss == nil, "\(r.miss ?? "")")
            let cres = try cipher.open(String(decoding: r.body, as: UTF8.self))
            out.cres.append(cres)
            out.delays.append(r.delay)
            if let rr = r.rreq {
                #expect(rr.url == "http://127.0.0.1:9/3ds/rreq")
                out.rreq = try JSON.parse(rr.body)
                out.delays.append(rr.after)
            }
        }
        return out
    }

    /// A decoupled flow: the AReq is answered D, and the RReq follows.
    func decoupled(_ engine: ReplayEngine, pan: String) throws -> Outcome {
        let areq = try liveAReq(engine.catalog, pan: pan, version: "2.2.0", sdkKey: try PrivateKey.generateP256())
        let a = engine.handle(LiveRequest(method: "POST", target: "/ds/areq", body: areq.bytes), selfURL: "http://127.0.0.1:1")
        let ares = try JSON.parse(a.body)
        #expect(ares["transStatus"]?.stringValue == "D")
        let rr = try #require(a.rreq)
        return Outcome(ares: ares, cres: [], delays: [a.delay, rr.after], rreq: try JSON.parse(rr.body))
    }

    @Test func appChallengeWithFreshKeysAndRewrittenIDs() throws {
        let trust = try Trust()
        let engine = ReplayEngine(catalog: try Self.catalog("demo-app.3dstape"), options: ReplayOptions(), identity: trust.identity)
        let o = try appChallenge(engine, trust, pan: "4000000000001067", version: "2.2.0", entries: [[], [("challengeDataEntry", .string("1234"))]])
        #expect(o.cres.count == 2)
        #expect(o.cres[0]["acsUiType"]?.stringValue == "01" && o.cres[0]["acsCounterAtoS"]?.stringValue == "000")
        #expect(o.cres[1]["transStatus"]?.stringValue == "Y" && o.cres[1]["acsCounterAtoS"]?.stringValue == "001")
        for c in o.cres {
            #expect(c["acsTransID"] == o.ares["acsTransID"] && c["sdkTransID"] == o.ares["sdkTransID"]
                    && c["threeDSServerTransID"] == o.ares["threeDSServerTransID"])
        }
        let rreq = try #require(o.rreq)
        #expect(rreq["acsTransID"] == o.ares["acsTransID"] && rreq["dsTransID"] == o.ares["dsTransID"])
        #expect(rreq["threeDSServerTransID"] == o.ares["threeDSServerTransID"])
        let cavv = try #require(rreq["authenticationValue"]?.stringValue)
        #expect(cavv != "***" && Data(base64Encoded: cavv)?.count == 20, "a masked value is replaced by a well-formed one")
        #expect(engine.cek(for: o.ares["acsTransID"]!.stringValue!) != nil, "the writer can store the live channel in clear")
        // Both recorded flows for this card are told apart by version: 2.1.0 recorded N.
        let n = try appChallenge(engine, trust, pan: "4000000000001067", version: "2.1.0", entries: [[], [("challengeDataEntry", .string("9999"))]], enc: .a128gcm)
        #expect(n.cres.last?["transStatus"]?.stringValue == "N")
    }

    @Test func theSameSeedGivesTheSameAnswersAndSchedule() throws {
        let trust = try Trust()
        let catalog = try Self.catalog("demo-app.3dstape")
        var options = ReplayOptions()
        options.schedule = ReplaySchedule(timing: .original, jitter: .uniform(min: 0.001, max: 0.2), seed: 1234)
        func run() throws -> (Outcome, Outcome) {
            let engine = ReplayEngine(catalog: catalog, options: options, identity: trust.identity)
            return (try appChallenge(engine, trust, pan: "4000000000001075", version: "2.2.0", entries: [[], [("challengeDataEntry", .string("2"))]]),
                    try decoupled(engine, pan: "4000000000001133"))
        }
        let (a1, b1) = try run(), (a2, b2) = try run()
        func stable(_ j: JSON, _ o: Outcome) -> String {
            // Live IDs differ by construction (the test makes new ones); the replayer's own must not.
            var s = j.compact
            for k in ["threeDSServerTransID", "sdkTransID"] { if let v = o.ares[k]?.stringValue { s = s.replacingOccurrences(of: v, with: k) } }
            return s
        }
        #expect(a1.ares["acsTransID"] == a2.ares["acsTransID"] && a1.ares["dsTransID"] == a2.ares["dsTransID"])
        #expect(a1.cres.map { stable($0, a1) } == a2.cres.map { stable($0, a2) })
        #expect(a1.delays == a2.delays && b1.delays == b2.delays)
        #expect(stable(a1.rreq!, a1) == stable(a2.rreq!, a2))
        #expect(b1.rreq?["transStatus"]?.stringValue == "Y", "decoupled: the RReq follows the ARes")
    }

    /// The ARes filled into its template is byte for byte the ARes rewritten as a tree, for every transaction of
    /// every sample session: live IDs, URLs and origins, regenerated authentication values, a fresh acsSignedContent.
    @Test(arguments: ["demo-app.3dstape", "demo-browser.3dstape", "demo-pxp.3dstape", "demo-trustpayments.3dstape", "sample-reverse.3dstape"])
    func theAResTemplateWritesWhatTheTreeWrites(_ name: String) throws {
        let trust = try Trust()
        let catalog = try Self.catalog(name)
        let engine = ReplayEngine(catalog: catalog, options: ReplayOptions(), identity: trust.identity)
        var checked = 0
        for (i, flow) in catalog.flows.enumerated() where flow.aresJSON != nil {
            #expect(flow.aresTemplate != nil)
            var map: [(String, String)] = flow.ids.values.sorted().map { ($0, UUID().uuidString.lowercased()) }
            for key in ["notificationURL", "threeDSServerURL"] {
                if let u = flow.areqJSON[key]?.stringValue { map.append((u, "https://live.test/\(key)?n=\"1\"")) }
            }
            for f in flow.followUps { if let o = ReplayURL.origin(catalog.exchanges[f].url), !map.contains(where: { $0.0 == o }) { map.append((o, "http://127.0.0.1:1")) } }
            let lf = ReplayEngine.LiveFlow(flow: i, map: map, threeDSServerURL: nil)
            var untemplated = flow
            untemplated.aresTemplate = nil
            // A fresh acsSignedContent replaces a recorded one (the engine signs one only then).
            let fresh: String? = flow.aresJSON?["acsSignedContent"] == nil ? nil : "eyJhbGciOiJQUzI1NiJ9.eyJ4IjoxfQ.c2ln"
            for signed in Set([nil, fresh]) {
                var rng1 = SeededRandom(seed: 7, stream: UInt64(i), index: 1), rng2 = rng1
                let text = String(decoding: engine.aresBody(flow, lf, &rng1, transStatus: [], signedContent: signed), as: UTF8.self)
                let tree = String(decoding: engine.aresBody(untemplated, lf, &rng2, transStatus: [], signedContent: signed), as: UTF8.self)
                #expect(text == tree, "\(name) flow \(i)")
                if let signed { #expect(text.contains(signed)) }
                if let live = map.first(where: { $0.0 == flow.ids["threeDSServerTransID"] })?.1 { #expect(text.contains(live)) }
                #expect(!text.contains("\"***\""), "masked values are regenerated")
                checked += 1
            }
        }
        #expect(checked > 0)
    }

    @Test func aMissNamesTheClosestTransactionsAndTheFieldsThatDiffered() throws {
        let trust = try Trust()
        let engine = ReplayEngine(catalog: try Self.catalog("demo-app.3dstape"), options: ReplayOptions(), identity: trust.identity)
        let sdkKey = try PrivateKey.generateP256()
        let areq = try liveAReq(engine.catalog, pan: "4000000000001067", version: "2.2.0", sdkKey: sdkKey)
            .setting("messageVersion", to: .string("2.3.1"))
        let r = engine.handle(LiveRequest(method: "POST", target: "/ds/areq", body: areq.bytes), selfURL: "http://127.0.0.1:1")
        #expect(r.status == 404)
        let miss = try #require(r.miss)
        #expect(miss.contains("messageVersion: live 2.3.1, recorded 2.2.0"), "\(miss)")
        #expect(String(decoding: r.body, as: UTF8.self).contains("messageVersion"))
        var erroOptions = ReplayOptions()
        erroOptions.onMiss = .erro
        let erro = ReplayEngine(catalog: engine.catalog, options: erroOptions, identity: trust.identity)
            .handle(LiveRequest(method: "POST", target: "/ds/areq", body: areq.bytes), selfURL: "")
        let e = try JSON.parse(erro.body)
        #expect(e["messageType"]?.stringValue == "Erro" && e["errorCode"]?.stringValue == "305" && e["errorComponent"]?.stringValue == "D")
        #expect(e["threeDSServerTransID"] == areq["threeDSServerTransID"])
        // A CReq for no live transaction.
        let stray = engine.handle(LiveRequest(method: "POST", target: "/acs/challenge", body: Array("eyJhbGciOiJkaXIiLCJraWQiOiJ4In0..AAAA.AAAA.AAAA".utf8)), selfURL: "")
        #expect(stray.miss?.contains("no live transaction") == true)
    }

    /// Issue 26: a forward is an action of its own, not an answer with status 0: `--on-miss forward:URL` forwards the
    /// missed request to the URL with its path and query, and the miss is still named.
    @Test func aMissForwardedIsAForwardActionNotAStatus() throws {
        let trust = try Trust()
        var options = ReplayOptions()
        options.onMiss = .forward("http://127.0.0.1:9/base/")
        let engine = ReplayEngine(catalog: try Self.catalog("demo-app.3dstape"), options: options, identity: trust.identity)
        let r = engine.handle(LiveRequest(method: "GET", target: "/nothing/here?x=1", body: []), selfURL: "http://127.0.0.1:1")
        #expect(r.action == .forward(to: "http://127.0.0.1:9/base/nothing/here?x=1"))
        #expect(r.miss != nil)
        // Without it, the same miss is answered (404), not forwarded.
        let answered = ReplayEngine(catalog: engine.catalog, options: ReplayOptions(), identity: trust.identity)
            .handle(LiveRequest(method: "GET", target: "/nothing/here?x=1", body: []), selfURL: "http://127.0.0.1:1")
        #expect(answered.action == .answer && answered.status == 404)
    }

    @Test func browserFlowRewritesTheFormsAndForwardsTheNotification() throws {
        let trust = try Trust()
        let engine = ReplayEngine(catalog: try Self.catalog("demo-browser.3dstape"), options: ReplayOptions(), identity: trust.identity)
        let areq = try liveAReq(engine.catalog, pan: "4000000000001067", version: "2.2.0", channel: "02", sdkKey: try PrivateKey.generateP256())
            .setting("notificationURL", to: .string("http://127.0.0.1:9/3ds/notify"))
        let a = engine.handle(LiveRequest(method: "POST", target: "/ds/areq", body: areq.bytes), selfURL: "http://127.0.0.1:5555")
        let ares = try JSON.parse(a.body)
        let acsURL = try #require(ares["acsURL"]?.stringValue)
        #expect(acsURL.hasPrefix("http://127.0.0.1:5555/"), "a direct client is sent back to the replayer: \(acsURL)")
        let creq = JSON.object([("threeDSServerTransID", ares["threeDSServerTransID"]!), ("acsTransID", ares["acsTransID"]!),
                                ("messageType", .string("CReq")), ("messageVersion", .string("2.2.0")), ("challengeWindowSize", .string("05"))])
        let form = "creq=\(Base64URL.encode(creq.bytes))&threeDSSessionData=bGl2ZS1zZXNzaW9u"
        let page = engine.handle(LiveRequest(method: "POST", target: "/acs/challenge", body: Array(form.utf8)), selfURL: "http://127.0.0.1:5555")
        let html = String(decoding: page.body, as: UTF8.self)
        #expect(page.miss == nil && html.contains(ares["acsTransID"]!.stringValue!), "the page carries the live acsTransID")
        let submit = "acsTransID=\(ares["acsTransID"]!.stringValue!)&uiType=01&answer=1234&action=submit"
        let final = engine.handle(LiveRequest(method: "POST", target: "/acs/challenge/submit", body: Array(submit.utf8)), selfURL: "http://127.0.0.1:5555")
        let finalHTML = String(decoding: final.body, as: UTF8.self)
        #expect(finalHTML.contains("http://127.0.0.1:9/3ds/notify"), "the cres goes to the live notificationURL")
        #expect(finalHTML.contains("bGl2ZS1zZXNzaW9u"), "threeDSSessionData echoed from the live creq post")
        let cresValue = try #require(finalHTML.components(separatedBy: "name=\"cres\" value=\"").dropFirst().first?.split(separator: "\"").first)
        let cres = try JSON.parse(Base64URL.decode(String(cresValue))!)
        #expect(cres["acsTransID"] == ares["acsTransID"] && cres["transStatus"]?.stringValue == "Y")
        #expect(final.rreq?.url == "http://127.0.0.1:9/3ds/rreq")
        let notify = engine.handle(LiveRequest(method: "POST", target: "http://127.0.0.1:9/3ds/notify", body: Array("cres=x".utf8)), selfURL: "")
        #expect(notify.action == .forward(to: "http://127.0.0.1:9/3ds/notify"), "the transaction's own endpoints are live, not replayed")
    }

    @Test func plainExchangesMatchStructurallyInRecordedOrder() throws {
        let trust = try Trust()
        let catalog = try Self.catalog("sample-reverse.3dstape")
        let plain = try #require(catalog.plain.first, "the reverse sample has a non-3DS exchange")
        let x = catalog.exchanges[plain]
        var options = ReplayOptions()
        options.repeatMode = .miss
        let engine = ReplayEngine(catalog: catalog, options: options, identity: trust.identity)
        let same = catalog.plain.filter { catalog.exchanges[$0].method == x.method && catalog.exchanges[$0].url == x.url
            && catalog.exchanges[$0].requestBody == x.requestBody }.count
        for _ in 0..<same {
            let r = engine.handle(LiveRequest(method: x.method, target: ReplayURL.pathAndQuery(x.url).path + (ReplayURL.pathAndQuery(x.url).query.isEmpty ? "" : "?" + ReplayURL.pathAndQuery(x.url).query),
                                              body: x.requestBody), selfURL: "")
            #expect(r.miss == nil && r.status == x.status, "\(r.miss ?? "")")
        }
        let again = engine.handle(LiveRequest(method: x.method, target: ReplayURL.pathAndQuery(x.url).path, body: x.requestBody), selfURL: "")
        #expect(again.miss != nil, "--repeat miss: served once per recording")
    }

    @Test func undecryptedAppChannelsAreNamed() throws {
        let catalog = try Self.catalog("demo-app.3dstape")
        #expect(catalog.undecryptedProblems().isEmpty)
        let hidden = catalog.exchanges.map { x -> StoredExchange in
            var y = x
            y.messages = x.messages.map { m in
                var n = m
                if n.location == "jwe", let kid = m.json?["acsTransID"] {
                    n.decryption = "no key log"
                    n.json = .object([("alg", .string("dir")), ("enc", .string("A128CBC-HS256")), ("kid", kid)])
                }
                return n
            }
            return y
        }
        let problems = ReplayCatalog(path: "s.3dstape", exchanges: hidden).undecryptedProblems()
        #expect(problems.count == 8, "one line per app challenge of the demo (UI types 01 twice, 02–07): \(problems.count)")
        #expect(problems.allSatisfy { $0.contains("--decrypt substitute") && $0.contains("decrypt s.3dstape --keylog") })
    }
}

/// Non-3DS and pre-AReq exchanges (the 3DS Method): matched with the fresh fields ignored, the live values echoed back.
@Suite struct ReplayEchoTests {
    func exchange(id: Int64, method: String, url: String, body: String, response: String) -> StoredExchange {
        StoredExchange(id: id, connectionID: 1, method: method, url: url, status: 200, requestHeaders: [], requestBody: Array(body.utf8),
                       requestContentEncoding: nil, responseHeaders: [("Content-Type", "text/html")], responseBody: Array(response.utf8),
                       responseContentEncoding: nil, upstream: nil, timeline: ExchangeTimeline(requestStart: 1, requestSent: 1, firstByte: 1.01, done: 1.02),
                       messages: [])
    }

    @Test func threeDSMethodMatchesWithFreshIDsAndEchoesThem() throws {
        func methodData(_ id: String, _ url: String) -> String {
            Base64URL.encode(JSON.object([("threeDSServerTransID", .string(id)), ("threeDSMethodNotificationURL", .string(url))]).bytes)
        }
        let recorded = methodData("11111111-1111-4111-8111-111111111111", "http://merchant.old/3ds/method-done")
        let page = "<form method=\"post\" action=\"http://merchant.old/3ds/method-done\"><input type=\"hidden\" name=\"threeDSMethodData\" value=\"\(recorded)\"></form>"
        let catalog = ReplayCatalog(path: "s", exchanges: [exchange(id: 1, method: "POST", url: "http://acs.old/acs/method",
                                                                    body: "threeDSMethodData=\(recorded)", response: page)])
        let trust = try ReplayEngineTests.Trust()
        let engine = ReplayEngine(catalog: catalog, options: ReplayOptions(), identity: trust.identity)
        let live = methodData("22222222-2222-4222-8222-222222222222", "http://127.0.0.1:7000/3ds/method-done")
        let r = engine.handle(LiveRequest(method: "POST", target: "/acs/method", body: Array("threeDSMethodData=\(live)".utf8)), selfURL: "")
        #expect(r.miss == nil && r.recordedExchangeID == 1, "\(r.miss ?? "")")
        let html = String(decoding: r.body, as: UTF8.self)
        #expect(html.contains("action=\"http://127.0.0.1:7000/3ds/method-done\""), "\(html)")
        #expect(html.contains(live), "the echoed threeDSMethodData carries the live ID and URL")
        // Another field that differs is still a miss, named.
        let other = Base64URL.encode(JSON.object([("threeDSServerTransID", .string("x")), ("threeDSMethodNotificationURL", .string("y")),
                                                  ("extra", .string("z"))]).bytes)
        let miss = engine.handle(LiveRequest(method: "POST", target: "/acs/method", body: Array("threeDSMethodData=\(other)".utf8)), selfURL: "")
        #expect(miss.miss?.contains("body.threeDSMethodData.extra: not recorded") == true, "\(miss.miss ?? "")")
    }
}
