import Foundation
import Testing
import TapCore
import TapStore
@testable import TapInspect

/// `HAR.read`: a HAR document taken a piece at a time, each entry given as soon as it is read, checked as strictly as
/// `JSON.parse` checks a whole document (the import of a 3 GB file held 3.1 GB; now memory holds one entry).
@Suite struct HARReaderTests {
    static let document = HARTests.har(Fixtures.app + Fixtures.browser)

    /// `bytes` handed over `size` bytes at a time, counting how many were handed over.
    final class Pieces {
        let bytes: [UInt8], size: Int
        var given = 0
        init(_ bytes: [UInt8], size: Int) { self.bytes = bytes; self.size = size }
        func next() -> [UInt8] {
            let end = min(bytes.count, given + size)
            defer { given = end }
            return Array(bytes[given..<end])
        }
    }

    static func read(_ bytes: [UInt8], pieces size: Int) throws -> [HAR.Entry] {
        let source = Pieces(bytes, size: size)
        var entries: [HAR.Entry] = []
        let count = try HAR.read(from: source.next, each: { entries.append($0) })
        #expect(count == entries.count)
        return entries
    }

    static func summary(_ entries: [HAR.Entry]) -> [String] {
        entries.map { "\($0.method) \($0.url) \($0.status ?? 0) \($0.requestBody.count) \($0.responseBody.count) \($0.start) \($0.done ?? 0) "
            + "\($0.requestHeaders.map { "\($0.0)=\($0.1)" }) \($0.requestPlaintext?.compact ?? "-") \($0.responsePlaintext?.compact ?? "-")" }
    }

    @Test(arguments: [1, 2, 7, 64, 4096, 1 << 20])
    func anyPieceSizeGivesTheEntriesOfTheWholeDocument(_ size: Int) throws {
        let whole = try JSON.parse(Self.document)
        guard case let .array(expected)? = whole["log"]?["entries"] else { Issue.record("no entries"); return }
        let entries = try Self.read(Self.document, pieces: size)
        #expect(entries.count == expected.count && entries.count == Fixtures.app.count + Fixtures.browser.count)
        #expect(Self.summary(entries) == Self.summary(try expected.map(HAR.entry)))
    }

