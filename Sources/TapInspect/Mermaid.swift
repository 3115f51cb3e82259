import Foundation
import TapCore
import TapStore

/// A Mermaid `sequenceDiagram` of a session: the 3DS roles (SDK, Browser, 3DS Server, DS, ACS) and any other hosts,
/// each exchange drawn as a request arrow and a response arrow labelled with message types, statuses and timings.
public enum Mermaid {
    /// The roles in the order they are drawn, with their Mermaid aliases.
    static let roles: [(alias: String, name: String)] = [("SDK", "SDK"), ("Browser", "Browser"), ("Server", "3DS Server"), ("DS", "DS"), ("ACS", "ACS")]

    public static func sequenceDiagram(_ exchanges: [StoredExchange]) -> String {
        let transactions = ThreeDSTransaction.group(exchanges)
        var txOf: [Int64: (Int, ThreeDSTransaction)] = [:]
        for (i, t) in transactions.enumerated() { for m in t.messages where txOf[m.exchangeID] == nil { txOf[m.exchangeID] = (i + 1, t) } }
        var originRole: [String: String] = [:] // URL origin → role, learnt from 3DS exchanges
        var lines: [String] = []
        var used: [String] = []
        var others: [String: String] = [:] // origin → alias for hosts without a 3DS role
        func use(_ alias: String) { if !used.contains(alias) { used.append(alias) } }
        var announced = Set<Int>()
        let t0 = exchanges.first?.requestStart ?? 0
        for x in exchanges {
            let req = x.messages.first { $0.direction == "request" && $0.type != nil }
            let browserTx = txOf[x.id]?.1.deviceChannel == "02"
            var pair = req.flatMap { roles(for: $0, exchangeURL: x.url, browser: browserTx, known: originRole) }
            let origin = Self.origin(x.url)
            if let pair { originRole[origin] = pair.1 }
            if pair == nil {
                let to = originRole[origin] ?? others[origin] ?? {
                    let alias = "H\(others.count + 1)"
                    others[origin] = alias
                    return alias
                }()
                let lastBrowser = lines.last?.contains("Browser") ?? false
                pair = (to == "ACS" || lastBrowser ? "Browser" : "Client", to)
            }
            let (from, to) = pair!
            use(from); use(to)
            if let (n, t) = txOf[x.id], announced.insert(n).inserted {
                let channel = ["01": "app", "02": "browser", "03": "3RI"][t.deviceChannel ?? ""] ?? "?"
                lines.append("    Note over \(from),\(to): transaction \(n) · \(channel) \(t.version ?? "") · \(t.outcome)")
            }
            let reqLabel = x.messages.filter { $0.direction == "request" }.map(label).joined(separator: ", ")
            let respLabel = x.messages.filter { $0.direction == "response" }.map(label).joined(separator: ", ")
            let path = URLComponents(string: x.url)?.path ?? x.url
            lines.append("    \(from)->>\(to): \(clean(reqLabel.isEmpty ? "\(x.method) \(path)" : reqLabel)) · T+\(String(format: "%.0f", (x.requestStart - t0) * 1000)) ms")
            let status = x.status.map { "HTTP \($0)" } ?? "no response"
            let took = x.durationMs.map { String(format: " · %.1f ms", $0) } ?? ""
            if let e = x.error, x.status == nil {
                lines.append("    \(to)--x\(from): \(clean(e))\(took)")
            } else {
                lines.append("    \(to)-->>\(from): \(clean(respLabel.isEmpty ? status : respLabel))\(took)")
            }
        }
        var head = ["sequenceDiagram"]
        for (alias, name) in roles where used.contains(alias) { head.append("    participant \(alias) as \(name)") }
        if used.contains("Client") { head.insert("    participant Client", at: 1) }
        for (origin, alias) in others.sorted(by: { $0.value < $1.value }) where used.contains(alias) {
            head.append("    participant \(alias) as \(clean(origin))")
        }
        return (head + lines).joined(separator: "\n") + "\n"
    }

    /// Who sends and who answers an exchange, from its request message.
    static func roles(for m: RecordedMessage, exchangeURL: String, browser: Bool, known: [String: String]) -> (String, String)? {
        switch m.type {
        case "AReq", "PReq": return ("Server", "DS")
        case "RReq": return ("DS", "Server")
        case "CReq": return m.location == "jwe" ? ("SDK", "ACS") : ("Browser", "ACS")
        case "CRes": return ("Browser", "Server") // a browser final CRes posted to the notificationURL
        case "Erro":
            let to = known[origin(exchangeURL)] ?? "DS"
            return (to == "ACS" ? (browser ? "Browser" : "SDK") : "Server", to)
        default: return nil
        }
    }

    static func label(_ m: RecordedMessage) -> String {
        var s = m.type ?? "?"
        if m.location == "jwe", !m.isDecrypted { return s + " (JWE)" }
        if let v = m.json?["transStatus"]?.stringValue { s += " " + v }
        if let e = m.json?["errorCode"]?.stringValue { s += " " + e }
        if let c = m.json?["challengeCancel"]?.stringValue { s += " cancel " + c }
        if m.location.hasPrefix("form:") { s += " (form)" }
        return s
    }

    static func origin(_ url: String) -> String {
        guard let c = URLComponents(string: url), let host = c.host else { return url }
        return "\(c.scheme ?? "http")://\(host)\(c.port.map { ":\($0)" } ?? "")"
    }

    /// Mermaid message text: no line breaks, semicolons or `#` (entity codes), which would end or garble the line.
    static func clean(_ s: String) -> String {
        String(s.map { $0 == "\n" || $0 == "\r" || $0 == ";" || $0 == "#" ? " " : $0 })
    }
}
