import Dispatch
import Foundation
import Synchronization
import Testing
import TapIdentity

/// The interception CA created on first use: commands started at the same moment on a fresh home share one CA.
@Suite struct InterceptionCATests {
    /// Two `check` runs started together in CI on a fresh THREEDSTAPE_HOME: one created the CA while the other found no
    /// CA, tried to create it too and failed ("already exists"), so it ended with exit 1 and no report. Eight creators
    /// at once (each its own descriptor and lock, as separate processes have) all get the same CA.
    @Test func concurrentFirstUseCreatesOneCA() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-ca-race-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: home) }
        let results = Mutex<[(der: [UInt8]?, error: String?)]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            let r: (der: [UInt8]?, error: String?)
            do { r = (try UserHome(path: home).interceptionCA().0.certificate.der, nil) } catch { r = (nil, "\(error)") }
            results.withLock { $0.append(r) }
        }
        let all = results.withLock { $0 }
        let failures = all.compactMap(\.error)
        #expect(failures.isEmpty, "\(failures)")
        let certificates = Set(all.compactMap(\.der))
        #expect(certificates.count == 1)
        let (again, created) = try UserHome(path: home).interceptionCA()
        #expect(!created && certificates.contains(again.certificate.der))
    }
}
