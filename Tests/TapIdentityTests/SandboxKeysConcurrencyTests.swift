import Dispatch
import Foundation
import Synchronization
import Testing
import TapIdentity

/// The sandbox's keys created on first use by several processes at once (a sandbox and a client started together on a
/// fresh home): all get the same keys, none fails on a file another is writing.
@Suite struct SandboxKeysConcurrencyTests {
    @Test func concurrentFirstUseMakesOneSetOfKeys() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-keys-race-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let results = Mutex<[(root: [UInt8]?, error: String?)]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            let r: (root: [UInt8]?, error: String?)
            do { r = (try SandboxKeys.loadOrCreate(in: dir).root.certificate.der, nil) } catch { r = (nil, "\(error)") }
            results.withLock { $0.append(r) }
        }
        let all = results.withLock { $0 }
        #expect(all.compactMap(\.error).isEmpty, "\(all.compactMap(\.error))")
        #expect(Set(all.compactMap(\.root)).count == 1)
    }
}
