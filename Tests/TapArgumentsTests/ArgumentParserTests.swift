import Testing
import TapArguments

@Suite struct ArgumentParserTests {
    let options: [OptionSpec] = [.option("key", "PEM", repeatable: true, help: ""), .option("out", "FILE", help: ""),
                                 .flag("json", help: "")]

    @Test func parsesOptionsFlagsAndPositionals() throws {
        let p = try ArgumentParser.parse(["in.txt", "--key", "a.pem", "--key=b.pem", "--json", "--out", "o"],
                                         options: options, maxPositionals: 1)
        #expect(p.positionals == ["in.txt"])
        #expect(p.all("key") == ["a.pem", "b.pem"])
        #expect(p.value("out") == "o")
        #expect(p.has("json"))
    }

    @Test func dashIsAPositionalAndDoubleDashEndsOptions() throws {
        #expect(try ArgumentParser.parse(["-"], options: options, maxPositionals: 1).positionals == ["-"])
        #expect(try ArgumentParser.parse(["--", "--json"], options: options, maxPositionals: 1).positionals == ["--json"])
    }

    @Test(arguments: [
        (["--nope"], "unknown option --nope"), (["--key"], "--key needs a value (PEM)"),
        (["--out", "a", "--out", "b"], "--out given more than once"), (["a", "b"], "unexpected argument b"),
        (["--json=1"], "--json takes no value"), (["-x"], "unknown option -x"),
    ])
    func reportsUsageErrors(args: [String], message: String) {
        #expect(throws: UsageError(message)) { try ArgumentParser.parse(args, options: options, maxPositionals: 1) }
    }
}

@Suite struct VariadicOptionTests {
    @Test func takesValuesUpToTheNextOption() throws {
        let p = try ArgumentParser.parse(["--select", "1", "3", "--json", "--select=5"],
                                         options: [.variadic("select", "N", help: ""), .flag("json", help: "")], maxPositionals: 0)
        #expect(p.all("select") == ["1", "3", "5"])
        #expect(p.has("json"))
    }
}
