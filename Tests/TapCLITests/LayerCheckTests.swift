import Foundation
import Testing

/// tools/testing/layers.py (run by .ci/run): Package.swift's layer comment is the rule, and a module that imports one of
/// its own or a higher layer, imports what it does not declare, or is in no layer fails the check.
@Suite struct LayerCheckTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
    var script: String { Self.root.appendingPathComponent("tools/testing/layers.py").path }

    /// A copy of Package.swift and one source file per case in a scratch tree.
    func check(package: (String) -> String = { $0 }, files: [String: String]) throws -> (status: Int32, out: String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("3dstape-layers-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try package(manifest).write(to: dir.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
        for (path, text) in files {
            let url = dir.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try text.write(to: url, atomically: true, encoding: .utf8)
        }
        let r = try sh(["python3", script, "--root", dir.path])
        return (r.status, r.out)
    }

    @Test func theTreeKeepsItsLayers() throws {
        let r = try sh(["python3", script])
        #expect(r.status == 0 && r.out.hasPrefix("layers: ok"), "\(r.out)\(r.err)")
    }

    @Test func anUpwardImportFails() throws {
        let r = try check(files: ["Sources/TapCore/Bad.swift": "import Foundation\n@testable import TapEMV\n",
                                  "Sources/TapIdentity/Ok.swift": "import TapJOSE\n"])
        #expect(r.status == 1 && r.out == "layers: Sources/TapCore/Bad.swift:2: TapCore (layer 2) uses TapEMV (layer 5): "
            + "a module uses only modules of a lower layer\n"
            + "layers: Sources/TapCore/Bad.swift:2: TapCore imports TapEMV, which its dependencies in Package.swift do not name\n", "\(r.out)")
    }

    @Test func aSidewaysImportAndAnUndeclaredOneFail() throws {
        let r = try check(files: ["Sources/TapProxy/Side.swift": "import TapReplay\n", "Sources/TapBench/Hidden.swift": "import TapSQLite\n"])
        #expect(r.status == 1, "\(r.out)")
        #expect(r.out.contains("Sources/TapProxy/Side.swift:1: TapProxy (layer 8) uses TapReplay (layer 8)"))
        #expect(r.out.contains("Sources/TapBench/Hidden.swift:1: TapBench imports TapSQLite, which its dependencies in Package.swift do not name"))
    }

    @Test func aDependencyUpwardOrAModuleInNoLayerFails() throws {
        let r = try check(package: {
            $0.replacingOccurrences(of: #".target(name: "TapHTTP", dependencies: ["TapCore"]"#, with: #".target(name: "TapHTTP", dependencies: ["TapCore", "TapNet"]"#)
                .replacingOccurrences(of: "HTTP messages, typed command-line options: TapCrypto, TapCompression, TapSQLite, TapHTTP, TapArguments",
                                      with: "HTTP messages, typed command-line options: TapCrypto, TapCompression, TapSQLite, TapHTTP")
        }, files: [:])
        #expect(r.status == 1, "\(r.out)")
        #expect(r.out.contains("layers: Package.swift: TapHTTP's dependencies: TapHTTP (layer 3) uses TapNet (layer 4)"))
        #expect(r.out.contains("layers: Package.swift: target TapArguments is in no layer of the header comment"))
    }

    /// A test target that imports one of ours without naming it (TapInspectTests imported TapEMV, which only TapInspect's own
    /// dependencies brought along) fails; naming it passes.
    @Test func aTestTargetImportingWhatItDoesNotDeclareFails() throws {
        let undeclared: (String) -> String = {
            $0.replacingOccurrences(of: #""TapInspectTests", dependencies: ["TapInspect", "TapRecording", "TapStore", "TapEMV", "#,
                                    with: #""TapInspectTests", dependencies: ["TapInspect", "TapRecording", "TapStore", "#)
        }
        let file = ["Tests/TapInspectTests/ValidatorTests.swift": "import Testing\n@testable import TapInspect\nimport TapEMV\n"]
        let r = try check(package: undeclared, files: file)
        #expect(r.status == 1 && r.out == "layers: Tests/TapInspectTests/ValidatorTests.swift:3: TapInspectTests imports TapEMV, "
            + "which its dependencies in Package.swift do not name\n", "\(r.out)")
        #expect(try check(files: file).status == 0)
    }
}
