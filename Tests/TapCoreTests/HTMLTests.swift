import Testing
import TapCore

/// Issue 23 item 7: live values put into a page are escaped for where they land, by one helper.
@Suite struct HTMLEscapeTests {
    static let hostile = "n\"><script>alert(document.domain)</script>'&"

    @Test func textAndAttributesLeaveNoMarkup() {
        let a = HTMLEscape.attribute(Self.hostile)
        #expect(a == "n&quot;&gt;&lt;script&gt;alert(document.domain)&lt;/script&gt;&#39;&amp;")
        #expect(HTMLEscape.text(Self.hostile) == a)
        #expect(!a.contains("<") && !a.contains(">") && !a.contains("\"") && !a.contains("'"))
        #expect(HTMLEscape.attribute("a\u{0}b\u{1B}c\td") == "a\u{FFFD}b\u{FFFD}c\td", "controls HTML forbids are replaced")
        #expect(HTMLEscape.attribute("plain-value_1") == "plain-value_1")
    }

    @Test func unescapeUndoesEveryEscape() {
        for s in [Self.hostile, "sess\"><i>x", "a&b=c;d", "é ü \u{2028}", "&amp; as text"] {
            #expect(HTMLEscape.unescape(HTMLEscape.attribute(s)) == s, "\(s)")
        }
        #expect(HTMLEscape.unescape("&#x27;&#39;&apos;&unknown;&") == "'''&unknown;&")
    }

    @Test func unquotedValuesCannotEndTheValueOrTheTag() {
        let u = HTMLEscape.unquotedAttribute("a b\"c'd>e`f=g/h")
        #expect(!u.contains(" ") && !u.contains("\"") && !u.contains("'") && !u.contains(">") && !u.contains("`"))
        #expect(HTMLEscape.unescape(u) == "a b\"c'd>e`f=g/h")
    }

    @Test func onlyHTTPAndRelativeURLsArePostedTo() {
        for safe in ["http://merchant.example/notify?a=1&b=2", "HTTPS://x", "/relative/path", "page.html", "?q=1", "#top", "//host/p"] {
            #expect(HTMLEscape.isSafeURL(safe), "\(safe)")
        }
        for unsafe in ["javascript:alert(1)", " JaVaScRiPt:alert(1)", "java\tscript:alert(1)", "\u{1}javascript:x", "data:text/html,<p>",
                       "vbscript:x", "file:///etc/passwd"] {
            #expect(!HTMLEscape.isSafeURL(unsafe), "\(unsafe)")
            #expect(HTMLEscape.url(unsafe) == "about:blank")
        }
        #expect(HTMLEscape.url("http://m.example/n\"><script>") == "http://m.example/n&quot;&gt;&lt;script&gt;")
    }

    @Test func scriptStringsCannotEndTheStringOrTheElement() {
        let s = HTMLEscape.script("</script><b>\"'`\\\n\u{2028}")
        #expect(s == "\\u003C/script\\u003E\\u003Cb\\u003E\\u0022\\u0027\\u0060\\u005C\\u000A\\u2028")
    }
}

@Suite struct HTMLSubstitutionTests {
    let pairs: [(recorded: String, live: String)] = [
        ("http://127.0.0.1:46279/3ds/notify", "http://m.example/n\"><script>alert(1)</script>"),
        ("SESSION-RECORDED", "sess\"><i>x"),
        ("https://acs.example", "javascript:alert(2)//"),
    ]

    @Test func eachContextGetsItsOwnEscape() {
        let page = """
        <!DOCTYPE html><html><head><title>SESSION-RECORDED</title><script>var s = "SESSION-RECORDED";</script></head>
        <body onload="document.forms[0].submit()"><!-- SESSION-RECORDED -->
        <form method="post" action="http://127.0.0.1:46279/3ds/notify"><input type="hidden" name="threeDSSessionData" value="SESSION-RECORDED">
        <input name=x value=SESSION-RECORDED><a href='https://acs.example/challenge'>SESSION-RECORDED</a>
        <a href="/help?from=https://acs.example">more</a></form></body></html>
        """
        let out = HTMLSubstitution.replacing(pairs, in: page)
        #expect(out.contains(#"<title>sess&quot;&gt;&lt;i&gt;x</title>"#))
        #expect(out.contains(#"var s = "sess\u0022\u003E\u003Ci\u003Ex";"#), "a string in a script: \(out)")
        #expect(out.contains("<!-- sess&quot;&gt;&lt;i&gt;x -->"))
        #expect(out.contains(#"action="http://m.example/n&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;""#))
        #expect(out.contains(#"value="sess&quot;&gt;&lt;i&gt;x""#))
        #expect(out.contains("value=sess&#x22;&#x3E;&#x3C;i&#x3E;x>"), "an unquoted value: \(out)")
        #expect(out.contains("href='about:blank/challenge'"), "a javascript: URL that begins an href is not used: \(out)")
        #expect(out.contains(#"href="/help?from=javascript:alert(2)//""#), "in the middle of a URL it is only text")
        #expect(!out.contains("<script>alert") && !out.contains("<i>"))
    }

    @Test func recordedTextEscapedInThePageIsFoundAndReplacedOnce() {
        let page = #"<a href="http://m.example/r?a=1&amp;b=2">x</a> A then B"#
        let out = HTMLSubstitution.replacing([("http://m.example/r?a=1&b=2", "http://live.example/?c=3&d=4"), ("A", "B"), ("B", "C")], in: page)
        #expect(out == #"<a href="http://live.example/?c=3&amp;d=4">x</a> B then C"#, "escaped recorded text matched; B from A is not turned into C")
    }

    @Test func aPageWithNothingToReplaceIsReturnedAsItIs() {
        let page = "<p>nothing <b>here</b> & there</p>"
        #expect(HTMLSubstitution.replacing(pairs, in: page) == page)
        #expect(HTMLSubstitution.replacing([], in: page) == page)
    }
}
