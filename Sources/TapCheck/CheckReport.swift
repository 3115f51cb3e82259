import Foundation
import TapCore
import TapReplay

/// The verdicts of one `3dstape check` run, written as a table's rows, JSON, a JUnit XML file and an HTML page.
public struct CheckReport: Sendable {
    public var session: String
    public var command: [String]
    public var verdicts: [ScenarioVerdict]
    /// When the run started (Unix time), for JUnit's timestamp.
    public var started: Double
    /// The signal that stopped the run early, if one did.
    public var interruptedBy: String?

    public init(session: String, command: [String], verdicts: [ScenarioVerdict], started: Double, interruptedBy: String? = nil) {
        self.session = session
        self.command = command
        self.verdicts = verdicts
        self.started = started
        self.interruptedBy = interruptedBy
    }

    public var failed: Int { verdicts.filter { $0.outcome == .fail }.count }
    public var skipped: Int { verdicts.filter { $0.outcome == .skip }.count }
    public var passed: Int { verdicts.filter { $0.outcome == .pass }.count }
    public var seconds: Double { verdicts.map(\.seconds).reduce(0, +) }

    /// What was observed against each clause, in one cell (`Erro 302 sent; no CReq after the Erro`).
    static func observedText(_ v: ScenarioVerdict) -> String {
        if v.outcome == .skip { return v.reason ?? "" }
        var parts = v.reason.map { [$0] } ?? []
        parts += v.clauses.map { ($0.passed ? "" : "✗ ") + $0.observed }
        if v.runs > 1 { parts.append("\(v.runsPassed) of \(v.runs) runs passed") }
        return parts.joined(separator: "; ")
    }

    /// The rows of the terminal table (the caller escapes and renders them).
    public var rows: [[String]] {
        [["SCENARIO", "VERDICT", "EXPECTED", "OBSERVED", "TIME"]] + verdicts.map { v in
            [v.scenario, v.outcome.rawValue, v.outcome == .skip ? "-" : v.expected.map(\.brief).joined(separator: "; "),
             CheckReport.observedText(v), v.outcome == .skip ? "-" : String(format: "%.1fs", v.seconds)]
        }
    }

    /// `{"session", "command", "passed", "failed", "skipped", "scenarios": [{"name", "verdict", "expected", "observed", "reason", …}]}`.
    public var json: JSON {
        .object([
            ("session", .string(session)), ("command", .array(command.map(JSON.string))),
            ("interrupted", interruptedBy.map(JSON.string) ?? .null),
            ("passed", .number(String(passed))), ("failed", .number(String(failed))), ("skipped", .number(String(skipped))),
            ("scenarios", .array(verdicts.map { v in
                .object([
                    ("name", .string(v.scenario)), ("verdict", .string(v.outcome.rawValue)),
                    ("expected", .array(v.expected.map(\.json))),
                    ("clauses", .array(v.clauses.map { c in
                        .object([("clause", .string(c.clause.description)), ("passed", .bool(c.passed)), ("observed", .string(c.observed))])
                    })),
                    ("observed", v.observation?.json ?? .null),
                    ("reason", v.reason.map(JSON.string) ?? .null),
                    ("seconds", .number(String(format: "%.3f", v.seconds))),
                    ("runs", .number(String(v.runs))), ("runsPassed", .number(String(v.runsPassed))),
                    ("sessions", .array(v.sessions.map(JSON.string))), ("logs", .array(v.logs.map(JSON.string))),
                ])
            })),
        ])
    }

