import Testing
import TapCore

/// Hardening, round two, defect 2: `Int(Double)` and `UInt64(Double)` trapped (exit 132) on an option, a HAR entry or a
/// stored time too large for the integer. The checked conversions return nil, clamp or saturate instead.
@Suite struct CheckedTests {
    static let hostile: [Double] = [.nan, -.nan, .infinity, -.infinity, 1e20, -1e20, 1e300, -1e300, 9.223372036854775808e18,
                                    -9.223372036854775808e18, 1.8446744073709551616e19, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
                                    .leastNonzeroMagnitude, -0.0]

    @Test func integersAreNilOutsideTheirRange() {
        #expect(Checked.int(3.9) == 3 && Checked.int(-3.9) == -3 && Checked.int(rounding: 2.5) == 3 && Checked.int(rounding: -2.5) == -3)
        #expect(Checked.int(.nan) == nil && Checked.int(.infinity) == nil && Checked.int(-.infinity) == nil)
        #expect(Checked.int(1e20) == nil && Checked.int(-1e20) == nil)
        #expect(Checked.int(9.223372036854775808e18) == nil, "2^63 is one past Int.max")
        #expect(Checked.int(-9.223372036854775808e18) == Int.min, "-2^63 is Int.min itself")
        #expect(Checked.int(9.223372036854774784e18) == 9_223_372_036_854_774_784, "the largest Double below 2^63")
        for v in Self.hostile { _ = Checked.int(v); _ = Checked.int(rounding: v) } // none traps
    }

    @Test func clampedIntegersForShownValues() {
        #expect(Checked.clampedInt(1e300) == Int.max && Checked.clampedInt(-1e300) == Int.min)
        #expect(Checked.clampedInt(.infinity) == Int.max && Checked.clampedInt(-.infinity) == Int.min && Checked.clampedInt(.nan) == 0)
        #expect(Checked.clampedInt(rounding: 1.5) == 2 && Checked.milliseconds(1.5) == 1500 && Checked.milliseconds(1e300) == Int.max)
        for v in Self.hostile { _ = Checked.clampedInt(v); _ = Checked.milliseconds(v) }
    }

    @Test func timerArithmeticSaturates() {
        #expect(Checked.nanoseconds(1.5) == 1_500_000_000)
        #expect(Checked.nanoseconds(-1) == 0 && Checked.nanoseconds(.nan) == 0 && Checked.nanoseconds(-.infinity) == 0)
        #expect(Checked.nanoseconds(1e11) == .max && Checked.nanoseconds(1e300) == .max && Checked.nanoseconds(.infinity) == .max)
        #expect(Checked.nanoseconds(18_446_744_073) > 18_446_744_072_000_000_000 && Checked.nanoseconds(18_446_744_073) < .max, "just inside UInt64")
        #expect(Checked.deadline(10, plus: 5) == 15 && Checked.deadline(.max - 1, plus: 5) == .max && Checked.deadline(1, plus: .max) == .max)
    }

    @Test func durationsWithUnitsAndRange() throws {
        #expect(try CheckedDuration.parse("250ms") == 0.25 && CheckedDuration.parse("2.5s") == 2.5 && CheckedDuration.parse("5m") == 300)
        #expect(try CheckedDuration.parse("1h") == 3600 && CheckedDuration.parse("24h") == 86_400 && CheckedDuration.parse(" 7 ") == 7)
        #expect(try abs(CheckedDuration.parse("100us") - 0.0001) < 1e-12 && CheckedDuration.parse("0") == 0)
        // The reproductions of the issue, and every other way out of range.
        for text in ["99999999999999999999s", "1e11s", "1e11", "1e300", "inf", "infinity", "-inf", "1e400", "24.001h", "86401", "-1s", "-0.001"] {
            #expect(throws: CheckedValueError("a duration must be from 0s to 24h"), "\(text)") { try CheckedDuration.parse(text) }
        }
        for text in ["nan", "NaN", "", "s", "abc", "1x", "ms", "1 s", "--1s"] {
            #expect(throws: CheckedValueError("expected a duration such as 250ms, 2.5s, 5m or 1h"), "\(text)") { try CheckedDuration.parse(text) }
        }
        #expect(throws: CheckedValueError("a duration must be from 1ms to 24h")) { try CheckedDuration.parse("0", within: CheckedDuration.timeout) }
        #expect(try CheckedDuration.parse("0.001", within: CheckedDuration.timeout) == 0.001)
        #expect(CheckedDuration.clamp(.nan) == 0 && CheckedDuration.clamp(.infinity) == 86_400 && CheckedDuration.clamp(-5) == 0)
        #expect(CheckedDuration.describe(0.25) == "250ms" && CheckedDuration.describe(2) == "2s" && CheckedDuration.describe(2.5) == "2.5s")
        #expect(CheckedDuration.describe(1e20) == "1e+20s" && CheckedDuration.describe(.infinity) == "infs")
        for v in Self.hostile { _ = CheckedDuration.describe(v); _ = CheckedDuration.clamp(v) }
    }

    @Test func numbersAndByteSizesWithRange() throws {
        #expect(try Checked.number("0.5", within: 0...1000) == 0.5 && Checked.number("1e3", within: 0...1000) == 1000)
        for text in ["1e300", "nan", "inf", "-1", "1000.5", "x", "", "0x10", "0x1p3", "1_0"] {
            #expect(throws: CheckedValueError("expected a number from 0 to 1000"), "\(text)") { try Checked.number(text, within: 0...1000) }
        }
        #expect(try Checked.byteSize("4096", within: 1...(1 << 20)) == 4096 && Checked.byteSize("64KiB", within: 1...(1 << 20)) == 65536)
        #expect(try Checked.byteSize("2G", within: 1...(4 << 30)) == 2 << 30 && Checked.byteSize("1TiB", within: 1...(1 << 40)) == 1 << 40)
        // The examples in the refusal are sizes the option takes (they said "such as 4096" where 4096 was refused).
        let refusal = CheckedValueError("expected a size from 1MiB to 64GiB, such as 1MiB or 512MiB")
        for text in ["0", "-1", "1e9", "65GiB", "99999999999999999999", "9999999999999999G", "1.5MiB", "KiB", "", "+5M", "512KiB"] {
            #expect(throws: refusal, "\(text)") { try Checked.byteSize(text, within: (1 << 20)...(64 << 30)) }
        }
        #expect(throws: CheckedValueError("expected a size from 64KiB to 16TiB, such as 64KiB or 512MiB")) {
            try Checked.byteSize("1", within: (64 << 10)...(16 << 40))
        }
        #expect(throws: CheckedValueError("expected a size from 1 to 512MiB, such as 4096, 64KiB or 512MiB")) { try Checked.byteSize("x", within: 1...(512 << 20)) }
        #expect(throws: CheckedValueError("expected a size from 1 to 100, such as 1")) { try Checked.byteSize("x", within: 1...100) }
        #expect(Checked.describe(bytes: 65536) == "64KiB" && Checked.describe(bytes: 1000) == "1000" && Checked.describe(bytes: 16 << 40) == "16TiB")
    }
}
