import Foundation
import Testing
import TapCompression
import TapCore
import TapEMV
import TapRecording
@testable import TapStore

/// Issue 23, item 3: what the writer stores of a body. Content codings are undone layer by layer (`gzip, gzip` was stored
/// with the card number inside the inner layer), and sessions that held nothing to mask come out as they were.
@Suite struct StoredMaskingTests {
    static let areq = Array(#"{"messageType":"AReq","acctNumber":"4000000000001000","note":"card 4000 0000 0000 1000"}"#.utf8)
    static let masked = #"{"messageType":"AReq","acctNumber":"400000******1000","note":"card 4000 00** **** 1000"}"#

    static func stored(_ body: [UInt8], _ headers: [(String, String)]) -> StoredMessage {
        StoredMessage(CapturedMessage(headers: headers, body: body, wireSize: body.count), mask: true, isRequest: true)
    }

    static func gzip(_ b: [UInt8], _ times: Int = 1) throws -> [UInt8] {
        var out = b
        for _ in 0..<times { out = try Compression.compress(out, format: .gzip) }
        return out
    }

    @Test func contentCodingsAreUndoneLayerByLayer() throws {
        for headers in [[("Content-Encoding", "gzip, gzip")], [("Content-Encoding", "gzip"), ("content-encoding", "x-gzip")]] {
            let s = Self.stored(try Self.gzip(Self.areq, 2), headers)
            #expect(String(decoding: s.body, as: UTF8.self) == Self.masked, "\(headers)")
            #expect(s.messages.first?.summary?.messageType == "AReq")
            #expect(s.contentEncoding == headers.map(\.1).joined(separator: ", ").lowercased())
        }
        let deflateInGzip = try Self.gzip(try Compression.compress(Self.areq, format: .zlib))
        #expect(String(decoding: Self.stored(deflateInGzip, [("Content-Encoding", "deflate, gzip")]).body, as: UTF8.self) == Self.masked)
        #expect(String(decoding: Self.stored(try Self.gzip(Self.areq, 2), [("Content-Encoding", "gzip, identity, gzip")]).body, as: UTF8.self) == Self.masked)
    }

    @Test func whatCannotBeDecodedIsStoredAsFarAsItDecodedAndMasked() throws {
        // Cut short: the part that arrived, masked, rather than compressed bytes that hide the card number.
        var seed: UInt32 = 7 // letters that do not compress away
        let letters = (0..<6000).map { _ -> UInt8 in seed = seed &* 1_103_515_245 &+ 12345; return UInt8(ascii: "a") + UInt8((seed >> 16) % 26) }
        let long = Array(#"{"acctNumber":"4000000000001000","padding":""#.utf8) + letters + Array(#""}"#.utf8)
        let z = try Self.gzip(long)
        #expect(z.count > 2000)
        let cut = Self.stored(Array(z.prefix(z.count / 2)), [("Content-Encoding", "gzip")])
        let text = String(decoding: cut.body, as: UTF8.self)
        #expect(text.hasPrefix(#"{"acctNumber":"400000******1000","padding":""#) && cut.body.count > 1000, "\(text.prefix(80))")
        #expect(cut.contentEncoding?.hasPrefix("gzip (not decoded: compressed data is truncated; the ") == true, "\(cut.contentEncoding ?? "-")")
        // Sent as gzip but not gzip: kept as it came, and masked as any body.
        let plain = Self.stored(Self.areq, [("Content-Encoding", "gzip")])
        #expect(String(decoding: plain.body, as: UTF8.self) == Self.masked)
        #expect(plain.contentEncoding?.hasPrefix("gzip (not decoded: ") == true)
        // A coding 3dstape does not decode, outside a gzip layer it does.
        let br = Self.stored(try Self.gzip(Self.areq), [("Content-Encoding", "gzip, br")])
        #expect(br.contentEncoding == "gzip, br (not decoded: br is not supported)")
        // The inner layer, once the outer is undone.
        let inner = Self.stored(try Self.gzip(Array((try Self.gzip(Self.areq)).prefix(30))), [("Content-Encoding", "gzip, gzip")])
        #expect(inner.contentEncoding?.hasPrefix("gzip, gzip (1 of 2 decoded; then: ") == true, "\(inner.contentEncoding ?? "-")")
        // Layers beyond the limit stay as they are.
        let five = Self.stored(try Self.gzip(Self.areq, 5), [("Content-Encoding", Array(repeating: "gzip", count: 5).joined(separator: ","))])
        #expect(five.contentEncoding?.hasSuffix("(4 of 5 decoded; then: more than 4 content codings)") == true)
        #expect(try Compression.decompress(five.body, format: .gzip) == Self.areq)
        // No coding, or identity: the body as it is.
        #expect(Self.stored(Self.areq, [("Content-Encoding", "identity")]).contentEncoding == "identity")
        #expect(Self.stored(Self.areq, []).contentEncoding == nil)
    }

    /// Every session in `sessions/` was stored masked: masking it again changes nothing (bodies, URLs, headers, messages),
    /// so sessions with nothing new to mask are written byte for byte as before.
    @Test func theCheckedInSessionsAreAlreadyAsTheWriterStoresThem() throws {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../sessions").standardized
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".3dstape") }.sorted()
        #expect(files.count >= 5)
        var checked = 0
        for file in files {
            let reader = try SessionReader(path: dir.appendingPathComponent(file).path)
            for x in try reader.exchanges() {
                for (side, body) in [("request", x.requestBody), ("response", x.responseBody)] {
                    #expect(ThreeDSContent.prepare(body, mask: true).stored == body, "\(file) #\(x.id) \(side) body")
                    #expect(ThreeDSContent.prepare(body, mask: true, scan: false).stored == body, "\(file) #\(x.id) \(side) body")
                }
                #expect(Masking.maskText(x.url) == x.url, "\(file) #\(x.id) url")
                for headers in [x.requestHeaders, x.responseHeaders] {
                    let plain = headers.filter { !["authorization", "proxy-authorization", "cookie", "set-cookie"].contains($0.0.lowercased()) }
                    #expect(Masking.maskHeaders(plain).map(\.1) == plain.map(\.1), "\(file) #\(x.id) headers")
                }
                for m in x.messages where m.location != "body" {
                    if let json = m.json { #expect(Masking.mask(json) == json, "\(file) #\(x.id) \(m.location)") }
                }
                checked += 1
            }
        }
        #expect(checked > 100)
    }
}
