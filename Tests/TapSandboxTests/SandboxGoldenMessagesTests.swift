import Foundation
import Testing
import TapCore
import TapSandbox
import TapStore

/// Every message the sandbox and the client put on the wire, recorded through the proxy (key substitution opens the app
/// channel) for every test card, version and channel, held against the messages the sandbox produced before its
/// messages were built by TapEMV's builders (Fixtures/sandbox-messages.golden): the same members in the same order with
/// the same values, byte for byte once the values that are fresh each run (IDs, keys, ports, signatures) are blanked.
/// `THREEDSTAPE_WRITE_GOLDEN=1` rewrites the file (only ever from a tree whose output is known good).
@Suite(.serialized) struct SandboxGoldenMessagesTests {
    static let golden = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/sandbox-messages.golden")

    /// Members whose values are made fresh on every run.
    static let fresh: Set<String> = ["authenticationValue", "acsSignedContent", "sdkEncData", "sdkEphemPubKey", "acsEphemPubKey",
                                     "purchaseDate", "acsHTML"]

    static func blanked(_ json: JSON) -> JSON {
        switch json {
        case let .object(members):
            return .object(members.map { k, v in (k, fresh.contains(k) ? .string("<fresh>") : blanked(v)) })
        case let .array(items):
            return .array(items.map(blanked))
        default:
            return json
        }
    }

    static func normalised(_ text: String) -> String {
        var s = text
        for (pattern, with) in [("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "<uuid>"),
                                ("127\\.0\\.0\\.1:[0-9]+", "127.0.0.1:<port>")] {
            s = s.replacingOccurrences(of: pattern, with: with, options: .regularExpression)
        }
        return s
    }

    /// One line per message: direction, type, and its JSON (blanked, normalised); sorted, since an RReq may be recorded
    /// before or after the client's next request.
    static func recordedLines() throws -> [String] {
        let h = try SandboxHarness(substitute: true)
        var flows: [(String, Bool, String, (inout ClientOptions) -> Void)] = []
        for version in ["2.1.0", "2.2.0", "2.3.1"] {
            for card in TestCard.all where card.behaviour != .acsNeverAnswers {
                flows.append((card.pan, false, version, { SandboxHarness.passing(card, &$0) }))
                flows.append((card.pan, true, version, { SandboxHarness.passing(card, &$0) }))
            }
            flows.append(("4000000000001067", false, version, { $0.answer = "0000" }))
            flows.append(("4000000000001075", false, version, { $0.cancel = true }))
            flows.append(("4000000000001067", true, version, { $0.cancel = true }))
        }
        for (pan, browser, version, configure) in flows {
            var o = h.options(card: pan, browser: browser, version: version)
            configure(&o)
            _ = try h.run(o)
        }
        let session = h.sessionPath
        h.stop(keepFiles: true)
        defer { try? FileManager.default.removeItem(at: h.dir) }
        let reader = try SessionReader(path: session)
        var lines: [String] = []
        for x in try reader.exchanges() {
            for m in x.messages {
                guard let json = m.json else { continue }
                lines.append(normalised("\(m.direction) \(m.type ?? "?") \(blanked(json).compact)"))
            }
        }
        return lines.sorted()
    }

    @Test func everyMessageKeepsItsMembersOrderAndValues() throws {
        let lines = try Self.recordedLines()
        if ProcessInfo.processInfo.environment["THREEDSTAPE_WRITE_GOLDEN"] == "1" {
            try (lines.joined(separator: "\n") + "\n").write(to: Self.golden, atomically: true, encoding: .utf8)
            return
        }
        let expected = try String(contentsOf: Self.golden, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(lines.count == expected.count)
        for (a, b) in zip(lines, expected) where a != b {
            Issue.record("message differs:\n now:    \(a)\n before: \(b)")
            break
        }
        #expect(Set(["AReq", "ARes", "CReq", "CRes", "RReq", "RRes", "Erro"]).isSubset(of: Set(lines.map { $0.split(separator: " ")[1] })))
    }
}
