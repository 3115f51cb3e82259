import Foundation
import Testing
import TapCore
import TapEMV
import TapStore
@testable import TapInspect

/// Every rule of the table caught by a mutation of a real message, the transaction rules, and the seeds' value lists.
@Suite struct ValidatorTests {
    static let transactions = ThreeDSTransaction.group(Fixtures.app) + ThreeDSTransaction.group(Fixtures.browser) + [Fixtures.preparation]

    @Test func demoSessionsAndFixturesValidateClean() throws {
        #expect(Validator.validate(transactions: [Fixtures.preparation]).isEmpty)
        #expect(Fixtures.app.count > 30 && Fixtures.browser.count > 10)
        let findings = Validator.validate(Fixtures.app) + Validator.validate(Fixtures.browser)
        #expect(findings.isEmpty, "\(findings.map { "\($0.exchangeID) \($0.rule) \($0.detail)" })")
    }

    /// A transaction holding `message` (mutated), with an AReq that sets the channel, category and version it needs.
    static func context(for rule: ElementRule, version: String) -> (ThreeDSTransaction, InspectedMessage)? {
        // The base: a real message of the rule's type and version, from a transaction of the channel the rule needs.
        var wantChannel: String?, wantCategory: String?
        var fields: [(String, String)] = []
        func satisfy(_ c: ElementRule.Condition) {
            switch c {
            case let .channel(v): wantChannel = v.map(\.wire).sorted().first
            case let .category(v): wantCategory = v.map(\.wire).sorted().first
            case let .field(f, v): fields.append((f.rawValue, v.sorted().first!))
            case .browserJavaScript: fields.append(("browserJavascriptEnabled", "true"))
            case let .all(cs): cs.forEach(satisfy)
            case let .any(cs): if let f = cs.first { satisfy(f) }
            }
        }
        if case let .when(c) = rule.presence { satisfy(c) }
        let candidates = transactions.filter { t in
            (wantChannel == nil || t.deviceChannel == wantChannel) && t.messages.contains { $0.type == rule.message.rawValue && $0.version == version && $0.json != nil }
        }
        guard var tx = candidates.first ?? transactions.first(where: { $0.messages.contains { $0.type == rule.message.rawValue && $0.json != nil } }) else {
            return nil
        }
        let index = tx.messages.firstIndex { $0.type == rule.message.rawValue && $0.json != nil }!
        var m = tx.messages[index]
        var json = m.json!.setting("messageVersion", to: .string(version))
        for (n, v) in fields { json = json.setting(n, to: v == "true" ? .bool(true) : .string(v)) }
        if let areqIndex = tx.messages.firstIndex(where: { $0.type == "AReq" }), var areq = tx.messages[areqIndex].json {
            if let wantChannel { areq = areq.setting("deviceChannel", to: .string(wantChannel)) }
            if let wantCategory { areq = areq.setting("messageCategory", to: .string(wantCategory)) }
            areq = areq.setting("messageVersion", to: .string(version))
            tx.messages[areqIndex].json = areq
            if rule.message == .aReq { json = areq.merging(fields) }
        }
        m.json = json
        tx.messages[index] = m
        return (tx, m)
    }

    static func invalidValue(_ f: ElementRule.Format) -> JSON {
        switch f {
        case .uuid: return .string("not-a-uuid")
        case .values: return .string("ZZ")
        case .numeric: return .string("1x")
        case .signedNumeric: return .string("x")
        case let .text(max): return .string(String(repeating: "a", count: max + 1))
        case .url: return .string("not a url")
        case .cardNumber: return .string("12")
        case .yearMonth: return .string("1399")
        case .dateTime: return .string("20261399000000")
        case .jose: return .string("abc")
        case .ecPublicJWK: return .object([("kty", .string("RSA"))])
        case .renderingType: return .object([("acsInterface", .string("09")), ("acsUiTemplate", .string("01"))])
        case .counter: return .string("999")
        case .base64: return .string("short")
        case .boolean: return .string("true")
        case .object, .array: return .string("x")
        }
    }

    static func findings(_ tx: ThreeDSTransaction, _ m: InspectedMessage) -> [Finding] {
        var t = tx
        t.messages = t.messages.map { $0.exchangeID == m.exchangeID && $0.type == m.type ? m : $0 }
        return Validator.validate(transactions: [t]).filter { $0.exchangeID == m.exchangeID && $0.message == m.type }
    }

