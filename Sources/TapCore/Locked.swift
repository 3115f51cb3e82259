#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value shared between threads, guarded by a pthread mutex. 3dstape uses it instead of Synchronization's `Mutex`
/// because that one locks with futex calls inside the prebuilt toolchain library, which ThreadSanitizer cannot see:
/// every guarded access was reported as a race. pthread mutexes are intercepted, so TSan checks real races only.
public final class Locked<Value>: @unchecked Sendable {
    // Safe: `value` is read and written only between pthread_mutex_lock and pthread_mutex_unlock on `mutex`.
    private var value: Value
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, under the lock.
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
