import Foundation
import Testing
import TapCore
import TapCrypto
import TapEMV
import TapJOSE
@testable import TapReplay
@testable import TapStore

/// The fault workflow made quiet and exact (issue 24 items 1-4): what a conformant client sends after a fault is answered
/// as an ACS would, one RReq per transaction, rules checked by the answers they cover, and a scenario's rules sorted into
/// those that apply to a session and those that cannot.
@Suite struct ReplayFaultWorkflowTests {
    typealias Fixture = ReplayEngineTests

    func engine(_ session: String, _ rules: [String]) throws -> (ReplayEngine, Fixture.Trust) {
        let trust = try Fixture.Trust()
        var options = ReplayOptions()
        options.faults = try rules.map { (r) throws(ReplayError) in try FaultRule.parse(r) }
        return (ReplayEngine(catalog: try Fixture.catalog(session), options: options, identity: trust.identity), trust)
    }

    /// An SDK's side of the app channel after the ARes: the cipher, the base CReq members and the ARes.
    struct SDK {
        var cipher: AppChannelCipher
        let base: [(String, JSON)]
        let ares: JSON
        func erro(_ code: String) -> [UInt8] {
            Erro.make(code: code, component: "C", description: "Transaction timed out", detail: "the SDK's challenge timeout", about: ares,
                      messageType: "CRes", version: "2.2.0").bytes
        }
        mutating func creq(_ extra: [(String, JSON)]) throws -> [UInt8] { Array(try cipher.seal(.object(base + extra)).utf8) }
    }

    func start(_ engine: ReplayEngine, _ trust: Fixture.Trust) throws -> SDK {
        let sdkKey = try PrivateKey.generateP256()
        let areq = try Fixture().liveAReq(engine.catalog, pan: "4000000000001067", version: "2.2.0", sdkKey: sdkKey)
        let a = engine.handle(LiveRequest(method: "POST", target: "/ds/areq", body: areq.bytes), selfURL: "http://127.0.0.1:1")
        let ares = try JSON.parse(a.body)
        let signed = try #require(ares["acsSignedContent"]?.stringValue)
        let content = try #require(try JWS(compact: signed).payloadJSON)
        let acsTransID = try #require(ares["acsTransID"]?.stringValue)
        let cipher = try AppChannelCipher(role: .sdk, privateKey: sdkKey, peerPublicKey: try JWK(json: content["acsEphemPubKey"]!).publicKey(),
                                          sdkReferenceNumber: areq["sdkReferenceNumber"]!.stringValue!, acsTransID: acsTransID, enc: .a128cbcHS256)
        return SDK(cipher: cipher, base: [("threeDSServerTransID", ares["threeDSServerTransID"]!), ("acsTransID", .string(acsTransID)),
                                          ("messageType", .string("CReq")), ("messageVersion", .string("2.2.0")), ("sdkTransID", ares["sdkTransID"]!)],
                   ares: ares)
    }

    func post(_ engine: ReplayEngine, _ body: [UInt8]) -> ReplayAnswer {
        engine.handle(LiveRequest(method: "POST", target: "/acs/challenge", body: body), selfURL: "http://127.0.0.1:1")
    }

    // MARK: item 1

