import Foundation
import Testing
import TapCore
import TapStore
@testable import TapInspect

@Suite struct DiffTests {
    static func withMessage(_ xs: [StoredExchange], exchange id: Int64, type: String, _ change: (JSON) -> JSON) -> [StoredExchange] {
        xs.map { x in
            guard x.id == id else { return x }
            var y = x
            y.messages = y.messages.map { m in
                guard m.type == type, let j = m.json else { return m }
                var n = m
                n.json = change(j)
                return n
            }
            return y
        }
    }

    @Test func aSessionEqualsItself() throws {
        let d = try SessionDiff.compare(Fixtures.app, Fixtures.app)
        #expect(d.isEmpty)
        #expect(d.pairedTransactions == 16)
    }

    @Test func volatileValuesAndLoopbackPortsAreIgnored() throws {
        // Another run: the first transaction's IDs are new in every message, its date and loopback ports too.
        let old = Fixtures.app[0].messages[0].json!["threeDSServerTransID"]!
        let new = JSON.string(UUID().uuidString.lowercased())
        var b = Fixtures.app.map { x in
            var y = x
            y.messages = y.messages.map { m in
                var n = m
                if m.json?["threeDSServerTransID"] == old { n.json = m.json!.setting("threeDSServerTransID", to: new) }
                return n
            }
            return y
        }
        b = Self.withMessage(b, exchange: 1, type: "AReq") {
            $0.setting("threeDSServerURL", to: .string("http://127.0.0.1:1/3ds/rreq")).setting("purchaseDate", to: .string("20270101000000"))
        }
        #expect(try SessionDiff.compare(Fixtures.app, b).isEmpty)
    }

    @Test func changedAddedAndRemovedElements() throws {
        let b = Self.withMessage(Fixtures.app, exchange: 1, type: "AReq") {
            $0.setting("purchaseAmount", to: .string("9999")).setting("browserLanguage", to: .string("en")).removing("mcc")
        }
        let d = try SessionDiff.compare(Fixtures.app, b, options: { var o = SessionDiff.Options(); o.timingTolerance = nil; return o }())
        let kinds = d.changes.map { "\($0.kind.rawValue) \($0.pointer ?? "")" }
        #expect(Set(kinds) == ["changed /purchaseAmount", "added /browserLanguage", "removed /mcc"])
        #expect(d.changes.allSatisfy { $0.transactionA == 1 && $0.exchangeA == 1 && $0.message == "AReq" })
    }

    @Test func outcomeAndStatusChanges() throws {
        var b = Self.withMessage(Fixtures.app, exchange: 1, type: "ARes") { $0.setting("transStatus", to: .string("N")) }
        b[1].status = 500
        let d = try SessionDiff.compare(Fixtures.app, b)
        #expect(d.changes.contains { $0.kind == .outcome && $0.before == "Y" && $0.after == "N" })
        #expect(d.changes.contains { $0.kind == .status && $0.before == "200" && $0.after == "500" })
    }

    @Test func aMissingTransactionLeavesTheOthersPaired() throws {
        let dropped = Set(ThreeDSTransaction.group(Fixtures.app)[2].messages.map(\.exchangeID))
        let b = Fixtures.app.filter { !dropped.contains($0.id) }
        let d = try SessionDiff.compare(Fixtures.app, b)
        #expect(d.changes.count == 1)
        #expect(d.changes.first?.kind == .missingTransaction && d.changes.first?.transactionA == 3)
        #expect(d.pairedTransactions == 15)
    }

    @Test func aMissingMessageInsideATransaction() throws {
        let challenge = ThreeDSTransaction.group(Fixtures.app).first { $0.shape.contains("RReq") }!
        let rreq = challenge.messages.first { $0.type == "RReq" }!.exchangeID
        let d = try SessionDiff.compare(Fixtures.app, Fixtures.app.filter { $0.id != rreq })
        #expect(d.changes.contains { $0.kind == .missingMessage && $0.message == "RReq" })
        #expect(d.changes.contains { $0.kind == .missingMessage && $0.message == "RRes" })
    }

    @Test func timingsOutsideTheTolerance() throws {
        var b = Fixtures.app
        b[0].done = b[0].done.map { $0 + 0.5 }
        #expect(try SessionDiff.compare(Fixtures.app, b).changes.contains { $0.kind == .timing && $0.exchangeA == 1 })
        var loose = SessionDiff.Options()
        loose.timingTolerance = 1
        #expect(try SessionDiff.compare(Fixtures.app, b, options: loose).isEmpty)
    }

    @Test func loopbackPortNormalisation() {
        #expect(SessionDiff.withoutLoopbackPort("http://127.0.0.1:38023/acs/challenge") == "http://127.0.0.1:PORT/acs/challenge")
        #expect(SessionDiff.withoutLoopbackPort("https://acs.example:8443/x") == "https://acs.example:8443/x")
        // Every occurrence, each loopback spelling, in order; no digits, no change; text around kept byte for byte.
        #expect(SessionDiff.withoutLoopbackPort("a=http://localhost:1/x&b=https://[::1]:443/y&c=http://127.0.0.1:2")
                == "a=http://localhost:PORT/x&b=https://[::1]:PORT/y&c=http://127.0.0.1:PORT")
        #expect(SessionDiff.withoutLoopbackPort("http://127.0.0.1:/x") == "http://127.0.0.1:/x")
        #expect(SessionDiff.withoutLoopbackPort("é http://127.0.0.1:9é://localhost:") == "é http://127.0.0.1:PORTé://localhost:")
        #expect(SessionDiff.withoutLoopbackPort("://127.0.0.1") == "://127.0.0.1")
    }
}
