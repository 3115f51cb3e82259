/// One option or flag a command accepts.
public struct OptionSpec: Sendable {
    public let name: String
    public let valueName: String?
    public let repeatable: Bool
    public let help: String
    /// Takes every following argument up to the next option (`--select 1 3`).
    public var variadic = false
    /// Checks one given value before the command runs (set by a typed `Option`); nil takes any text.
    public var check: (@Sendable (String) throws(InvalidArguments) -> Void)?

    /// An option that takes a value (`--key PEM`).
    public static func option(_ name: String, _ valueName: String, repeatable: Bool = false, help: String) -> OptionSpec {
        OptionSpec(name: name, valueName: valueName, repeatable: repeatable, help: help)
    }

    /// An option that takes one or more values (`--select 1 3`); repeatable too.
    public static func variadic(_ name: String, _ valueName: String, help: String) -> OptionSpec {
        var o = OptionSpec(name: name, valueName: valueName, repeatable: true, help: help)
        o.variadic = true
        return o
    }

    /// A flag without a value (`--json`).
    public static func flag(_ name: String, help: String) -> OptionSpec {
        OptionSpec(name: name, valueName: nil, repeatable: false, help: help)
    }
}

/// A usage error: unknown option, missing value, too many arguments. Its message is shown as is.
public struct UsageError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Parsed command-line arguments: option values by name, flags, and positionals in order.
public struct ParsedArguments: Sendable, Equatable {
    public var values: [String: [String]] = [:]
    public var flags: Set<String> = []
    public var positionals: [String] = []

    /// The last value of an option, if given.
    public func value(_ name: String) -> String? { values[name]?.last }
    /// Every value of a repeatable option, in order.
    public func all(_ name: String) -> [String] { values[name] ?? [] }
    /// Whether a flag was given.
    public func has(_ name: String) -> Bool { flags.contains(name) }
}

/// Parses GNU-style arguments: `--name value`, `--name=value`, flags, `--` ending options, `-` as a positional.
public enum ArgumentParser {
    public static func parse(_ args: [String], options: [OptionSpec], maxPositionals: Int) throws(UsageError) -> ParsedArguments {
        var parsed = ParsedArguments()
        var i = 0
        var optionsEnded = false
        while i < args.count {
            let a = args[i]
            i += 1
            if optionsEnded || !a.hasPrefix("--") || a == "--" {
                if a == "--", !optionsEnded { optionsEnded = true; continue }
                if a.hasPrefix("-"), a != "-", !optionsEnded { throw UsageError("unknown option \(a)") }
                parsed.positionals.append(a)
                continue
            }
            var name = String(a.dropFirst(2))
            var inline: String?
            if let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            guard let spec = options.first(where: { $0.name == name }) else {
                throw UsageError("unknown option --\(name)")
            }
            if spec.valueName == nil {
                if inline != nil { throw UsageError("--\(name) takes no value") }
                parsed.flags.insert(name)
                continue
            }
            let value: String
            if let inline {
                value = inline
            } else {
                guard i < args.count else { throw UsageError("--\(name) needs a value (\(spec.valueName!))") }
                value = args[i]
                i += 1
            }
            if !spec.repeatable, parsed.values[name] != nil { throw UsageError("--\(name) given more than once") }
            parsed.values[name, default: []].append(value)
            if spec.variadic, inline == nil {
                while i < args.count, !args[i].hasPrefix("--") {
                    parsed.values[name, default: []].append(args[i])
                    i += 1
                }
            }
        }
        if parsed.positionals.count > maxPositionals {
            throw UsageError("unexpected argument \(parsed.positionals[maxPositionals])")
        }
        return parsed
    }

    /// Checks every given value of every option through its typed parser, in the order the options are declared, so a
    /// bad value is refused before anything starts.
    public static func validate(_ parsed: ParsedArguments, options: [OptionSpec]) throws(InvalidArguments) {
        for spec in options {
            guard let check = spec.check else { continue }
            for text in parsed.all(spec.name) { try check(text) }
        }
    }

    /// Formats the options table of a command's help.
    public static func helpTable(_ options: [OptionSpec]) -> String {
        let rows = options.map { o -> (String, String) in
            let left = "--\(o.name)" + (o.valueName.map { " \($0)" } ?? "") + (o.variadic ? "..." : (o.repeatable ? " ..." : ""))
            return (left, o.help)
        }
        let width = (rows.map(\.0.count).max() ?? 0) + 2
        return rows.map { "  " + $0.0 + String(repeating: " ", count: width - $0.0.count) + $0.1 }.joined(separator: "\n")
    }
}
