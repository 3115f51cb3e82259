import TapCore
import TapCrypto
import TapJOSE

/// What `3dstape decode` may use to decrypt and verify.
public struct DecodeKeys: Sendable {
    /// Private keys for RSA-OAEP-256 and ECDH-ES JWEs.
    public var privateKeys: [PrivateKey] = []
    /// Content keys for `dir` JWEs (16 bytes for GCM; 32 for CBC-HS256, or a 32-byte app-channel CEK for GCM).
    public var contentKeys: [[UInt8]] = []
    /// Roots that an x5c chain must reach.
    public var trustRoots: [Certificate] = []
    /// HS256 shared secrets.
    public var secrets: [[UInt8]] = []
    /// directoryServerIDs for EC deviceData; the well-known ones are tried when none is given.
    public var directoryServerIDs: [String] = []
    /// Whether to mask PANs and OTP entries in what is shown.
    public var mask = true

    public init() {}

    /// The DS ids of emv3ds.md §2, tried for EC deviceData when none is given.
    public static let knownDirectoryServerIDs = [
        "A000000003", "A000000004", "A000000025", "A000000152", "A000000324", "A000000042", "F055545342", "F155545342",
    ]
}

/// The result of decoding one input: what it was, its header, its payload, and whether it verified.
public struct DecodeResult: Sendable {
    /// What the input was.
    public enum Kind: String, Sendable {
        case jws, jwe, jwt, base64urlJSON = "base64url-json", form, json
    }

    public var kind: Kind
    public var header: JSON?
    /// The decoded payload: JSON where it is JSON, otherwise a string. Nil after an error.
    public var payload: JSON?
    /// true: signature (and chain, if roots given) verified; false: it did not; nil: nothing to verify with.
    public var verified: Bool?
    /// The reason decoding failed, or nil.
    public var error: String?
    /// For forms: each field decoded.
    public var fields: [(String, DecodeResult)]?
    /// Human notes: how it was decrypted, which key, which 3DS message.
    public var notes: [String] = []

    /// The one JSON object `decode --json` prints.
    public var json: JSON {
        var m: [(String, JSON)] = [
            ("kind", .string(kind.rawValue)),
            ("header", header ?? .null),
            ("payload", payload ?? .null),
            ("verified", verified.map(JSON.bool) ?? .null),
            ("error", error.map(JSON.string) ?? .null),
        ]
        if let fields {
            m.append(("fields", .object(fields.map { ($0.0, $0.1.error == nil ? ($0.1.payload ?? .null) : .null) })))
        }
        if !notes.isEmpty { m.append(("notes", .array(notes.map(JSON.string)))) }
        if let summary = payload.flatMap(MessageSummary.init) { m.append(("messageType", .string(summary.messageType ?? ""))) }
        return .object(m)
    }

    /// The first error in this result or any field.
    public var firstError: String? {
        error ?? fields?.lazy.compactMap { name, r in r.firstError.map { "field \(name): \($0)" } }.first
    }
}

/// Detects what a blob is (compact JWS, JWE, JWT, base64url JSON, a form body, or JSON) and decodes it.
public enum Decoder {
    /// Decodes `input`. Never throws: failures are in `DecodeResult.error`, with no payload shown.
    public static func decode(_ input: [UInt8], keys: DecodeKeys) -> DecodeResult {
        decode(input, keys: keys, insideForm: false)
    }

    /// `insideForm`: a form field's value is decoded as JWS, JWE, base64url JSON or JSON, but never as another form:
    /// 3DS fields hold no forms, and `a=a=a=…` would otherwise nest once per `=` (40 KB of it crashed `decode`).
    static func decode(_ input: [UInt8], keys: DecodeKeys, insideForm: Bool) -> DecodeResult {
        let text = String(decoding: input, as: UTF8.self).trimmingWhitespace
        if text.isEmpty { return failure(.json, "input is empty") }
        if text.hasPrefix("{") || text.hasPrefix("[") {
            do {
                return DecodeResult(kind: .json, payload: shown(try JSON.parse(text), keys))
            } catch {
                return failure(.json, "\(error)")
            }
        }
        let dots = text.reduce(0) { $0 + ($1 == "." ? 1 : 0) }
        if dots == 4, !text.contains("=") { return decodeJWE(text, keys: keys) }
        if dots == 2, !text.contains("=") { return decodeJWS(text, keys: keys) }
        if let bytes = Base64URL.decode(text), let json = try? JSON.parse(bytes), json.isObject {
            return DecodeResult(kind: .base64urlJSON, payload: shown(json, keys))
        }
        if !insideForm, let form = FormBody.parse(text) {
            var result = DecodeResult(kind: .form)
            result.fields = form.map { name, value in (name, decodeField(value, keys: keys)) }
            if let e = result.firstError { result.error = e }
            return result
        }
        return failure(.json, "not a JWS, JWE, JWT, base64url JSON, form body or JSON")
    }