    /// challenge-timeout with an SDK that gives up: its Erro 402 and then its challengeCancel 08 CReq (the order 3dstape
    /// client sends them in). The CReq was answered 404 MISS 'no live transaction' before.
    @Test func theCancelAfterTheSDKsErroIsAnsweredAsAnACSAndIsNoMiss() throws {
        let (engine, trust) = try engine("demo-app.3dstape", ["CRes#1=hang"])
        var sdk = try start(engine, trust)
        let hung = post(engine, try sdk.creq([]))
        #expect(hung.action == .fault(.hang) && hung.miss == nil)
        let erro = post(engine, sdk.erro("402"))
        #expect(erro.miss == nil && erro.closing && erro.status == 200)
        let rreq = try JSON.parse(try #require(erro.rreq, "the ACS's RReq follows the SDK's Erro").body)
        #expect(rreq["transStatus"]?.stringValue == "N" && rreq["challengeCancel"]?.stringValue == "08")

        let cancel = post(engine, try sdk.creq([("challengeCancel", .string("08"))]))
        #expect(cancel.miss == nil, "\(cancel.miss ?? "")")
        #expect(cancel.closing && cancel.rreq == nil, "answered as an ACS, without a second RReq")
        #expect(cancel.matchedBy == "challengeCancel 08 after the SDK's Erro 402: answered as an ACS (final CRes N)", "\(cancel.matchedBy ?? "")")
        let cres = try sdk.cipher.open(String(decoding: cancel.body, as: UTF8.self))
        #expect(cres["messageType"]?.stringValue == "CRes" && cres["transStatus"]?.stringValue == "N"
                && cres["challengeCompletionInd"]?.stringValue == "Y")

        // An Erro repeated after the end is acknowledged too; a CReq that continues the challenge after the end is still a miss.
        let again = post(engine, sdk.erro("402"))
        #expect(again.miss == nil && again.closing && again.rreq == nil && (again.matchedBy ?? "").contains("after the SDK's Erro 402"))
        let more = post(engine, try sdk.creq([("challengeDataEntry", .string("1234"))]))
        #expect(more.miss != nil, "only a cancel is expected after the end")
        #expect(engine.liveTransactions == 0 && engine.endedTransactions == 1)
    }

    /// The other order (cancel CReq first, then the Erro) and the Erro 302 an SDK sends when it rejects a CRes: no miss, one RReq.
    @Test func anSDKsClosingMessagesAfterEachChallengeFaultAreNoMiss() throws {
        for (rules, close) in [(["CRes#1=bad-counter"], "302"), (["CRes#1=wrong-key"], "302"), (["CRes#1=hang"], "cancel-then-402")] {
            let (engine, trust) = try engine("demo-app.3dstape", rules)
            var sdk = try start(engine, trust)
            _ = post(engine, try sdk.creq([]))
            var rreqs = 0
            if close == "302" {
                let a = post(engine, sdk.erro("302"))
                #expect(a.miss == nil && a.closing, "\(rules)")
                rreqs += a.rreq == nil ? 0 : 1
            } else {
                let c = post(engine, try sdk.creq([("challengeCancel", .string("08"))]))
                let e = post(engine, sdk.erro("402"))
                #expect(c.miss == nil && e.miss == nil && e.closing, "\(rules): \(c.miss ?? "") \(e.miss ?? "")")
                rreqs += (c.rreq == nil ? 0 : 1) + (e.rreq == nil ? 0 : 1)
            }
            #expect(rreqs == 1, "\(rules): one RReq per transaction, \(rreqs)")
        }
    }

    // MARK: item 2

    /// CRes#2=bad-counter hits the final CRes: its RReq is planned with it, and the SDK's Erro 302 planned a second one.
    @Test func aRejectedFinalCResGivesOneRReq() throws {
        let (engine, trust) = try engine("demo-app.3dstape", ["CRes#2=bad-counter"])
        var sdk = try start(engine, trust)
        let first = post(engine, try sdk.creq([]))
        let second = post(engine, try sdk.creq([("challengeDataEntry", .string("1234"))]))
        #expect(first.rreq == nil && second.rreq != nil && second.faults.contains("bad-counter"))
        let erro = post(engine, sdk.erro("302"))
        #expect(erro.miss == nil && erro.closing)
        #expect(erro.rreq == nil, "was a second RReq ('2 RReqs sent')")
    }

    // MARK: item 3

    func rules(_ texts: [String]) throws -> [FaultRule] { try texts.map { (t) throws(ReplayError) in try FaultRule.parse(t) } }
    func delays(_ texts: [String]) throws -> [DelayRule] { try texts.map { (t) throws(ReplayError) in try DelayRule.read(t) } }

