import TapCore
import TapCrypto
import TapJOSE

/// An error of the app channel, with the EMV error code a real SDK or ACS would answer with.
public struct ChannelError: Error, Equatable, CustomStringConvertible {
    public let code: EMVErrorCode
    public let message: String
    public init(_ code: EMVErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }
    public var description: String { "\(code.rawValue): \(message)" }
}

/// The encrypted CReq/CRes channel between a 3DS SDK and an ACS (emv3ds.md §1), for either side.
///
/// From its own P-256 private key, the peer's public key, the sdkReferenceNumber and the acsTransID it
/// derives the CEK (ECDH, then the Concat KDF with PartyVInfo = sdkReferenceNumber). A128CBC-HS256 uses
/// all 32 bytes in both directions; A128GCM uses the leftmost 16 for SDK→ACS and the rightmost 16 for
/// ACS→SDK, with IVs `00…00‖counter` and `FF…FF‖counter`. Counters run "000" to "255": each message
/// carries the sender's current value, and the receiver checks it against its own.
public struct AppChannelCipher: Sendable {
    /// Which side of the channel this value plays.
    public enum Role: String, Sendable { case sdk, acs }

    public let role: Role
    /// The acsTransID, sent as the JWE `kid`.
    public let acsTransID: String
    /// The content encryption used for the next message sent. The ACS adopts the enc of each CReq it opens.
    public var enc: ContentEncryption
    /// The 32-byte channel CEK (secret: log it only to a key log).
    public let cek: [UInt8]
    /// The counter value the next sent message will carry.
    public private(set) var sendCounter = 0
    /// The counter value the next received message must carry.
    public private(set) var receiveCounter = 0

    /// Derives the channel from ECDH (`privateKey` is dC on the SDK side, dT on the ACS side).
    public init(role: Role, privateKey: PrivateKey, peerPublicKey: PublicKey, sdkReferenceNumber: String,
                acsTransID: String, enc: ContentEncryption) throws(ChannelError) {
        let z: [UInt8]
        do { z = try privateKey.sharedSecret(with: peerPublicKey) } catch {
            throw ChannelError(.decryptionFailure, "ECDH failed: \(error.message)")
        }
        self.init(role: role, cek: ConcatKDF.emv(z: z, partyV: sdkReferenceNumber), acsTransID: acsTransID, enc: enc)
    }

    /// A channel from a CEK known in advance (for example from a key log).
    public init(role: Role, cek: [UInt8], acsTransID: String, enc: ContentEncryption) {
        self.role = role
        self.cek = cek
        self.acsTransID = acsTransID
        self.enc = enc
    }

    /// The counter member this side writes (`sdkCounterStoA` or `acsCounterAtoS`) and the one it reads.
    var sendCounterField: String { role == .sdk ? "sdkCounterStoA" : "acsCounterAtoS" }
    var receiveCounterField: String { role == .sdk ? "acsCounterAtoS" : "sdkCounterStoA" }

    /// The key for one direction under `enc`.
    static func key(cek: [UInt8], enc: ContentEncryption, sdkToACS: Bool) -> [UInt8] {
        switch enc {
        case .a128cbcHS256: return cek
        case .a128gcm: return sdkToACS ? Array(cek.prefix(16)) : Array(cek.suffix(16))
        }
    }

    /// The IV for a message: counter-derived for GCM, random for CBC.
    static func iv(enc: ContentEncryption, sdkToACS: Bool, counter: Int) -> [UInt8] {
        switch enc {
        case .a128gcm: return [UInt8](repeating: sdkToACS ? 0x00 : 0xFF, count: 11) + [UInt8(counter)]
        case .a128cbcHS256: return Digest.randomBytes(16)
        }
    }

    /// Sets this side's counter in `message`, encrypts it as a compact JWE, and advances the counter.
    /// `counterOffset` writes a counter that far from the right one (a fault the replayer injects; 0 otherwise).
    public mutating func seal(_ message: JSON, counterOffset: Int = 0) throws(ChannelError) -> String {
        try sealed(message, counterOffset: counterOffset).compact
    }

