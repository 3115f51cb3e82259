import Foundation
import Testing
@testable import TapInspect

@Suite struct SequenceAlignmentTests {
    typealias Step = SequenceAlignment.Step

    /// The pairing `diff` did before: the whole table of remaining pairs, walked from the start (kept here as the reference).
    static func reference(_ a: [String], _ b: [String]) -> [Step] {
        let n = a.count, m = b.count
        var table = [[Int]](repeating: [Int](repeating: 0, count: m + 1), count: n + 1)
        for i in stride(from: n - 1, through: 0, by: -1) {
            for j in stride(from: m - 1, through: 0, by: -1) {
                table[i][j] = a[i] == b[j] ? table[i + 1][j + 1] + 1 : max(table[i + 1][j], table[i][j + 1])
            }
        }
        var out: [Step] = []
        var i = 0, j = 0
        while i < n || j < m {
            if i < n, j < m, a[i] == b[j] { out.append(.both(i, j)); i += 1; j += 1 }
            else if j >= m || (i < n && table[i + 1][j] >= table[i][j + 1]) { out.append(.onlyA(i)); i += 1 }
            else { out.append(.onlyB(j)); j += 1 }
        }
        return out
    }

    /// A small deterministic generator, so that a failure names a seed that reproduces it.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// Random pairs over alphabets of one to five keys (long runs of one key are where tie-breaking shows), B often
    /// an edit of A; the band and the divide-and-conquer are forced down to rectangles of a few cells.
    @Test(arguments: [0, 4, 64, 4096])
    func theSamePairsAsTheFullTable(smallTable: Int) throws {
        var rng = SplitMix(state: UInt64(smallTable) + 1)
        for round in 0..<400 {
            let alphabet = Int.random(in: 1...5, using: &rng)
            let n = Int.random(in: 0...90, using: &rng)
            let a = (0..<n).map { _ in "k\(Int.random(in: 0..<alphabet, using: &rng))" }
            var b: [String]
            if Bool.random(using: &rng) {
                b = a
                for _ in 0..<Int.random(in: 0...12, using: &rng) {
                    switch Int.random(in: 0..<3, using: &rng) {
                    case 0 where !b.isEmpty: b.remove(at: Int.random(in: 0..<b.count, using: &rng))
                    case 1: b.insert("k\(Int.random(in: 0..<alphabet + 1, using: &rng))", at: Int.random(in: 0...b.count, using: &rng))
                    default: if !b.isEmpty { b[Int.random(in: 0..<b.count, using: &rng)] = "k\(Int.random(in: 0..<alphabet, using: &rng))" }
                    }
                }
            } else {
                b = (0..<Int.random(in: 0...90, using: &rng)).map { _ in "k\(Int.random(in: 0..<alphabet, using: &rng))" }
            }
            let got = try SequenceAlignment.pair(a, b, maxSteps: .max, smallTable: smallTable)
            #expect(got == Self.reference(a, b), "round \(round): \(a) | \(b)")
        }
    }

    @Test func tiesGoToAFirstAsBefore() throws {
        // A run of equal keys: the pairs are made from the start, the element left over is the last of the run.
        #expect(try SequenceAlignment.pair(["y", "y"], ["y"], maxSteps: .max, smallTable: 0) == [.both(0, 0), .onlyA(1)])
        #expect(try SequenceAlignment.pair(["x", "y"], ["y", "x"], maxSteps: .max, smallTable: 0) == [.onlyA(0), .both(1, 0), .onlyB(1)])
        #expect(try SequenceAlignment.pair([], ["a"], maxSteps: .max) == [.onlyB(0)])
        #expect(try SequenceAlignment.pair(["a"], [], maxSteps: .max) == [.onlyA(0)])
    }

    /// 20 000 against 20 000, each side a transaction short of the other at the start and every 500th dropped: the old table
    /// would hold 400 million cells (3.2 GB); the band holds about a hundred per row.
    @Test func twentyThousandAgainstTwentyThousandInLinearMemory() throws {
        let a = (0..<20_000).map { i in i % 3 == 0 ? "03|01|2.2.0|AReq" : (i % 7 == 0 ? "01|01|2.1.0|AReq" : "01|01|2.2.0|AReq") }
        var b = a.enumerated().filter { $0.offset % 500 != 250 }.map(\.element)
        b[0] = "02|01|2.2.0|AReq"
        let started = Date()
        let pairs = try SequenceAlignment.pair(a, b, maxSteps: SessionDiff.defaultMaxPairingSteps)
        #expect(Date().timeIntervalSince(started) < 10)
        #expect(pairs.filter { if case .both = $0 { return true } else { return false } }.count == 20_000 - 40 - 1)
        #expect(pairs.count == 20_000 + 1)
    }

    @Test func sequencesTooDifferentAreRefusedBeforeAnySearch() {
        let a = [String](repeating: "01|01|2.2.0|AReq", count: 30_000), b = [String](repeating: "02|01|2.2.0|AReq", count: 30_000)
        let started = Date()
        #expect(throws: SequenceAlignment.TooDifferent.self) { try SequenceAlignment.pair(a, b, maxSteps: 1_000_000) }
        do { _ = try SequenceAlignment.pair(a, b, maxSteps: 1_000_000) } catch {
            #expect(error.unpairedAtLeast == 60_000 && error.limit == 1_000_000)
        }
        #expect(Date().timeIntervalSince(started) < 2)
    }

    @Test func aShuffleIsRefusedOnceTheSearchPassesTheLimit() {
        // The same keys in another order: no count tells them apart, Myers' search stops at the limit.
        var rng = SplitMix(state: 7)
        let a = (0..<20_000).map { "k\($0 % 4)" }
        let b = a.shuffled(using: &rng)
        #expect(throws: SequenceAlignment.TooDifferent.self) { try SequenceAlignment.pair(a, b, maxSteps: 50_000_000) }
    }
}
