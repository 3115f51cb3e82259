import Testing
import TapCore

/// `application/x-www-form-urlencoded` bodies (`FormBody`, from TapEMV's Decoder.swift) and the HTML forms of the
/// browser flow (`HTMLForm`, from the sandbox), now in TapCore beside `HTMLEscape`: what one writes, the other reads back.
@Suite struct FormTests {
    static let values: [(String, String)] = [
        ("creq", "eyJhIjoiYiJ9"), ("threeDSSessionData", "a b&c=d+e%f/é"), ("answer", ""), ("x-y.z_0", "\"><script>"),
    ]

    @Test func encodedFieldsParseBack() throws {
        let body = FormBody.encode(Self.values)
        let text = String(decoding: body, as: UTF8.self)
        #expect(text == "creq=eyJhIjoiYiJ9&threeDSSessionData=a%20b%26c%3Dd%2Be%25f%2F%C3%A9&answer=&x-y.z_0=%22%3E%3Cscript%3E")
        let parsed = try #require(FormBody.parse(text))
        #expect(parsed.map(\.0) == Self.values.map(\.0) && parsed.map(\.1) == Self.values.map(\.1))
        #expect(FormBody.parse("a=b+c%20d") .map { $0.map(\.1) } == ["b c d"])
    }

    @Test func whatIsNotAFormIsRefused() {
        for text in ["", "{\"a\":1}", "a", "=b", "a b=c", "a=%4", "a=%zz", "a=%C3"] {
            #expect(FormBody.parse(text) == nil, "\(text)")
        }
    }

    /// The ACS's final page (an auto-posting form) read as the SDK-like clients read it: the action and every field,
    /// hostile values included, come back as they were put in; an action that is not http(s) is never posted to.
    @Test func anAutoPostingFormReadsBack() throws {
        let page = HTMLForm.autoPost(action: "https://merchant.example/notify?a=1&b=\"2\"", fields: Self.values, title: "<Back>")
        #expect(!page.contains("<script>") && page.contains("<title>&lt;Back&gt;</title>"))
        #expect(HTMLForm.action(in: page) == "https://merchant.example/notify?a=1&b=\"2\"")
        let inputs = HTMLForm.inputs(in: page)
        #expect(inputs.map(\.0) == Self.values.map(\.0) && inputs.map(\.1) == Self.values.map(\.1))
        #expect(HTMLForm.action(in: HTMLForm.autoPost(action: "javascript:alert(1)", fields: [], title: "t")) == "about:blank")
        #expect(HTMLForm.action(in: "<p>no form</p>") == nil && HTMLForm.inputs(in: "<p>no form</p>").isEmpty)
    }
}
