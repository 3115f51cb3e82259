// Fuzz targets for 3dstape's parsers, driven by libFuzzer. Built only with:
//   swift build --product TapFuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING --build-path .build-fuzz
// and run as `TapFuzz TARGET [libFuzzer options] [corpus dirs]` (tools/fuzz/run.sh). TARGET: http-request,
// http-response, json, jose, decode, form, masking, session, http-server (HTTPServerFuzz.swift), options
// (OptionsTarget.swift), client-hello. Each input must give a value, ask for more, or throw — never trap.
import Foundation
import TapCore
import TapEMV
import TapHTTP
import TapJOSE
import TapNet
import TapStore

/// One fuzz target: bytes in, nothing out; a trap or a sanitizer report is a finding.
enum FuzzTarget: String, CaseIterable {
    case httpRequest = "http-request", httpResponse = "http-response", json, jose, decode, form, masking, session, options
    case httpServer = "http-server"
    /// The ClientHello reader of `--pass-through` tunnels: given a client's first bytes, whole and cut in two.
    case clientHello = "client-hello"

    /// Where the session target writes each input, as a file for SQLite to open (one per process).
    static let sessionPath = "/dev/shm/tapfuzz-\(getpid()).3dstape"

    func run(_ bytes: [UInt8]) {
        switch self {
        case .httpRequest, .httpResponse:
            // Fed in two pieces, as a network delivers them, then drained.
            var p = HTTPParser(mode: self == .httpRequest ? .request : .response)
            let cut = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 1)
            for piece in [Array(bytes[..<cut]), Array(bytes[cut...])] {
                p.append(piece)
                for _ in 0..<8 {
                    if self == .httpRequest { if (try? p.nextRequest()) == nil { break } } else if (try? p.nextResponse()) == nil { break }
                }
            }
            _ = try? p.finish()
        case .json:
            if let j = try? JSON.parse(bytes) { _ = try? JSON.parse(j.bytes) }
        case .jose:
            let text = String(decoding: bytes, as: UTF8.self)
            _ = try? JWS(compact: text)
            _ = try? JWE(compact: text)
        case .decode:
            _ = Decoder.decode(bytes, keys: DecodeKeys())
        case .form:
            _ = FormBody.parse(String(decoding: bytes, as: UTF8.self))
        case .masking:
            // The recorder's scan and the full parse must agree: the same messages, and stored bodies that parse alike.
            let fast = ThreeDSContent.prepare(bytes, mask: true)
            let full = ThreeDSContent.prepare(bytes, mask: true, scan: false)
            if fast.messages.map(\.summary) != full.messages.map(\.summary) { fatalError("scan and parse found different messages") }
            let a = try? JSON.parse(fast.stored), b = try? JSON.parse(full.stored)
            if a != b { fatalError("scan and parse stored different JSON") }
            _ = ThreeDSContent.maskLuhnRuns(bytes)
            // The same masking on a URL, a log line and a header value (issue 23: every container).
            let text = String(decoding: bytes, as: UTF8.self)
            _ = Masking.maskText(text)
            _ = Masking.maskHeaders([("X-Value", text)])
        case .httpServer:
            HTTPServerFuzz.shared.serve(bytes)
        case .session:
            // A corrupted or truncated session file: the reader must refuse it or read what it can, never trap.
            let path = FuzzTarget.sessionPath
            for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
            guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else { return }
            if let reader = try? SessionReader(path: path) {
                _ = try? reader.summary()
                _ = try? reader.exchanges()
                _ = try? reader.connections()
            }
        case .options:
            OptionsFuzz.run(bytes)
        case .clientHello:
            _ = TLSClientHello.read(bytes)
            let cut = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 1)
            if case .hello = TLSClientHello.read(Array(bytes[..<cut])), cut < bytes.count, TLSClientHello.read(bytes) == .needMore {
                fatalError("a prefix read as a ClientHello while the whole asks for more")
            }
        }
    }
}

#if FUZZING
import CFuzzDriver

/// libFuzzer's own main (linked with -sanitize=fuzzer) refers to this symbol; the driver below is what runs.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    selected.run(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}

nonisolated(unsafe) var selected: FuzzTarget = .json // set once before the driver starts, read by its callback only
let args = CommandLine.arguments
guard args.count > 1, let target = FuzzTarget(rawValue: args[1]) else {
    FileHandle.standardError.write(Data("usage: TapFuzz \(FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")) [libFuzzer options]\n".utf8))
    exit(2)
}
selected = target
var argc = CommandLine.argc - 1
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv.advanced(by: 1)
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in
    selected.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
})
#else
// A plain build runs each target once over its arguments' files (a smoke check that the targets compile and run).
for path in CommandLine.arguments.dropFirst() {
    guard let d = FileManager.default.contents(atPath: path) else { continue }
    for t in FuzzTarget.allCases { t.run([UInt8](d)) }
}
#endif
