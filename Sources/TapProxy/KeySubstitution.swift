import Foundation
import TapCore
import TapCrypto
import TapEMV
import TapJOSE

/// What the client trusts instead of the real DS: 3dstape's test DS keys and an ACS signing certificate
/// chained to 3dstape's test DS root (`3dstape ca export --ds DIR` writes the client's side of it).
public struct SubstitutionIdentity: Sendable {
    public var dsRSAKey: PrivateKey?
    public var dsECKey: PrivateKey?
    /// The directoryServerID the client uses for an EC DS key (the KDF's PartyVInfo).
    public var directoryServerID: String
    public var acsKey: PrivateKey
    public var acsCertificate: Certificate
    public var signing: SignatureAlgorithm

    public init(dsRSAKey: PrivateKey?, dsECKey: PrivateKey?, directoryServerID: String, acsKey: PrivateKey,
                acsCertificate: Certificate, signing: SignatureAlgorithm) {
        self.dsRSAKey = dsRSAKey
        self.dsECKey = dsECKey
        self.directoryServerID = directoryServerID
        self.acsKey = acsKey
        self.acsCertificate = acsCertificate
        self.signing = signing
    }
}

/// The real DS: the certificate deviceData is re-encrypted for, and the roots acsSignedContent must reach.
public struct UpstreamDS: Sendable {
    public var encryptionCertificate: Certificate
    public var directoryServerID: String
    public var roots: [Certificate]
    public var keyID: String?

    public init(encryptionCertificate: Certificate, directoryServerID: String, roots: [Certificate], keyID: String? = nil) {
        self.encryptionCertificate = encryptionCertificate
        self.directoryServerID = directoryServerID
        self.roots = roots
        self.keyID = keyID
    }
}

/// Active decryption of the app channel (`record --decrypt substitute`): the proxy stands between the
/// SDK and the ACS with a key of its own on each side (emv3ds.md §3, "Proxy consequence").
///
/// - AReq: deviceData is decrypted with 3dstape's DS key and re-encrypted for the real DS; the SDK's
///   sdkEphemPubKey is replaced by the proxy's key toward the ACS.
/// - ARes: acsSignedContent is verified against the real DS root, then re-signed with 3dstape's ACS
///   certificate, carrying the proxy's acsEphemPubKey and the SDK's real sdkEphemPubKey. If it does not
///   verify, it is passed on unchanged (the SDK then fails as it would against that ACS) and the reason
///   recorded.
/// - CReq/CRes: decrypted with one leg's key and re-encrypted with the other's; each leg checks its own
///   counters. A plain-JSON Erro passes through. A CReq that the SDK leg cannot open is answered with the
///   Erro 302 a real ACS would send; a CRes the ACS leg cannot open passes on unchanged, reason recorded.
///
/// Its transaction state is used only on the proxy's loop thread; the SDK-leg CEKs, which the session
/// writer uses to store the plaintexts, are behind a lock.
public final class KeySubstitution: ChannelKeySource, @unchecked Sendable {
    // Safe: `pending` and `channels` are touched only on the proxy loop's thread; `sdkLegKeys` is guarded
    // by `lock` because the writer thread reads it.
    public let identity: SubstitutionIdentity
    public let upstream: UpstreamDS
    private var pending: [String: Pending] = [:]
    private var channels: [String: Channel] = [:]
    private let lock = NSLock()
    private var sdkLegKeys: [String: [UInt8]] = [:]

    public var method: String { "key substitution" }

    struct Pending {
        let sdkKey: JSON
        let towardACS: PrivateKey
        let sdkReferenceNumber: String
    }

    final class Channel {
        var sdkLeg: AppChannelCipher // the proxy plays the ACS toward the SDK
        var acsLeg: AppChannelCipher // the proxy plays the SDK toward the ACS
        init(sdkLeg: AppChannelCipher, acsLeg: AppChannelCipher) {
            self.sdkLeg = sdkLeg
            self.acsLeg = acsLeg
        }
    }

    /// What to do with a message.
    public enum Action {
        case unchanged(note: String?)
        case replaced([UInt8], note: String?)
        /// Answer the client directly (an Erro a real ACS would send), without forwarding.
        case answer(status: Int, body: [UInt8], note: String)
    }

    /// What a response needs to know about its request.
    public enum Context: Sendable {
        case aReq(serverTransID: String)
        case cReq(acsTransID: String)
    }

