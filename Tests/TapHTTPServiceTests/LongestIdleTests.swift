import Testing
import TapNet

/// `Listener.longestIdle`: which connection a server closes for a new one at its connection cap.
@Suite struct LongestIdleTests {
    @Test func theSmallestKeyIsTheOneIdleTheLongestAndNoneIdleIsNil() {
        let connections: [(name: String, idleSince: UInt64?)] = [("busy", nil), ("recent", 900), ("oldest", 100), ("middle", 500)]
        #expect(Listener.longestIdle(connections, idleKey: \.idleSince)?.name == "oldest")
        #expect(Listener.longestIdle(connections.filter { $0.name == "busy" }, idleKey: \.idleSince) == nil)
        #expect(Listener.longestIdle([(name: String, idleSince: UInt64?)](), idleKey: \.idleSince) == nil)
        // One whose state lags the kernel (a request arrived unread, a TLS handshake under way) is passed over.
        #expect(Listener.longestIdle(connections, idleKey: \.idleSince, isQuiet: { $0.name != "oldest" })?.name == "middle")
        #expect(Listener.longestIdle(connections, idleKey: \.idleSince, isQuiet: { _ in false }) == nil)
    }
}
