#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
import TapCore

/// `SystemCall.hasUnreadInput`: bytes the peer sent and nobody read yet, seen without taking them.
@Suite struct UnreadInputTests {
    @Test func seesBytesWaitingWithoutTakingThem() {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { _ = SystemCall.close(fds[0]); _ = SystemCall.close(fds[1]) }
        #expect(!SystemCall.hasUnreadInput(fds[0]), "nothing sent yet (and the peek does not wait)")
        let request = Array("GET / HTTP/1.1\r\n\r\n".utf8)
        #expect(request.withUnsafeBytes { SystemCall.write(fds[1], $0.baseAddress, $0.count) } == request.count)
        #expect(SystemCall.hasUnreadInput(fds[0]))
        #expect(SystemCall.hasUnreadInput(fds[0]), "peeking took nothing")
        var buffer = [UInt8](repeating: 0, count: 64)
        #expect(buffer.withUnsafeMutableBytes { SystemCall.read(fds[0], $0.baseAddress, $0.count) } == request.count)
        #expect(!SystemCall.hasUnreadInput(fds[0]))
    }
}
