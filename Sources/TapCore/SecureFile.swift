#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Files 3dstape writes that others may read (keys, certificates, key logs, session files): created with their final
/// mode from the start (never world-readable for a moment), never through a symlink (O_NOFOLLOW), and never over an
/// existing file unless the caller says so. Replacing writes a temporary file beside the target (O_EXCL, the final mode)
/// and renames it over the target, so a reader sees the old file or the new one, never a half-written one; only a
/// regular file or a symlink (the link itself, never its target) is replaced, never a device, FIFO, socket or directory.
public enum SecureFile {
    /// Why a file could not be written.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        init(_ d: String) { description = d }
    }

    /// Creates `path` with `contents` and `mode`. An existing entry is an error naming `--force`, unless `replace`.
    public static func create(_ path: String, contents: [UInt8], mode: mode_t, replace: Bool = false) throws(Failure) {
        if replace {
            var st = stat()
            if lstat(path, &st) == 0 {
                try refuseUnlessReplaceable(path, st.st_mode & S_IFMT)
                return try replaceAtomically(path, contents: contents, mode: mode)
            }
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else {
            if errno == EEXIST { throw Failure("\(path) already exists; remove it or use --force") }
            throw Failure("cannot create \(path): \(reason())")
        }
        defer { close(fd) }
        try write(fd, contents, path)
    }

    /// Only a regular file or a symlink may be replaced; `--force` never turns a device, FIFO or socket into a file.
    static func refuseUnlessReplaceable(_ path: String, _ type: mode_t) throws(Failure) {
        switch type {
        case S_IFREG, S_IFLNK: return
        case S_IFDIR: throw Failure("\(path) is a directory")
        case S_IFCHR, S_IFBLK: throw Failure("\(path) is a device, not a regular file; refusing to replace it")
        case S_IFIFO: throw Failure("\(path) is a FIFO, not a regular file; refusing to replace it")
        case S_IFSOCK: throw Failure("\(path) is a socket, not a regular file; refusing to replace it")
        default: throw Failure("\(path) is not a regular file; refusing to replace it")
        }
    }

    /// Writes a temporary file in `path`'s directory and renames it over `path` (rename(2) replaces the entry itself,
    /// a symlink included, and is atomic); the temporary file is removed if anything fails.
    static func replaceAtomically(_ path: String, contents: [UInt8], mode: mode_t) throws(Failure) {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[...$0]) } ?? ""
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        var attempt = 0
        while true {
            var random = SystemRandomNumberGenerator()
            let temporary = directory + "." + name + ".tmp-" + String(random.next() as UInt64, radix: 36)
            let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
            if fd < 0 {
                attempt += 1
                if errno == EEXIST && attempt < 8 { continue }
                throw Failure("cannot replace \(path): cannot create a temporary file beside it: \(reason())")
            }
            do throws(Failure) {
                defer { close(fd) }
                try write(fd, contents, temporary)
                guard fsync(fd) == 0 else { throw Failure("cannot write \(temporary): \(reason())") }
                guard rename(temporary, path) == 0 else { throw Failure("cannot replace \(path): \(reason())") }
            } catch {
                unlink(temporary)
                throw error
            }
            return
        }
    }

    /// Appends `bytes` to `path`, creating it with `mode` if absent; a symlink is refused.
    public static func append(_ path: String, _ bytes: [UInt8], mode: mode_t) throws(Failure) {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else { throw Failure("cannot open \(path) for appending: \(reason())") }
        defer { close(fd) }
        try write(fd, bytes, path)
    }

    /// Runs `body` while holding an exclusive advisory lock (flock) on `path`, created 0600 if absent: processes that
    /// check-then-create the same files (two `3dstape` commands creating the interception CA at once) take turns.
    /// Blocks until the lock is free; the lock goes with the descriptor, also when the process dies.
    public static func withExclusiveLock<T>(_ path: String, _ body: () throws -> T) throws -> T {
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure("cannot open the lock file \(path): \(reason())") }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw Failure("cannot lock \(path): \(reason())") }
        }
        defer { _ = flock(fd, LOCK_UN) }
        return try body()
    }

    static func write(_ fd: Int32, _ bytes: [UInt8], _ path: String) throws(Failure) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { SystemCall.write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure("cannot write \(path): \(reason())")
            }
            offset += n
        }
    }

    static func reason() -> String { String(cString: strerror(errno)) }
}
