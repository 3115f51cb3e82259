import Foundation
import Testing
import TapCore
import TapCrypto
import TapEMV
import TapHTTPService
import TapJOSE
import TapSandbox
import TapStore

/// The client against the sandbox for every test card, message version and channel, direct and
/// through the recording proxy.
@Suite(.serialized) struct SandboxFlowTests {
    /// The documented outcome of a card at a version with its passing answer.
    static func expected(_ card: TestCard, _ version: String, browser: Bool) -> String {
        if MessageVersion(wire: version) < card.minimumVersion { return "U" }
        switch card.behaviour {
        case let .frictionless(s): return s.wire
        case .challenge, .decoupled, .delayedARes: return "Y"
        case .acsNeverAnswers: return "timeout"
        case .erro: return "Erro 305"
        }
    }

    static func outcome(_ r: ClientResult) -> String {
        if let e = r.error { return e["errorCode"]?.stringValue.map { "Erro \($0)" } ?? "error: \(e["message"]?.stringValue ?? "")" }
        return r.transStatus ?? "-"
    }

    static let cards = TestCard.all.filter { $0.behaviour != .acsNeverAnswers }

    @Test func everyCardEveryVersionAppChannel() throws {
        let h = try SandboxHarness()
        defer { h.stop() }
        var n = 0
        for version in ["2.1.0", "2.2.0", "2.3.1"] {
            for card in Self.cards {
                var o = h.options(card: card.pan, version: version)
                o.enc = n % 2 == 0 ? .a128cbcHS256 : .a128gcm
                n += 1
                SandboxHarness.passing(card, &o)
                let r = try h.run(o)
                #expect(Self.outcome(r) == Self.expected(card, version, browser: false), "\(card.summary) \(version) \(o.enc.rawValue)")
                if case .challenge = card.behaviour, MessageVersion(wire: version) >= card.minimumVersion {
                    #expect(r.challenge && r.rreqReceived, "\(card.summary) \(version): challenge and RReq")
                    #expect(r.eci == "05")
                }
            }
        }
    }

    @Test func everyCardBrowserChannel() throws {
        let h = try SandboxHarness()
        defer { h.stop() }
        for version in ["2.2.0", "2.3.1"] {
            for card in Self.cards {
                var o = h.options(card: card.pan, browser: true, version: version)
                SandboxHarness.passing(card, &o)
                let r = try h.run(o)
                #expect(Self.outcome(r) == Self.expected(card, version, browser: true), "\(card.summary) browser \(version)")
            }
        }
    }

    @Test func wrongAnswersAndCancelGiveN() throws {
        let h = try SandboxHarness()
        defer { h.stop() }
        for (pan, browser) in [("4000000000001067", false), ("4000000000001075", false), ("4000000000001067", true)] {
            var o = h.options(card: pan, browser: browser)
            o.answer = "0000"
            o.select = ["1"]
            #expect(try h.run(o).transStatus == "N")
            var c = h.options(card: pan, browser: browser)
            c.cancel = true
            let r = try h.run(c)
            #expect(r.transStatus == "N" && r.rreqReceived)
        }
    }

    @Test func ecDSKeyAndES256() throws {
        let h = try SandboxHarness(dsKey: .ec, signing: .es256)
        defer { h.stop() }
        for pan in ["4000000000001000", "4000000000001067"] {
            var o = h.options(card: pan, version: "2.3.1")
            o.answer = TestCard.otp
            o.enc = .a128gcm
            #expect(try h.run(o).transStatus == "Y")
        }
    }

    @Test func throughTheRecordingProxy() throws {
        let h = try SandboxHarness(viaProxy: true)
        var flows = 0, challenges = 0
        for card in Self.cards {
            for browser in [false, true] {
                var o = h.options(card: card.pan, browser: browser, version: "2.3.1")
                SandboxHarness.passing(card, &o)
                let r = try h.run(o)
                #expect(Self.outcome(r) == Self.expected(card, "2.3.1", browser: browser), "\(card.summary) via proxy")
                flows += 1
                if r.challenge { challenges += 1 }
            }
        }
        let session = h.sessionPath
        h.stop(keepFiles: true)
        defer { try? FileManager.default.removeItem(at: h.dir) }
        #expect(flows == Self.cards.count * 2)
        let reader = try SessionReader(path: session)
        let xs = try reader.exchanges()
        let types = xs.flatMap { $0.messages.compactMap(\.type) }
        #expect(types.filter { $0 == "AReq" }.count == Self.cards.count * 2)
        #expect(types.filter { $0 == "RRes" }.count >= challenges)
        #expect(types.contains("CReq") && types.contains("CRes") && types.contains("Erro"))
        // PANs masked in the stored AReqs.
        #expect(xs.allSatisfy { !String(decoding: $0.requestBody, as: UTF8.self).contains("4000000000001067") })
    }
}
