import Testing
@testable import TapHTTP

/// The request bytes all connections of a server hold, against one cap; each connection keeps its own share.
@Suite struct BufferBudgetTests {
    @Test func aShareMovesTheTotalByWhatItNowHoldsAndReleaseGivesItBack() {
        let budget = BufferBudget(limit: 200 * 1024)
        var a = BufferBudget.Share(), b = BufferBudget.Share()
        #expect(budget.hold(&a, 100 * 1024) && budget.total == 100 * 1024)
        #expect(budget.hold(&a, 150 * 1024) && budget.total == 150 * 1024) // replaces a's count, not added to it
        #expect(budget.hold(&b, 10 * 1024) && budget.total == 160 * 1024)
        // Past the cap: the share that asks for more than the exempt amount is refused; a small one still passes.
        #expect(!budget.hold(&b, 70 * 1024))
        #expect(budget.total == 220 * 1024)
        #expect(budget.hold(&b, BufferBudget.exempt))
        budget.release(&a)
        #expect(budget.total == BufferBudget.exempt && a.bytes == 0)
        budget.release(&a) // a second release gives back nothing
        #expect(budget.total == BufferBudget.exempt)
        budget.release(&b)
        #expect(budget.total == 0)
    }
}
