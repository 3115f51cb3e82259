// Benchmarks of single components, for tools/bench (not part of the 3dstape command line).
//
//   TapBench writer PATH COUNT   writes COUNT exchanges shaped as tools/bench/proxy.sh's (a 2 KB AReq-like POST
//                                answered by a 3 KB ARes-like JSON) through the session writer into PATH, and prints
//                                "exchanges COUNT cpu_us_per_exchange X": the process's CPU time (user + system) from
//                                the first submit until the writer has closed the file, divided by COUNT.
//   TapBench mask ROUNDS SESSION...   the masking alone on each body, URL and header set of the sessions (MaskBench.swift).
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TapRecording
import TapStore

/// The process's CPU time (user + system), in microseconds.
func processCPU() -> Double {
    var r = rusage()
    getrusage(RUSAGE_SELF.rawValue, &r)
    return Double(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 + Double(r.ru_utime.tv_usec + r.ru_stime.tv_usec)
}

/// The benchmark's exchanges, made before the clock starts.
func exchanges(_ count: Int) -> [ExchangeRecord] {
    let areq = Array(#"{"messageType": "AReq", "messageVersion": "2.2.0", "threeDSServerTransID": "8a880dc0-d2d2-4067-bcb1-b08d1690b26e", "acctNumber": "4000000000001091", "deviceChannel": "02", "messageCategory": "01", "padding": ""#.utf8)
        + [UInt8](repeating: UInt8(ascii: "a"), count: 1800) + Array(#""}"#.utf8)
    let ares = Array(#"{"messageType": "ARes", "messageVersion": "2.2.0", "transStatus": "Y", "eci": "05", "acsTransID": "13c701a3-5a88-4c45-89e9-ef65e50a8bf9", "dsTransID": "d7c1ee99-9478-44a6-b1f2-391e29c6b340", "threeDSServerTransID": "8a880dc0-d2d2-4067-bcb1-b08d1690b26e", "padding": ""#.utf8)
        + [UInt8](repeating: UInt8(ascii: "x"), count: 2750) + Array(#""}"#.utf8)
    return (0..<count).map { i in
        var r = ExchangeRecord(connectionID: 1, seq: i + 1, method: "POST", url: "http://127.0.0.1:18181/ds/areq", host: "127.0.0.1:18184",
                               path: "/ds/areq", upstream: "127.0.0.1:18181",
                               request: CapturedMessage(headers: [("Host", "127.0.0.1:18184"), ("User-Agent", "wrk"), ("Content-Type", "application/json"),
                                                                  ("Content-Length", String(areq.count))], body: areq, wireSize: areq.count + 90),
                               requestStart: 1_790_000_000 + Double(i) / 1000)
        r.status = 200
        r.response = CapturedMessage(headers: [("Server", "nginx"), ("Content-Type", "application/json"), ("Content-Length", String(ares.count))],
                                     body: ares, wireSize: ares.count + 80)
        r.requestSent = r.requestStart + 0.00002
        r.firstByte = r.requestStart + 0.0001
        r.done = r.requestStart + 0.00012
        r.mask = true
        return r
    }
}

let args = CommandLine.arguments
if args.count > 3, args[1] == "mask", let rounds = Int(args[2]), rounds > 0 {
    maskBench(rounds: rounds, sessions: Array(args[3...]))
    exit(0)
}
guard args.count == 4, args[1] == "writer", let count = Int(args[3]), count > 0 else {
    FileHandle.standardError.write(Data("usage: TapBench writer PATH COUNT | TapBench mask ROUNDS SESSION...\n".utf8))
    exit(2)
}
let records = exchanges(count)
let writer: SessionWriter
do {
    writer = try SessionWriter(path: args[2], meta: [("label", "TapBench writer")])
} catch {
    FileHandle.standardError.write(Data("TapBench: \(error)\n".utf8))
    exit(1)
}
writer.submit(.connectionOpened(ConnectionRecord(id: 1, clientAddress: "127.0.0.1:40000", acceptedAt: 1_790_000_000, mode: "reverse",
                                                 upstream: "http://127.0.0.1:18181")))
let start = processCPU()
for r in records { writer.submit(.exchange(r)) }
writer.close()
let perExchange = (processCPU() - start) / Double(count)
guard writer.exchangesWritten == count else {
    FileHandle.standardError.write(Data("wrote \(writer.exchangesWritten) of \(count): \(writer.writeError ?? "?")\n".utf8))
    exit(1)
}
print(String(format: "exchanges %d cpu_us_per_exchange %.2f", count, perExchange))