    public init(identity: SubstitutionIdentity, upstream: UpstreamDS) {
        self.identity = identity
        self.upstream = upstream
    }

    public func cek(for acsTransID: String) -> [UInt8]? {
        lock.lock()
        defer { lock.unlock() }
        return sdkLegKeys[acsTransID.lowercased()]
    }

    // MARK: requests

    /// Rewrites a request body bound for the upstream; returns the action and the context for its response.
    public func request(_ body: [UInt8]) -> (Action, Context?) {
        let text = String(decoding: body, as: UTF8.self).trimmingWhitespace
        if text.hasPrefix("{") {
            guard let json = try? JSON.parse(body), json.messageKind == .aReq,
                  DeviceChannel(json["deviceChannel"]) == .app else { return (.unchanged(note: nil), nil) }
            return aReq(json)
        }
        if text.split(separator: ".", omittingEmptySubsequences: false).count == 5, let jwe = try? JWE(compact: text),
           let kid = jwe.keyID, let channel = channels[kid] {
            return cReq(text, kid: kid, channel)
        }
        return (.unchanged(note: nil), nil)
    }

    func aReq(_ areq: JSON) -> (Action, Context?) {
        guard let serverTransID = areq["threeDSServerTransID"]?.stringValue, let sdkKey = areq["sdkEphemPubKey"],
              let sdkRef = areq["sdkReferenceNumber"]?.stringValue, let encData = areq["sdkEncData"]?.stringValue else {
            return (.unchanged(note: "substitution: AReq without sdkEphemPubKey, sdkReferenceNumber or sdkEncData; passed unchanged"), nil)
        }
        let device: [UInt8]
        do {
            device = try decryptDeviceData(encData)
        } catch {
            return (.unchanged(note: "substitution: sdkEncData does not open with 3dstape's DS key (\(error)); the client does not use "
                               + "3dstape's DS identity, so the AReq is passed unchanged"), nil)
        }
        do {
            let dsKey = try upstream.encryptionCertificate.publicKey
            let reencrypted = dsKey.type == .rsa
                ? try JWE.encryptRSAOAEP256(plaintext: device, recipient: dsKey, enc: .a128cbcHS256, keyID: upstream.keyID)
                : try JWE.encryptEMVECDH(plaintext: device, recipient: dsKey, directoryServerID: upstream.directoryServerID,
                                         enc: .a128cbcHS256, keyID: upstream.keyID)
            let towardACS = try PrivateKey.generateP256()
            pending[serverTransID] = Pending(sdkKey: sdkKey, towardACS: towardACS, sdkReferenceNumber: sdkRef)
            let rewritten = areq.setting("sdkEncData", to: .string(reencrypted.compact))
                .setting("sdkEphemPubKey", to: JWK(publicKey: towardACS.publicKey).json())
            return (.replaced(rewritten.bytes, note: "substitution: deviceData re-encrypted for the upstream DS; sdkEphemPubKey replaced"),
                    .aReq(serverTransID: serverTransID))
        } catch {
            return (.unchanged(note: "substitution: cannot re-encrypt deviceData for the upstream DS (\(error)); AReq passed unchanged"), nil)
        }
    }

    func decryptDeviceData(_ compact: String) throws -> [UInt8] {
        try JWE(compact: compact).decryptDeviceData(rsaKey: identity.dsRSAKey, ecKey: identity.dsECKey,
                                                    directoryServerID: identity.directoryServerID)
    }

    func cReq(_ compact: String, kid: String, _ c: Channel) -> (Action, Context?) {
        let message: JSON
        do {
            message = try c.sdkLeg.openRequest(compact)
        } catch {
            let erro = Erro.make(error.code, component: "A", description: "Data decryption failure", detail: error.message,
                                 about: .object([("acsTransID", .string(kid))]), messageType: "CReq", version: "2.2.0")
            return (.answer(status: 200, body: erro.bytes, note: "substitution: the SDK's CReq does not open on the SDK leg (\(error.message)); "
                            + "answered Erro \(error.code.rawValue) as an ACS would"), nil)
        }
        do {
            c.acsLeg.enc = c.sdkLeg.enc // the ACS answers in the CReq's enc, so forward in the SDK's enc
            let sealed = try c.acsLeg.seal(message)
            return (.replaced(Array(sealed.utf8), note: nil), .cReq(acsTransID: kid))
        } catch {
            return (.unchanged(note: "substitution: cannot re-encrypt the CReq for the ACS (\(error.message))"), nil)
        }
    }