    /// JUnit XML: one `<testcase>` per scenario in a `<testsuite name="3dstape check">`, `<failure>` with the expected
    /// and observed clauses, `<skipped>` with the reason; the shape Jenkins, GitLab and GitHub's JUnit readers take.
    public var junit: String {
        func x(_ s: String) -> String { MarkupText.escaped(s) }
        let stamp = CheckReport.isoTime(started)
        var out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        out += "<testsuites name=\"3dstape check\" tests=\"\(verdicts.count)\" failures=\"\(failed)\" errors=\"0\" skipped=\"\(skipped)\" "
            + "time=\(CheckReport.attribute(seconds))>\n"
        out += "  <testsuite name=\"3dstape check\" tests=\"\(verdicts.count)\" failures=\"\(failed)\" errors=\"0\" skipped=\"\(skipped)\" "
            + "time=\(CheckReport.attribute(seconds)) timestamp=\"\(stamp)\">\n"
        out += "    <properties><property name=\"session\" value=\"\(x(session))\"/>"
            + "<property name=\"command\" value=\"\(x(command.joined(separator: " ")))\"/></properties>\n"
        let suite = "3dstape.check." + (session.split(separator: "/").last.map(String.init) ?? session)
        for v in verdicts {
            out += "    <testcase classname=\"\(x(suite))\" name=\"\(x(v.scenario))\" time=\(CheckReport.attribute(v.seconds))"
            switch v.outcome {
            case .pass:
                out += "/>\n"
            case .skip:
                out += ">\n      <skipped message=\"\(x(v.reason ?? "not applicable"))\"/>\n    </testcase>\n"
            case .fail:
                let message = v.failureLines.first ?? "failed"
                var body = "expected:\n" + v.expected.map { "  \($0.description)" }.joined(separator: "\n")
                body += "\nobserved:" + (v.reason.map { "\n  \($0)" } ?? "")
                body += v.clauses.map { "\n  \($0.passed ? "ok  " : "FAIL") \($0.observed)" }.joined()
                if !v.sessions.isEmpty { body += "\nreplay sessions: " + v.sessions.joined(separator: ", ") }
                out += ">\n      <failure message=\"\(x(message))\" type=\"expectation\">\(x(body))</failure>\n    </testcase>\n"
            }
        }
        out += "  </testsuite>\n</testsuites>\n"
        return out
    }

    /// A self-contained page: the verdicts, with links to each replay session and command log in the same directory.
    public func html(linkingFrom directory: String) -> String {
        func x(_ s: String) -> String { MarkupText.escaped(s) }
        func link(_ path: String) -> String {
            let name = path.split(separator: "/").last.map(String.init) ?? path
            return "<a href=\"\(x(name))\">\(x(name))</a>"
        }
        let colour: [ScenarioVerdict.Outcome: String] = [.pass: "#2a9d43", .fail: "#d1342f", .skip: "#888888"]
        var rows = ""
        for v in verdicts {
            rows += "<tr><td>\(x(v.scenario))</td><td style=\"color:\(colour[v.outcome]!);font-weight:bold\">\(v.outcome.rawValue)</td>"
                + "<td>\(v.expected.map { x($0.description) }.joined(separator: "<br>"))</td>"
                + "<td>\(x(CheckReport.observedText(v)).replacingOccurrences(of: "; ", with: "<br>"))</td>"
                + "<td>\(v.outcome == .skip ? "-" : String(format: "%.1f s", v.seconds))</td>"
                + "<td>\((v.sessions.map(link) + v.logs.map(link)).joined(separator: "<br>"))</td></tr>\n"
        }
        return """
        <!DOCTYPE html><html><head><meta charset="utf-8"><title>3dstape check: \(x(session))</title>
        <style>body{font-family:sans-serif;margin:2em}td,th{padding:4px 10px;text-align:left;vertical-align:top}tr:nth-child(even){background:#f4f4f4}</style>
        </head><body><h1>3dstape check</h1><p>session <code>\(x(session))</code>; command <code>\(x(command.joined(separator: " ")))</code></p>
        <p>\(passed) passed, \(failed) failed, \(skipped) skipped\(interruptedBy.map { "; interrupted by \(x($0))" } ?? "")</p>
        <table><tr><th>scenario</th><th>verdict</th><th>expected</th><th>observed</th><th>time</th><th>files</th></tr>
        \(rows)</table></body></html>
        """
    }

    /// A number of seconds as a quoted XML attribute value.
    static func attribute(_ seconds: Double) -> String { "\"" + String(format: "%.3f", seconds.isFinite ? max(0, seconds) : 0) + "\"" }

    /// ISO 8601 without a zone suffix, as JUnit's schema has it.
    static func isoTime(_ unix: Double) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "yyyy-MM-dd'T'HH:mm:ss"
        return f.string(from: Date(timeIntervalSince1970: Checked.storedTime(unix)))
    }
}
