import Testing
import TapCore

@Suite struct LogThrottleTests {
    @Test func oneLineASecondAtMost() {
        var t = LogThrottle()
        var allowed: [Bool] = []
        for now: UInt64 in [5, 500_000_000, 1_000_000_004, 1_000_000_005, 1_900_000_000] { allowed.append(t.allow(nowNanos: now)) }
        // The first line goes out; then only a second after the last one logged.
        #expect(allowed == [true, false, false, true, false])
    }
}

@Suite struct StandardBase64Tests {
    /// RFC 4648 §10's test vectors, and the Basic credentials of RFC 7617 §2.
    @Test func rfcVectors() {
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy",
                       "Aladdin:open sesame": "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="]
        for (plain, encoded) in vectors { #expect(Base64URL.encodeStandard(Array(plain.utf8)) == encoded, "\(plain)") }
        #expect(Base64URL.encodeStandard([0xFB, 0xFF]) == "+/8=")
    }
}
