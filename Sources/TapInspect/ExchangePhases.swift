import TapStore

/// An exchange's phases in milliseconds, from its recorded timestamps, each from the end of the one before: connect
/// (to the upstream) and TLS, nil where they did not happen (a reused connection); send; wait (for the first byte);
/// receive. A timestamp missing or earlier than the one before leaves its phase at 0. HAR's timings and the web
/// inspector's waterfall both come from here.
public struct ExchangePhases: Sendable {
    public var connect: Double?
    public var tls: Double?
    public var send = 0.0
    public var wait = 0.0
    public var receive = 0.0

    public init(start: Double, upstreamConnect: Double?, tlsDone: Double?, requestSent: Double?, firstByte: Double?, done: Double?) {
        var cursor = start
        if let c = upstreamConnect, c >= start {
            connect = (c - start) * 1000
            cursor = c
            if let t = tlsDone, t >= c {
                tls = (t - c) * 1000
                cursor = t
            }
        }
        if let sent = requestSent, sent >= cursor { send = (sent - cursor) * 1000; cursor = sent }
        if let first = firstByte, first >= cursor { wait = (first - cursor) * 1000; cursor = first }
        if let done, done >= cursor { receive = (done - cursor) * 1000 }
    }

    public init(_ x: StoredExchange) {
        self.init(start: x.requestStart, upstreamConnect: x.upstreamConnect, tlsDone: x.tlsDone, requestSent: x.requestSent,
                  firstByte: x.firstByte, done: x.done)
    }

    /// The phases by name, 0 for one that did not happen: connect, tls, send, wait, receive.
    public var named: [(String, Double)] {
        [("connect", connect ?? 0), ("tls", tls ?? 0), ("send", send), ("wait", wait), ("receive", receive)]
    }
}