    @Test func rulesOverlapByTheAnswersTheyCoverAndDeadRulesAreRefused() throws {
        let app = try Fixture.catalog("demo-app.3dstape"), browser = try Fixture.catalog("demo-browser.3dstape")
        func one(_ faults: [String], _ d: [String] = [], _ catalog: ReplayCatalog) throws -> [String] {
            ReplayFaults.problems(try rules(faults), delays: try delays(d), catalog: catalog)
        }
        // The issue's reproductions, each one line.
        var p = try one(["CRes=hang", "CRes#1=delay:1s"], [], app)
        #expect(p == ["--fault CRes=hang and CRes#1=delay:1s overlap (rules 1 and 2): both change the transport of CRes #1 (recorded exchange #8); keep one"], "\(p)")
        p = try one(["CRes#9=hang"], [], app)
        #expect(p == ["--fault CRes#9=hang can never apply: the session has at most 2 CRes per transaction"], "\(p)")
        p = try one([], ["foo=1s"], app)
        #expect(p.count == 1 && p[0].hasPrefix("--delay foo=1s can never apply: the session has no foo (it has ARes, CRes"), "\(p)")
        p = try one([], ["CRes#9=1s"], app)
        #expect(p == ["--delay CRes#9=1s can never apply: the session has at most 2 CRes per transaction"], "\(p)")
        p = try one([], ["CRes=1s", "CRes#1=2s"], app)
        #expect(p.count == 1 && p[0].hasPrefix("--delay CRes=1s and CRes#1=2s overlap (--delay options 1 and 2): both set the delay of CRes #1"), "\(p)")
        // An exchange number, a path and an occurrence that name the same answer overlap; other layers do not.
        p = try one(["exchange:8=reset", "path:/acs/challenge=hang"], [], app)
        #expect(p.count == 1 && p[0].contains("overlap") && p[0].contains("recorded exchange #8"), "\(p)")
        #expect(try one(["CRes=hang", "CRes#1=bad-counter", "ARes=erro:402"], ["CRes#2=1s", "ARes=10ms"], app).isEmpty)
        #expect(try one(["CRes#1=hang", "CRes#2=delay:1s"], [], app).isEmpty, "different answers of one type")
        // Actions on answers they do not change, and exchanges the replay forwards live, are refused rather than ignored.
        p = try one(["RReq=hang"], [], app)
        #expect(p.count == 1 && p[0].hasPrefix("--fault RReq=hang can never apply: hang changes only answers the replayer sends"), "\(p)")
        p = try one(["ARes=bad-signature"], [], browser)
        #expect(p.count == 1 && p[0].contains("ARes without acsSignedContent"), "\(p)")
        p = try one(["exchange:5=hang"], [], browser)
        #expect(p.count == 1 && p[0].contains("exchange 5 went to the transaction's own 3DS Server or merchant page"), "\(p)")
        p = try one(["path:/3ds/notify=close"], ["path:/3ds/notify=1s"], browser)
        #expect(p.count == 2 && p.allSatisfy { $0.contains("forwards live") }, "\(p)")
        #expect(try one(["exchange:10=drop-rreq", "path:/acs/challenge=erro:402"], [], app).isEmpty)
    }

    /// Overlapping groups of different matches are counted, not listed pair by pair: 1,500 CRes rules and 1,500 CRes#1
    /// rules are 2.2 million crossing pairs (plus those within each group).
    @Test func crossingOverlapsStayLinear() throws {
        let catalog = try Fixture.catalog("demo-app.3dstape")
        let many = try rules(Array(repeating: "CRes=hang", count: 1500) + Array(repeating: "CRes#1=reset", count: 1500))
        let clock = ContinuousClock()
        var p: [String] = []
        let took = clock.measure { p = ReplayFaults.problems(many, catalog: catalog) }
        #expect(took < .seconds(2), "\(took)")
        let pairs = 1500 * 1499 / 2 * 2 + 1500 * 1500
        #expect(p.count == 6 && p.last == "… and \(pairs - 5) more problems with these 3000 rules", "\(p.last ?? "")")
    }

