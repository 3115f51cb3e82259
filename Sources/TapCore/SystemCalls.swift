#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The C library's descriptor calls under names no Swift member shadows (a type's own `close()` or `write(_:)` hides the C
/// function inside it), so that code calls `SystemCall.close(fd)` instead of naming the C library's module (`Glibc.close`),
/// which is `Darwin` on macOS.
public enum SystemCall {
    @inline(__always) public static func close(_ fd: Int32) -> Int32 { libcClose(fd) }
    @inline(__always) public static func read(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int { libcRead(fd, buffer, count) }
    @inline(__always) public static func write(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int { libcWrite(fd, buffer, count) }
    @inline(__always) public static func send(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int, _ flags: Int32) -> Int {
        libcSend(fd, buffer, count, flags)
    }
    @inline(__always) public static func connect(_ fd: Int32, _ address: UnsafePointer<sockaddr>?, _ length: socklen_t) -> Int32 {
        libcConnect(fd, address, length)
    }
    /// Whether bytes the peer sent wait unread in the kernel: a one-byte peek (MSG_PEEK) that does not wait, takes
    /// nothing, and is false at the end of the stream or on an error.
    public static func hasUnreadInput(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        return libcRecv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) > 0
    }
    /// Ends sending on a socket (a TCP FIN); receiving goes on.
    @inline(__always) public static func shutdownWrite(_ fd: Int32) -> Int32 { libcShutdown(fd, Int32(SHUT_WR)) }
    /// The calling thread's errno.
    @inline(__always) public static var errorNumber: Int32 { errno }
}

// At file scope the C names resolve to the C library's functions.
@inline(__always) private func libcClose(_ fd: Int32) -> Int32 { close(fd) }
@inline(__always) private func libcRead(_ fd: Int32, _ b: UnsafeMutableRawPointer?, _ n: Int) -> Int { read(fd, b, n) }
@inline(__always) private func libcWrite(_ fd: Int32, _ b: UnsafeRawPointer?, _ n: Int) -> Int { write(fd, b, n) }
@inline(__always) private func libcSend(_ fd: Int32, _ b: UnsafeRawPointer?, _ n: Int, _ f: Int32) -> Int { send(fd, b, n, f) }
@inline(__always) private func libcRecv(_ fd: Int32, _ b: UnsafeMutableRawPointer?, _ n: Int, _ f: Int32) -> Int { recv(fd, b, n, f) }
@inline(__always) private func libcConnect(_ fd: Int32, _ a: UnsafePointer<sockaddr>?, _ l: socklen_t) -> Int32 { connect(fd, a, l) }
@inline(__always) private func libcShutdown(_ fd: Int32, _ how: Int32) -> Int32 { shutdown(fd, how) }
