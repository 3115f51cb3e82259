import Testing
@testable import TapHTTP

@Suite struct HTTPParserTests {
    func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

    @Test func contentLengthRequestArrivingByteByByte() throws {
        let text = "POST /ds/areq HTTP/1.1\r\nHost: ds.test\r\nContent-Length: 11\r\n\r\n{\"a\":\"bcd\"}"
        var p = HTTPParser(mode: .request)
        var got: HTTPRequest?
        for b in bytes(text) {
            p.append([b])
            if let r = try p.nextRequest() { got = r }
        }
        let r = try #require(got)
        #expect(r.head.method == "POST" && r.head.target == "/ds/areq")
        #expect(r.head.headers["host"] == "ds.test")
        #expect(r.body == bytes("{\"a\":\"bcd\"}"))
        #expect(r.rawHead + r.rawBody == bytes(text))
        #expect(p.isIdle)
    }

    @Test func pipelinedRequests() throws {
        var p = HTTPParser(mode: .request)
        p.append(bytes("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\nPOST /c HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"))
        #expect(try p.nextRequest()?.head.target == "/a")
        #expect(try p.nextRequest()?.head.target == "/b")
        #expect(try p.nextRequest()?.body == bytes("hi"))
        #expect(try p.nextRequest() == nil)
    }

    @Test func chunkedWithExtensionsAndTrailers() throws {
        let text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: y\r\n\r\n"
        var p = HTTPParser(mode: .response)
        p.append(Array(bytes(text).prefix(40)))
        #expect(try p.nextResponse() == nil)
        p.append(Array(bytes(text).dropFirst(40)))
        let r = try #require(try p.nextResponse())
        #expect(r.body == bytes("hello world"))
        #expect(r.rawHead + r.rawBody == bytes(text))
    }

    @Test func responsesWithoutBodiesAndInterim() throws {
        var p = HTTPParser(mode: .response)
        p.requestMethod = "HEAD"
        p.append(bytes("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"))
        #expect(try p.nextResponse()?.body == [])
        p.requestMethod = "POST"
        p.append(bytes("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"))
        #expect(try p.nextResponse()?.head.status == 204)
    }

    @Test func closeDelimitedResponse() throws {
        var p = HTTPParser(mode: .response)
        p.append(bytes("HTTP/1.0 200 OK\r\n\r\nbody until close"))
        #expect(try p.nextResponse() == nil)
        #expect(try p.finish()?.body == bytes("body until close"))
    }

    @Test func truncatedMessageAtCloseIsAnError() throws {
        var p = HTTPParser(mode: .response)
        p.append(bytes("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"))
        #expect(try p.nextResponse() == nil)
        #expect(throws: HTTPParseError.self) { try p.finish() }
    }

    @Test(arguments: [
        ("GARBAGE\r\n\r\n", 400), ("GET / HTTP/2.0\r\n\r\n", 400), ("GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400), ("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        ("POST / HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", 413),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        ("GET / HTTP/1.1\r\n folded: x\r\n\r\n", 400),
    ])
    func malformedRequests(text: String, status: Int) {
        var p = HTTPParser(mode: .request)
        p.append(bytes(text))
        #expect { _ = try p.nextRequest() } throws: { ($0 as? HTTPParseError)?.status == status }
    }

    @Test func oversizedHeadIs431EvenBeforeItEnds() {
        var limits = HTTPLimits()
        limits.maxHeadBytes = 1024
        var p = HTTPParser(mode: .request, limits: limits)
        p.append(bytes("GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 2000)))
        #expect { _ = try p.nextRequest() } throws: { ($0 as? HTTPParseError)?.status == 431 }
    }

    @Test func keepAliveRules() {
        #expect(HTTPRequestHead(method: "GET", target: "/").keepAlive)
        #expect(!HTTPRequestHead(method: "GET", target: "/", headers: HTTPHeaders([("Connection", "close")])).keepAlive)
        #expect(!HTTPRequestHead(method: "GET", target: "/", version: "HTTP/1.0").keepAlive)
        #expect(HTTPRequestHead(method: "GET", target: "/", version: "HTTP/1.0", headers: HTTPHeaders([("Connection", "Keep-Alive")])).keepAlive)
    }

    @Test func randomSplitsGiveTheSameMessages() throws {
        let text = bytes("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET /y HTTP/1.1\r\n\r\n")
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            var p = HTTPParser(mode: .request)
            var out: [String] = []
            var i = 0
            while i < text.count {
                let n = Int.random(in: 1...7, using: &rng)
                p.append(Array(text[i..<min(text.count, i + n)]))
                i += n
                while let r = try p.nextRequest() { out.append(r.head.target + ":" + String(decoding: r.body, as: UTF8.self)) }
            }
            #expect(out == ["/x:abc", "/y:"])
        }
    }
}

/// Random and mutated input never crashes the parser: it returns messages, asks for more, or throws.
@Suite struct HTTPParserRobustnessTests {
    @Test func randomMutationsOfValidMessages() {
        let seeds = [
            "POST /ds/areq HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
            "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x\r\nabc\r\n0\r\nT: 1\r\n\r\n",
            "CONNECT acs.test:443 HTTP/1.1\r\nHost: acs.test:443\r\n\r\n",
        ].map { Array($0.utf8) }
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<3000 {
            var bytes = seeds.randomElement(using: &rng)!
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                let i = Int.random(in: 0..<bytes.count, using: &rng)
                switch Int.random(in: 0..<4, using: &rng) {
                case 0: bytes[i] = UInt8.random(in: 0...255, using: &rng)
                case 1: bytes.remove(at: i)
                case 2: bytes.insert(UInt8.random(in: 0...255, using: &rng), at: i)
                default: bytes.insert(contentsOf: [13, 10], at: i)
                }
                if bytes.isEmpty { bytes = [0] }
            }
            for mode in [HTTPParser.Mode.request, .response] {
                var p = HTTPParser(mode: mode)
                p.append(bytes)
                for _ in 0..<4 {
                    if mode == .request { _ = try? p.nextRequest() } else { _ = try? p.nextResponse() }
                }
                _ = try? p.finish()
            }
        }
    }
}
