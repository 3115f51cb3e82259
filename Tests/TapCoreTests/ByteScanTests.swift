import Testing
import TapCore

/// The word-at-a-time searches against the byte loops they replace, at every start offset of random buffers biased
/// towards the bytes that matter (quotes, backslashes, CR and LF, controls, high bytes, digits and their neighbours).
@Suite struct ByteScanTests {
    static func referenceStop(_ u: [UInt8], _ from: Int) -> Int {
        u[from...].firstIndex { $0 == 0x22 || $0 == 0x5C || $0 < 0x20 || $0 >= 0x80 } ?? u.count
    }

    static func referenceEightDigits(_ u: [UInt8], _ at: Int) -> Bool {
        u[at..<at + 8].allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    static func referenceStopOrHint(_ u: [UInt8], _ from: Int) -> Int {
        u.indices.dropFirst(from).first { k in
            let c = u[k]
            return c == 0x22 || c == 0x5C || c < 0x20 || c >= 0x80 || c == 0x3D || (c == 0x65 && (k + 1 == u.count || u[k + 1] == 0x79 || u[k + 1] == 0x77))
        } ?? u.count
    }

    /// Digits, spaces and dashes, no two of the separators side by side.
    static func referenceEightCardBytes(_ u: [UInt8], _ at: Int) -> Bool {
        let w = u[at..<at + 8]
        func separator(_ c: UInt8) -> Bool { c == 0x20 || c == 0x2D }
        return w.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || separator($0) } && !zip(w, w.dropFirst()).contains { separator($0) && separator($1) }
    }

    static func referenceBase64URLRunEnd(_ u: [UInt8], _ from: Int) -> Int {
        u[from...].firstIndex { !(Base64URL.isAlphabetByte($0) || $0 == 0x2E) } ?? u.count
    }

    static func referenceLineBreak(_ u: [UInt8], _ from: Int, _ end: Int) -> Int {
        u[from..<end].firstIndex { $0 == 0x0D || $0 == 0x0A } ?? end
    }

    @Test func agreesWithByteLoops() {
        var rng = SystemRandomNumberGenerator()
        let interesting: [UInt8] = [0x00, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x2F, 0x30, 0x39, 0x3A, 0x5B, 0x5C,
                                    0x5D, 0x7F, 0x80, 0x8A, 0x8D, 0xAF, 0xB0, 0xB9, 0xFF, 0x2C, 0x2D, 0x2E, 0x3C, 0x3D, 0x3E, 0x64, 0x65,
                                    0x66, 0xA0, 0xAD, 0xBD, 0xE5, 0x35, 0x30, 0x20, 0x20, 0x2D, 0x65, 0x79, 0x77, 0x65]
        for _ in 0..<2_000 {
            let count = Int.random(in: 0...72, using: &rng) // past two 16-byte blocks and an 8-byte word
            let sparse = Int.random(in: 1...30, using: &rng) // how rare the interesting bytes are
            let bytes: [UInt8] = (0..<count).map { _ in
                Int.random(in: 0..<sparse, using: &rng) == 0 ? interesting.randomElement(using: &rng)! : UInt8.random(in: 0x41...0x5A, using: &rng)
            }
            bytes.withUnsafeBufferPointer { u in
                for from in 0...count {
                    #expect(ByteScan.jsonStringStop(u, from: from) == ByteScanTests.referenceStop(bytes, from), "\(bytes) from \(from)")
                    #expect(ByteScan.jsonStringStopOrHint(u, from: from) == ByteScanTests.referenceStopOrHint(bytes, from), "\(bytes) from \(from)")
                    #expect(ByteScan.base64URLRunEnd(u, from: from) == ByteScanTests.referenceBase64URLRunEnd(bytes, from), "\(bytes) from \(from)")
                    if from + 8 <= count {
                        #expect(ByteScan.eightDigits(u, at: from) == ByteScanTests.referenceEightDigits(bytes, from), "\(bytes) at \(from)")
                        #expect(ByteScan.eightCardBytes(u, at: from) == ByteScanTests.referenceEightCardBytes(bytes, from), "\(bytes) at \(from)")
                    }
                    let window = stride(from: from, through: count - 8, by: 6).first { ByteScanTests.referenceEightCardBytes(bytes, $0) }
                    #expect(ByteScan.nextCardWindow(u, from: from) == window, "\(bytes) from \(from)")
                    for end in from...count {
                        #expect(ByteScan.lineBreak(u, from: from, end: end) == ByteScanTests.referenceLineBreak(bytes, from, end), "\(bytes) \(from)..<\(end)")
                        #expect(ByteScan.isASCII(u, from..<end) == bytes[from..<end].allSatisfy { $0 < 0x80 }, "\(bytes) \(from)..<\(end)")
                    }
                }
            }
        }
    }

