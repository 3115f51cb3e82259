import Foundation
import Testing
import TapCore
import TapRecording
@testable import TapStore

/// A session that must appear whole or not at all (`import`): written under a hidden staging name beside its
/// destination, linked into place by `publish` only when complete, removed with its WAL and shared-memory files by
/// `discard`.
@Suite struct StagedSessionTests {
    static func files(_ dir: String) -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted() }

    @Test func aStagedSessionAppearsUnderItsNameOnlyWhenPublished() throws {
        let destination = try SessionWriterTests.tempPath()
        let dir = (destination as NSString).deletingLastPathComponent
        defer { SessionWriterTests.removeTemp(destination) }
        let staging = SessionWriter.stagingPath(for: destination)
        #expect((staging as NSString).deletingLastPathComponent == dir, "beside the destination: a rename, not a copy")
        let name = (staging as NSString).lastPathComponent
        #expect(name.hasPrefix(".s.3dstape.partial-") && !name.hasSuffix(".3dstape"), "hidden, and not a *.3dstape that ls, web or replay would list: \(name)")
        let writer = try SessionWriter(path: staging, meta: [("label", "staged")])
        writer.submit(SessionWriterTests.opened())
        for i in 0..<300 { writer.submit(SessionWriterTests.exchange(i, body: 200)) }
        #expect(SessionWriterTests.waitUntil(5) { writer.exchangesWritten == 300 })
        #expect(!FileManager.default.fileExists(atPath: destination), "nothing under the destination's name while writing")
        try writer.publish(as: destination)
        #expect(Self.files(dir) == ["s.3dstape"], "the staging file, its WAL and shm are gone: \(Self.files(dir))")
        #expect(try SessionReader(path: destination).exchanges().count == 300)
    }

    @Test func publishNeverReplacesAFileAndDiscardLeavesNothing() throws {
        let destination = try SessionWriterTests.tempPath()
        let dir = (destination as NSString).deletingLastPathComponent
        defer { SessionWriterTests.removeTemp(destination) }
        try Data("someone else's".utf8).write(to: URL(fileURLWithPath: destination))
        let writer = try SessionWriter(path: SessionWriter.stagingPath(for: destination), meta: [("label", "staged")])
        writer.submit(SessionWriterTests.opened())
        writer.submit(SessionWriterTests.exchange(1, body: 10))
        do {
            try writer.publish(as: destination)
            Issue.record("published over an existing file")
        } catch { #expect("\(error)".contains("already exists"), "\(error)") }
        #expect(try String(contentsOfFile: destination, encoding: .utf8) == "someone else's")
        writer.discard()
        #expect(Self.files(dir) == ["s.3dstape"], "\(Self.files(dir))")
    }

    @Test func discardStopsAtOnceAndRemovesTheFileWithItsWALAndSHM() throws {
        let destination = try SessionWriterTests.tempPath()
        let dir = (destination as NSString).deletingLastPathComponent
        defer { SessionWriterTests.removeTemp(destination) }
        let writer = try SessionWriter(path: SessionWriter.stagingPath(for: destination), meta: [("label", "abandoned")])
        writer.submit(SessionWriterTests.opened())
        for i in 0..<2000 { writer.submit(SessionWriterTests.exchange(i, body: 2000)) }
        #expect(SessionWriterTests.waitUntil(5) { Self.files(dir).contains { $0.hasSuffix("-wal") } }, "writing has begun: \(Self.files(dir))")
        writer.discard()
        #expect(Self.files(dir).isEmpty, "\(Self.files(dir))")
        #expect(writer.backlog == 0, "what was queued is let go")
    }
}
