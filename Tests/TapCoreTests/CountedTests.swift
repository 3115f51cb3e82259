import Testing
import TapCore

/// `counted` puts the noun in the number the count needs (the commands printed "1 errors", "1 exchanges written").
@Suite struct CountedTests {
    @Test func singularOnlyForOne() {
        #expect(counted(0, "error") == "0 errors")
        #expect(counted(1, "error") == "1 error")
        #expect(counted(2, "exchange") == "2 exchanges")
        #expect(counted(1, "retry", "retries") == "1 retry")
        #expect(counted(3, "retry", "retries") == "3 retries")
        #expect(counted(-1, "error") == "-1 errors")
    }
}
