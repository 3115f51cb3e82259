"""The app channel as a 3DS SDK and its 3DS Server play it, in Python with `cryptography`, for the Locust file.

What a real SDK does for every transaction, from emv3ds.md (sections 1 and 2) and the Swift client (SDKClient):
  - deviceData (sdkEncData) encrypted to the DS certificate: RSA-OAEP-256 for an RSA DS key, the EMV ECDH-ES variant
    (Concat KDF, PartyVInfo = directoryServerID) for an EC one;
  - a fresh P-256 ephemeral key per AReq (sdkEphemPubKey);
  - acsSignedContent verified: x5c chain to the DS root, signature PS256 or ES256 with the leaf's key, the SDK's own
    key echoed;
  - the channel key from ECDH with acsEphemPubKey and the Concat KDF (PartyVInfo = sdkReferenceNumber);
  - each CReq sealed as a JWE (alg dir, kid = acsTransID; A128CBC-HS256 with a random IV, or A128GCM with the
    counter IV and the left half of the key), each CRes opened and its acsCounterAtoS checked.

The JOSE/EMV primitives come from tools/interop/jose_interop.py (checked there against jwcrypto and 3dstape both
ways). Every check raises SDKError with the reason, which the Locust file reports as the request's failure.
"""
import base64, datetime, json, os, sys, uuid

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
import jose_interop as ji  # noqa: E402  (the repository's EMV JOSE helpers)

ENCS = ("A128CBC-HS256", "A128GCM")


class SDKError(Exception):
    """A check the SDK or 3DS Server makes failed; the message names what and why."""


def b64u(data: bytes) -> str:
    return ji.b64u(data)


def ub64u(text: str) -> bytes:
    try:
        return ji.ub64u(text)
    except (ValueError, TypeError) as e:
        raise SDKError(f"not base64url: {e}") from None


