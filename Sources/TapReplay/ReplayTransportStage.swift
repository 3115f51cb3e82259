import TapHTTPService
import TapNet

/// The replay-only stage of a transport fault (`--fault ...=close|reset|truncate:N|malformed|dribble:D`): the server hands
/// the connection over (`HTTPServerAnswer.takeOver`) and this stage does to it what the fault says, instead of the
/// server's ordinary reply. A hang never reaches it (nothing is sent).
extension Replayer {
    static func deliver(_ reply: HTTPReply, with fault: ReplayTransportFault, on connection: Connection) {
        switch fault {
        case .hang:
            break
        case .close:
            connection.close()
        case .reset:
            connection.reset()
        case let .raw(bytes):
            connection.write(bytes)
            connection.close(afterFlush: true)
        case let .dribble(seconds):
            dribble(reply.bytes(keepAlive: false), over: seconds, on: connection)
        }
    }

    /// Writes `bytes` in about 20 pieces spread evenly over `seconds`, then closes (WireMock's chunkedDribbleDelay).
    static func dribble(_ bytes: [UInt8], over seconds: Double, on connection: Connection) {
        let pieces = max(1, min(20, bytes.count))
        let size = (bytes.count + pieces - 1) / pieces
        for i in 0..<pieces {
            let chunk = Array(bytes[min(bytes.count, i * size)..<min(bytes.count, (i + 1) * size)])
            let last = i == pieces - 1
            connection.loop.schedule(after: seconds * Double(i) / Double(max(1, pieces - 1))) { [weak connection] in
                guard let connection, !connection.isClosed else { return }
                connection.write(chunk)
                if last { connection.close(afterFlush: true) }
            }
        }
    }
}
