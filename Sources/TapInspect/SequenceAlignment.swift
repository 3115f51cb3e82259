/// How `3dstape diff` pairs two sequences of keys (transaction signatures, plain exchanges' method and URL): a longest
/// common subsequence, walked from the start; where the keys are equal they pair, else the walk leaves out the side
/// that keeps the most pairs ahead, A's element on a tie. That walk used to read a table of every (i, j) (8 bytes times
/// the product of the lengths: 3.2 GB for 20 000 against 20 000); this gives the same pairs in memory linear in the
/// lengths and time proportional to the rows times the number of elements left unpaired:
///
/// - the common start pairs as the walk would;
/// - the number of unpaired elements D comes from Myers' greedy O((N+M)·D) search, which fixes the band of diagonals
///   the walk can use (from D+3 wide: its own steps and the neighbours it compares);
/// - Hirschberg's divide and conquer over the band: a sweep up from the end keeps two rows of remaining-pairs counts
///   and, above the middle row, the column where the walk from each cell reaches that row; the walk from the start
///   so gives one point of the walk in the middle row, and the two halves are walked the same way (a walk between two
///   of its points is the walk of that rectangle alone). Small rectangles are walked on their full table, as before.
///
/// Past `maxSteps` (an estimate of the cells swept) it refuses with `TooDifferent` instead of running for minutes.
enum SequenceAlignment {
    enum Step: Equatable, Sendable { case both(Int, Int), onlyA(Int), onlyB(Int) }

    /// Two sequences too different to pair within the step limit.
    struct TooDifferent: Error, Sendable {
        var countA: Int
        var countB: Int
        /// Elements (of both sides) left unpaired at least.
        var unpairedAtLeast: Int
        /// The step limit it would pass.
        var limit: Int
    }

    /// Rectangles of at most this many cells are walked on their full table.
    static let smallTable = 4096

    static func pair(_ a: [String], _ b: [String], maxSteps: Int, smallTable: Int = smallTable) throws(TooDifferent) -> [Step] {
        var ids: [String: Int32] = [:]
        func id(_ s: String) -> Int32 {
            if let v = ids[s] { return v }
            let v = Int32(truncatingIfNeeded: ids.count)
            ids[s] = v
            return v
        }
        let x = a.map(id), y = b.map(id)
        return try pair(x, y, symbols: ids.count, maxSteps: maxSteps, smallTable: smallTable)
    }

    static func pair(_ x: [Int32], _ y: [Int32], symbols: Int, maxSteps: Int, smallTable: Int) throws(TooDifferent) -> [Step] {
        let n = x.count, m = y.count
        var out: [Step] = []
        out.reserveCapacity(max(n, m))
        var p = 0
        while p < n, p < m, x[p] == y[p] {
            out.append(.both(p, p))
            p += 1
        }
        let rows = n - p, columns = m - p
        if rows == 0 || columns == 0 {
            for i in p..<n { out.append(.onlyA(i)) }
            for j in p..<m { out.append(.onlyB(j)) }
            return out
        }
        // Each key's count on both sides bounds the unpaired from below, so sessions with little in common are
        // refused before any search.
        var balance = [Int](repeating: 0, count: symbols)
        for i in p..<n { balance[Int(x[i])] += 1 }
        for j in p..<m { balance[Int(y[j])] -= 1 }
        let lowerBound = balance.reduce(0) { $0 + abs($1) }
        let first = sweepSteps(rows: rows, unpaired: lowerBound)
        guard first <= maxSteps else {
            throw TooDifferent(countA: n, countB: m, unpairedAtLeast: lowerBound, limit: maxSteps)
        }
        let unpaired = try unpairedCount(x, p, n, y, p, m, rows: rows, lowerBound: lowerBound, maxSteps: maxSteps)
        var walker = Walker(x: x, y: y, smallTable: smallTable, out: out)
        walker.walk(r0: p, c0: p, r1: n, c1: m, pairs: (rows + columns - unpaired) / 2)
        return walker.out
    }

