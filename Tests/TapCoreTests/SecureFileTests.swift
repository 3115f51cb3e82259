import Foundation
import Testing
import TapCore

/// Hardening defect 9: files are created with their final mode, never through a planted symlink, never over a file.
@Suite struct SecureFileTests {
    func withDir(_ body: (String) throws -> Void) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("securefile-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try body(dir)
    }

    @Test func createdWithTheFinalModeAndNeverOverAFile() throws {
        try withDir { dir in
            let key = dir + "/key.pem"
            try SecureFile.create(key, contents: Array("secret".utf8), mode: 0o600)
            let mode = (try FileManager.default.attributesOfItem(atPath: key)[.posixPermissions] as? NSNumber)?.intValue
            #expect(mode == 0o600)
            #expect { try SecureFile.create(key, contents: [], mode: 0o600) } throws: { "\($0)".contains("already exists; remove it or use --force") }
            try SecureFile.create(key, contents: Array("new".utf8), mode: 0o600, replace: true)
            #expect(FileManager.default.contents(atPath: key) == Data("new".utf8))
        }
    }

    @Test func aPlantedSymlinkIsNeverFollowed() throws {
        try withDir { dir in
            let victim = dir + "/victim.txt"
            try Data("precious".utf8).write(to: URL(fileURLWithPath: victim))
            let link = dir + "/ds-cert.pem"
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: victim)
            #expect(throws: SecureFile.Failure.self) { try SecureFile.create(link, contents: Array("x".utf8), mode: 0o644) }
            #expect(throws: SecureFile.Failure.self) { try SecureFile.append(link, Array("x".utf8), mode: 0o600) }
            try SecureFile.create(link, contents: Array("cert".utf8), mode: 0o644, replace: true)
            #expect(FileManager.default.contents(atPath: victim) == Data("precious".utf8), "the symlink's target is untouched")
            #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: link)) == nil, "the link itself was replaced by a file")
        }
    }
}
