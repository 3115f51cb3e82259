import Foundation
import Testing
@testable import TapCompression

@Suite struct CompressionTests {
    let text = Array(String(repeating: #"{"messageType":"ARes","transStatus":"Y"}"#, count: 200).utf8)

    @Test(arguments: [Compression.Format.gzip, .zlib, .raw])
    func roundTrips(format: Compression.Format) throws {
        let c = try Compression.compress(text, format: format)
        #expect(c.count < text.count / 10)
        #expect(try Compression.decompress(c, format: format) == text)
        #expect(try Compression.decompress(try Compression.compress([], format: format), format: format) == [])
    }

    @Test func deflateAcceptsRawStreamsToo() throws {
        #expect(try Compression.decompress(try Compression.compress(text, format: .raw), format: .zlib) == text)
    }

    @Test func truncatedAndGarbageAreErrors() throws {
        let c = try Compression.compress(text, format: .gzip)
        #expect(throws: CompressionError.self) { try Compression.decompress(Array(c.prefix(c.count / 2)), format: .gzip) }
        #expect(throws: CompressionError.self) { try Compression.decompress([1, 2, 3, 4, 5], format: .gzip) }
    }

    /// What decoded before the failure is kept (the recorder stores it masked rather than compressed bytes it cannot
    /// mask); nothing past the bomb guard.
    @Test(arguments: [Compression.Format.gzip, .zlib, .raw])
    func aStreamCutShortGivesWhatDecoded(format: Compression.Format) throws {
        var seed: UInt32 = 1
        let noisy = (0..<20_000).map { _ -> UInt8 in seed = seed &* 1_103_515_245 &+ 12345; return UInt8(truncatingIfNeeded: seed >> 16) }
        let c = try Compression.compress(noisy, format: format)
        let cut = Compression.decompressPrefix(Array(c.prefix(c.count / 2)), format: format)
        #expect(cut.error != nil)
        #expect(cut.decoded.count > 5000 && Array(noisy.prefix(cut.decoded.count)) == cut.decoded)
        let whole = Compression.decompressPrefix(c, format: format)
        #expect(whole.error == nil && whole.decoded == noisy)
        let big = try Compression.compress([UInt8](repeating: 0, count: 4 << 20), format: format)
        let bomb = Compression.decompressPrefix(big, format: format, maxOutput: 1 << 20)
        #expect(bomb.decoded.isEmpty && bomb.error == CompressionError("decompressed body exceeds 1048576 bytes"))
    }

    @Test func bombGuard() throws {
        let big = try Compression.compress([UInt8](repeating: 0, count: 4 << 20), format: .gzip)
        #expect(throws: CompressionError("decompressed body exceeds 1048576 bytes")) {
            try Compression.decompress(big, format: .gzip, maxOutput: 1 << 20)
        }
    }

    /// Interop with /bin/gzip both ways.
    @Test func gzipCommandInterop() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-gz-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let ours = dir.appendingPathComponent("ours.gz")
        try Data(try Compression.compress(text, format: .gzip)).write(to: ours)
        #expect(try run(["gzip", "-dc", ours.path]) == text)
        let plain = dir.appendingPathComponent("plain")
        try Data(text).write(to: plain)
        let theirs = try run(["gzip", "-c", plain.path])
        #expect(try Compression.decompress(theirs, format: .gzip) == text)
    }

    func run(_ args: [String]) throws -> [UInt8] {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = args
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        let out = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return [UInt8](out)
    }
}
