import Foundation
import TapArguments
import TapCore
import TapEMV
import TapInspect
import TapRecording
import TapStore

/// `3dstape validate`: every 3DS message of a session checked against its version's rules.
struct ValidateCommand: Command {
    let spec = CommandSpec(name: "validate",
                           abstract: "Check every 3DS message of a session against its version's rules (2.1.0, 2.2.0, 2.3.1); exit 1 on errors",
                           usage: "SESSION [--json] [--rules]", maxPositionals: 1, options: [json.spec, rules.spec])
    static let json = Flag("json", help: "print the findings as a JSON array (with --rules: the rules as one JSON object)")
    static let rules = Flag("rules", help: "list the rules instead (element rules by message, then the rules across a transaction)")

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        if args.has(Self.rules) {
            guard args.positionals.isEmpty else { throw InvalidArguments("--rules lists the rules and reads no session: give one or the other") }
            printRules(io, json: args.has(Self.json))
            return 0
        }
        guard let path = args.positionals.first else { throw InvalidArguments("give a session file (see '3dstape ls')") }
        let reader = try SessionReader(path: path)
        let exchanges = try reader.exchanges()
        let transactions = ThreeDSTransaction.group(exchanges)
        let findings = Validator.validate(transactions: transactions)
        let errors = findings.filter { $0.severity == .error }.count
        if args.has(Self.json) {
            io.json(JSON.array(findings.map(\.json)))
        } else {
            let messages = transactions.reduce(0) { $0 + $1.messages.count }
            let encrypted = transactions.reduce(0) { $0 + $1.messages.filter(\.isEncrypted).count }
            if !findings.isEmpty {
                io.out(Table.render([["EXCHANGE", "MESSAGE", "ELEMENT", "SEVERITY", "RULE", "DETAIL"]] + findings.map {
                    [String($0.exchangeID), $0.message, $0.pointer.isEmpty ? "-" : $0.pointer, $0.severity.rawValue, $0.rule, ThreeDSContent.printable($0.detail)]
                }))
            }
            io.out("\(TerminalText.escaped(path)): \(counted(messages, "message")) in \(counted(transactions.count, "transaction")) checked"
                   + (encrypted > 0 ? " (\(encrypted) still encrypted, not checked: 'decrypt' with a key log opens them)" : "")
                   + "; \(counted(errors, "error")), \(counted(findings.count - errors, "warning"))")
        }
        return errors > 0 ? 1 : 0
    }

    /// The rules: a table (a format over 60 characters cut with '…'), or with `--json` one object holding `elements` (id,
    /// message, element, required, format, since), `messageRules` and `findingNames` (id, summary).
    func printRules(_ io: Terminal, json: Bool) {
        let elements = ValidationRules.elements.map { r -> (rule: ElementRule, required: String) in
            switch r.presence {
            case .required: return (r, "yes")
            case .optional: return (r, "no")
            case let .when(c): return (r, "when \(c)")
            }
        }
        let messageRules = Validator.transactionRules.map { ($0.id, $0.summary) } + Validator.messageRules.map { ($0.id, $0.summary) }
        // How a finding names the element rule it broke (`AReq.messageCategory.required`).
        let findingNames = [
            ("<rule>.required", "the element is missing where the rule requires it"),
            ("<rule>.format", "the value does not have the rule's format (for a masked value: the verdict masking stored with it)"),
            ("<rule>.version", "the element is not defined before the rule's SINCE version, a warning"),
            ("<rule>.rfc4122", "a UUID of a version or variant outside RFC 4122 (a placeholder?), a warning"),
        ]
        if json {
            io.json(.object([
                ("elements", .array(elements.map { e in
                    .object([("id", .string(e.rule.id)), ("message", .string(e.rule.message.rawValue)), ("element", .string(e.rule.element)),
                             ("required", .string(e.required)), ("format", .string(e.rule.format.listing)),
                             ("since", .string((e.rule.since ?? .v2_1).wire))])
                })),
                ("messageRules", .array(messageRules.map { .object([("id", .string($0.0)), ("summary", .string($0.1))]) })),
                ("findingNames", .array(findingNames.map { .object([("id", .string($0.0)), ("summary", .string($0.1))]) })),
            ]))
            return
        }
        let cut = { (s: String) in s.count > 60 ? String(s.prefix(59)) + "…" : s }
        io.out(Table.render([["RULE", "REQUIRED", "FORMAT", "SINCE"]]
                            + elements.map { [$0.rule.id, $0.required, cut($0.rule.format.listing), ($0.rule.since ?? .v2_1).wire] }))
        io.out("")
        for (id, summary) in messageRules { io.out("\(id): \(summary)") }
        io.out("")
        io.out("a finding names an element rule it broke so:")
        for (id, summary) in findingNames { io.out("  \(id): \(summary)") }
        io.out("\(counted(elements.count, "element rule")), \(counted(messageRules.count, "message and transaction rule", "message and transaction rules"))")
    }
}
