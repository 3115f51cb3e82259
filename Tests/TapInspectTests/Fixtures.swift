import Foundation
import TapCore
import TapStore
@testable import TapInspect

/// The checked-in demo sessions, read from a copy (opening a session may recover its WAL, so the originals are never opened).
enum Fixtures {
    static let sessions = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../sessions").standardized

    static func exchanges(_ name: String) throws -> [StoredExchange] {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("inspect-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let copy = dir.appendingPathComponent(name)
        try FileManager.default.copyItem(at: sessions.appendingPathComponent(name), to: copy)
        return try SessionReader(path: copy.path).exchanges()
    }

    static let app: [StoredExchange] = (try? exchanges("demo-app.3dstape")) ?? []
    static let browser: [StoredExchange] = (try? exchanges("demo-browser.3dstape")) ?? []
    static let pxp: [StoredExchange] = (try? exchanges("demo-pxp.3dstape")) ?? []
    static let trustPayments: [StoredExchange] = (try? exchanges("demo-trustpayments.3dstape")) ?? []
}

extension Fixtures {
    /// A preparation exchange (PReq/PRes), which the demo sessions do not hold: SPEC Table A.1's elements, synthetic values.
    static let preparation: ThreeDSTransaction = {
        let preq = try! JSON.parse(#"{"threeDSServerRefNumber":"3DSTAPE-SERVER","threeDSServerTransID":"8a880dc0-d2d2-4067-bcb1-b08d1690b26e","#
                                   + #""messageType":"PReq","messageVersion":"2.2.0","serialNum":"1"}"#)
        let pres = try! JSON.parse(#"{"threeDSServerTransID":"8a880dc0-d2d2-4067-bcb1-b08d1690b26e","dsTransID":"0b2c7d54-ff21-4a4c-9f8a-3a0f3cb1e9a3","#
                                   + #""messageType":"PRes","messageVersion":"2.2.0","serialNum":"2","cardRangeData":[]}"#)
        return ThreeDSTransaction(key: "8a880dc0-d2d2-4067-bcb1-b08d1690b26e", messages: [
            InspectedMessage(exchangeID: 1, direction: "request", location: "body", type: "PReq", json: preq),
            InspectedMessage(exchangeID: 1, direction: "response", location: "body", type: "PRes", json: pres),
        ])
    }()
}
