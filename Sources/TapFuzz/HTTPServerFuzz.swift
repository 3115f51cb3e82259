// The `http-server` fuzz target: HTTPServer, the driver every 3dstape server runs on, end to end with the replayer's
// handler, over one socketpair per input. The input is what a client sends, pipelined; its first byte says how:
// in pieces of which size (slow input), whether the client reads its answers as they come or leaves them queued,
// and whether it half-closes after its last byte. The server stops reading at 4 KiB of unsent answers (1 MiB in
// `3dstape replay`), so that a client that does not read drives its backpressure. The loop is stepped here
// (EventLoop.runOnce), so an input runs to its end without threads. After the client closes, the server must have
// let go of everything: connections, request bytes, queued answers and pending exchanges.
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TapCrypto
import TapNet
import TapReplay

/// One replayer, its loop and listener, made once per process and used by every input.
///
/// `@unchecked Sendable` (for `shared`): libFuzzer runs the inputs one at a time on one thread, the loop's.
final class HTTPServerFuzz: @unchecked Sendable {
    let loop: EventLoop
    let replayer: Replayer
    /// Answers the client read during the last input (kept so that reading is not optimised away).
    var bytesRead = 0
    /// The client's receive buffer.
    var readBuffer = [UInt8](repeating: 0, count: 65536)

    /// Made by the first input.
    static let shared: HTTPServerFuzz = {
        do { return try HTTPServerFuzz() } catch { fatalError("http-server: cannot set up the replayer: \(error)") }
    }()

    /// The replayer of the repository's reverse-mode sample (copied to /dev/shm: opening may recover its WAL), answering
    /// at once (`--timing none`) but for GET /chunked (20 µs later, from a timer) and GET /gzip (never: a hang, until the
    /// client leaves).
    init() throws {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../sessions/sample-reverse.3dstape")
            .standardized.path
        let copy = "/dev/shm/tapfuzz-server-\(getpid()).3dstape"
        for suffix in ["", "-wal", "-shm"] { unlink(copy + suffix) }
        try FileManager.default.copyItem(atPath: source, toPath: copy)
        defer { for suffix in ["", "-wal", "-shm"] { unlink(copy + suffix) } }
        let catalog = try ReplayCatalog.load(path: copy)
        var options = ReplayOptions()
        options.schedule.timing = .none
        options.faults = [try FaultRule.parse("path:/chunked=delay:20us"), try FaultRule.parse("path:/gzip=hang")]
        let ca = try CertificateAuthority.selfSigned(commonName: "TapFuzz DS root", key: try PrivateKey.generateP256())
        let key = try PrivateKey.generateP256()
        let identity = ReplayACSIdentity(key: key, certificate: try ca.issue(commonName: "TapFuzz ACS", subjectKey: key.publicKey, profile: .signing),
                                         signing: .es256)
        loop = try EventLoop()
        replayer = Replayer(loop: loop, engine: ReplayEngine(catalog: catalog, options: options, identity: identity), writer: nil,
                            outgoingTLS: try TLSContext(clientRoots: []), report: { _ in })
        try replayer.start(on: HostPort(host: "127.0.0.1", port: 0), tls: nil, intercepting: nil, scheme: "http",
                           headerTimeout: 1, idleTimeout: 1, maxUnsentBytes: 4096)
    }

    func serve(_ bytes: [UInt8]) {
        let flags = bytes.first ?? 0
        let readsAsItGoes = flags & 1 != 0
        let halfCloses = flags & 2 != 0
        let stream = Array(bytes.dropFirst())
        // Pieces of 1 to 64 bytes, or the whole input at once; no more than 64 pieces (a run stays short).
        let size = flags >> 2 == 0 ? max(1, stream.count) : max(Int(flags >> 2), (stream.count + 63) / 64)

        guard let (server, client) = Platform.streamSocketPair() else { fatalError("socketpair: \(errno)") }
        // Small kernel buffers on the server's side, so that a client that does not read soon leaves answers queued
        // in the server (the driver's own backpressure, not the kernel's).
        var small: Int32 = 4096
        setsockopt(server, SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        replayer.adopt(fd: server, peer: "fuzz")

        var offset = 0, stalls = 0
        while offset < stream.count, stalls < 8 {
            let n = min(size, stream.count - offset)
            let sent = stream.withUnsafeBytes { send(client, $0.baseAddress! + offset, n, Platform.sendFlags) }
            let full = sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
            loop.runOnce()
            if readsAsItGoes { drain(client) }
            if sent > 0 {
                offset += sent
            } else if !full || !readsAsItGoes {
                break // the server closed (a refusal), or stopped reading a client that does not read either
            } else {
                stalls += 1
            }
        }
        if halfCloses { shutdown(client, Int32(SHUT_WR)) }
        // Let the delayed answers (20 µs) and the server's reaction to the end of the input come, turning the loop without
        // sleeping (a sleep on a busy machine costs far more than the delay): until nothing is ready and no answer waits
        // for its timer (for 5 ms at most).
        let until = EventLoop.nowNanos() + 5_000_000
        var quiet = 0
        while quiet < 2 || replayer.held.timed > 0, EventLoop.nowNanos() < until {
            let worked = loop.runOnce()
            if readsAsItGoes || halfCloses { drain(client) }
            quiet = worked == 0 ? quiet + 1 : 0
        }
        close(client)
        var turns = 0
        while replayer.held.connections > 0, turns < 2000 {
            loop.runOnce(maxWaitNanos: 50_000)
            turns += 1
        }
        let held = replayer.held
        guard held.connections == 0, held.requestBytes == 0, held.unsentBytes == 0, held.unanswered == 0 else {
            fatalError("http-server: the client left but the server still holds \(held)")
        }
    }

    /// Reads what the server has sent so far (as a client that keeps up would).
    func drain(_ fd: Int32) {
        while true {
            let n = readBuffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n <= 0 { return }
            bytesRead &+= n
        }
    }
}
