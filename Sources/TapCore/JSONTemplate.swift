/// A JSON value serialised once, compact as `JSON.bytes` writes it, with some of its string values left open.
/// Filling the open values gives exactly the bytes `bytes` would write for the value with those strings replaced,
/// without building, walking or freeing a tree: for answers served again and again with a few values changed
/// (the replayer's ARes, whose IDs and URLs are the live transaction's).
public struct JSONTemplate: Sendable {
    /// A string value left open: the member's key (nil for an array element), the value as it is in the original,
    /// and its depth (1 for a member of the top-level object).
    public struct Hole: Sendable, Equatable {
        public let key: String?
        public let value: String
        public let depth: Int
    }

    /// The open values, in document order.
    public let holes: [Hole]
    /// The bytes around the holes: `literals[i]` precedes `holes[i]`; the last follows the last hole.
    let literals: [[UInt8]]
    let size: Int

    /// Serialises `json`, leaving open each string value for which `open(key, value, depth)` is true.
    public init(_ json: JSON, open: (_ key: String?, _ value: String, _ depth: Int) -> Bool) {
        var builder = Builder()
        builder.emit(json, key: nil, depth: 0, open: open)
        literals = builder.literals + [builder.current]
        holes = builder.holes
        size = literals.reduce(0) { $0 + $1.count } + holes.reduce(0) { $0 + $1.value.utf8.count + 2 }
    }

    /// The bytes with each hole's string from `fill(index, hole)`, called once per hole in document order
    /// (quoted and escaped here).
    public func render(_ fill: (Int, Hole) -> String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(size + 64)
        for (i, hole) in holes.enumerated() {
            out.append(contentsOf: literals[i])
            JSON.writeString(fill(i, hole), into: &out)
        }
        out.append(contentsOf: literals[holes.count])
        return out
    }

    /// Writes as `JSON.write` does (compact), cutting the output at each open string.
    struct Builder {
        var literals: [[UInt8]] = []
        var holes: [Hole] = []
        var current: [UInt8] = []

        mutating func emit(_ json: JSON, key: String?, depth: Int, open: (String?, String, Int) -> Bool) {
            switch json {
            case let .string(s) where open(key, s, depth):
                literals.append(current)
                current = []
                holes.append(Hole(key: key, value: s, depth: depth))
            case let .array(items) where !items.isEmpty:
                current.append(0x5B)
                for (n, item) in items.enumerated() {
                    if n > 0 { current.append(0x2C) }
                    emit(item, key: nil, depth: depth + 1, open: open)
                }
                current.append(0x5D)
            case let .object(members) where !members.isEmpty:
                current.append(0x7B)
                for (n, (k, value)) in members.enumerated() {
                    if n > 0 { current.append(0x2C) }
                    JSON.writeString(k, into: &current)
                    current.append(0x3A)
                    emit(value, key: k, depth: depth + 1, open: open)
                }
                current.append(0x7D)
            default:
                json.write(into: &current, pretty: false, level: 0)
            }
        }
    }
}
