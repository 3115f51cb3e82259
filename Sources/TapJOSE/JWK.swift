import TapCore
import TapCrypto

/// A JSON Web Key (RFC 7517) for EC P-256 or RSA, public or private.
public struct JWK: Sendable, Equatable {
    /// The key material.
    public enum Material: Sendable, Equatable {
        case ecPublic(x: [UInt8], y: [UInt8])
        case ecPrivate(x: [UInt8], y: [UInt8], d: [UInt8])
        case rsaPublic(RSAPublicComponents)
        case rsaPrivate(RSAPrivateComponents)
    }

    public var material: Material
    /// The optional `kid`.
    public var keyID: String?

    public init(material: Material, keyID: String? = nil) {
        self.material = material
        self.keyID = keyID
    }

    /// The JWK of a public key.
    public init(publicKey: PublicKey, keyID: String? = nil) {
        if let (x, y) = publicKey.p256Coordinates {
            material = .ecPublic(x: x, y: y)
        } else {
            material = .rsaPublic(publicKey.rsaComponents!)
        }
        self.keyID = keyID
    }

    /// The public JWK of a private key's pair (its public half, without building a public key first).
    public init(publicKeyOf privateKey: PrivateKey, keyID: String? = nil) {
        if let (x, y) = privateKey.p256Coordinates {
            material = .ecPublic(x: x, y: y)
        } else {
            material = .rsaPublic(privateKey.publicKey.rsaComponents!)
        }
        self.keyID = keyID
    }

    /// The JWK of a private key (includes the private parts).
    public init(privateKey: PrivateKey, keyID: String? = nil) {
        if privateKey.type == .p256, let d = privateKey.p256D, let (x, y) = privateKey.p256Coordinates {
            material = .ecPrivate(x: x, y: y, d: d)
        } else {
            material = .rsaPrivate(privateKey.rsaComponents!)
        }
        self.keyID = keyID
    }

    /// Parses a JWK object. EC keys must be on P-256; coordinates must be 32 bytes.
    public init(json: JSON) throws(JOSEError) {
        guard json.isObject else { throw JOSEError(.malformed, "a JWK must be a JSON object") }
        func field(_ name: String) throws(JOSEError) -> [UInt8] {
            guard let s = json[name]?.stringValue else { throw JOSEError(.malformed, "JWK is missing \"\(name)\"") }
            guard let b = Base64URL.decode(s) else { throw JOSEError(.malformed, "JWK \"\(name)\" is not base64url") }
            return b
        }
        func optional(_ name: String) throws(JOSEError) -> [UInt8]? {
            json[name] == nil ? nil : try field(name)
        }
        keyID = json["kid"]?.stringValue
        switch json["kty"]?.stringValue {
        case "EC":
            guard json["crv"]?.stringValue == "P-256" else {
                throw JOSEError(.unsupported, "JWK curve \(json["crv"]?.compact ?? "missing") is not supported (only P-256)")
            }
            let x = try field("x"), y = try field("y")
            guard x.count == 32, y.count == 32 else { throw JOSEError(.malformed, "P-256 JWK coordinates must be 32 bytes") }
            if let d = try optional("d") {
                guard d.count == 32 else { throw JOSEError(.malformed, "P-256 JWK \"d\" must be 32 bytes") }
                material = .ecPrivate(x: x, y: y, d: d)
            } else {
                material = .ecPublic(x: x, y: y)
            }
        case "RSA":
            let n = try field("n"), e = try field("e")
            if let d = try optional("d") {
                material = .rsaPrivate(RSAPrivateComponents(n: n, e: e, d: d, p: try optional("p"), q: try optional("q"),
                                                            dp: try optional("dp"), dq: try optional("dq"), qi: try optional("qi")))
            } else {
                material = .rsaPublic(RSAPublicComponents(n: n, e: e))
            }
        case let other:
            throw JOSEError(.unsupported, "JWK kty \(other.map { "\"\($0)\"" } ?? "missing") is not supported (EC or RSA)")
        }
    }

    /// The JSON form. Private parts are included only when `includePrivate` is set.
    public func json(includePrivate: Bool = false) -> JSON {
        var m: [(String, JSON)] = []
        func b(_ v: [UInt8]) -> JSON { .string(Base64URL.encode(v)) }
        switch material {
        case let .ecPublic(x, y), let .ecPrivate(x, y, _):
            m = [("kty", .string("EC")), ("crv", .string("P-256")), ("x", b(x)), ("y", b(y))]
            if includePrivate, case let .ecPrivate(_, _, d) = material { m.append(("d", b(d))) }
        case let .rsaPublic(c):
            m = [("kty", .string("RSA")), ("n", b(c.n)), ("e", b(c.e))]
        case let .rsaPrivate(c):
            m = [("kty", .string("RSA")), ("n", b(c.n)), ("e", b(c.e))]
            if includePrivate {
                m.append(("d", b(c.d)))
                for (name, v) in [("p", c.p), ("q", c.q), ("dp", c.dp), ("dq", c.dq), ("qi", c.qi)] {
                    if let v { m.append((name, b(v))) }
                }
            }
        }
        if let keyID { m.append(("kid", .string(keyID))) }
        return .object(m)
    }

    /// The RFC 7638 thumbprint (SHA-256 over the required members in lexicographic order), base64url.
    public var thumbprint: String {
        let canonical: String
        switch material {
        case let .ecPublic(x, y), let .ecPrivate(x, y, _):
            canonical = #"{"crv":"P-256","kty":"EC","x":"\#(Base64URL.encode(x))","y":"\#(Base64URL.encode(y))"}"#
        case let .rsaPublic(c):
            canonical = #"{"e":"\#(Base64URL.encode(c.e))","kty":"RSA","n":"\#(Base64URL.encode(c.n))"}"#
        case let .rsaPrivate(c):
            canonical = #"{"e":"\#(Base64URL.encode(c.e))","kty":"RSA","n":"\#(Base64URL.encode(c.n))"}"#
        }
        return Base64URL.encode(Digest.sha256(Array(canonical.utf8)))
    }

    /// The public key this JWK describes.
    public func publicKey() throws(JOSEError) -> PublicKey {
        do {
            switch material {
            case let .ecPublic(x, y), let .ecPrivate(x, y, _): return try PublicKey(p256X: x, y: y)
            case let .rsaPublic(c): return try PublicKey(rsa: c)
            case let .rsaPrivate(c): return try PublicKey(rsa: RSAPublicComponents(n: c.n, e: c.e))
            }
        } catch { throw JOSEError.from(error, context: "JWK") }
    }

    /// The private key this JWK describes; throws `.missingKey` for a public JWK.
    public func privateKey() throws(JOSEError) -> PrivateKey {
        do {
            switch material {
            case let .ecPrivate(x, y, d): return try PrivateKey(p256D: d, x: x, y: y)
            case let .rsaPrivate(c): return try PrivateKey(rsa: c)
            case .ecPublic, .rsaPublic: throw JOSEError(.missingKey, "the JWK has no private part")
            }
        } catch let e as JOSEError {
            throw e
        } catch let e as CryptoError {
            throw JOSEError.from(e, context: "JWK")
        } catch {
            throw JOSEError(.malformed, "JWK: \(error)")
        }
    }
}