    /// A form field's value: decoded where it is an encoding we know, else kept as a string.
    static func decodeField(_ value: String, keys: DecodeKeys) -> DecodeResult {
        let r = decode(Array(value.utf8), keys: keys, insideForm: true)
        if r.error != nil, r.kind == .json, !(value.hasPrefix("{") || value.hasPrefix("[")) {
            return DecodeResult(kind: .json, payload: .string(value))
        }
        return r
    }

    static func failure(_ kind: DecodeResult.Kind, _ message: String) -> DecodeResult {
        DecodeResult(kind: kind, error: message)
    }

    static func shown(_ json: JSON, _ keys: DecodeKeys) -> JSON { keys.mask ? Masking.mask(json) : json }

    static func payloadValue(_ bytes: [UInt8], _ keys: DecodeKeys) -> JSON {
        if let j = try? JSON.parse(bytes) { return shown(j, keys) }
        return .string(String(decoding: bytes, as: UTF8.self))
    }

    static func decodeJWS(_ text: String, keys: DecodeKeys) -> DecodeResult {
        let jws: JWS
        do { jws = try JWS(compact: text) } catch { return failure(.jws, "malformed JWS: \(error.message)") }
        let isJWT = jws.header["typ"]?.stringValue?.uppercased() == "JWT" || jws.algorithm == "HS256"
        var r = DecodeResult(kind: isJWT ? .jwt : .jws, header: jws.header)
        do {
            if jws.algorithm == "HS256" {
                if keys.secrets.isEmpty {
                    r.notes.append("HS256 signature not checked: give --secret")
                } else {
                    guard let secret = keys.secrets.first(where: { (try? jws.verifyHS256(secret: $0)) != nil }) else {
                        throw JOSEError(.badSignature, "HS256 signature does not verify with the given secret(s)")
                    }
                    if isJWT, let jwt = try? JWT(compact: text) { try jwt.verify(secret: secret) }
                    r.verified = true
                    r.notes.append("HS256 signature verified with the shared secret")
                }
            } else if !keys.trustRoots.isEmpty {
                let leaf = try jws.verifyWithX5C(roots: keys.trustRoots)
                r.verified = true
                r.notes.append("\(jws.algorithm ?? "?") signature verified; x5c chain from \(leaf.subject) reaches a trusted root")
            } else if jws.header["x5c"] != nil {
                r.notes.append("signature not checked: give --trust ROOT.pem to validate the x5c chain")
            } else if let alg = jws.algorithm.flatMap(SignatureAlgorithm.init(rawValue:)),
                      let key = keys.privateKeys.map(\.publicKey).first(where: { $0.type == alg.keyType }) {
                try jws.verify(with: key)
                r.verified = true
                r.notes.append("\(alg.rawValue) signature verified with the public part of the given --key")
            } else {
                r.notes.append("signature not checked: no x5c header and no key given")
            }
        } catch let e as JOSEError {
            r.verified = false
            r.error = describe(e)
            return r
        } catch {
            r.error = "\(error)"
            return r
        }
        r.payload = payloadValue(jws.payload, keys)
        if let p = r.payload, case .object = p, jws.payload.count > 0, let summary = MessageSummary(p) {
            r.notes.append("EMV 3DS \(summary.line)")
        }
        if r.payload?["acsEphemPubKey"] != nil { r.notes.append("acsSignedContent: acsEphemPubKey, sdkEphemPubKey, acsURL") }
        return r
    }

    static func decodeJWE(_ text: String, keys: DecodeKeys) -> DecodeResult {
        let jwe: JWE
        do { jwe = try JWE(compact: text) } catch { return failure(.jwe, "malformed JWE: \(error.message)") }
        var r = DecodeResult(kind: .jwe, header: jwe.header)
        do {
            let enc = try jwe.contentEncryption
            let (plaintext, how) = try decryptJWE(jwe, enc: enc, keys: keys)
            r.payload = payloadValue(plaintext, keys)
            r.notes.append(how)
            if let p = r.payload, let summary = MessageSummary(p) { r.notes.append("EMV 3DS \(summary.line)") }
        } catch {
            r.error = describe(error)
        }
        return r
    }

