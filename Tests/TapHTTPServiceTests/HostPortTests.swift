import Testing
import TapNet
import TapHTTPService

/// `HOST:PORT` from the wire (a CONNECT target, a URL's authority) and from options: one checked reading, so that a
/// signed port, a user part, a path or a shorthand IPv4 address is refused instead of handed to the resolver
/// (hostile tester, issue 26: `CONNECT 127.0.0.1:+42163` reached the upstream; `127.1` and `0x7f.1` reached 127.0.0.1).
@Suite struct HostPortTests {
    @Test func signedOrOverlongPortsAreRefused() {
        for bad in ["127.0.0.1:+42163", "127.0.0.1:-1", "a.test:65536", "a.test:000443", "a.test: 443", "a.test:", "a.test:4 3"] {
            #expect(HostPort(bad) == nil, "\(bad)")
        }
        #expect(HostPort("a.test:65535") == HostPort(host: "a.test", port: 65535))
        #expect(HostPort("a.test:0") == HostPort(host: "a.test", port: 0))
    }

    @Test func hostsThatAreNotNamesOrAddressesAreRefused() {
        for bad in ["user@127.0.0.1:42163", "h/ost:42163", "%00:42163", "*:42163", "a..b:443", ".a:443", "a b:443",
                    "[::1%]:80",
                    "[::g]:80", "[a.test]:80", "\u{1B}[31m:80"] {
            #expect(HostPort(bad) == nil, "\(bad.debugDescription)")
        }
    }

    @Test func namesAddressesAndIPv6LiteralsStillParse() {
        #expect(HostPort("acs.example.com:443") == HostPort(host: "acs.example.com", port: 443))
        #expect(HostPort("ACS-1_x.example.:8443") == HostPort(host: "ACS-1_x.example.", port: 8443))
        #expect(HostPort("127.0.0.1:18900") == HostPort(host: "127.0.0.1", port: 18900))
        #expect(HostPort("0.0.0.0:80") == HostPort(host: "0.0.0.0", port: 80))
        #expect(HostPort("[::1]:443") == HostPort(host: "::1", port: 443))
        #expect(HostPort("[fe80::1%eth0]:443") == HostPort(host: "fe80::1%eth0", port: 443))
        #expect(HostPort("[::ffff:127.0.0.1]:80") == HostPort(host: "::ffff:127.0.0.1", port: 80))
        #expect(HostPort(":8080") == HostPort(host: "127.0.0.1", port: 8080))
        #expect(HostPort("localhost", defaultPort: 80) == HostPort(host: "localhost", port: 80))
        #expect(HostPort("3com.example:80") == HostPort(host: "3com.example", port: 80))
    }

    @Test func shorthandIPv4HostsAreKnown() {
        for shorthand in ["127.1:1", "0x7f.1:1", "2130706433:1", "127.0.0.01:1", "256.1.1.1:1", "0:1", "1.2.3.4.5:1"] {
            #expect(HostPort(shorthand)?.isShorthandIPv4 == true, "\(shorthand)")
        }
        for plain in ["127.0.0.1:1", "0.0.0.0:1", "a.test:1", "3com.example:1", "[::1]:1", "10.0.0.255:1"] {
            #expect(HostPort(plain)?.isShorthandIPv4 == false, "\(plain)")
        }
    }

    @Test func aConnectToASignedShorthandOrUserTargetIsA400() {
        for target in ["127.0.0.1:+42163", "user@127.0.0.1:42163", "h/ost:42163", "*:42163", "0x7f.1:42163", "127.1:42163"] {
            var proxy = HTTPRequestIntakeTests.intake(connect: true)
            #expect(HTTPRequestIntakeTests.steps(&proxy, "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n\r\n")
                    == ["400 CONNECT target '\(target)' is not host:port"])
        }
        var ok = HTTPRequestIntakeTests.intake(connect: true)
        #expect(HTTPRequestIntakeTests.steps(&ok, "CONNECT 127.0.0.1:42163 HTTP/1.1\r\n\r\n") == ["intercept 127.0.0.1:42163"])
    }
}
