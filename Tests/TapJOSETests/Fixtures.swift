import Foundation
import TapCore
import TapCrypto
import TapJOSE

/// Loads the checked-in vectors beside this file.
enum Fixtures {
    static func load(_ name: String) throws -> JSON {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/\(name)")
        return try JSON.parse([UInt8](try Data(contentsOf: url)))
    }

    static var python: JSON { get throws { try load("python-vectors.json") } }
    static var rfc: JSON { get throws { try load("rfc-vectors.json") } }

    static func cases(kind: String) throws -> [JSON] {
        guard case let .array(all)? = try python["cases"] else { return [] }
        return all.filter { $0["kind"]?.stringValue == kind }
    }

    static func key(_ name: String) throws -> JWK { try JWK(json: try python["keys"]![name]!) }

    static func root(_ name: String) throws -> Certificate {
        try Certificate(pemOrDER: Array(try python["roots"]![name]!.stringValue!.utf8))
    }
}