    /// What to do about a JWE no key given fits: give one (none was given), or one of the other type (`wanted`) than those given.
    static func keysGiven(_ keys: DecodeKeys, _ wanted: String) -> String {
        guard !keys.privateKeys.isEmpty else { return "give --key PEM" }
        let types = Set(keys.privateKeys.map(\.type.rawValue)).sorted().joined(separator: ", ")
        return "the --key given (\(keys.privateKeys.count)) is \(types), not \(wanted)"
    }

    /// Tries each key that fits the JWE's alg. Returns the plaintext and how it was obtained.
    static func decryptJWE(_ jwe: JWE, enc: ContentEncryption, keys: DecodeKeys) throws(JOSEError) -> ([UInt8], String) {
        switch try jwe.keyManagement {
        case .rsaOAEP256:
            let rsaKeys = keys.privateKeys.filter { $0.type == .rsa }
            guard !rsaKeys.isEmpty else { throw JOSEError(.missingKey, "RSA-OAEP-256 JWE needs an RSA private key: " + keysGiven(keys, "an RSA one")) }
            for (i, k) in rsaKeys.enumerated() {
                guard let cek = try? jwe.unwrapRSA(k) else { continue }
                return (try jwe.decrypt(cek: cek), "decrypted: RSA-OAEP-256 + \(enc.rawValue) with RSA key #\(i + 1)")
            }
            throw JOSEError(.wrongKey, "wrong key: none of the \(rsaKeys.count) RSA key(s) unwraps the content key")
        case .emvECDH:
            let ecKeys = keys.privateKeys.filter { $0.type == .p256 }
            guard !ecKeys.isEmpty else { throw JOSEError(.missingKey, "ECDH-ES JWE needs the DS's EC P-256 private key: " + keysGiven(keys, "an EC P-256 one")) }
            let ids = keys.directoryServerIDs.isEmpty ? DecodeKeys.knownDirectoryServerIDs : keys.directoryServerIDs
            for k in ecKeys {
                for id in ids {
                    guard let cek = try? jwe.deriveEMVKey(ecKey: k, directoryServerID: id),
                          let p = try? jwe.decrypt(cek: cek) else { continue }
                    return (p, "decrypted: EMV deviceData \(jwe.algorithm ?? "") + \(enc.rawValue), PartyVInfo (DS id) \(id)")
                }
            }
            let idText = keys.directoryServerIDs.isEmpty ? "the known DS ids; give --ds-id" : "DS id(s) \(ids.joined(separator: ", "))"
            throw JOSEError(.wrongKey, "wrong key or DS id: no EC key with \(idText) decrypts this JWE")
        case .direct:
            guard !keys.contentKeys.isEmpty else { throw JOSEError(.missingKey, "dir JWE needs its content key: give --cek HEX") }
            for cek in keys.contentKeys {
                var candidates: [([UInt8], String)] = []
                if cek.count == enc.keyLength { candidates.append((cek, "the given CEK")) }
                if enc == .a128gcm, cek.count == 32 {
                    candidates.append((Array(cek.prefix(16)), "the left half of the channel CEK (SDK→ACS)"))
                    candidates.append((Array(cek.suffix(16)), "the right half of the channel CEK (ACS→SDK)"))
                }
                for (k, what) in candidates {
                    if let p = try? jwe.decrypt(cek: k) { return (p, "decrypted: dir + \(enc.rawValue) with \(what)") }
                }
            }
            if !keys.contentKeys.contains(where: { $0.count == enc.keyLength || (enc == .a128gcm && $0.count == 32) }) {
                throw JOSEError(.wrongKey, "wrong key size: \(enc.rawValue) needs a \(enc.keyLength)-byte CEK")
            }
            throw JOSEError(.authenticationFailed, "authentication tag mismatch: tampered JWE or wrong --cek")
        }
    }

    static func describe(_ e: JOSEError) -> String {
        switch e.kind {
        case .badSignature: return "bad signature: \(e.message)"
        case .untrustedChain: return "untrusted chain: \(e.message)"
        case .authenticationFailed: return "bad tag: \(e.message)"
        case .wrongKey: return e.message.hasPrefix("wrong") ? e.message : "wrong key: \(e.message)"
        case .missingKey: return "missing key: \(e.message)"
        case .malformed: return "malformed input: \(e.message)"
        case .unsupported: return "unsupported: \(e.message)"
        case .invalidClaims: return "invalid JWT: \(e.message)"
        }
    }
}
