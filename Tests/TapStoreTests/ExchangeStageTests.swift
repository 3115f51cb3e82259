import Foundation
import Testing
import TapCore
import TapRecording
@testable import TapStore

/// Storage knows nothing of 3DS (issue 26): the writer stores what its stages leave, in their order. With no stages a
/// card number is stored as captured (TapStore does not mask); the standard stages (TapRecording) mask it, as every
/// writer 3dstape makes does by default.
@Suite struct ExchangeStageTests {
    /// Marks each body with its name, so the order the stages ran in shows in what is stored.
    struct Mark: ExchangeStage {
        let name: String
        func prepare(_ exchange: inout PreparedExchange) {
            exchange.eachSide { side, _, _ in side.body += Array(name.utf8) }
            exchange.request.messages.append(MessageRecord(location: "mark", json: .string(name), messageType: name))
        }
        func prepare(clientText: String) -> String { clientText + "+" + name }
    }

    static let pan = "4000000000001091"

    static func write(stages: [any ExchangeStage]?) throws -> (path: String, exchange: StoredExchange, note: String) {
        let path = try SessionWriterTests.tempPath()
        let writer = try stages.map { try SessionWriter(path: path, meta: [], stages: $0) } ?? SessionWriter(path: path, meta: [])
        writer.submit(SessionWriterTests.opened())
        let body = Array(#"{"messageType":"AReq","acctNumber":"\#(pan)"}"#.utf8)
        var x = ExchangeRecord(connectionID: 1, seq: 1, method: "POST", url: "http://127.0.0.1/areq?pan=\(pan)", host: "127.0.0.1", path: "/areq",
                               upstream: nil, request: CapturedMessage(headers: [("Content-Type", "application/json")], body: body, wireSize: body.count),
                               requestStart: Date().timeIntervalSince1970)
        x.status = 200
        x.response = CapturedMessage(headers: [], body: Array("ok".utf8), wireSize: 2)
        writer.submit(.exchange(x))
        writer.submit(.note(at: x.requestStart, kind: "refused", detail: "target \(pan)"))
        writer.close()
        let reader = try SessionReader(path: path)
        return (path, try #require(try reader.exchanges().first), try #require(try reader.events().first).detail)
    }

    @Test func theWriterStoresWhatItsStagesLeaveInTheirOrder() throws {
        let (path, x, note) = try Self.write(stages: [Mark(name: "one"), Mark(name: "two")])
        defer { SessionWriterTests.removeTemp(path) }
        #expect(String(decoding: x.requestBody, as: UTF8.self).hasSuffix("onetwo") && String(decoding: x.responseBody, as: UTF8.self) == "okonetwo")
        #expect(x.messages.map(\.type) == ["one", "two"] && x.messages.map(\.location) == ["mark", "mark"])
        #expect(note == "target \(Self.pan)+one+two")
    }

    @Test func withoutStagesNothingIsMaskedOrFoundAndTheStandardOnesMaskByDefault() throws {
        let (raw, bare, bareNote) = try Self.write(stages: [])
        defer { SessionWriterTests.removeTemp(raw) }
        #expect(String(decoding: bare.requestBody, as: UTF8.self).contains(Self.pan) && bare.url.contains(Self.pan) && bare.messages.isEmpty)
        #expect(bareNote.contains(Self.pan))
        let (masked, x, note) = try Self.write(stages: nil) // SessionWriter(path:meta:) from TapRecording
        defer { SessionWriterTests.removeTemp(masked) }
        #expect(!String(decoding: x.requestBody, as: UTF8.self).contains(Self.pan) && !x.url.contains(Self.pan) && !note.contains(Self.pan))
        #expect(x.messages.map(\.type) == ["AReq"])
    }
}
