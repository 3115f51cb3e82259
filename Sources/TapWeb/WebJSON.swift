import Foundation
import TapCore
import TapEMV
import TapInspect
import TapRecording
import TapStore

/// The JSON shapes of the inspector's API: timeline rows, exchanges and sequence diagrams.
enum WebJSON {
    static func num(_ d: Double?, _ digits: Int = 3) -> JSON { d.map { .number(String(format: "%.\(digits)f", $0)) } ?? .null }
    static func str(_ s: String?) -> JSON { s.map(JSON.string) ?? .null }

    /// The waterfall's phases: 0 for one that did not happen.
    static func phases(_ p: ExchangePhases) -> JSON { .object(p.named.map { ($0.0, num($0.1)) }) }

    static func row(_ r: ExchangeRow) -> JSON {
        let p = ExchangePhases(start: r.requestStart, upstreamConnect: r.upstreamConnect, tlsDone: r.tlsDone, requestSent: r.requestSent,
                               firstByte: r.firstByte, done: r.done)
        let json = JSON.object([
            ("id", .number(String(r.id))), ("method", .string(r.method)), ("url", .string(r.url)), ("host", str(r.host)),
            ("status", r.status.map { .number(String($0)) } ?? .null), ("start", num(r.requestStart, 6)),
            ("duration_ms", num(r.done.map { ($0 - r.requestStart) * 1000 })),
            ("phases", phases(p)),
            ("messages", .array(r.messages.map { m in
                .object([("direction", .string(m.direction)), ("type", str(m.type)), ("location", .string(m.location)),
                         ("trans_status", str(m.transStatus)), ("error_code", str(m.errorCode)), ("encrypted", .bool(m.encrypted))])
            })),
            ("error", str(r.error)), ("client_aborted", .bool(r.clientAbortAt != nil)),
            ("replay", r.replay.map(ExchangeJSON.replay) ?? .null),
        ])
        return r.tunnel.map { json.setting("tunnel", to: ExchangeJSON.tunnel($0)) } ?? json
    }

    static func exchange(_ x: StoredExchange) -> JSON {
        ExchangeJSON.full(x)
            .setting("phases", to: phases(ExchangePhases(x)))
            .setting("upstream", to: str(x.upstream))
            .setting("messages", to: .array(x.messages.map { m in
                .object([("direction", .string(m.direction)), ("location", .string(m.location)), ("type", str(m.type)),
                         ("json", m.json ?? .null), ("decryption", str(m.decryption)),
                         ("encrypted", .bool(m.isEncrypted)), ("decoded", decodedElements(m.json))])
            }))
    }

    /// The message's elements that hold JOSE (acsSignedContent's JWS, sdkEncData's JWE, a JWT), decoded as
    /// `3dstape decode` does without keys: header and payload shown (masked), signatures and ciphertexts not checked.
    static func decodedElements(_ json: JSON?) -> JSON {
        guard let members = json?.objectMembers else { return .object([]) }
        var out: [(String, JSON)] = []
        for (name, value) in members {
            guard let text = value.stringValue, text.hasPrefix("eyJ"), text.utf8.count < 1 << 20 else { continue }
            let dots = text.utf8.reduce(0) { $0 + ($1 == UInt8(ascii: ".") ? 1 : 0) }
            guard dots == 2 || dots == 4 else { continue }
            out.append((name, Decoder.decode(Array(text.utf8), keys: DecodeKeys()).json))
        }
        return .object(out)
    }

    static func diagram(_ d: SequenceDiagram) -> JSON {
        .object([
            ("participants", .array(d.participants.map { .object([("alias", .string($0.alias)), ("name", .string($0.name))]) })),
            ("items", .array(d.items.map { item in
                switch item {
                case let .note(from, to, text):
                    return .object([("note", .string(text)), ("from", .string(from)), ("to", .string(to))])
                case let .arrow(a):
                    let kind = a.kind == .request ? "request" : a.kind == .response ? "response" : "failure"
                    return .object([("kind", .string(kind)), ("from", .string(a.from)), ("to", .string(a.to)), ("label", .string(a.label)),
                                    ("exchange", .number(String(a.exchangeID))), ("timing", .string(a.timing)), ("replay", str(a.replay))])
                }
            })),
        ])
    }
}
