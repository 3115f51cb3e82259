import Foundation
import TapCore
import TapEMV
import TapStore

/// `TapBench mask ROUNDS SESSION...`: the masking alone, as the session writer runs it on each body it stores
/// (`ThreeDSContent.prepare`), on the bodies, URLs and headers of recorded sessions (the repository's `sessions/` are
/// clean: what a clean message costs), grouped by 3DS message type, and on the writer benchmark's two bodies. Prints the
/// CPU time per item, best of five runs of ROUNDS passes.
func maskBench(rounds: Int, sessions: [String]) {
    var json: [[UInt8]] = [], other: [[UInt8]] = [], urls: [String] = [], headers: [[(String, String)]] = []
    for path in sessions {
        guard let reader = try? SessionReader(path: path), let xs = try? reader.exchanges() else {
            FileHandle.standardError.write(Data("TapBench: cannot read \(path)\n".utf8))
            continue
        }
        for x in xs {
            for b in [x.requestBody, x.responseBody] where !b.isEmpty {
                if b.firstNonWhitespace == UInt8(ascii: "{") { json.append(b) } else { other.append(b) }
            }
            urls.append(x.url)
            headers += [x.requestHeaders, x.responseHeaders]
        }
    }
    func time(_ name: String, _ items: Int, averageBytes: Int, _ pass: () -> Int) {
        guard items > 0 else { return }
        var best = Double.infinity, sink = 0
        for _ in 0..<5 {
            let t0 = processCPU()
            for _ in 0..<rounds { sink &+= pass() }
            best = min(best, processCPU() - t0)
        }
        let ns = best * 1000 / Double(rounds * items)
        print(name.padding(toLength: 44, withPad: " ", startingAt: 0)
              + String(format: "%5d items %8.0f ns each %8.1f MB/s", items, ns, Double(averageBytes) / ns * 1000) + (sink == 42 ? " " : ""))
    }
    func bodies(_ name: String, _ bs: [[UInt8]]) {
        time(name, bs.count, averageBytes: bs.reduce(0) { $0 + $1.count } / max(bs.count, 1)) {
            bs.reduce(0) { $0 &+ ThreeDSContent.prepare($1, mask: true).stored.count }
        }
    }
    bodies("JSON bodies", json)
    var byType: [String: [[UInt8]]] = [:]
    for b in json { byType[(try? JSON.parse(b))?["messageType"]?.stringValue ?? "(no messageType)", default: []].append(b) }
    for (type, bs) in byType.sorted(by: { $0.key < $1.key }) { bodies("  \(type)", bs) }
    bodies("other bodies (forms, HTML, JWE)", other)
    bodies("writer benchmark's AReq and ARes", exchanges(1).flatMap { [$0.request.body, $0.response?.body ?? []] })
    time("URLs", urls.count, averageBytes: urls.reduce(0) { $0 + $1.utf8.count } / max(urls.count, 1)) {
        urls.reduce(0) { $0 &+ Masking.maskText($1).utf8.count }
    }
    time("header sets", headers.count, averageBytes: 0) { headers.reduce(0) { $0 &+ Masking.maskHeaders($1).count } }
}
