import Foundation
import Testing
import TapCore
import TapCrypto
import TapJOSE

/// `3dstape decode`, run as a process, for every kind of input.
@Suite struct DecodeCommandTests {
    func fixture() throws -> JSON {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../TapJOSETests/Fixtures/python-vectors.json")
        return try JSON.parse([UInt8](try Data(contentsOf: url)))
    }

    func cases(_ kind: String) throws -> [JSON] {
        guard case let .array(all)? = try fixture()["cases"] else { return [] }
        return all.filter { $0["kind"]?.stringValue == kind }
    }

    func json(_ r: CLIRunner.Result) throws -> JSON { try JSON.parse(r.stdout) }

    @Test func decodesEveryKindAsJSON() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let doc = try fixture()
        let rsaKey = dir.appendingPathComponent("rsa.jwk"), ecKey = dir.appendingPathComponent("ec.pem")
        try doc["keys"]!["rsa"]!.compact.write(to: rsaKey, atomically: true, encoding: .utf8)
        try JWK(json: doc["keys"]!["ec"]!).privateKey().pem().write(to: ecKey, atomically: true, encoding: .utf8)
        let root = dir.appendingPathComponent("root.pem")
        try doc["roots"]!["rsa"]!.stringValue!.write(to: root, atomically: true, encoding: .utf8)
        let secret = doc["keys"]!["secret"]!.stringValue!

        // JWE RSA-OAEP-256 (key as a JWK file) and EC deviceData (key as PEM, DS id found by trying the known ones).
        for (kind, key) in [("jwe-rsa", rsaKey), ("jwe-ec", ecKey)] {
            for c in try cases(kind) {
                let r = try CLIRunner.run(["decode", "--json", "--key", key.path, "-"], stdin: c["compact"]!.stringValue!)
                #expect(r.status == 0, "\(c["name"]!.compact): \(r.stderr)")
                let out = try json(r)
                #expect(out["kind"] == .string("jwe"))
                #expect(out["error"] == .null)
                #expect(out["payload"]?["messageType"] != nil || out["payload"]?["DV"] != nil)
            }
        }
        // x5c JWS verified against --trust.
        let x5c = try cases("jws-x5c").first { $0["root"]?.stringValue == "rsa" }!
        let v = try json(try CLIRunner.run(["decode", "--json", "--trust", root.path], stdin: x5c["compact"]!.stringValue!))
        #expect(v["kind"] == .string("jws"))
        #expect(v["verified"] == .bool(true))
        #expect(v["payload"]?["acsURL"]?.stringValue == "https://acs.example.test/challenge")
        // JWT with --secret.
        let jwt = try json(try CLIRunner.run(["decode", "--json", "--secret", secret], stdin: try cases("jwt")[0]["compact"]!.stringValue!))
        #expect(jwt["kind"] == .string("jwt"))
        #expect(jwt["verified"] == .bool(true))
        // dir JWE with --cek.
        let dirCase = try cases("jwe-dir")[0]
        let d = try json(try CLIRunner.run(["decode", "--json", "--cek", dirCase["cek"]!.stringValue!], stdin: dirCase["compact"]!.stringValue!))
        #expect(d["payload"]?["acctNumber"]?.stringValue == "400000******1091")
        // base64url JSON, form, plain JSON.
        let creq = Base64URL.encode(Array(#"{"messageType":"CReq","messageVersion":"2.1.0","challengeWindowSize":"05"}"#.utf8))
        #expect(try json(try CLIRunner.run(["decode", "--json"], stdin: creq))["kind"] == .string("base64url-json"))
        let form = try json(try CLIRunner.run(["decode", "--json"], stdin: "creq=\(creq)&threeDSSessionData=xyz"))
        #expect(form["kind"] == .string("form"))
        #expect(form["fields"]?["creq"]?["challengeWindowSize"]?.stringValue == "05")
        let plain = try json(try CLIRunner.run(["decode", "--json"], stdin: #"{"messageType":"Erro","errorCode":"203"}"#))
        #expect(plain["kind"] == .string("json"))
    }

    @Test func failuresExitOneWithOneLine() throws {
        let dir = try CLIRunner.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let wrongKey = dir.appendingPathComponent("wrong.pem")
        try PrivateKey.generateRSA().pem().write(to: wrongKey, atomically: true, encoding: .utf8)
        let jwe = try cases("jwe-rsa")[0]["compact"]!.stringValue!

        let wrong = try CLIRunner.run(["decode", "--key", wrongKey.path], stdin: jwe)
        #expect(wrong.status == 1)
        #expect(wrong.stderr.split(separator: "\n").count == 1)
        #expect(wrong.stderr.contains("wrong key"))
        #expect(!wrong.stdout.contains("payload:"))

        var parts = jwe.split(separator: ".").map(String.init)
        parts[4] = String(parts[4].reversed())
        let tampered = try CLIRunner.run(["decode", "--cek", String(repeating: "00", count: 32), "--json"], stdin: "e30..AAAAAAAAAAAAAAAA.AAAA.AAAAAAAAAAAAAAAAAAAAAA")
        #expect(tampered.status == 1)
        let noKey = try CLIRunner.run(["decode"], stdin: jwe)
        #expect(noKey.status == 1 && noKey.stderr.contains("missing key"))
        let truncated = try CLIRunner.run(["decode"], stdin: String(jwe.prefix(40)))
        #expect(truncated.status == 1)
        #expect(truncated.stderr.hasPrefix("3dstape: decode:"))
        let garbage = try CLIRunner.run(["decode"], stdin: "%%% not anything")
        #expect(garbage.status == 1)
        let badKeyFile = try CLIRunner.run(["decode", "--key", "/nonexistent.pem"], stdin: jwe)
        #expect(badKeyFile.status == 1 && badKeyFile.stderr.contains("/nonexistent.pem"))
    }

    @Test func helpAndUsage() throws {
        let help = try CLIRunner.run(["--help"])
        #expect(help.status == 0 && help.stdout.contains("decode"))
        #expect(try CLIRunner.run(["decode", "--help"]).stdout.contains("--trust PEM"))
        let unknown = try CLIRunner.run(["nope"])
        #expect(unknown.status == 2 && unknown.stderr.contains("unknown command"))
        let badOption = try CLIRunner.run(["decode", "--what"])
        #expect(badOption.status == 2 && badOption.stderr.contains("unknown option --what"))
    }
}
