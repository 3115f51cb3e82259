import Testing
import TapCore
import TapEMV
@testable import TapInspect

/// The element table is keyed by the typed EMV members: one row per message and member, filed under the right enum, and a
/// condition names an element of its own message.
@Suite struct ElementRuleTests {
    @Test func oneRowPerMessageAndMemberFiledUnderItsKind() {
        var ids: Set<String> = []
        for rule in ValidationRules.elements {
            #expect(ids.insert(rule.id).inserted, "\(rule.id) twice in the table")
            // The typed member is the one its name would parse to: a transaction ID is never filed as a field, nor the reverse.
            switch rule.member {
            case let .id(f): #expect(EMVField(rawValue: f.rawValue) == nil && TransactionIDField(rawValue: rule.element) == f, "\(rule.id)")
            case let .field(f): #expect(TransactionIDField(rawValue: f.rawValue) == nil && EMVField(rawValue: rule.element) == f, "\(rule.id)")
            }
        }
        #expect(ids.count == ValidationRules.elements.count && ids.count > 100)
    }

    @Test func aConditionNamesAnElementOfItsOwnMessage() {
        func fields(_ c: ElementRule.Condition) -> [EMVField] {
            switch c {
            case let .field(f, _): return [f]
            case .channel, .category, .browserJavaScript: return []
            case let .all(cs), let .any(cs): return cs.flatMap(fields)
            }
        }
        var conditions = 0
        for rule in ValidationRules.elements {
            guard case let .when(c) = rule.presence else { continue }
            let own = Set((ValidationRules.byKind[rule.message] ?? []).map(\.member))
            for f in fields(c) {
                conditions += 1
                #expect(own.contains(.field(f)), "\(rule.id) depends on \(f), which \(rule.message.rawValue) has no rule for")
            }
        }
        #expect(conditions >= 18)
    }

    @Test func aFieldConditionReadsTheTypedMemberAndDescribesItBySpecName() {
        let c = ElementRule.Condition.field(.transStatus, ["Y", "A"])
        let ares = MessageContext(json: .object([("transStatus", .string("A"))]), channel: .browser, category: .payment, version: .v2_2)
        #expect(c.holds(ares))
        #expect(!c.holds(MessageContext(json: .object([("transStatus", .string("N"))]), channel: .browser, category: .payment, version: .v2_2)))
        #expect(!c.holds(MessageContext(json: .object([("transStatusReason", .string("Y"))]), channel: .browser, category: .payment, version: .v2_2)))
        #expect(c.description == "transStatus A/Y")
        let js = ElementRule.Condition.browserJavaScript
        #expect(js.holds(MessageContext(json: .object([("browserJavascriptEnabled", .bool(true))]), version: .v2_2)))
        #expect(!js.holds(MessageContext(json: .object([("browserJavascriptEnabled", .bool(false))]), version: .v2_2)))
    }
}
