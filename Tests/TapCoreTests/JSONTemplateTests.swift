import Testing
@testable import TapCore

/// A template filled in gives the bytes the tree would, with the same strings replaced.
@Suite struct JSONTemplateTests {
    /// `json` with each string for which `open` holds replaced by `replace(value)`, as a tree.
    static func replaced(_ json: JSON, key: String?, depth: Int, open: (String?, String, Int) -> Bool, _ replace: (String) -> String) -> JSON {
        switch json {
        case let .string(s): return open(key, s, depth) ? .string(replace(s)) : json
        case let .array(items): return .array(items.map { replaced($0, key: nil, depth: depth + 1, open: open, replace) })
        case let .object(members): return .object(members.map { ($0.0, replaced($0.1, key: $0.0, depth: depth + 1, open: open, replace)) })
        default: return json
        }
    }

    @Test(arguments: [
        #"{"a":"x","b":{"c":"y","d":[1,"z",{"e":"x"}],"f":[],"g":{}},"h":null,"i":true,"j":-1.5e3,"k":"x"}"#,
        #"{"quote\"key":"va\"l\\ue\n","ctl":"\u0001","unicode":"é€😀","x":"x"}"#,
        #"["x",["x",["x"]],{"x":"x"}]"#,
        #""x""#,
        #"{}"#,
    ])
    func fillingGivesWhatTheTreeWrites(_ text: String) throws {
        let json = try JSON.parse(Array(text.utf8))
        for open in [{ (_: String?, v: String, _: Int) in v == "x" }, { (k: String?, _: String, d: Int) in k == "k" || d == 1 },
                     { (_: String?, _: String, _: Int) in true }, { (_: String?, _: String, _: Int) in false }] {
            let template = JSONTemplate(json, open: open)
            #expect(template.render { _, hole in hole.value } == json.bytes, "unchanged when filled with the original values")
            let replace = { (s: String) in "<\(s)|\"\\\n>" }
            var order: [Int] = []
            let filled = template.render { i, hole in order.append(i); return replace(hole.value) }
            #expect(filled == Self.replaced(json, key: nil, depth: 0, open: open, replace).bytes)
            #expect(order == Array(template.holes.indices))
        }
    }

    @Test func holesKnowTheirKeyAndDepth() throws {
        let json = try JSON.parse(Array(#"{"a":"1","b":{"c":"2"},"d":["3"]}"#.utf8))
        let t = JSONTemplate(json) { _, _, _ in true }
        #expect(t.holes == [.init(key: "a", value: "1", depth: 1), .init(key: "c", value: "2", depth: 2), .init(key: nil, value: "3", depth: 2)])
    }
}
