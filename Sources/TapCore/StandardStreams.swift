import Foundation

/// Writes to standard output and standard error that cannot end the process: a closed pipe (`3dstape check … | head`),
/// a full disk (`> /dev/full`) or a closed descriptor (`>&-`) loses the text, not the command's exit status.
/// (FileHandle.write traps on such errors; SIGPIPE is ignored by the commands that serve, so a write gets EPIPE instead.)
public enum StandardStreams {
    /// Writes `bytes` to standard output; a failure to write is ignored.
    public static func out(_ bytes: Data) { write(STDOUT_FILENO, bytes) }

    /// Writes `bytes` to standard error; a failure to write is ignored.
    public static func err(_ bytes: Data) { write(STDERR_FILENO, bytes) }

    static func write(_ fd: Int32, _ bytes: Data) {
        bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            var offset = 0
            while offset < raw.count {
                let n = Foundation.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { return } // EPIPE, ENOSPC, EBADF: the text is lost, the command goes on
                offset += n
            }
        }
    }
}
