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

    /// Tester's find: `--force` unlinked whatever the path was and wrote a regular file there (as root, /dev/null became
    /// a file). A FIFO, a socket and a directory are refused and left as they are; a symlink to a device is replaced
    /// itself; a file is replaced by rename, so a reader (a hard link here) never sees it half-written or truncated.
    @Test func onlyFilesAndSymlinksAreReplacedAndByRename() throws {
        try withDir { dir in
            let fifo = dir + "/fifo"
            #expect(mkfifo(fifo, 0o600) == 0)
            #expect { try SecureFile.create(fifo, contents: [1], mode: 0o644, replace: true) } throws: { "\($0)".contains("is a FIFO, not a regular file") }
            let sock = dir + "/sock"
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var addr = sockaddr_un()
            addr.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &addr.sun_path) { raw in for (i, b) in sock.utf8.prefix(raw.count - 1).enumerated() { raw[i] = b } }
            let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
            #expect(bound == 0)
            #expect { try SecureFile.create(sock, contents: [1], mode: 0o644, replace: true) } throws: { "\($0)".contains("is a socket") }
            #expect { try SecureFile.create(dir, contents: [1], mode: 0o644, replace: true) } throws: { "\($0)".contains("is a directory") }
            var st = stat()
            #expect(lstat(fifo, &st) == 0 && (st.st_mode & S_IFMT) == S_IFIFO)
            #expect(lstat(sock, &st) == 0 && (st.st_mode & S_IFMT) == S_IFSOCK)
            let toDevice = dir + "/null-link"
            try FileManager.default.createSymbolicLink(atPath: toDevice, withDestinationPath: "/dev/null")
            try SecureFile.create(toDevice, contents: Array("x".utf8), mode: 0o600, replace: true)
            #expect(lstat(toDevice, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG && (st.st_mode & 0o777) == 0o600)
            #expect(stat("/dev/null", &st) == 0 && (st.st_mode & S_IFMT) == S_IFCHR)
            let file = dir + "/ca.pem", reader = dir + "/reader"
            try SecureFile.create(file, contents: Array("old".utf8), mode: 0o644)
            #expect(link(file, reader) == 0)
            try SecureFile.create(file, contents: Array("new".utf8), mode: 0o644, replace: true)
            #expect(FileManager.default.contents(atPath: reader) == Data("old".utf8), "the old file was not written in place")
            #expect(FileManager.default.contents(atPath: file) == Data("new".utf8))
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == ["ca.pem", "fifo", "null-link", "reader", "sock"])
        }
    }
}
