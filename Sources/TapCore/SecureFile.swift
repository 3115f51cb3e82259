#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Files 3dstape writes that others may read (keys, certificates, key logs, session files): created with their final
/// mode from the start (never world-readable for a moment), never through a symlink (O_NOFOLLOW), and never over an
/// existing file unless the caller says so, in which case the existing entry itself (a file, or a planted symlink,
/// never its target) is removed first.
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
                guard (st.st_mode & S_IFMT) != S_IFDIR else { throw Failure("\(path) is a directory") }
                guard unlink(path) == 0 else { throw Failure("cannot replace \(path): \(reason())") }
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
