import Testing
import TapCore
@testable import TapEMV

/// The typed member names: each read gives what the name on the wire gives, and every name is spelled once.
@Suite struct EMVFieldTests {
    static let ares = try! JSON.parse(#"{"threeDSServerTransID":"S","dsTransID":"D","acsTransID":"A","messageType":"ARes","messageVersion":"2.2.0","transStatus":"Y","eci":"05","authenticationValue":"AV","acsRenderingType":{"acsInterface":"01","acsUiTemplate":"01"}}"#)

    @Test func aFieldReadsTheMemberOfItsNameAndNothingElse() {
        for f in EMVField.allCases { #expect(Self.ares[f] == Self.ares[f.rawValue], "\(f)") }
        for f in TransactionIDField.allCases { #expect(Self.ares[f] == Self.ares[f.rawValue], "\(f)") }
        #expect(Self.ares[.eci] == .string("05"))
        #expect(Self.ares[.acsTransID] == .string("A"))
        #expect(Self.ares[.sdkTransID] == nil)
        #expect(Self.ares[.acsRenderingType]?[.acsUiTemplate] == .string("01"))
        #expect(JSON.string("not an object")[.eci] == nil)
        #expect(Self.ares[MessageMember.field(.transStatus)] == .string("Y"))
        #expect(Self.ares[MessageMember.id(.dsTransID)] == .string("D"))
    }

    @Test func settingAFieldReplacesItInPlaceOrAppendsIt() {
        let replaced = Self.ares.setting(.eci, to: .string("06")).setting(.threeDSServerTransID, to: .string("T"))
        #expect(replaced.compact == Self.ares.compact.replacingOccurrences(of: #""eci":"05""#, with: #""eci":"06""#)
            .replacingOccurrences(of: #""threeDSServerTransID":"S""#, with: #""threeDSServerTransID":"T""#))
        #expect(JSON.object([]).setting(.sdkTransID, to: .string("K")).setting(.purchaseDate, to: .string("1")).compact
            == #"{"sdkTransID":"K","purchaseDate":"1"}"#)
    }

    @Test func everyNameIsSpelledOnceAndIsItsCaseName() {
        let names = EMVField.allCases.map(\.rawValue) + TransactionIDField.allCases.map(\.rawValue)
        #expect(Set(names).count == names.count, "a name in both enums, or twice")
        for f in EMVField.allCases { #expect(f.rawValue == "\(f)") }
        #expect(MessageMember.id(.sdkTransID).name == "sdkTransID" && MessageMember.field(.deviceRenderOptions).description == "deviceRenderOptions")
    }
}
