import Foundation
import TapCore

/// Looks host names up off the event loop for `Connection.connect`: getaddrinfo blocks for as long as the system's
/// resolver takes (seconds for a name that does not exist), and on the loop thread one client choosing names would
/// freeze every other connection. A lookup runs on a thread of its own, at most `maxInFlight` at once (more are refused
/// at once, not queued), and its answer is posted back to the loop; a lookup with no answer within `timeout` fails
/// there (its thread finishes in the background and still counts until it does). Literal addresses need no lookup.
/// Each `EventLoop` has one (`EventLoop.resolver`); a test replaces `lookUp` with a slow one.
public final class HostResolver: Sendable {
    /// The blocking lookup: the numeric address for the host (called off the loop).
    public typealias LookUp = @Sendable (HostPort) throws -> String

    public let timeout: Double
    public let maxInFlight: Int
    private let lookUp: LookUp
    private let inFlight = Locked(0)

    public init(timeout: Double = 5, maxInFlight: Int = 16, lookUp: LookUp? = nil) {
        self.timeout = timeout
        self.maxInFlight = maxInFlight
        self.lookUp = lookUp ?? { target in
            let resolved = try ResolvedAddress(target)
            guard let host = resolved.numericHost else { throw NetError("cannot resolve \(target.host)", code: 0, reason: "no usable address") }
            return host
        }
    }

    /// Lookups running now.
    public var running: Int { inFlight.withLock { $0 } }

    /// Looks `target` up and calls `done` on `loop`'s thread, once: with the numeric host, or why there is none (no
    /// answer within `timeout`, too many lookups in flight, the resolver's error).
    func resolve(_ target: HostPort, on loop: EventLoop, _ done: @escaping (Result<String, ConnectionError>) -> Void) {
        let answer = LoopBound(done)
        let admitted = inFlight.withLock { n -> Bool in
            guard n < maxInFlight else { return false }
            n += 1
            return true
        }
        guard admitted else {
            let why = "\(target.host): \(maxInFlight) host name lookups already in flight; try again"
            _ = loop.schedule(after: 0) { answer.take()?(.failure(.resolve(why))) }
            return
        }
        let limit = timeout
        let timer = loop.schedule(after: limit) {
            answer.take()?(.failure(.resolve("\(target.host): no answer within \(CheckedDuration.describe(limit))")))
        }
        let lookUp = self.lookUp, inFlight = self.inFlight
        let carried = LoopBound((answer, timer))
        // A thread per lookup, not a Dispatch queue: Dispatch runs blocking work on a pool as wide as the cores, so two
        // lookups that hang would hold every other one back (seen in the tests on 2 cores). `maxInFlight` bounds them.
        Thread {
            let result: Result<String, ConnectionError>
            do {
                result = .success(try lookUp(target))
            } catch {
                result = .failure(.resolve("\(target.host): \((error as? NetError)?.reason ?? "\(error)")"))
            }
            inFlight.withLock { $0 -= 1 }
            loop.execute {
                guard let (answer, timer) = carried.take() else { return }
                loop.cancel(timer)
                answer.take()?(result)
            }
        }.start()
    }
}

/// A value made on the loop's thread that rides through another thread untouched and is used on the loop again: taken
/// at most once. `@unchecked Sendable` is safe because the value is only read (`take`) on the loop's thread; the lock
/// only guards against taking it twice, not against concurrent use.
final class LoopBound<Value>: @unchecked Sendable {
    private let box: Locked<Value?>
    init(_ value: Value) { box = Locked(value) }
    func take() -> Value? { box.withLock { v in defer { v = nil }; return v } }
}
