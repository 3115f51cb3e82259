import Foundation
import TapCore
import TapCrypto
import TapEMV
import TapHTTPService
import TapIdentity
import TapNet
import TapProxy
import TapRecording
import TapSandbox
import TapStore

/// A sandbox (and optionally the recording proxy) on a loop thread, with client certificates on disk.
final class SandboxHarness {
    /// The test process's key directories (this one and its "-identity" sibling), removed when the process exits: one
    /// pair per `swift test` run was left in the temporary directory before.
    static let keysDirectory: String = {
        atexit {
            for suffix in ["", "-identity"] { try? FileManager.default.removeItem(atPath: SandboxHarness.keysDirectory + suffix) }
        }
        return FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-sandbox-keys-\(getpid())").path
    }()
    /// Made once per test process (suites run in parallel; Swift initialises a static exactly once).
    static let keys: SandboxKeys = try! SandboxKeys.loadOrCreate(in: keysDirectory)
    /// 3dstape's own test DS identity for key substitution (a second key set).
    static let identity: SandboxKeys = try! SandboxKeys.loadOrCreate(in: keysDirectory + "-identity", name: "3dstape Test")

    let loop: EventLoop
    let sandbox: Sandbox
    let stack: ServiceStack
    let certs: String
    let dir: URL
    var proxyAddress: HostPort?
    var writer: SessionWriter?
    private var proxy: ProxyServer?

    var substitution: KeySubstitution?

    /// `substitute`: record through the proxy with key substitution; the client then trusts 3dstape's
    /// test DS identity instead of the sandbox's.
    init(dsKey: DSKeyType = .rsa, signing: SignatureAlgorithm = .ps256, viaProxy: Bool = false, tls: Bool = false,
         substitute: Bool = false, configure: (inout SandboxOptions) -> Void = { _ in }) throws {
        let keys = SandboxHarness.keys
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-sandbox-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        certs = dir.appendingPathComponent("certs").path
        try (substitute ? SandboxHarness.identity : keys).writeClientCertificates(to: certs, dsKeyType: dsKey)
        stack = try ServiceStack.background("3dstape-test-harness")
        loop = stack.loop
        var options = SandboxOptions()
        options.dsKeyType = dsKey
        options.signing = signing
        options.aresDelay = 0.3
        options.decoupledDelay = 0.1
        if viaProxy || substitute {
            var sub: KeySubstitution?
            if substitute {
                let id = SandboxHarness.identity
                sub = KeySubstitution(identity: SubstitutionIdentity(dsRSAKey: id.dsKeys[.rsa]?.key, dsECKey: id.dsKeys[.ec]?.key,
                                                                     directoryServerID: id.directoryServerID, acsKey: id.acsRSA.key,
                                                                     acsCertificate: id.acsRSA.cert, signing: .ps256),
                                      upstream: UpstreamDS(encryptionCertificate: keys.dsKeys[dsKey]!.cert,
                                                           directoryServerID: keys.directoryServerID, roots: [keys.root.certificate]))
            }
            substitution = sub
            let w = try SessionWriter(path: dir.appendingPathComponent("s.3dstape").path, meta: [("label", "sandbox test")], keys: sub)
            var config = ProxyConfiguration(mode: .forward, upstreamTLS: try TLSContext(clientRoots: []), interceptTLS: nil)
            config.substitution = sub
            let p = ProxyServer(loop: loop, config: config, writer: w)
            proxyAddress = try p.listen(on: HostPort(host: "127.0.0.1", port: 0))
            options.outgoingProxy = proxyAddress
            writer = w
            stack.onStop { p.shutdown() }
            stack.finally { w.close() }
            proxy = p
        }
        configure(&options)
        sandbox = Sandbox(keys: keys, options: options, loop: loop)
        try sandbox.start(on: HostPort(host: "127.0.0.1", port: 0), tls: tls)
        stack.start()
    }

    var sessionPath: String { dir.appendingPathComponent("s.3dstape").path }

    func options(card: String, browser: Bool = false, version: String = "2.2.0") -> ClientOptions {
        var o = ClientOptions(dsURL: HTTPURL(sandbox.baseURL)!, card: card, certsDirectory: certs)
        o.browser = browser
        o.messageVersion = version
        o.proxy = proxyAddress
        o.timeout = 10
        return o
    }

    /// Scripts the passing answer for a card.
    static func passing(_ card: TestCard, _ o: inout ClientOptions) {
        switch card.behaviour {
        case .challenge(uiType: .text), .challenge(uiType: .html): o.answer = TestCard.otp
        case .challenge(uiType: .singleSelect): o.select = ["2"]
        case .challenge(uiType: .multiSelect): o.select = ["1", "3"]
        case .challenge(uiType: .oob), .challenge(uiType: .htmlOOB): o.oob = true
        default: break
        }
    }

    func run(_ o: ClientOptions) throws -> ClientResult { try SDKClient(options: o).run() }

    /// Stops the loop (closing the proxy on its thread) and the writer; removes the files unless told not to.
    func stop(keepFiles: Bool = false) {
        stack.stop()
        if !keepFiles { try? FileManager.default.removeItem(at: dir) }
    }
}