    /// The cells Hirschberg's recursion sweeps over `rows` rows with `unpaired` elements left out: the band at the top
    /// level, about as much again below it, and the two margins of each rectangle on each level.
    static func sweepSteps(rows: Int, unpaired: Int) -> Int {
        let levels = Int.bitWidth - rows.leadingZeroBitCount
        let (a, o1) = rows.multipliedReportingOverflow(by: 2 * unpaired + 3 * levels + 6)
        return o1 ? Int.max : a
    }

    /// Myers' greedy search for the number of elements of x[r0..<r1] and y[c0..<c1] left unpaired by a longest common
    /// subsequence (its O((N+M)·D) time counted against `maxSteps` with the sweep that follows).
    static func unpairedCount(_ x: [Int32], _ r0: Int, _ r1: Int, _ y: [Int32], _ c0: Int, _ c1: Int, rows: Int,
                              lowerBound: Int, maxSteps: Int) throws(TooDifferent) -> Int {
        let nA = r1 - r0, nB = c1 - c0, maxD = nA + nB
        let offset = maxD + 1
        var furthest = [Int](repeating: 0, count: 2 * maxD + 3)
        var steps = 0
        for d in 0...maxD {
            let ahead = sweepSteps(rows: rows, unpaired: max(d, lowerBound))
            if steps > maxSteps - min(ahead, maxSteps) {
                throw TooDifferent(countA: x.count, countB: y.count, unpairedAtLeast: max(d, lowerBound), limit: maxSteps)
            }
            for k in stride(from: -d, through: d, by: 2) {
                var i: Int
                if k == -d || (k != d && furthest[offset + k - 1] < furthest[offset + k + 1]) {
                    i = furthest[offset + k + 1]
                } else {
                    i = furthest[offset + k - 1] + 1
                }
                var j = i - k
                let start = i
                while i < nA, j < nB, x[r0 + i] == y[c0 + j] {
                    i += 1
                    j += 1
                }
                steps += 1 + i - start
                furthest[offset + k] = i
                if i >= nA, j >= nB { return d }
            }
        }
        return maxD
    }

    /// The walk, rectangle by rectangle, appending its steps in order.
    struct Walker {
        let x: [Int32]
        let y: [Int32]
        let smallTable: Int
        var out: [Step]

        /// Walks from (r0, c0) to (r1, c1), both points of the walk, whose rectangle holds `pairs` pairs.
        mutating func walk(r0: Int, c0: Int, r1: Int, c1: Int, pairs: Int) {
            let rows = r1 - r0, columns = c1 - c0
            if pairs == 0 { // nothing equal: every step is a tie, so A's side goes first
                for i in r0..<r1 { out.append(.onlyA(i)) }
                for j in c0..<c1 { out.append(.onlyB(j)) }
                return
            }
            if rows <= 1 || columns <= 1 || rows * columns <= smallTable {
                walkTable(r0: r0, c0: c0, r1: r1, c1: c1)
                return
            }
            let (mid, column, pairsBelow) = crossing(r0: r0, c0: c0, r1: r1, c1: c1, pairs: pairs)
            walk(r0: r0, c0: c0, r1: mid, c1: column, pairs: pairs - pairsBelow)
            walk(r0: mid, c0: column, r1: r1, c1: c1, pairs: pairsBelow)
        }

