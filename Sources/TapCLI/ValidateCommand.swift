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
    static let json = Flag("json", help: "print the findings as a JSON array")
    static let rules = Flag("rules", help: "list the rules instead (element rules by message, then the rules across a transaction)")

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        if args.has(Self.rules) { printRules(io); return 0 }
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
            io.out("\(TerminalText.escaped(path)): \(messages) messages in \(transactions.count) transactions checked"
                   + (encrypted > 0 ? " (\(encrypted) still encrypted, not checked: 'decrypt' with a key log opens them)" : "")
                   + "; \(errors) errors, \(findings.count - errors) warnings")
        }
        return errors > 0 ? 1 : 0
    }

    func printRules(_ io: Terminal) {
        var rows = [["RULE", "REQUIRED", "FORMAT", "SINCE"]]
        for r in ValidationRules.elements {
            let presence: String
            switch r.presence {
            case .required: presence = "yes"
            case .optional: presence = "no"
            case let .when(c): presence = "when \(c)"
            }
            rows.append([r.id, presence, r.format.listing.prefix(60).description, r.since?.wire ?? MessageVersion.v2_1.wire])
        }
        io.out(Table.render(rows))
        io.out("")
        for r in Validator.transactionRules { io.out("\(r.id): \(r.summary)") }
        io.out("CRes.final-elements: a final CRes carries only IDs, counter, completion indicator and transStatus")
        io.out("ARes.3ri-status: transStatus C, D or S is not valid for a 3RI transaction")
        io.out("<rule>.rfc4122: a UUID of a version or variant outside RFC 4122 (a placeholder?), a warning")
        io.out("<rule>.format of a masked value: the verdict masking stored with it (*** (malformed: …))")
        io.out("\(ValidationRules.elements.count) element rules, \(Validator.transactionRules.count + 2) message and transaction rules")
    }
}
