// Writes JOSE and EMV vectors made by 3dstape's own code, with their keys, for
// tools/interop/jose_interop.py check (Python's jwcrypto and cryptography verify each one).
import Foundation
import TapCore
import TapCrypto
import TapEMV
import TapJOSE

func makeVectors() throws -> JSON {
    let rsa = try PrivateKey.generateRSA(), ds = try PrivateKey.generateP256()
    let sdk = try PrivateKey.generateP256(), acs = try PrivateKey.generateP256()
    let secret = "swift-made-shared-secret-0123456789"
    let cek16 = Digest.randomBytes(16), cek32 = Digest.randomBytes(32)
    let areq = #"{"messageType":"AReq","messageVersion":"2.3.1","acctNumber":"4000000000001091"}"#
    let areqBytes = Array(areq.utf8)
    var cases: [JSON] = []
    func add(_ name: String, _ kind: String, _ compact: String, _ expect: String, _ extra: [(String, JSON)] = []) {
        cases.append(.object([("name", .string(name)), ("kind", .string(kind)), ("compact", .string(compact)),
                              ("expect", .string(expect))] + extra))
    }

    for alg in SignatureAlgorithm.allCases {
        let key = alg == .es256 ? ds : rsa
        add("swift-jws-\(alg.rawValue)", "jws", try JWS.sign(payload: areqBytes, algorithm: alg, key: key).compact, areq,
            [("key", .string(alg == .es256 ? "ec" : "rsa"))])
    }
    add("swift-jws-HS256", "jws-hs256", try JWS.signHS256(payload: areqBytes, secret: Array(secret.utf8)).compact, areq)
    let claims = #"{"iss":"merchant","exp":99999999999}"#
    add("swift-jwt-HS256", "jwt", try JWT.signHS256(claims: try JSON.parse(claims), secret: Array(secret.utf8)).jws.compact, claims)

    var roots: [(String, JSON)] = []
    for (name, rootKey, leafKey, alg) in [("ec", try PrivateKey.generateP256(), try PrivateKey.generateP256(), SignatureAlgorithm.es256),
                                          ("rsa", try PrivateKey.generateRSA(), try PrivateKey.generateRSA(), .ps256)] {
        let root = try CertificateAuthority.selfSigned(commonName: "3dstape Interop DS Root \(name)", key: rootKey)
        let leaf = try root.issue(commonName: "3dstape Interop ACS \(name)", subjectKey: leafKey.publicKey, profile: .signing)
        roots.append((name, .string(root.certificate.pem)))
        let content = JSON.object([("acsEphemPubKey", JWK(publicKey: acs.publicKey).json()),
                                   ("sdkEphemPubKey", JWK(publicKey: sdk.publicKey).json()),
                                   ("acsURL", .string("https://127.0.0.1:9/acs/challenge"))])
        let jws = try JWS.sign(payload: content.bytes, algorithm: alg, key: leafKey, extraHeader: [("x5c", JWS.x5cHeader([leaf]))])
        add("swift-jws-x5c-\(alg.rawValue)", "jws-x5c", jws.compact, content.compact, [("root", .string(name))])
    }

    for enc in ContentEncryption.allCases {
        add("swift-jwe-RSA-OAEP-256-\(enc.rawValue)", "jwe-rsa",
            try JWE.encryptRSAOAEP256(plaintext: areqBytes, recipient: rsa.publicKey, enc: enc, keyID: "ds-rsa").compact, areq,
            [("key", .string("rsa"))])
        let cek = enc == .a128gcm ? cek16 : cek32
        let header = JSON.object([("alg", .string("dir")), ("enc", .string(enc.rawValue))])
        add("swift-jwe-dir-\(enc.rawValue)", "jwe-dir", try JWE.encrypt(plaintext: areqBytes, cek: cek, header: header).compact, areq,
            [("cek", .string(Hex.encode(cek)))])
        for algName in ["ECDH-ES", "dir"] {
            let device = #"{"DV":"1.6","DD":{"C001":"Linux"}}"#
            let jwe = try JWE.encryptEMVECDH(plaintext: Array(device.utf8), recipient: ds.publicKey, directoryServerID: "A000000003",
                                             enc: enc, keyID: "ds-ec", algName: algName)
            add("swift-deviceData-\(algName)-\(enc.rawValue)", "jwe-ec", jwe.compact, device,
                [("key", .string("ec")), ("dsID", .string("A000000003"))])
        }
        // The app channel: two CReqs from the SDK side and two CRes from the ACS side, so counters 0 and 1 appear.
        let ref = "3DS_LOA_SDK_3DSTAPE_020300_00001", acsTransID = UUID().uuidString.lowercased()
        var sdkSide = try AppChannelCipher(role: .sdk, privateKey: sdk, peerPublicKey: acs.publicKey, sdkReferenceNumber: ref,
                                           acsTransID: acsTransID, enc: enc)
        var acsSide = try AppChannelCipher(role: .acs, privateKey: acs, peerPublicKey: sdk.publicKey, sdkReferenceNumber: ref,
                                           acsTransID: acsTransID, enc: enc)
        for round in 0..<2 {
            let creq = JSON.object([("messageType", .string("CReq")), ("acsTransID", .string(acsTransID)),
                                    ("challengeDataEntry", .string("1234"))])
            let sealed = try sdkSide.seal(creq)
            let common: [(String, JSON)] = [("sdkReferenceNumber", .string(ref)), ("acsTransID", .string(acsTransID)),
                                            ("counter", .string(String(round)))]
            add("swift-channel-CReq-\(enc.rawValue)-\(round)", "channel", sealed,
                creq.setting("sdkCounterStoA", to: .string(String(format: "%03d", round))).compact, [("role", .string("acs"))] + common)
            _ = try acsSide.openRequest(sealed)
            let cres = JSON.object([("messageType", .string("CRes")), ("acsTransID", .string(acsTransID)),
                                    ("challengeCompletionInd", .string("N"))])
            let reply = try acsSide.seal(cres)
            add("swift-channel-CRes-\(enc.rawValue)-\(round)", "channel", reply,
                cres.setting("acsCounterAtoS", to: .string(String(format: "%03d", round))).compact, [("role", .string("sdk"))] + common)
            _ = try sdkSide.open(reply)
        }
    }

    let keys = JSON.object([
        ("rsa", JWK(privateKey: rsa).json(includePrivate: true)), ("ec", JWK(privateKey: ds).json(includePrivate: true)),
        ("sdk", JWK(privateKey: sdk).json(includePrivate: true)), ("acs", JWK(privateKey: acs).json(includePrivate: true)),
        ("secret", .string(secret)),
    ])
    return .object([("comment", .string("Made by 3dstape (TapInteropVectors) for tools/interop/jose_interop.py check")),
                    ("keys", keys), ("roots", .object(roots)), ("cases", .array(cases))])
}

guard CommandLine.arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: TapInteropVectors OUT.json\n".utf8))
    exit(2)
}
do {
    let doc = try makeVectors()
    try Data(doc.pretty.utf8).write(to: URL(fileURLWithPath: CommandLine.arguments[1]))
    if case let .array(c)? = doc["cases"] { print("wrote \(c.count) Swift-made vectors to \(CommandLine.arguments[1])") }
} catch {
    FileHandle.standardError.write(Data("TapInteropVectors: \(error)\n".utf8))
    exit(1)
}
