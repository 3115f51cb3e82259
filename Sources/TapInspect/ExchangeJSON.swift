import Foundation
import TapCore
import TapStore

/// JSON renderings of stored exchanges: `show --json` and `export --format jsonl`.
public enum ExchangeJSON {
    public static func summary(_ x: StoredExchange) -> JSON {
        let json = JSON.object([("id", .number(String(x.id))), ("method", .string(x.method)), ("url", .string(x.url)),
                 ("status", x.status.map { .number(String($0)) } ?? .null), ("start", .number(String(format: "%.6f", x.requestStart))),
                 ("duration_ms", x.durationMs.map { .number(String(format: "%.3f", $0)) } ?? .null),
                 ("messages", .array(x.messages.map { .object([("direction", .string($0.direction)), ("type", $0.type.map(JSON.string) ?? .null)]) })),
                 ("error", x.error.map(JSON.string) ?? .null), ("replay", x.replay.map(replay) ?? .null)])
        // Only a tunnel has the member (the JSON of every other exchange is as before).
        return x.tunnel.map { json.setting("tunnel", to: tunnel($0)) } ?? json
    }

    /// A CONNECT passed through without interception: what was seen of it.
    public static func tunnel(_ t: TunnelAnnotation) -> JSON {
        .object([("host", .string(t.host)), ("port", .number(String(t.port))), ("sni", t.sni.map(JSON.string) ?? .null),
                 ("alpn_offered", t.alpnOffered.map { .array($0.map(JSON.string)) } ?? .null),
                 ("bytes_up", .number(String(t.bytesUp))), ("bytes_down", .number(String(t.bytesDown))),
                 ("ended", t.ended.map(JSON.string) ?? .null), ("decided_by", t.decidedBy.map(JSON.string) ?? .null)])
    }

    /// One line on a tunnel, for `show`: `tunnel host:port, SNI …, ALPN ["h2", "http/1.1"], N B up, M B down, ended …`,
    /// safe for a terminal. `brief` (a table cell, a HAR comment): the SNI and the ALPN names cut short
    /// (`TerminalText.abbreviated`), so a 15 KB SNI cannot widen every row; in full otherwise (`show --exchange N`).
    public static func describe(_ t: TunnelAnnotation, brief: Bool = true) -> String {
        let target = t.host.contains(":") ? "[\(t.host)]:\(t.port)" : "\(t.host):\(t.port)"
        let sni = t.sni.map { brief ? TerminalText.abbreviated($0) : TerminalText.escaped($0) } ?? "none"
        let alpn = t.alpnOffered.map { TerminalText.nameList($0, limit: brief ? 32 : nil) } ?? "none"
        return TerminalText.escaped("tunnel \(target), SNI ") + sni + ", ALPN " + alpn + ", \(t.bytesUp) B up, \(t.bytesDown) B down"
            + (t.ended.map { ", " + TerminalText.escaped($0) } ?? "")
    }

    public static func replay(_ r: ReplayAnnotation) -> JSON {
        .object([("recorded_exchange", r.recordedExchangeID.map { .number(String($0)) } ?? .null),
                 ("matched_by", r.matchedBy.map(JSON.string) ?? .null), ("miss", r.miss.map(JSON.string) ?? .null),
                 ("scheduled_delay_ms", r.scheduledDelayMs.map { .number(String(format: "%.3f", $0)) } ?? .null),
                 ("actual_delay_ms", r.actualDelayMs.map { .number(String(format: "%.3f", $0)) } ?? .null),
                 ("faults", r.faults.map(JSON.string) ?? .null), ("outcome", r.outcome.map(JSON.string) ?? .null)])
    }

    public static func full(_ x: StoredExchange) -> JSON {
        func headers(_ h: [(String, String)]) -> JSON { .array(h.map { .array([.string($0.0), .string($0.1)]) }) }
        func body(_ b: [UInt8]) -> JSON { (try? JSON.parse(b)) ?? .string(String(decoding: b, as: UTF8.self)) }
        func t(_ d: Double?) -> JSON { d.map { .number(String(format: "%.6f", $0)) } ?? .null }
        return summary(x).setting("request", to: .object([("headers", headers(x.requestHeaders)), ("body", body(x.requestBody))]))
            .setting("response", to: .object([("headers", headers(x.responseHeaders)), ("body", body(x.responseBody))]))
            .setting("timings", to: .object([("request_start", t(x.requestStart)), ("upstream_connect", t(x.upstreamConnect)),
                                             ("tls_done", t(x.tlsDone)), ("request_sent", t(x.requestSent)),
                                             ("first_byte", t(x.firstByte)), ("done", t(x.done)), ("client_abort", t(x.clientAbortAt))]))
            .setting("messages", to: .array(x.messages.map {
                .object([("direction", .string($0.direction)), ("location", .string($0.location)), ("json", $0.json ?? .null),
                         ("decryption", $0.decryption.map(JSON.string) ?? .null)])
            }))
    }
}

