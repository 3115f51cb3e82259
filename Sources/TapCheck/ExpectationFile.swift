import TapCore
import TapReplay

/// A team's own expectations (`check --expect FILE`): per scenario name, or `*` for every scenario, a list of clauses
/// that replace the default clauses of the same kind or add to them; `{"clause": "…", "drop": true}` removes a kind.
/// `exit-status` and `reports-failure` say the same thing and replace each other.
public struct ExpectationFile: Sendable {
    /// The changes, in the file's order: scenario name (or `*`), clauses to set, kinds to drop.
    var changes: [(scenario: String, set: [ExpectationClause], drop: [String])] = []

    public init() {}

    /// Reads the file; every mistake is one line (`FILE: challenge-timeout: clause 2: gives-up needs "within" …`).
    public static func parse(_ bytes: [UInt8], name: String, scenarios: [String]) -> Result<ExpectationFile, ExpectationFileError> {
        let json: JSON
        do { json = try JSON.parse(bytes) } catch { return .failure(ExpectationFileError(lines: ["\(name): \(error)"])) }
        guard case let .object(members) = json else {
            return .failure(ExpectationFileError(lines: ["\(name): expected an object of scenario names to lists of clauses, e.g. "
                + "{\"challenge-timeout\": [{\"clause\": \"gives-up\", \"within\": \"35s\"}]}"]))
        }
        var file = ExpectationFile()
        var lines: [String] = []
        for (scenario, value) in members {
            let where_ = "\(name): \(TerminalText.escaped(scenario))"
            if scenario != "*", !scenarios.contains(scenario) {
                lines.append("\(where_): no such scenario ('3dstape scenarios' lists them; * means every scenario)")
                continue
            }
            guard case let .array(items) = value else { lines.append("\(where_): expected a list of clauses"); continue }
            var set: [ExpectationClause] = [], drop: [String] = []
            for (n, item) in items.enumerated() {
                if case .bool(true)? = item["drop"] {
                    guard let kind = item["clause"]?.stringValue, ExpectationClause.kinds.contains(kind) || kind.hasPrefix("result:") else {
                        lines.append("\(where_): clause \(n + 1): drop needs \"clause\": one of \(ExpectationClause.kinds.joined(separator: ", "))")
                        continue
                    }
                    // A result clause is dropped by its field when one is given (`result:sdk.error`), all of them otherwise.
                    drop.append(kind == "result" ? (item["field"]?.stringValue.map { "result:" + $0 } ?? kind) : kind)
                    continue
                }
                do { set.append(try ExpectationClause.read(item)) } catch { lines.append("\(where_): clause \(n + 1): \(error)") }
            }
            file.changes.append((scenario, set, drop))
        }
        return lines.isEmpty ? .success(file) : .failure(ExpectationFileError(lines: lines))
    }

    /// The expectation for `scenario`: its defaults with the file's `*` changes, then its own.
    public func expectation(for scenario: String, defaults: [ExpectationClause]) -> [ExpectationClause] {
        var clauses = defaults
        // `*` first, then the scenario's own, whatever their order in the file.
        for change in changes.filter({ $0.scenario == "*" }) + changes.filter({ $0.scenario == scenario }) {
            for kind in change.drop {
                clauses.removeAll { ExpectationFile.group($0.kind) == ExpectationFile.group(kind) || (kind == "result" && $0.kind.hasPrefix("result:")) }
                // (a `result:FIELD` drop matches only the clause of that field, by the kind above)
            }
            for c in change.set {
                if let i = clauses.firstIndex(where: { ExpectationFile.group($0.kind) == ExpectationFile.group(c.kind) }) {
                    clauses[i] = c
                } else {
                    clauses.append(c)
                }
            }
        }
        return clauses
    }

    /// Kinds that replace each other.
    static func group(_ kind: String) -> String { kind == "reports-failure" ? "exit-status" : kind }
}

/// The mistakes in an `--expect` file, one line each.
public struct ExpectationFileError: Error, CustomStringConvertible {
    public let lines: [String]
    public var description: String { lines.joined(separator: "\n") }
}