    // MARK: responses

    /// Rewrites a response body on its way back to the client.
    public func response(_ body: [UInt8], context: Context) -> Action {
        switch context {
        case let .aReq(serverTransID): return aRes(body, serverTransID)
        case let .cReq(acsTransID): return cRes(body, acsTransID)
        }
    }

    func aRes(_ body: [UInt8], _ serverTransID: String) -> Action {
        guard let p = pending.removeValue(forKey: serverTransID) else { return .unchanged(note: nil) }
        guard let ares = try? JSON.parse(body), ares.messageKind == .aRes,
              let signed = ares["acsSignedContent"]?.stringValue, let acsTransID = ares["acsTransID"]?.stringValue else {
            return .unchanged(note: nil) // frictionless, or an Erro: nothing to substitute
        }
        let content: ACSSignedContent
        let verified: String
        do {
            let (c, leaf) = try ACSSignedContent.verify(signed, roots: upstream.roots)
            content = c
            verified = "acsSignedContent verified against the upstream DS root (signer \(leaf.subject))"
        } catch {
            return .unchanged(note: "substitution: acsSignedContent does not verify against the upstream DS root (\(error)); "
                              + "passed unchanged, so the SDK fails as it would against this ACS")
        }
        do {
            let acsKey = try JWK(json: content.acsEphemPubKey).publicKey()
            let acsLeg = try AppChannelCipher(role: .sdk, privateKey: p.towardACS, peerPublicKey: acsKey,
                                              sdkReferenceNumber: p.sdkReferenceNumber, acsTransID: acsTransID, enc: .a128cbcHS256)
            let (sdkLeg, towardSDK) = try ACSChannel.open(sdkEphemPubKey: p.sdkKey, sdkReferenceNumber: p.sdkReferenceNumber, acsTransID: acsTransID)
            channels[acsTransID] = Channel(sdkLeg: sdkLeg, acsLeg: acsLeg)
            lock.lock()
            sdkLegKeys[acsTransID.lowercased()] = sdkLeg.cek
            lock.unlock()
            let resigned = try ACSSignedContent(acsEphemPubKey: towardSDK, sdkEphemPubKey: p.sdkKey, acsURL: content.acsURL)
                .sign(key: identity.acsKey, certificate: identity.acsCertificate, algorithm: identity.signing)
            let out = ares.setting("acsSignedContent", to: .string(resigned))
            return .replaced(out.bytes, note: "substitution: \(verified); re-signed with 3dstape's ACS certificate; "
                             + "channel keys (fingerprints only, no key material is stored): sdk-leg \(KeySubstitution.fingerprint(sdkLeg.cek)) "
                             + "acs-leg \(KeySubstitution.fingerprint(acsLeg.cek))")
        } catch {
            return .unchanged(note: "substitution: cannot set up the channel (\(error)); ARes passed unchanged")
        }
    }

    /// A key's fingerprint for session files and logs: the first 8 bytes of its SHA-256, enough to tell keys apart
    /// and useless for decryption.
    public static func fingerprint(_ key: [UInt8]) -> String { "sha256:" + Hex.encode(Array(Digest.sha256(key).prefix(8))) }

    func cRes(_ body: [UInt8], _ acsTransID: String) -> Action {
        guard let c = channels[acsTransID] else { return .unchanged(note: nil) }
        let text = String(decoding: body, as: UTF8.self).trimmingWhitespace
        if text.hasPrefix("{") { return .unchanged(note: "substitution: the ACS answered in plain JSON (an Erro); passed unchanged") }
        do {
            let message = try c.acsLeg.open(text)
            let sealed = try c.sdkLeg.seal(message)
            if message.completesChallenge { channels[acsTransID] = nil }
            return .replaced(Array(sealed.utf8), note: nil)
        } catch {
            return .unchanged(note: "substitution: the ACS's CRes does not open on the ACS leg (\(error)); passed unchanged")
        }
    }
}

/// A key-substitution problem.
public struct SubstitutionError: Error, CustomStringConvertible {
    public let description: String
    public init(_ d: String) { description = d }
}
