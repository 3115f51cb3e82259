import Testing
import TapNet

/// URLs from the wire (an acsURL inside acsSignedContent, a threeDSServerURL) and from options go onto a request line
/// as they are: one with CR LF injected headers into client-replay's CReqs (hostile tester, issue 25).
@Suite struct HTTPURLTests {
    @Test func controlCharactersSpacesAndNonASCIIAreRefused() {
        for bad in ["http://127.0.0.1:18900/acs/challenge HTTP/1.1\r\nX-Injected: yes\r\nX-Pad: a", "http://127.0.0.1/a b",
                    "http://127.0.0.1/\u{1B}[31m", "http://127.0.0.1/a\tb", "http://127.0.0.1/\u{7F}", "http://h\u{E9}.example/",
                    "http://127.0.0.1/x\ny"] {
            #expect(HTTPURL(bad) == nil, "\(bad.debugDescription)")
        }
    }

    @Test func anEmptyHostIsRefusedNotTakenAsLoopback() {
        for bad in ["http://", "https://", "http:///path", "http://:80/x"] { #expect(HTTPURL(bad) == nil, "\(bad)") }
    }

    @Test func ordinaryURLsStillParse() throws {
        let u = try #require(HTTPURL("https://acs.example:8443/challenge?x=1&y=%20"))
        #expect(u.tls && u.address == HostPort(host: "acs.example", port: 8443) && u.path == "/challenge?x=1&y=%20")
        #expect(HTTPURL("http://[::1]:18900")?.address == HostPort(host: "::1", port: 18900))
        #expect(HTTPURL("HTTP://Example.COM")?.path == "/")
    }
}