    /// A UTF-8 byte order mark before the document (Windows tools write one) is skipped, in one piece or split across
    /// pieces; one anywhere else is still refused.
    @Test func aByteOrderMarkBeforeTheDocumentIsSkipped() throws {
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
        let expected = try Self.read(Self.document, pieces: 1 << 20).count
        for size in [1, 2, 4096] { #expect(try Self.read(bom + Self.document, pieces: size).count == expected, "pieces of \(size)") }
        #expect(throws: (any Error).self) { try HAR.parse(Array(" ".utf8) + bom + Self.document) }
    }

    @Test func eachEntryIsGivenBeforeTheRestOfTheFileIsRead() throws {
        let source = Pieces(Self.document, size: 4096)
        var givenAtEachEntry: [Int] = []
        _ = try HAR.read(from: source.next, each: { _ in givenAtEachEntry.append(source.given) })
        #expect(givenAtEachEntry.count > 10)
        #expect(givenAtEachEntry.first! < Self.document.count / 4, "the first entry came after \(givenAtEachEntry.first!) of \(Self.document.count) bytes")
        #expect(givenAtEachEntry == givenAtEachEntry.sorted())
    }

    @Test func stringsWithBracketsQuotesAndEscapesDoNotEndAnEntryEarly() throws {
        let tricky = #"]}\"{[\\"#
        let text = #"{"creator":{"name":"x]}"},"log":{"comment":"a \"}\" b","entries":[{"startedDateTime":"2026-01-01T00:00:00Z","#
            + #""request":{"method":"POST","url":"http://a/x","headers":[{"name":"X-T","value":""# + tricky + #""}],"#
            + #""postData":{"text":"[{\"a\":\"]\"}]"}},"response":{"status":200,"content":{"text":"{}"}}}],"version":"1.2"}}"#
        for size in [1, 3, 1000] {
            let entries = try Self.read(Array(text.utf8), pieces: size)
            #expect(entries.count == 1)
            #expect(entries.first?.requestHeaders.first?.1 == #"]}"{[\"#)
            #expect(entries.first.map { String(decoding: $0.requestBody, as: UTF8.self) } == #"[{"a":"]"}]"#)
        }
    }

    static let entry = #"{"startedDateTime":"2026-01-01T00:00:00Z","request":{"method":"GET","url":"http://a/"},"response":{"status":200}}"#

    @Test(arguments: [
        (#"{"log":{"version":"1.2","entries":[]}} x"#, "unexpected data after the JSON value"),
        (#"{"log":{"version":"1.2","entries":[]},"log":{"version":"1.2","entries":[]}}"#, "\"log\" appears twice"),
        (#"{"log":{"version":"1.2","entries":[]]}}"#, "expected ',' or '}' in an object"),
        (#"{"log":{"version":"1.2","entries":["# + entry + " " + entry + "]}}", "expected ',' or ']' in an array"),
        (#"{"log":{"version":"1.2","entries":["# + entry + "," + entry + "}]}}", "not JSON: invalid JSON at byte"),
        (#"{"log":{"version":"1.2","entries":[]"#, "unterminated object"),
        (#"{"log":{"version":"1.2","entries":[{"startedDateTime":"2026-01-01T00:00:00Z""#, "unterminated object"),
        (#"{"log":{"version":"1.2","entries":[{"startedDateTime":"2026-01-01T00:00"#, "unterminated string"),
        (#"{"log":{"version":"1.2","entries":[1]}}"#, "entry 1: startedDateTime is missing"),
        (#"{"log":{"entries":[],"version":"3"}}"#, "HAR version 3 is not supported"),
        (#"{"log":{"version":"1.2","entries":{}}}"#, "log.entries is missing or not an array"),
        (#"[1,2]"#, "no \"log\" object"),
        (#"{"log":{"version":"1.2","entries":[tru]}}"#, "invalid literal"),
        ("", "unexpected end of input"),
    ])
    func aBrokenDocumentIsRefusedWithOneLine(_ text: String, _ expected: String) {
        for size in [1, 5, 4096] {
            do {
                _ = try Self.read(Array(text.utf8), pieces: size)
                Issue.record("accepted: \(text)")
            } catch {
                #expect("\(error)".contains(expected), "\(size): \(error)")
                #expect(!"\(error)".contains("\n"))
            }
        }
    }

    @Test func nestingDeeperThanTheDocumentLimitIsRefusedInAnEntryAsInTheWholeFile() {
        func document(_ depth: Int) -> [UInt8] {
            let deep = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
            return Array((#"{"log":{"version":"1.2","entries":[{"_deep":"# + deep + #","startedDateTime":"2026-01-01T00:00:00Z","#
                + #""request":{"method":"GET","url":"http://a/"},"response":{"status":200}}]}}"#).utf8)
        }
        // The document's own levels (the top object, log, entries, the entry) leave 60 for what an entry holds.
        #expect((try? Self.read(document(60), pieces: 7).count) == 1)
        #expect(throws: HAR.ImportError.self) { try Self.read(document(61), pieces: 7) }
        #expect(throws: HAR.ImportError.self) { try HAR.parse(document(100_000)) }
    }

    @Test func whatTheSourceOrTheConsumerThrowsComesThroughUnchanged() {
        struct Stop: Error {}
        #expect(throws: Stop.self) { _ = try HAR.read(from: { throw Stop() }, each: { _ in }) }
        #expect(throws: Stop.self) { _ = try HAR.read(from: Pieces(Self.document, size: 100).next, each: { _ in throw Stop() }) }
    }
}
