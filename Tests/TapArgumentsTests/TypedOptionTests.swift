import Testing
import TapArguments

/// The typed option layer (issue 26): each option declared once, every given value checked before a command runs, the
/// values read back typed, a refusal naming the option.
@Suite struct TypedOptionTests {
    enum Mode: String, Sendable, CaseIterable { case fast, slow }

    static let runs = Option("runs", "N", WholeNumberValue(1...100), default: 1, help: "runs")
    static let wait = Option("wait", "DURATION", DurationValue.timeout, help: "wait")
    static let size = Option("size", "SIZE", ByteSizeValue(1...(1 << 20)), repeatable: true, help: "size")
    static let mode = Option("mode", "fast|slow", ChoiceValue<Mode>(refusal: { "--\($0) \($1): expected fast or slow" }), default: .fast, help: "mode")
    static let seed = Option("seed", "N", SeedValue(), help: "seed")
    static let json = Flag("json", help: "json")
    static let all = [runs.spec, wait.spec, size.spec, mode.spec, seed.spec, json.spec]

    func parse(_ args: [String]) throws -> ParsedArguments {
        let parsed = try ArgumentParser.parse(args, options: Self.all, maxPositionals: 0)
        try ArgumentParser.validate(parsed, options: Self.all)
        return parsed
    }

    @Test func valuesAreReadTypedWithTheirDefaults() throws {
        let p = try parse(["--runs", "3", "--wait", "250ms", "--size", "64KiB", "--size=2", "--mode", "slow", "--seed", "18446744073709551615", "--json"])
        #expect(try p.value(Self.runs) == 3)
        #expect(try p.value(Self.wait) == 0.25)
        #expect(try p.all(Self.size) == [64 << 10, 2])
        #expect(try p.value(Self.mode) == .slow)
        #expect(try p.value(Self.seed) == UInt64.max)
        #expect(p.has(Self.json))
        let empty = try parse([])
        #expect(try empty.value(Self.runs) == 1 && empty.value(Self.mode) == .fast && empty.value(Self.wait) == nil)
        #expect(!empty.given(Self.runs) && !empty.has(Self.json))
    }

    @Test(arguments: [
        (["--runs", "0"], "--runs 0: expected a whole number from 1 to 100"),
        (["--runs", "99999999999999999999999"], "--runs 99999999999999999999999: expected a whole number from 1 to 100"),
        (["--wait", "inf"], "--wait inf: a duration must be from 1ms to 24h"),
        (["--wait", "nan"], "--wait nan: expected a duration such as 250ms, 2.5s, 5m or 1h"),
        (["--size", "1", "--size", "2MiB"], "--size 2MiB: expected a size from 1 to 1MiB, such as 4096 or 64KiB"),
        (["--mode", "medium"], "--mode medium: expected fast or slow"),
        (["--seed", "-1"], "--seed -1: expected a whole number from 0 to 18446744073709551615"),
    ])
    func aBadValueIsRefusedBeforeTheCommandRunsNamingTheOption(args: [String], message: String) throws {
        let parsed = try ArgumentParser.parse(args, options: Self.all, maxPositionals: 0)
        #expect(throws: InvalidArguments.self) { try ArgumentParser.validate(parsed, options: Self.all) }
        do { try ArgumentParser.validate(parsed, options: Self.all) } catch { #expect(error.message == message) }
    }

    @Test func theHelpTableComesFromTheDeclarations() {
        let table = ArgumentParser.helpTable([Self.runs.spec, Self.size.spec, Self.json.spec])
        #expect(table == "  --runs N         runs\n  --size SIZE ...  size\n  --json           json")
    }
}
