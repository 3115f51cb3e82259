import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing
import TapCore
@testable import TapStore
import TapRecording
@testable import TapInspect

/// Recorded text in the diagrams: a CRLF in a messageType or transStatus used to pass `Mermaid.clean` ("\r\n" is one
/// Swift Character) and add a diagram line of its own; U+FFFE/U+FFFF in a label made the SVG unparseable.
@Suite struct DiagramTextTests {
    static let injected = "\r\nDS->>ACS: fake\u{2028}DS->>Server: also fake\u{85}"

    /// The demo session with its first exchange's messageType and transStatus carrying `injected`, U+FFFE and U+FFFF,
    /// a failed exchange whose error does too, and a plain host whose URL ends in U+FFFF.
    static func hostile() -> [StoredExchange] {
        var xs = Fixtures.app
        xs[0].messages = xs[0].messages.map { m in
            var m = m
            if m.type == "AReq" { m.type = "AReq" + injected + "\u{FFFE}" }
            if m.type == "ARes", let j = m.json { m.json = j.setting("transStatus", to: .string("Y" + injected + "\u{FFFF}")) }
            return m
        }
        var failed = xs[1]
        failed.id = 9001
        failed.messages = []
        failed.url = "https://other.example\u{FFFF}/x"
        failed.status = nil
        failed.error = "reset\r\nDS->>ACS: fake \u{FFFE}\u{1B}[2J"
        xs.append(failed)
        return xs
    }

    /// Roles come from the stored messageType as a MessageKind, matched as the specification spells it: a UL harness name
    /// (pArq) or another text has no 3DS role, as when the types were compared as strings.
    @Test func rolesFollowTheMessageKindSpelledAsTheSpecificationSpellsIt() {
        func roles(_ type: String?, _ location: String = "body", browser: Bool = false) -> [String]? {
            let m = RecordedMessage(direction: "request", location: location, type: type, json: nil, decryption: nil)
            return SequenceDiagram.roles(for: m, exchangeURL: "https://acs.example/x", browser: browser,
                                         known: ["https://acs.example": "ACS"]).map { [$0.0, $0.1] }
        }
        #expect(roles("AReq") == ["Server", "DS"] && roles("PReq") == ["Server", "DS"] && roles("RReq") == ["DS", "Server"])
        #expect(roles("CReq", "jwe") == ["SDK", "ACS"] && roles("CReq", "form:creq") == ["Browser", "ACS"])
        #expect(roles("Erro") == ["SDK", "ACS"] && roles("Erro", browser: true) == ["Browser", "ACS"])
        #expect(roles("pArq") == nil && roles("areq") == nil && roles(nil) == nil)
        #expect(RecordedMessage(direction: "request", location: "body", type: "pArq", json: nil, decryption: nil).kind == nil)
    }

    @Test func mermaidKeepsOneLineForEachItem() {
        let d = SequenceDiagram(Self.hostile())
        let text = Mermaid.render(d)
        // Lines as a JavaScript parser sees them (Swift's split on "\n" would not cut at a CRLF: it is one Character).
        let breaks: Set<Unicode.Scalar> = ["\n", "\r", "\u{85}", "\u{2028}", "\u{2029}"]
        let lines = text.unicodeScalars.split(omittingEmptySubsequences: false) { breaks.contains($0) }.dropLast().map { String($0) }
        #expect(lines.count == 1 + d.participants.count + d.items.count)
        #expect(lines.allSatisfy { $0 == "sequenceDiagram" || $0.hasPrefix("    ") }, "every line is the diagram's own")
        #expect(!text.unicodeScalars.contains { $0 == "\r" || $0 == "\u{2028}" || $0 == "\u{85}" || $0 == "\u{FFFE}" || $0 == "\u{FFFF}" || $0 == "\u{1B}" })
        #expect(text.contains(": AReq  DS->>ACS: fake DS->>Server: also fake   · T+0 ms\n"), "the text is kept, on the arrow's line")
    }

    @Test func theSVGParsesAsXML() throws {
        let svg = SequenceSVG.render(SequenceDiagram(Self.hostile()))
        let parser = XMLParser(data: Data(svg.utf8))
        #expect(parser.parse(), "\(String(describing: parser.parserError))")
        #expect(!svg.unicodeScalars.contains { $0 == "\u{FFFE}" || $0 == "\u{FFFF}" || $0 == "\u{1B}" })
        #expect(svg.contains("AReq\r\nDS-&gt;&gt;ACS: fake&#x2028;DS-&gt;&gt;Server: also fake&#x85;\u{FFFD}"))
        #expect(svg.contains(">https://other.example\u{FFFD}/x</text>"))
        // python3's parser agrees, where it is installed.
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-svg-\(UUID().uuidString).svg")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(svg.utf8).write(to: file)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", "-c", "import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])", file.path]
        p.standardError = FileHandle.nullDevice
        if (try? p.run()) != nil {
            p.waitUntilExit()
            #expect(p.terminationStatus == 0, "python3's xml.dom.minidom refused the SVG")
        }
    }

    @Test func markupTextDropsWhatXMLForbidsAndReferencesWhatATerminalActsOn() {
        #expect(MarkupText.escaped("<a href=\"x\">'&'</a>") == "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;")
        #expect(MarkupText.escaped("a\u{0}b\u{1B}c\u{FFFE}d\u{FFFF}e\tf\ng\rh") == "a\u{FFFD}b\u{FFFD}c\u{FFFD}d\u{FFFD}e\tf\ng\rh")
        #expect(MarkupText.escaped("\u{7F}\u{9B}\u{202E}x\u{2066}") == "&#x7F;&#x9B;&#x202E;x&#x2066;")
        #expect(MarkupText.escaped("ok · é 🙂") == "ok · é 🙂")
    }
}