    /// The skips over blocks (16 and 32 bytes at a time, then 18 or 36 bytes ahead) against the byte loops: a digit run or a
    /// stop placed at every offset of letter padding as long as a few blocks, searched from each offset.
    @Test func blockSkipsLandWhereByteLoopsDo() {
        for count in [40, 50, 64, 71, 90, 101] {
            for position in 0..<count {
                for (insert, letter) in [(Array("40000000000010".utf8), UInt8(ascii: "x")), (Array("0 0".utf8), UInt8(ascii: "a")),
                                         (Array("\"".utf8), UInt8(ascii: "a")), (Array("ey".utf8), UInt8(ascii: "b")), (Array("=".utf8), UInt8(ascii: "Q")),
                                         (Array("e".utf8), UInt8(ascii: "f")), ([0xC3, 0xA9], UInt8(ascii: "z")), ([0x0A], UInt8(ascii: "z"))] {
                    var bytes = [UInt8](repeating: letter, count: count)
                    for (k, c) in insert.enumerated() where position + k < count { bytes[position + k] = c }
                    bytes.withUnsafeBufferPointer { u in
                        for from in 0..<min(7, count) {
                            let window = stride(from: from, through: count - 8, by: 6).first { ByteScanTests.referenceEightCardBytes(bytes, $0) }
                            #expect(ByteScan.nextCardWindow(u, from: from) == window, "\(insert) at \(position) of \(count) from \(from)")
                            #expect(ByteScan.jsonStringStop(u, from: from) == ByteScanTests.referenceStop(bytes, from), "\(insert) at \(position) of \(count)")
                            #expect(ByteScan.jsonStringStopOrHint(u, from: from) == ByteScanTests.referenceStopOrHint(bytes, from), "\(insert) at \(position) of \(count)")
                        }
                    }
                }
            }
        }
    }

    /// `JSON.writeString` (which finds the bytes to escape with `jsonStringStop`) against the escape written byte by byte.
    static func referenceJSONString(_ s: String) -> [UInt8] {
        var out: [UInt8] = [0x22]
        for c in s.utf8 {
            switch c {
            case 0x22: out += [0x5C, 0x22]
            case 0x5C: out += [0x5C, 0x5C]
            case 0x0A: out += [0x5C, 0x6E]
            case 0x0D: out += [0x5C, 0x72]
            case 0x09: out += [0x5C, 0x74]
            case ..<0x20: out += Array("\\u00".utf8) + Array(String(c >> 4, radix: 16).utf8) + Array(String(c & 0xF, radix: 16).utf8)
            default: out.append(c)
            }
        }
        return out + [0x22]
    }

    @Test func writesJSONStringsAsAByteLoopWould() {
        var rng = SystemRandomNumberGenerator()
        let pieces = ["a", "Z", "\"", "\\", "\n", "\r", "\t", "\u{01}", "\u{1F}", "\u{7F}", "é", "€", "😀", " ", "/", "0123456789"]
        for _ in 0..<3_000 {
            let s = (0..<Int.random(in: 0...40, using: &rng)).map { _ in
                Int.random(in: 0..<4, using: &rng) == 0 ? pieces.randomElement(using: &rng)! : "abcdefgh"
            }.joined()
            var out: [UInt8] = [0x41]
            JSON.writeString(s, into: &out)
            #expect(Array(out.dropFirst()) == ByteScanTests.referenceJSONString(s), "\(s.debugDescription)")
        }
    }

    /// Every byte value in every lane of a 16-byte block (the vector searches) and of the 8-byte word after it (the
    /// word searches), and in the byte loop's tail.
    @Test func everyByteValueInEveryLane() {
        for lane in 0..<27 {
            for value in 0...255 {
                var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: 27)
                bytes[lane] = UInt8(value)
                var digits = [UInt8](repeating: UInt8(ascii: "5"), count: 8)
                if lane < 8 { digits[lane] = UInt8(value) }
                bytes.withUnsafeBufferPointer { u in
                    #expect(ByteScan.jsonStringStop(u, from: 0) == ByteScanTests.referenceStop(bytes, 0), "\(value) at \(lane)")
                    #expect(ByteScan.jsonStringStopOrHint(u, from: 0) == ByteScanTests.referenceStopOrHint(bytes, 0), "\(value) at \(lane)")
                    #expect(ByteScan.base64URLRunEnd(u, from: 0) == ByteScanTests.referenceBase64URLRunEnd(bytes, 0), "\(value) at \(lane)")
                    #expect(ByteScan.lineBreak(u, from: 0, end: 27) == ByteScanTests.referenceLineBreak(bytes, 0, 27), "\(value) at \(lane)")
                    #expect(ByteScan.isASCII(u, 0..<27) == (value < 0x80), "\(value) at \(lane)")
                }
                // The card-window scan's blocks: a run of digits broken by the byte under test, searched from each of
                // the six offsets a step apart.
                var run = [UInt8](repeating: UInt8(ascii: "5"), count: 27)
                run[lane] = UInt8(value)
                run.withUnsafeBufferPointer { u in
                    for from in 0..<6 {
                        let window = stride(from: from, through: 27 - 8, by: 6).first { ByteScanTests.referenceEightCardBytes(run, $0) }
                        #expect(ByteScan.nextCardWindow(u, from: from) == window, "\(value) at \(lane) from \(from)")
                    }
                }
                digits.withUnsafeBufferPointer { u in
                    #expect(ByteScan.eightDigits(u, at: 0) == ByteScanTests.referenceEightDigits(digits, 0), "\(value) at \(lane)")
                    #expect(ByteScan.eightCardBytes(u, at: 0) == ByteScanTests.referenceEightCardBytes(digits, 0), "\(value) at \(lane)")
                }
                // A card number's separators beside the byte under test, in every lane.
                for pattern in lane < 8 ? ["4000 000", "40-00 00", " 4000-00", "0 0 0 0 ", "0-0-0-0-"] : [] {
                    var card = Array(pattern.utf8)
                    card[lane] = UInt8(value)
                    card.withUnsafeBufferPointer { u in
                        #expect(ByteScan.eightCardBytes(u, at: 0) == ByteScanTests.referenceEightCardBytes(card, 0), "\(value) at \(lane) in \(pattern)")
                    }
                }
            }
        }
    }
}