    /// As `seal`, returning the message as encrypted too (with its counter).
    public mutating func sealed(_ message: JSON, counterOffset: Int = 0) throws(ChannelError) -> (compact: String, plaintext: JSON) {
        guard message.isObject else { throw ChannelError(.messageInvalid, "a CReq/CRes must be a JSON object") }
        guard sendCounter <= 255 else { throw ChannelError(.decryptionFailure, "the \(sendCounterField) counter would wrap past 255") }
        let counted = message.setting(sendCounterField, to: .string(Self.counterText((sendCounter + counterOffset) & 0xFF)))
        let header = JSON.object([("alg", .string("dir")), ("enc", .string(enc.rawValue)), ("kid", .string(acsTransID))])
        let sdkToACS = role == .sdk
        let jwe: JWE
        do {
            jwe = try JWE.encrypt(plaintext: counted.bytes, cek: Self.key(cek: cek, enc: enc, sdkToACS: sdkToACS), header: header,
                                  iv: Self.iv(enc: enc, sdkToACS: sdkToACS, counter: sendCounter))
        } catch { throw ChannelError(.decryptionFailure, error.message) }
        sendCounter += 1
        return (jwe.compact, counted)
    }

    /// Decrypts a JWE from the peer, checks its counter, and advances the receive counter.
    /// A tag mismatch or counter mismatch is 302; a missing counter 201; a malformed one 203.
    public mutating func open(_ compact: String) throws(ChannelError) -> JSON {
        try checkCounter(try decrypt(compact))
    }

    /// Checks the received counter of a decrypted message and advances it.
    mutating func checkCounter(_ message: JSON) throws(ChannelError) -> JSON {
        guard let value = message[receiveCounterField] else {
            throw ChannelError(.requiredElementMissing, "\(receiveCounterField) is missing")
        }
        guard let text = value.stringValue, text.count == 3, let n = Int(text), (0...255).contains(n) else {
            throw ChannelError(.formatInvalid, "\(receiveCounterField) \(value.compact) is not a string \"000\" to \"255\"")
        }
        guard n == receiveCounter else {
            throw ChannelError(.decryptionFailure,
                               "Counters are not equal: \(receiveCounterField) is \(text), expected \(Self.counterText(receiveCounter))")
        }
        receiveCounter += 1
        return message
    }

    /// Decrypts without touching counters (for inspection of recorded traffic).
    public func decrypt(_ compact: String) throws(ChannelError) -> JSON {
        let jwe: JWE
        do { jwe = try JWE(compact: compact) } catch { throw ChannelError(.decryptionFailure, error.message) }
        return try decrypt(jwe)
    }

    /// Decrypts an already parsed JWE without touching counters.
    public func decrypt(_ jwe: JWE) throws(ChannelError) -> JSON {
        let received: ContentEncryption
        do { received = try jwe.contentEncryption } catch { throw ChannelError(.decryptionFailure, error.message) }
        let plaintext: [UInt8]
        do {
            plaintext = try jwe.decrypt(cek: Self.key(cek: cek, enc: received, sdkToACS: role == .acs))
        } catch {
            throw ChannelError(.decryptionFailure, error.message)
        }
        let json: JSON
        do { json = try JSON.parse(plaintext) } catch { throw ChannelError(.messageInvalid, "decrypted message is not JSON: \(error)") }
        guard json.isObject else { throw ChannelError(.messageInvalid, "decrypted message is not a JSON object") }
        return json
    }

    /// Opens as the ACS and adopts the CReq's enc for the reply (the ACS answers in the CReq's enc).
    public mutating func openRequest(_ compact: String) throws(ChannelError) -> JSON {
        let jwe: JWE
        do { jwe = try JWE(compact: compact) } catch { throw ChannelError(.decryptionFailure, error.message) }
        return try openRequest(jwe)
    }

    /// The same for a CReq already parsed (a server that read its kid first).
    public mutating func openRequest(_ jwe: JWE) throws(ChannelError) -> JSON {
        let message = try checkCounter(try decrypt(jwe))
        if role == .acs, let e = try? jwe.contentEncryption { enc = e }
        return message
    }

    static func counterText(_ n: Int) -> String {
        let s = String(n)
        return String(repeating: "0", count: 3 - s.count) + s
    }
}