    /// One case per rule: a value outside the rule's format is caught as `<rule>.format` at the element's pointer.
    @Test(arguments: ValidationRules.elements.map(\.id))
    func formatMutationIsCaught(_ id: String) throws {
        let rule = try #require(ValidationRules.elements.first { $0.id == id })
        let (tx, base) = try #require(Self.context(for: rule, version: rule.since?.wire ?? "2.3.1"), "no \(rule.message) to mutate")
        var m = base
        m.json = base.json!.setting(rule.element, to: Self.invalidValue(rule.format))
        let found = Self.findings(tx, m)
        #expect(found.contains { $0.rule == id + ".format" && $0.pointer == "/" + rule.element && $0.severity == .error },
                "\(id): \(found.map(\.rule))")
    }

    /// One case per required or conditional rule: the element removed (its condition made true) is caught as `<rule>.required`.
    @Test(arguments: ValidationRules.elements.filter { if case .optional = $0.presence { return false }; return true }.map(\.id))
    func removalIsCaught(_ id: String) throws {
        let rule = try #require(ValidationRules.elements.first { $0.id == id })
        let (tx, base) = try #require(Self.context(for: rule, version: rule.since?.wire ?? "2.2.0"), "no \(rule.message) to mutate")
        var m = base
        m.json = base.json!.removing(rule.element)
        if rule.message == .aReq, let i = tx.messages.firstIndex(where: { $0.type == "AReq" }) {
            var t = tx
            t.messages[i] = m
            let found = Validator.validate(transactions: [t]).filter { $0.exchangeID == m.exchangeID && $0.message == "AReq" }
            #expect(found.contains { $0.rule == id + ".required" }, "\(id): \(found.map(\.rule))")
            return
        }
        let found = Self.findings(tx, m)
        #expect(found.contains { $0.rule == id + ".required" && $0.pointer == "/" + rule.element }, "\(id): \(found.map(\.rule))")
    }

    @Test func elementDefinedInALaterVersionIsAWarning() throws {
        let tx = try #require(Self.transactions.first { $0.deviceChannel == "02" && $0.version == "2.1.0" })
        let areq = try #require(tx.areq)
        var m = areq
        m.json = areq.json!.setting("browserJavascriptEnabled", to: .bool(true))
        let found = Self.findings(tx, m)
        #expect(found.contains { $0.rule == "AReq.browserJavascriptEnabled.version" && $0.severity == .warning })
    }

    // MARK: values that depend on the version (the seeds' lists)

    static func check(_ rule: String, _ value: String, version: String) -> String? {
        let r = ValidationRules.elements.first { $0.id == rule }!
        return r.format.problem(.string(value), version: MessageVersion(wire: version))
    }

    @Test func cake3DS2UITypesByVersion() {
        for t in ["01", "02", "03", "04", "05"] { #expect(Self.check("CRes.acsUiType", t, version: "2.1.0") == nil) }
        for t in ["06", "07"] {
            #expect(Self.check("CRes.acsUiType", t, version: "2.3.1") == nil)
            #expect(Self.check("CRes.acsUiType", t, version: "2.2.0")?.contains("defined from 2.3.1") == true)
        }
        #expect(Self.check("CRes.acsUiType", "08", version: "2.3.1") != nil)
    }

    @Test func cake3DS2ErrorCodesAndDeviceChannels() {
        for code in ["101", "201", "202", "203", "301", "302", "402", "102"] { #expect(Self.check("Erro.errorCode", code, version: "2.1.0") == nil) }
        #expect(Self.check("Erro.errorCode", "207", version: "2.3.1") == nil)
        #expect(Self.check("Erro.errorCode", "308", version: "2.2.0") != nil)
        #expect(Self.check("Erro.errorCode", "999", version: "2.3.1") != nil)
        for c in ["01", "02", "03"] { #expect(Self.check("AReq.deviceChannel", c, version: "2.2.0") == nil) }
        #expect(Self.check("AReq.deviceChannel", "04", version: "2.2.0") != nil)
    }

    @Test func cake3DS2AuthenticationRequestParametersAreRequiredOnTheAppChannel() {
        // Cake3DS2's createAuthenticationRequestParameters(): deviceData, sdkTransactionIdentifier, sdkAppIdentifier,
        // sdkReferenceNumber, sdkEphemeralPublicKey, messageVersion, as the AReq carries them.
        for element in ["sdkEncData", "sdkTransID", "sdkAppID", "sdkReferenceNumber", "sdkEphemPubKey", "messageVersion"] {
            let rule = ValidationRules.elements.first { $0.id == "AReq.\(element)" }
            #expect(rule != nil, "AReq.\(element)")
            guard let rule else { continue }
            switch rule.presence {
            case .required: break
            case let .when(c): #expect(c.holds(MessageContext(json: .object([]), channel: .app, category: .payment, version: .v2_2)))
            case .optional: Issue.record("AReq.\(element) is optional")
            }
        }
    }

    @Test func transStatusAndChallengeCancelByVersion() {
        #expect(Self.check("ARes.transStatus", "D", version: "2.1.0") != nil)
        #expect(Self.check("ARes.transStatus", "D", version: "2.2.0") == nil)
        #expect(Self.check("ARes.transStatus", "S", version: "2.2.0") != nil)
        #expect(Self.check("ARes.transStatusReason", "22", version: "2.1.0") != nil)
        #expect(Self.check("ARes.transStatusReason", "30", version: "2.3.1") == nil)
        #expect(Self.check("CReq.challengeCancel", "03", version: "2.1.0") != nil)
        #expect(Self.check("CReq.challengeCancel", "09", version: "2.3.1") == nil)
        #expect(Self.check("CReq.challengeCancel", "02", version: "2.3.1") != nil) // reserved
    }

    // MARK: rules across a transaction

    static func challenge(_ version: String = "2.2.0") -> ThreeDSTransaction {
        transactions.first { $0.deviceChannel == "01" && $0.version == version && $0.shape.contains("RReq") && $0.shape.filter { $0 == "CReq" }.count >= 2 }!
    }

    static func mutate(_ tx: ThreeDSTransaction, _ type: String, occurrence: Int = 0, _ change: (JSON) -> JSON) -> ThreeDSTransaction {
        var t = tx
        let indices = t.messages.indices.filter { t.messages[$0].type == type }
        t.messages[indices[occurrence]].json = change(t.messages[indices[occurrence]].json!)
        return t
    }

    static func rules(_ tx: ThreeDSTransaction) -> Set<String> { Set(Validator.validate(transactions: [tx]).map(\.rule)) }

    @Test func cleanChallengeHasNoFindings() {
        #expect(Self.rules(Self.challenge()).isEmpty)
    }

    @Test func countersOutOfOrder() {
        let tx = Self.challenge()
        #expect(Self.rules(Self.mutate(tx, "CReq", occurrence: 1) { $0.setting("sdkCounterStoA", to: .string("002")) }).contains("tx.sdk-counter"))
        #expect(Self.rules(Self.mutate(tx, "CRes", occurrence: 0) { $0.setting("acsCounterAtoS", to: .string("001")) }).contains("tx.acs-counter"))
    }

    @Test func finalCResAndRReqDisagree() {
        let tx = Self.mutate(Self.challenge(), "RReq") { $0.setting("transStatus", to: .string("N")).setting("transStatusReason", to: .string("01")) }
        #expect(Self.rules(tx) == ["tx.final-cres-rreq"])
    }

    @Test func idsAndVersionKeptAcrossTheTransaction() {
        let tx = Self.challenge()
        let other = UUID().uuidString.lowercased()
        #expect(Self.rules(Self.mutate(tx, "RReq") { $0.setting("dsTransID", to: .string(other)) }).contains("tx.same-ids"))
        #expect(Self.rules(Self.mutate(tx, "RRes") { $0.setting("messageVersion", to: .string("2.1.0")) }).contains("tx.same-version"))
    }

    @Test func finalCResWithExtraElements() {
        let tx = Self.mutate(Self.challenge(), "CRes", occurrence: 1) { $0.setting("acsUiType", to: .string("01")) }
        #expect(Self.rules(tx).contains("CRes.final-elements"))
    }

    @Test func challengeAfterAFrictionlessARes() {
        let tx = Self.mutate(Self.challenge(), "ARes") { $0.setting("transStatus", to: .string("Y")) }
        #expect(Self.rules(tx).contains("tx.challenge-status"))
    }

    @Test func threeRIChallengeIsRefused() {
        var tx = Self.mutate(Self.challenge(), "AReq") { $0.setting("deviceChannel", to: .string("03")) }
        tx.messages = Array(tx.messages.prefix(2))
        #expect(Self.rules(tx).contains("ARes.3ri-status"))
    }

    @Test func maskedValuesArePresentButNotFormatChecked() {
        let tx = Self.challenge()
        #expect(tx.areq?.string("acctNumber")?.contains("*") == true)
        #expect(!Self.rules(tx).contains("AReq.acctNumber.format"))
    }

    /// `validate --rules` lists a format in words, a value set and its later versions sorted: one listing whatever order the Set and
    /// the Dictionary hold them in (their order changes from run to run, and with how they were built).
    @Test func aFormatIsListedInOneOrder() {
        let values = (0..<40).map { String(format: "%02d", $0) }
        let added = ["2.3.1": ["41"], "2.10.0": ["43"], "2.2.0": ["40", "42"]]
        let expected = "one of " + values.joined(separator: ", ") + "; from 2.2.0 also 40, 42; from 2.3.1 also 41; from 2.10.0 also 43"
        for order in [values, values.reversed(), values.shuffled()] {
            var set = Set<String>(minimumCapacity: order.count * 3)
            for v in order { set.insert(v) }
            #expect(ElementRule.Format.values(set, added: added).listing == expected)
        }
        #expect(ElementRule.Format.text(max: 64).listing == "text, 1–64 characters")
        #expect(ElementRule.Format.numeric(1...3, atLeast: 5).listing == "digits, 1–3 long, at least 5")
        #expect(ElementRule.Format.jose(parts: 5).listing == "compact JWE (5 parts)")
    }
}

extension JSON {
    func merging(_ fields: [(String, String)]) -> JSON {
        fields.reduce(self) { $0.setting($1.0, to: $1.1 == "true" ? .bool(true) : .string($1.1)) }
    }
}
