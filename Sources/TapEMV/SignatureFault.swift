import TapCore

/// The bad-signature fault (the sandbox's `--bad-signature`, the replayer's `bad-signature`): a compact JWS whose chain
/// still validates but whose signature does not.
public enum SignatureFault {
    /// The compact JWS with one bit of its signature flipped (the middle byte's lowest bit); a string that is not three
    /// dot-separated parts with a base64url signature is returned as it was.
    public static func flippingSignatureBit(_ compact: String) -> String {
        var parts = compact.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, var sig = Base64URL.decode(parts[2]), !sig.isEmpty else { return compact }
        sig[sig.count / 2] ^= 0x01
        parts[2] = Base64URL.encode(sig)
        return parts.joined(separator: ".")
    }
}
