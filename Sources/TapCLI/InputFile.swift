import Foundation
import TapCore

/// A file (or standard input, `-`) that a command reads, refused before a byte of it is read when it is larger than the
/// command's limit (its size is the open file's, from fstat), and never read past the limit (a file that grows, a pipe):
/// read whole into one array, or a piece at a time.
final class InputFile {
    /// How messages name it: the path, or "standard input".
    let name: String
    let limit: Int
    private let fd: Int32
    private let owned: Bool
    private(set) var bytesRead = 0
    /// The size fstat gave for a regular file (nil for a pipe, a terminal or a device).
    let size: Int?

    init(_ path: String?, limit: Int) throws(CommandFailure) {
        self.limit = limit
        if path == nil || path == "-" {
            name = "standard input"
            fd = STDIN_FILENO
            owned = false
        } else {
            let p = path!
            name = p
            fd = open(p, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw CommandFailure("cannot read \(p): \(String(cString: strerror(errno)))") }
            owned = true
        }
        var st = stat()
        if fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG {
            size = Int(st.st_size)
        } else {
            size = nil
        }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            if owned { close(fd) }
            throw CommandFailure("cannot read \(name): it is a directory")
        }
        if let size, size > limit {
            if owned { close(fd) }
            throw CommandFailure("\(name) is \(InputFile.describe(size)) (\(size) bytes), more than the \(InputFile.describe(limit)) this command reads; "
                                 + "nothing was read")
        }
    }

    deinit { if owned { close(fd) } }

    /// Up to `count` more bytes; empty at the end. Past the limit, an error naming it.
    func read(upTo count: Int) throws(CommandFailure) -> [UInt8] {
        let want = min(count, limit - bytesRead + 1) // one byte past the limit shows that the input goes on
        var out = [UInt8](repeating: 0, count: max(want, 1))
        var n: Int
        repeat {
            n = out.withUnsafeMutableBytes { SystemCall.read(fd, $0.baseAddress, want) }
        } while n < 0 && errno == EINTR
        guard n >= 0 else { throw CommandFailure("cannot read \(name): \(String(cString: strerror(errno)))") }
        bytesRead += n
        guard bytesRead <= limit else {
            throw CommandFailure("\(name) is more than the \(InputFile.describe(limit)) this command reads")
        }
        out.removeSubrange(n...)
        return out
    }

    /// Everything left, in one array (the only copy).
    func readAll() throws(CommandFailure) -> [UInt8] {
        var all: [UInt8] = []
        all.reserveCapacity(min(size ?? 0, limit) + 1)
        while true {
            let piece = try read(upTo: 1 << 20)
            if piece.isEmpty { return all }
            all += piece
        }
    }

    /// `512 MiB`, `3.0 GiB`, `700 bytes`.
    static func describe(_ bytes: Int) -> String {
        for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] where bytes >= 1 << shift {
            return bytes % (1 << shift) == 0 ? "\(bytes >> shift) \(unit)" : String(format: "%.1f %@", Double(bytes) / Double(1 << shift), unit)
        }
        return "\(bytes) bytes"
    }
}