def _json_object(data: bytes, what: str) -> dict:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise SDKError(f"{what} is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise SDKError(f"{what} is not a JSON object")
    return value


class DSCertificates:
    """What a client is given about the DS (the layout `3dstape sandbox certs --out DIR` and `ca export --ds DIR`
    write): ds-root.pem (the roots acsSignedContent must chain to), ds-cert.pem (the key deviceData is encrypted
    to) and ds.json (directoryServerID, keyID)."""

    def __init__(self, directory: str):
        def read(name):
            path = os.path.join(directory, name)
            try:
                with open(path, "rb") as f:
                    return f.read()
            except OSError as e:
                raise SDKError(f"{path}: {e.strerror}; write the directory with '3dstape sandbox certs --out DIR' "
                               f"or '3dstape ca export --ds DIR'") from None
        try:
            self.roots = x509.load_pem_x509_certificates(read("ds-root.pem"))
            self.ds_cert = x509.load_pem_x509_certificate(read("ds-cert.pem"))
        except ValueError as e:
            raise SDKError(f"{directory}: a certificate does not parse: {e}") from None
        ds = _json_object(read("ds.json"), os.path.join(directory, "ds.json"))
        self.ds_id, self.key_id = ds.get("directoryServerID"), ds.get("keyID")
        if not isinstance(self.ds_id, str) or not isinstance(self.key_id, str):
            raise SDKError(f"{directory}/ds.json needs directoryServerID and keyID as strings")
        self.ds_key = self.ds_cert.public_key()
        if isinstance(self.ds_key, ec.EllipticCurvePublicKey):
            if not isinstance(self.ds_key.curve, ec.SECP256R1):
                raise SDKError(f"{directory}/ds-cert.pem: an EC DS key must be P-256, not {self.ds_key.curve.name}")
        elif not isinstance(self.ds_key, rsa.RSAPublicKey):
            raise SDKError(f"{directory}/ds-cert.pem: the DS key is neither RSA nor EC")
        self._trusted_chains = set()  # x5c chains already verified to a root (signatures are still checked per message)


def encrypt_device_data(device_data: dict, certs: DSCertificates, enc: str = "A128CBC-HS256") -> str:
    """sdkEncData: deviceData as a compact JWE to the DS key (RSA-OAEP-256, or ECDH-ES with the EMV KDF)."""
    plaintext = json.dumps(device_data, separators=(",", ":")).encode()
    if isinstance(certs.ds_key, rsa.RSAPublicKey):
        cek = os.urandom(32 if enc == "A128CBC-HS256" else 16)
        wrapped = certs.ds_key.encrypt(cek, padding.OAEP(mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=None))
        header = {"alg": "RSA-OAEP-256", "enc": enc, "kid": certs.key_id}
    else:
        eph = ec.generate_private_key(ec.SECP256R1())
        full = ji.emv_kdf(eph.exchange(ec.ECDH(), certs.ds_key), certs.ds_id)
        cek, wrapped = (full if enc == "A128CBC-HS256" else full[:16]), b""
        header = {"alg": "ECDH-ES", "enc": enc, "epk": ji.ec_jwk_public(eph), "kid": certs.key_id}
    return _seal(enc, cek, os.urandom(16 if enc == "A128CBC-HS256" else 12), plaintext, header, wrapped)


def _seal(enc: str, key: bytes, iv: bytes, plaintext: bytes, header: dict, encrypted_key: bytes = b"") -> str:
    segment = b64u(json.dumps(header, separators=(",", ":")).encode())
    aad = segment.encode()
    if enc == "A128GCM":
        out = AESGCM(key).encrypt(iv, plaintext, aad)
        ct, tag = out[:-16], out[-16:]
    else:
        ct, tag = ji.cbc_hs256_seal(key, iv, plaintext, aad)
    return ".".join([segment, b64u(encrypted_key), b64u(iv), b64u(ct), b64u(tag)])


def _jose_signature_to_der(alg: str, signature: bytes) -> bytes:
    if alg == "ES256":
        if len(signature) != 64:
            raise SDKError(f"acsSignedContent: an ES256 signature is 64 bytes (r||s), not {len(signature)}")
        return encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
    return signature


def verify_acs_signed_content(compact: str, certs: DSCertificates, now=None) -> dict:
    """Verifies the ARes's acsSignedContent as an SDK must (SPEC 6.2.3.2-3) and returns its payload: the x5c chain
    (leaf first, root withheld) issued up to one of the DS roots and valid now, then the JWS signature with the
    leaf's key, PS256 for an RSA leaf and ES256 for an EC one."""
    parts = compact.split(".") if isinstance(compact, str) else []
    if len(parts) != 3:
        raise SDKError("acsSignedContent is not a compact JWS (three parts)")
    header = _json_object(ub64u(parts[0]), "acsSignedContent header")
    alg, x5c = header.get("alg"), header.get("x5c")
    if alg not in ("PS256", "ES256"):
        raise SDKError(f"acsSignedContent alg {alg!r}: expected PS256 or ES256")
    if not isinstance(x5c, list) or not x5c or not all(isinstance(c, str) for c in x5c):
        raise SDKError("acsSignedContent has no x5c chain")
    key = tuple(x5c)
    try:
        chain = [x509.load_der_x509_certificate(base64.b64decode(c, validate=True)) for c in x5c]
    except ValueError as e:
        raise SDKError(f"acsSignedContent x5c: a certificate does not parse: {e}") from None
    if key not in certs._trusted_chains:
        _verify_chain(chain, certs.roots, now or datetime.datetime.now(datetime.timezone.utc))
        certs._trusted_chains.add(key)
    leaf_key = chain[0].public_key()
    signature = ub64u(parts[2])
    signed = f"{parts[0]}.{parts[1]}".encode()
    try:
        if alg == "PS256":
            if not isinstance(leaf_key, rsa.RSAPublicKey):
                raise SDKError("acsSignedContent alg PS256 with a non-RSA x5c leaf")
            leaf_key.verify(signature, signed, padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32), hashes.SHA256())
        else:
            if not isinstance(leaf_key, ec.EllipticCurvePublicKey) or not isinstance(leaf_key.curve, ec.SECP256R1):
                raise SDKError("acsSignedContent alg ES256 with a non-P-256 x5c leaf")
            leaf_key.verify(_jose_signature_to_der(alg, signature), signed, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise SDKError(f"acsSignedContent {alg} signature does not verify with the x5c leaf's key") from None
    payload = _json_object(ub64u(parts[1]), "acsSignedContent payload")
    for member in ("acsEphemPubKey", "sdkEphemPubKey", "acsURL"):
        if member not in payload:
            raise SDKError(f"acsSignedContent lacks {member}")
    return payload


def _verify_chain(chain, roots, now):
    for cert in chain:
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            raise SDKError(f"acsSignedContent x5c: {cert.subject.rfc4514_string()} is not valid now")
    for cert, issuer in zip(chain, chain[1:]):
        _issued_by(cert, issuer)
    last = chain[-1]
    for root in roots:
        if root.subject == last.issuer:
            _issued_by(last, root)
            return
    raise SDKError(f"acsSignedContent x5c: {last.issuer.rfc4514_string()} is not one of the DS roots given")


def _issued_by(cert, issuer):
    try:
        constraints = issuer.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        constraints = None
    if constraints is None or not constraints.ca:
        raise SDKError(f"acsSignedContent x5c: {issuer.subject.rfc4514_string()} is not a CA")
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        raise SDKError(f"acsSignedContent x5c: {cert.subject.rfc4514_string()} is not signed by "
                       f"{issuer.subject.rfc4514_string()}") from None


def public_jwk_key(jwk: dict):
    """A P-256 public key from a JWK (acsEphemPubKey), refused with the reason when it is not one."""
    if not isinstance(jwk, dict) or jwk.get("kty") != "EC" or jwk.get("crv") != "P-256":
        raise SDKError("acsEphemPubKey is not a P-256 EC JWK")
    try:
        x, y = int.from_bytes(ub64u(jwk["x"]), "big"), int.from_bytes(ub64u(jwk["y"]), "big")
        return ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()
    except (KeyError, TypeError, ValueError) as e:
        raise SDKError(f"acsEphemPubKey is not a point on P-256: {e}") from None


class AppChannel:
    """The SDK side of the CReq/CRes channel (emv3ds.md section 1): keys from ECDH and the EMV Concat KDF, counters
    from "000", A128CBC-HS256 (one 32-byte key, random IV) or A128GCM (left half SDK->ACS with IV 00..00||counter,
    right half ACS->SDK with FF..FF||counter)."""

    def __init__(self, sdk_key, acs_public_key, sdk_reference_number: str, acs_trans_id: str, enc: str):
        if enc not in ENCS:
            raise SDKError(f"enc {enc!r}: expected one of {', '.join(ENCS)}")
        self.cek = ji.emv_kdf(sdk_key.exchange(ec.ECDH(), acs_public_key), sdk_reference_number)
        self.acs_trans_id, self.enc = acs_trans_id, enc
        self.send_counter = self.receive_counter = 0

    def seal(self, creq: dict) -> str:
        if self.send_counter > 255:
            raise SDKError("sdkCounterStoA would pass 255")
        message = dict(creq, sdkCounterStoA=f"{self.send_counter:03d}")
        gcm = self.enc == "A128GCM"
        key = self.cek[:16] if gcm else self.cek
        iv = b"\0" * 11 + bytes([self.send_counter]) if gcm else os.urandom(16)
        header = {"alg": "dir", "enc": self.enc, "kid": self.acs_trans_id}
        self.send_counter += 1
        return _seal(self.enc, key, iv, json.dumps(message, separators=(",", ":")).encode(), header)

    def open(self, compact: str) -> dict:
        """Decrypts a CRes (in the enc its header names) and checks its kid, IV and acsCounterAtoS."""
        parts = compact.strip().split(".")
        if len(parts) != 5:
            raise SDKError("CRes is not a compact JWE (five parts)")
        header = _json_object(ub64u(parts[0]), "CRes JWE header")
        enc = header.get("enc")
        if header.get("alg") != "dir" or enc not in ENCS:
            raise SDKError(f"CRes JWE alg {header.get('alg')!r} enc {enc!r}: expected dir with {' or '.join(ENCS)}")
        if header.get("kid") not in (None, self.acs_trans_id):
            raise SDKError(f"CRes JWE kid {header.get('kid')!r} is not the acsTransID")
        gcm = enc == "A128GCM"
        iv = ub64u(parts[2])
        if gcm and iv != b"\xff" * 11 + bytes([self.receive_counter & 0xFF]):
            raise SDKError(f"CRes A128GCM IV {iv.hex()} is not FF..FF||{self.receive_counter:03d}")
        try:
            plaintext = ji.open_dir(compact.strip(), self.cek[16:] if gcm else self.cek)
        except Exception as e:  # cryptography's InvalidTag, a tag mismatch or bad padding: all a decryption failure
            raise SDKError(f"CRes does not decrypt ({type(e).__name__}: {e})") from None
        cres = _json_object(plaintext, "CRes plaintext")
        counter = cres.get("acsCounterAtoS")
        if counter != f"{self.receive_counter:03d}":
            raise SDKError(f"CRes acsCounterAtoS {counter!r}, expected {self.receive_counter:03d}")
        self.receive_counter += 1
        return cres


def device_data(sdk_reference_number: str, sdk_trans_id: str) -> dict:
    """The deviceData an SDK collects (EMV 3DS SDK Device Information, DV 1.6), as the Swift client sends it."""
    return {"DV": "1.6", "DD": {"C001": "Linux", "C002": "3dstape locust", "C004": "1", "C005": "en-GB",
                                "C016": sdk_reference_number, "C018": sdk_trans_id}, "DPNA": {}, "SW": []}


def fresh_areq(recorded: dict, certs: DSCertificates, threeds_server_url: str, pan: str, purchase_date: str):
    """The recorded AReq with what a real SDK and 3DS Server make fresh: transaction IDs, the SDK ephemeral key,
    deviceData encrypted to this DS, purchaseDate and the RReq URL. Returns (areq, sdk_private_key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    areq = dict(recorded)
    sdk_trans_id = str(uuid.uuid4())
    sdk_ref = areq.get("sdkReferenceNumber") or "3DS_LOA_SDK_3DSTAPE_020300_00001"
    areq.update({"threeDSServerTransID": str(uuid.uuid4()), "sdkTransID": sdk_trans_id, "sdkReferenceNumber": sdk_ref,
                 "sdkEphemPubKey": ji.ec_jwk_public(key), "threeDSServerURL": threeds_server_url, "acctNumber": pan,
                 "sdkEncData": encrypt_device_data(device_data(sdk_ref, sdk_trans_id), certs)})
    if "purchaseDate" in areq:
        areq["purchaseDate"] = purchase_date
    return areq, key


MASKED = "***"


def answer_for(ui_type: str, recorded: dict, message_version: str, answers: dict) -> dict:
    """The CReq entry for a challenge screen: the recorded CReq's entry where the recording has it in clear
    (oobContinue, infoContinueIndicator, challengeCancel, challengeNoEntry, resendChallenge), else the scripted
    answer for the screen's acsUiType (`answers`: otp, select, multi) where the recording masked it."""
    entry_keys = ("challengeCancel", "challengeNoEntry", "resendChallenge", "oobContinue", "infoContinueIndicator",
                  "challengeDataEntry", "challengeHTMLDataEntry", "whitelistingDataEntry", "trustListDataEntry")
    entry = {k: v for k, v in recorded.items() if k in entry_keys}
    masked = [k for k, v in entry.items() if isinstance(v, str) and "*" in v]
    if entry and not masked:
        return entry
    if ui_type in ("02",):
        return {"challengeDataEntry": answers["select"]}
    if ui_type in ("03",):
        return {"challengeDataEntry": answers["multi"]}
    if ui_type in ("04", "06"):
        return {"oobContinue": "01" if message_version >= "2.3.1" else True}
    if ui_type == "05":
        return {"challengeHTMLDataEntry": f"otp={answers['otp']}"}
    if ui_type == "07":
        return {"infoContinueIndicator": "01"} if message_version >= "2.3.1" else {"challengeNoEntry": "Y"}
    return {"challengeDataEntry": answers["otp"]}
