import TapCore

/// Arguments that parse but cannot be used (a bad value, an unknown fault action, a rule that can never apply): one
/// line naming the option, exit status 2 (`ExitStatus.usage`), before anything starts.
public struct InvalidArguments: Error, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Turns the text of one option into a typed value; a refusal is the whole message, naming the option
/// (`--max-body 1x: expected a size …`), as the command has always printed it.
public protocol OptionValueParser: Sendable {
    associatedtype Value: Sendable
    func parse(_ text: String, option: String) throws(InvalidArguments) -> Value
}

/// A typed option, declared once: its name, value type (the parser), default, help and whether it repeats. Its `spec`
/// goes into the command's option list (help text, parsing) and checks every given value before the command runs.
public struct Option<Parser: OptionValueParser>: Sendable {
    public let spec: OptionSpec
    public let parser: Parser
    /// The value when the option is absent (nil: the command decides, e.g. a default computed at run time).
    public let fallback: Parser.Value?

    public init(_ name: String, _ valueName: String, _ parser: Parser, default fallback: Parser.Value? = nil,
                repeatable: Bool = false, variadic: Bool = false, help: String) {
        var spec = variadic ? OptionSpec.variadic(name, valueName, help: help)
                            : OptionSpec.option(name, valueName, repeatable: repeatable, help: help)
        spec.check = { text throws(InvalidArguments) in _ = try parser.parse(text, option: name) }
        self.spec = spec
        self.parser = parser
        self.fallback = fallback
    }

    public var name: String { spec.name }
}

/// A flag without a value, declared once.
public struct Flag: Sendable {
    public let spec: OptionSpec
    public init(_ name: String, help: String) { spec = .flag(name, help: help) }
    public var name: String { spec.name }
}

extension ParsedArguments {
    /// The option's last value, typed (or its default when absent). The value was checked by `ArgumentParser.validate`
    /// before the command ran; this parses it again through the same parser, so it cannot trap either way.
    public func value<P>(_ option: Option<P>) throws(InvalidArguments) -> P.Value? {
        guard let text = value(option.name) else { return option.fallback }
        return try option.parser.parse(text, option: option.name)
    }

    /// The option's value, or its default when absent: for an option declared with one.
    public func value<P>(_ option: Option<P>, default fallback: P.Value) throws(InvalidArguments) -> P.Value {
        try value(option) ?? fallback
    }

    /// Every value of a repeatable option, typed, in order.
    public func all<P>(_ option: Option<P>) throws(InvalidArguments) -> [P.Value] {
        var out: [P.Value] = []
        for text in all(option.name) { out.append(try option.parser.parse(text, option: option.name)) }
        return out
    }

    /// Whether the flag was given.
    public func has(_ flag: Flag) -> Bool { has(flag.name) }

    /// Whether the option was given at all.
    public func given<P>(_ option: Option<P>) -> Bool { values[option.name] != nil }
}

// MARK: - The value types options take

/// Text taken as given (a label, a secret, a match expression parsed later against the session).
public struct TextValue: OptionValueParser {
    public init() {}
    public func parse(_ text: String, option: String) -> String { text }
}

/// A file or directory path. Not opened here: the command opens it and reports what is wrong with it.
public struct PathValue: OptionValueParser {
    public init() {}
    public func parse(_ text: String, option: String) throws(InvalidArguments) -> String {
        // A NUL cannot reach the file system (the C string would end there): say so instead of opening something else.
        guard !text.utf8.contains(0) else { throw InvalidArguments("--\(option): a path cannot hold a NUL character") }
        return text
    }
}

/// A whole number within a range; `refusal` words the error when the command always has (default: the range).
public struct WholeNumberValue: OptionValueParser {
    public let range: ClosedRange<Int>
    let refusal: (@Sendable (_ option: String, _ text: String) -> String)?
    public init(_ range: ClosedRange<Int>, refusal: (@Sendable (_ option: String, _ text: String) -> String)? = nil) {
        self.range = range
        self.refusal = refusal
    }
    public func parse(_ text: String, option: String) throws(InvalidArguments) -> Int {
        guard let n = Int(text), range.contains(n) else {
            throw InvalidArguments(refusal?(option, text)
                                   ?? "--\(option) \(text): expected a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return n
    }
}

/// A 64-bit seed: 0 to 2^64 - 1.
public struct SeedValue: OptionValueParser {
    public init() {}
    public func parse(_ text: String, option: String) throws(InvalidArguments) -> UInt64 {
        guard let n = UInt64(text) else { throw InvalidArguments("--\(option) \(text): expected a whole number from 0 to \(UInt64.max)") }
        return n
    }
}

/// A duration in seconds (`30`, `500ms`, `2m`) through `CheckedDuration`, within `range`.
public struct DurationValue: OptionValueParser {
    public let range: ClosedRange<Double>
    /// Any wait from 0 to 24 hours.
    public static let anyWait = DurationValue(CheckedDuration.anyWait)
    /// A timeout: 1 ms to 24 hours.
    public static let timeout = DurationValue(CheckedDuration.timeout)
    public init(_ range: ClosedRange<Double>) { self.range = range }
    public func parse(_ text: String, option: String) throws(InvalidArguments) -> Double {
        do { return try CheckedDuration.parse(text, within: range) } catch { throw InvalidArguments("--\(option) \(text): \(error)") }
    }
}

/// A byte size (`4096`, `64KiB`, `512MiB`) through `Checked.byteSize`, within `range`.
public struct ByteSizeValue: OptionValueParser {
    public let range: ClosedRange<Int>
    public init(_ range: ClosedRange<Int>) { self.range = range }
    public func parse(_ text: String, option: String) throws(InvalidArguments) -> Int {
        do { return try Checked.byteSize(text, within: range) } catch { throw InvalidArguments("--\(option) \(text): \(error)") }
    }
}

/// One of a fixed set of words, each naming a value; `refusal` is the message for anything else, as the command words it.
public struct ChoiceValue<Value: Sendable>: OptionValueParser {
    let choices: [(String, Value)]
    let normalise: @Sendable (String) -> String
    let refusal: @Sendable (_ option: String, _ text: String) -> String
    public init(_ choices: [(String, Value)], normalise: @escaping @Sendable (String) -> String = { $0 },
                refusal: @escaping @Sendable (_ option: String, _ text: String) -> String) {
        self.choices = choices
        self.normalise = normalise
        self.refusal = refusal
    }
    public func parse(_ text: String, option: String) throws(InvalidArguments) -> Value {
        let key = normalise(text)
        guard let hit = choices.first(where: { $0.0 == key }) else { throw InvalidArguments(refusal(option, key)) }
        return hit.1
    }
}

extension ChoiceValue where Value: RawRepresentable & CaseIterable, Value.RawValue == String {
    /// Every case of a string enum, by its raw value.
    public init(refusal: @escaping @Sendable (_ option: String, _ text: String) -> String) {
        self.init(Value.allCases.map { ($0.rawValue, $0) }, refusal: refusal)
    }
}

/// A value a command-specific function parses (a URL, an address): the one checked helper for that kind of value.
public struct CustomValue<Value: Sendable>: OptionValueParser {
    let convert: @Sendable (_ text: String, _ option: String) throws(InvalidArguments) -> Value
    public init(_ convert: @escaping @Sendable (_ text: String, _ option: String) throws(InvalidArguments) -> Value) { self.convert = convert }
    public func parse(_ text: String, option: String) throws(InvalidArguments) -> Value { try convert(text, option) }
}
