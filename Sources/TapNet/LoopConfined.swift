/// A value owned by one event loop, as SwiftNIO's `NIOLoopBound`: read and changed only through `value`, which checks
/// that the caller is on the loop's thread (or that the loop has not started yet, while its owner is being set up) and,
/// in debug builds, traps when it is not. Thread confinement checked, not promised: a class whose mutable state lives in
/// one of these may call itself `Sendable` on the strength of the check, and a slip (state touched from a Dispatch
/// queue or a test's thread) stops a debug run where it happens instead of corrupting it somewhere else.
///
/// `@unchecked Sendable` is safe because `stored` is only read or written through `value` (it is `@usableFromInline` for the
/// inlinable accessors, not for other code), which asserts the loop's
/// thread; the reference itself may cross threads (to hop back onto the loop), the value does not.
///
/// The accessors are inlinable, so that a user's release build specializes them for its `Value` and they compile to a
/// plain field access (the check is an `assert`, gone in release builds); before, each use from another module went
/// through the unspecialized generic getter, which copied the whole value out through its value witnesses.
public final class LoopConfined<Value>: @unchecked Sendable {
    public let loop: EventLoop
    @usableFromInline var stored: Value

    public init(_ value: Value, on loop: EventLoop) {
        self.loop = loop
        stored = value
    }

    /// True where the value may be touched: on the loop's thread, or anywhere before the loop runs.
    @inlinable public var isOnLoop: Bool { loop.mayBeUsedHere }

    /// The value; off the loop this traps in debug builds. Read in place (`_read`), not copied out.
    @inlinable public var value: Value {
        _read {
            assert(isOnLoop, "LoopConfined<\(Value.self)> read off its event loop's thread")
            yield stored
        }
        _modify {
            assert(isOnLoop, "LoopConfined<\(Value.self)> changed off its event loop's thread")
            yield &stored
        }
    }
}