    /// A path: fault on an exchange outside any transaction applies (it was silently ignored).
    @Test func faultsReachExchangesOutsideTransactions() throws {
        let echo = ReplayEchoTests()
        let catalog = ReplayCatalog(path: "p.3dstape", exchanges: [echo.exchange(id: 1, method: "GET", url: "http://shop.test/api/cart", body: "", response: "ok"),
                                                                   echo.exchange(id: 2, method: "GET", url: "http://shop.test/api/pay", body: "", response: "ok")])
        let faults = try rules(["path:/api/pay=status:503"])
        #expect(ReplayFaults.problems(faults, catalog: catalog).isEmpty)
        #expect(ReplayFaults.problems(try rules(["path:/api/pay=erro:402"]), catalog: catalog).first?.contains("exchanges outside any 3DS transaction") == true)
        var options = ReplayOptions()
        options.faults = faults
        let engine = ReplayEngine(catalog: catalog, options: options, identity: try Fixture.Trust().identity)
        let pay = engine.handle(LiveRequest(method: "GET", target: "/api/pay", body: []), selfURL: "")
        let cart = engine.handle(LiveRequest(method: "GET", target: "/api/cart", body: []), selfURL: "")
        #expect(pay.status == 503 && pay.faults == ["status:503"] && cart.status == 200 && cart.faults.isEmpty, "\(pay.status) \(cart.status)")
    }

    // MARK: item 4

    @Test func aScenariosRulesAreSortedIntoThoseThatApplyAndThoseThatCannot() throws {
        let rejected = try #require(ReplayScenario.named("challenge-rejected"))
        let browser = try rejected.applicability(to: try Fixture.catalog("demo-browser.3dstape"))
        #expect(browser.applicable.map(\.description) == ["RReq=trans-status:N"])
        #expect(browser.notApplicable.map(\.rule.description) == ["CRes=trans-status:N"]
                && browser.notApplicable[0].reason.hasPrefix("the session has no CRes"), "\(browser.notApplicable)")
        // An app session without its RReqs (a 3DS Server that was not recorded): the CRes rule applies, the RReq rule cannot.
        let app = try Fixture.catalog("demo-app.3dstape")
        let noRReq = ReplayCatalog(path: "n.3dstape", exchanges: app.exchanges.filter { x in !x.messages.contains { $0.type == "RReq" } })
        let partial = try rejected.applicability(to: noRReq)
        #expect(partial.applicable.map(\.description) == ["CRes=trans-status:N"])
        #expect(partial.notApplicable.map(\.rule.description) == ["RReq=trans-status:N"] && partial.notApplicable[0].reason.hasPrefix("the session has no RReq"))
        // Every scenario applies whole to the demo app session (what `check --all` runs against it), except the gateway
        // scenarios, which need a session recorded through their gateway (issue 28) and apply whole to that one.
        let coverage = RuleCoverage(app)
        let gateways = [ScenarioGateway.pxp: RuleCoverage(try Fixture.catalog("demo-pxp.3dstape")),
                        .trustPayments: RuleCoverage(try Fixture.catalog("demo-trustpayments.3dstape"))]
        for s in ReplayScenario.all {
            let r = try s.applicability(to: s.gateway.flatMap { gateways[$0] } ?? coverage)
            #expect(r.notApplicable.isEmpty && r.applicable.count == s.rules.count, "\(s.name): \(r.notApplicable)")
            if s.gateway != nil { #expect(try s.applicability(to: coverage).applicable.isEmpty, "\(s.name) on the app session") }
        }
    }
}