        /// The old walk on the rectangle's full table of remaining pairs.
        mutating func walkTable(r0: Int, c0: Int, r1: Int, c1: Int) {
            let rows = r1 - r0, columns = c1 - c0, width = columns + 1
            var table = [Int32](repeating: 0, count: (rows + 1) * width)
            for i in stride(from: rows - 1, through: 0, by: -1) {
                for j in stride(from: columns - 1, through: 0, by: -1) {
                    table[i * width + j] = x[r0 + i] == y[c0 + j] ? table[(i + 1) * width + j + 1] + 1
                        : max(table[(i + 1) * width + j], table[i * width + j + 1])
                }
            }
            var i = 0, j = 0
            while i < rows || j < columns {
                if i < rows, j < columns, x[r0 + i] == y[c0 + j] {
                    out.append(.both(r0 + i, c0 + j))
                    i += 1
                    j += 1
                } else if j >= columns || (i < rows && table[(i + 1) * width + j] >= table[i * width + j + 1]) {
                    out.append(.onlyA(r0 + i))
                    i += 1
                } else {
                    out.append(.onlyB(c0 + j))
                    j += 1
                }
            }
        }

        /// Where the walk from (r0, c0) first reaches the middle row, and the pairs left from there: one sweep up
        /// from (r1, c1) over the band of diagonals the walk and the cells it compares lie on.
        func crossing(r0: Int, c0: Int, r1: Int, c1: Int, pairs: Int) -> (row: Int, column: Int, pairsBelow: Int) {
            let rows = r1 - r0, columns = c1 - c0
            // Diagonal k = (j - c0) - (i - r0); the walk keeps to [-(rows - pairs), columns - pairs], and compares the
            // cells one diagonal either side of it.
            let low = -(rows - pairs) - 1, high = columns - pairs + 1, width = high - low + 1
            let mid = r0 + rows / 2
            // Remaining pairs of row i + 1 and row i; in the top half, the column where the walk from a cell reaches row mid.
            var below = [Int32](repeating: 0, count: width), row = [Int32](repeating: 0, count: width)
            var reachBelow = [Int32](repeating: -1, count: width), reach = [Int32](repeating: -1, count: width)
            var middle: [Int32] = []
            for i in stride(from: r1 - 1, through: r0, by: -1) {
                let top = i < mid
                if i == mid - 1 {
                    middle = below // row mid's counts
                    for t in 0..<width {
                        let j = c0 + (mid - r0) + low + t
                        reachBelow[t] = j >= c0 && j <= c1 ? Int32(j) : -1
                    }
                }
                // The columns of row i inside the rectangle, as positions in the band.
                let shift = c0 + (i - r0) + low // column of position 0
                let first = max(0, c0 - shift), last = min(width - 1, c1 - shift) // never empty: the band holds diagonal 0 … pairs
                let xi = x[i]
                below.withUnsafeBufferPointer { b in
                    row.withUnsafeMutableBufferPointer { r in
                        reachBelow.withUnsafeBufferPointer { eb in
                            reach.withUnsafeMutableBufferPointer { e in
                                y.withUnsafeBufferPointer { yb in
                                    var t = last
                                    if t >= first, shift + t == c1 { // the right edge: nothing left in B, the walk goes down
                                        r[t] = 0
                                        if top { e[t] = t > 0 ? eb[t - 1] : -1 }
                                        t -= 1
                                    }
                                    while t >= first {
                                        if xi == yb[shift + t] {
                                            r[t] = b[t] + 1
                                            if top { e[t] = eb[t] }
                                        } else {
                                            let down = t > 0 ? b[t - 1] : 0, right = t + 1 < width ? r[t + 1] : 0
                                            if down >= right {
                                                r[t] = down
                                                if top { e[t] = t > 0 ? eb[t - 1] : -1 }
                                            } else {
                                                r[t] = right
                                                if top { e[t] = e[t + 1] }
                                            }
                                        }
                                        t -= 1
                                    }
                                }
                            }
                        }
                    }
                }
                swap(&below, &row)
                if top { swap(&reachBelow, &reach) }
            }
            // `below` is row r0 now; (r0, c0) is diagonal 0.
            assert(Int(below[-low]) == pairs, "the band holds the walk")
            let column = Int(reachBelow[-low])
            return (mid, column, Int(middle[(column - c0) - (mid - r0) - low]))
        }
    }
}
