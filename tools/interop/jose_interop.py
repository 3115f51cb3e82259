#!/usr/bin/env python3
"""Interop between 3dstape's JOSE/EMV crypto and independent Python implementations.

  make FIXTURE.json   Python (jwcrypto + cryptography) makes vectors for every alg and enc 3dstape
                      supports; the Swift tests read them (Tests/TapJOSETests/Fixtures/python-vectors.json).
  check SWIFT.json    verifies vectors that 3dstape made (the TapInteropVectors tool) with Python.
  rfc FIXTURE.json    writes the RFC 7515/7516/7518 appendix values used by the Swift tests.

The EMV variants (deviceData ECDH-ES with PartyVInfo = DS id, app-channel CEK split and counter IVs)
are not in any JOSE library, so they are written here by hand from emv3ds.md with `cryptography`,
and cross-checked with jwcrypto's `dir` decryption where the JOSE part is standard.
"""
import base64, hashlib, hmac, json, os, sys
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.x509.oid import NameOID
import datetime
from jwcrypto import jwe, jwk, jws, jwt


def b64u(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def ub64u(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def emv_kdf(z: bytes, party_v: str) -> bytes:
    """Concat KDF, emv3ds.md section 1/2: empty AlgorithmID and PartyUInfo, PartyVInfo = ASCII party_v, 256 bits."""
    pv = party_v.encode()
    other = b"\0\0\0\0" + b"\0\0\0\0" + len(pv).to_bytes(4, "big") + pv + (256).to_bytes(4, "big")
    return hashlib.sha256(b"\0\0\0\1" + z + other).digest()


def cbc_hs256_seal(k: bytes, iv: bytes, pt: bytes, aad: bytes):
    mac_key, enc_key = k[:16], k[16:]
    padlen = 16 - len(pt) % 16
    e = Cipher(algorithms.AES(enc_key), modes.CBC(iv)).encryptor()
    ct = e.update(pt + bytes([padlen]) * padlen) + e.finalize()
    al = (len(aad) * 8).to_bytes(8, "big")
    tag = hmac.new(mac_key, aad + iv + ct + al, hashlib.sha256).digest()[:16]
    return ct, tag


def cbc_hs256_open(k: bytes, iv: bytes, ct: bytes, tag: bytes, aad: bytes) -> bytes:
    al = (len(aad) * 8).to_bytes(8, "big")
    if not hmac.compare_digest(hmac.new(k[:16], aad + iv + ct + al, hashlib.sha256).digest()[:16], tag):
        raise ValueError("CBC-HS256 tag mismatch")
    d = Cipher(algorithms.AES(k[16:]), modes.CBC(iv)).decryptor()
    p = d.update(ct) + d.finalize()
    if not 1 <= p[-1] <= 16 or p[-p[-1]:] != bytes([p[-1]]) * p[-1]:
        raise ValueError("bad padding")
    return p[: -p[-1]]


def seal(enc: str, k: bytes, iv: bytes, pt: bytes, header: dict) -> str:
    seg = b64u(json.dumps(header, separators=(",", ":")).encode())
    aad = seg.encode()
    if enc == "A128GCM":
        out = AESGCM(k).encrypt(iv, pt, aad)
        ct, tag = out[:-16], out[-16:]
    else:
        ct, tag = cbc_hs256_seal(k, iv, pt, aad)
    return ".".join([seg, "", b64u(iv), b64u(ct), b64u(tag)])


def open_dir(compact: str, k: bytes) -> bytes:
    seg, ek, iv, ct, tag = compact.split(".")
    header = json.loads(ub64u(seg))
    iv, ct, tag = ub64u(iv), ub64u(ct), ub64u(tag)
    if header["enc"] == "A128GCM":
        return AESGCM(k).decrypt(iv, ct + tag, seg.encode())
    return cbc_hs256_open(k, iv, ct, tag, seg.encode())


def channel_key(cek: bytes, enc: str, sdk_to_acs: bool) -> bytes:
    if enc == "A128CBC-HS256":
        return cek
    return cek[:16] if sdk_to_acs else cek[16:]


def ec_jwk_private(key) -> dict:
    return json.loads(jwk.JWK.from_pyca(key).export_private())


def ec_jwk_public(key) -> dict:
    return json.loads(jwk.JWK.from_pyca(key).export_public())


def pyca_private(d: dict):
    k = jwk.JWK(**d)
    return k._get_private_key()


def pyca_public(d: dict):
    k = jwk.JWK(**d)
    return k._get_public_key()


def make_chain(key_type: str):
    """A root CA and a signing leaf (x5c = [leaf], root withheld), as a DS root and an ACS certificate."""
    now = datetime.datetime.now(datetime.timezone.utc)
    def newkey():
        return ec.generate_private_key(ec.SECP256R1()) if key_type == "ec" else rsa.generate_private_key(65537, 2048)
    root_key, leaf_key = newkey(), newkey()
    root_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"Interop Test DS Root {key_type}")])
    root = (x509.CertificateBuilder().subject_name(root_name).issuer_name(root_name)
            .public_key(root_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(root_key, hashes.SHA256()))
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"Interop Test ACS {key_type}")]))
            .issuer_name(root_name).public_key(leaf_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(root_key, hashes.SHA256()))
    return root, leaf, leaf_key


def make(path: str):
    rsa_key = rsa.generate_private_key(65537, 2048)
    ds_ec = ec.generate_private_key(ec.SECP256R1())
    sdk_ec = ec.generate_private_key(ec.SECP256R1())
    acs_ec = ec.generate_private_key(ec.SECP256R1())
    keys = {
        "rsa": json.loads(jwk.JWK.from_pyca(rsa_key).export_private()),
        "ec": ec_jwk_private(ds_ec),
        "sdk": ec_jwk_private(sdk_ec),
        "acs": ec_jwk_private(acs_ec),
        "cek16": os.urandom(16).hex(),
        "cek32": os.urandom(32).hex(),
        "secret": "interop-shared-secret-0123456789abcdef",
    }
    k_rsa, k_ec = jwk.JWK(**keys["rsa"]), jwk.JWK(**keys["ec"])
    cases = []
    areq = json.dumps({"messageType": "AReq", "messageVersion": "2.2.0", "acctNumber": "4000000000001091"}).encode()

    # JWS with each asymmetric alg, and HS256.
    for alg, key in [("ES256", k_ec), ("PS256", k_rsa), ("RS256", k_rsa)]:
        s = jws.JWS(areq)
        s.add_signature(key, None, json.dumps({"alg": alg}))
        cases.append({"name": f"jws-{alg}", "kind": "jws", "compact": s.serialize(compact=True),
                      "key": "ec" if alg == "ES256" else "rsa", "expect": areq.decode()})
    s = jws.JWS(areq)
    s.add_signature(jwk.JWK(kty="oct", k=b64u(keys["secret"].encode())), None, json.dumps({"alg": "HS256"}))
    cases.append({"name": "jws-HS256", "kind": "jws-hs256", "compact": s.serialize(compact=True), "expect": areq.decode()})

    # JWT HS256 as payment gateways use it.
    t = jwt.JWT(header={"alg": "HS256", "typ": "JWT"}, claims={"iss": "merchant", "payload": {"pan": "4000000000001091"}})
    t.make_signed_token(jwk.JWK(kty="oct", k=b64u(keys["secret"].encode())))
    cases.append({"name": "jwt-HS256", "kind": "jwt", "compact": t.serialize(), "expect": json.dumps(json.loads(t.claims))})

    # acsSignedContent-like JWS with x5c chains (ES256 and PS256), root withheld.
    roots = {}
    for key_type, alg in [("ec", "ES256"), ("rsa", "PS256")]:
        root, leaf, leaf_key = make_chain(key_type)
        roots[key_type] = root.public_bytes(serialization.Encoding.PEM).decode()
        content = json.dumps({"acsEphemPubKey": ec_jwk_public(acs_ec), "sdkEphemPubKey": ec_jwk_public(sdk_ec),
                              "acsURL": "https://acs.example.test/challenge"}).encode()
        s = jws.JWS(content)
        s.add_signature(jwk.JWK.from_pyca(leaf_key), None,
                        json.dumps({"alg": alg, "x5c": [base64.b64encode(leaf.public_bytes(serialization.Encoding.DER)).decode()]}))
        cases.append({"name": f"jws-x5c-{alg}", "kind": "jws-x5c", "compact": s.serialize(compact=True),
                      "root": key_type, "expect": content.decode()})

    # JWE RSA-OAEP-256 (deviceData to an RSA DS key) with both enc values.
    for enc in ["A128CBC-HS256", "A128GCM"]:
        e = jwe.JWE(areq, json.dumps({"alg": "RSA-OAEP-256", "enc": enc, "kid": "ds-rsa-1"}))
        e.add_recipient(k_rsa)
        cases.append({"name": f"jwe-RSA-OAEP-256-{enc}", "kind": "jwe-rsa", "compact": e.serialize(compact=True),
                      "key": "rsa", "expect": areq.decode()})

    # JWE dir with a shared CEK, made by jwcrypto.
    for enc, cek in [("A128CBC-HS256", keys["cek32"]), ("A128GCM", keys["cek16"])]:
        e = jwe.JWE(areq, json.dumps({"alg": "dir", "enc": enc}))
        e.add_recipient(jwk.JWK(kty="oct", k=b64u(bytes.fromhex(cek))))
        cases.append({"name": f"jwe-dir-{enc}", "kind": "jwe-dir", "compact": e.serialize(compact=True),
                      "cek": cek, "expect": areq.decode()})

    # EMV EC deviceData: ECDH-ES (spec) and dir+epk (Stripe Android), PartyVInfo = DS id.
    device = json.dumps({"DV": "1.6", "DD": {"C001": "Android", "C018": "sdk-trans-id"}}).encode()
    ds_id = "F155545342"
    for alg in ["ECDH-ES", "dir"]:
        for enc in ["A128CBC-HS256", "A128GCM"]:
            eph = ec.generate_private_key(ec.SECP256R1())
            z = eph.exchange(ec.ECDH(), ds_ec.public_key())
            full = emv_kdf(z, ds_id)
            k = full[:16] if enc == "A128GCM" else full
            iv = os.urandom(12 if enc == "A128GCM" else 16)
            compact = seal(enc, k, iv, device, {"alg": alg, "enc": enc, "epk": ec_jwk_public(eph), "kid": "ds-ec-1"})
            cases.append({"name": f"deviceData-{alg}-{enc}", "kind": "jwe-ec", "compact": compact, "key": "ec",
                          "dsID": ds_id, "expect": device.decode()})

    # App channel: CReq from the SDK side and CRes from the ACS side, both enc values.
    sdk_ref, acs_trans = "3DS_LOA_SDK_INTEROP_020200_00001", "8a880dc0-d2d2-4067-bcb1-b08d1690b26e"
    cek = emv_kdf(sdk_ec.exchange(ec.ECDH(), acs_ec.public_key()), sdk_ref)
    assert cek == emv_kdf(acs_ec.exchange(ec.ECDH(), sdk_ec.public_key()), sdk_ref)
    for enc in ["A128CBC-HS256", "A128GCM"]:
        creq = json.dumps({"messageType": "CReq", "messageVersion": "2.2.0", "acsTransID": acs_trans,
                           "sdkCounterStoA": "000", "challengeDataEntry": "123456"}).encode()
        cres = json.dumps({"messageType": "CRes", "messageVersion": "2.2.0", "acsTransID": acs_trans,
                           "acsCounterAtoS": "000", "challengeCompletionInd": "Y", "transStatus": "Y"}).encode()
        header = {"alg": "dir", "enc": enc, "kid": acs_trans}
        iv_s = b"\0" * 11 + b"\0" if enc == "A128GCM" else os.urandom(16)
        iv_a = b"\xff" * 11 + b"\0" if enc == "A128GCM" else os.urandom(16)
        c1 = seal(enc, channel_key(cek, enc, True), iv_s, creq, header)
        c2 = seal(enc, channel_key(cek, enc, False), iv_a, cres, header)
        # Cross-check the standard JOSE part with jwcrypto's dir decryption.
        for c, sdk_to_acs, pt in [(c1, True, creq), (c2, False, cres)]:
            j = jwe.JWE()
            j.deserialize(c, key=jwk.JWK(kty="oct", k=b64u(channel_key(cek, enc, sdk_to_acs))))
            assert j.payload == pt
        common = {"sdkReferenceNumber": sdk_ref, "acsTransID": acs_trans, "cek": cek.hex()}
        cases.append({"name": f"channel-CReq-{enc}", "kind": "channel", "role": "acs", "compact": c1, **common,
                      "expect": creq.decode()})
        cases.append({"name": f"channel-CRes-{enc}", "kind": "channel", "role": "sdk", "compact": c2, **common,
                      "expect": cres.decode()})

    thumbprints = {name: jwk.JWK(**keys[name]).thumbprint() for name in ["rsa", "ec", "sdk", "acs"]}
    doc = {"comment": "Made by tools/interop/jose_interop.py make (jwcrypto + cryptography); regenerate, never edit.",
           "keys": keys, "thumbprints": thumbprints, "roots": roots, "cases": cases}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {len(cases)} Python-made vectors to {path}")


def check(path: str) -> int:
    """Verifies the vectors 3dstape made; prints one line per case and 'N passed, N failed'."""
    doc = json.load(open(path))
    keys, roots = doc["keys"], doc.get("roots", {})
    passed = failed = 0
    for c in doc["cases"]:
        try:
            kind, expect = c["kind"], c["expect"].encode()
            if kind == "jws":
                s = jws.JWS()
                s.deserialize(c["compact"], key=jwk.JWK(**keys[c["key"]]))
                got = s.payload
            elif kind == "jws-hs256":
                s = jws.JWS()
                s.deserialize(c["compact"], key=jwk.JWK(kty="oct", k=b64u(keys["secret"].encode())))
                got = s.payload
            elif kind == "jwt":
                t = jwt.JWT(jwt=c["compact"], key=jwk.JWK(kty="oct", k=b64u(keys["secret"].encode())))
                got, expect = json.dumps(json.loads(t.claims)).encode(), json.dumps(json.loads(c["expect"])).encode()
            elif kind == "jws-x5c":
                root = x509.load_pem_x509_certificate(roots[c["root"]].encode())
                header = json.loads(ub64u(c["compact"].split(".")[0]))
                leaf = x509.load_der_x509_certificate(base64.b64decode(header["x5c"][0]))
                leaf.verify_directly_issued_by(root)
                s = jws.JWS()
                s.deserialize(c["compact"], key=jwk.JWK.from_pyca(leaf.public_key()))
                got = s.payload
            elif kind == "jwe-rsa":
                e = jwe.JWE()
                e.deserialize(c["compact"], key=jwk.JWK(**keys[c["key"]]))
                got = e.payload
            elif kind == "jwe-dir":
                e = jwe.JWE()
                e.deserialize(c["compact"], key=jwk.JWK(kty="oct", k=b64u(bytes.fromhex(c["cek"]))))
                got = e.payload
            elif kind == "jwe-ec":
                header = json.loads(ub64u(c["compact"].split(".")[0]))
                eph = pyca_public(header["epk"])
                z = pyca_private(keys[c["key"]]).exchange(ec.ECDH(), eph)
                full = emv_kdf(z, c["dsID"])
                got = open_dir(c["compact"], full[:16] if header["enc"] == "A128GCM" else full)
            elif kind == "channel":
                own = pyca_private(keys["acs" if c["role"] == "acs" else "sdk"])
                peer = pyca_public(keys["sdk" if c["role"] == "acs" else "acs"])
                cek = emv_kdf(own.exchange(ec.ECDH(), peer), c["sdkReferenceNumber"])
                header = json.loads(ub64u(c["compact"].split(".")[0]))
                enc = header["enc"]
                sdk_to_acs = c["role"] == "acs"  # the ACS opens what the SDK sent
                got = open_dir(c["compact"], channel_key(cek, enc, sdk_to_acs))
                if enc == "A128GCM":
                    iv = ub64u(c["compact"].split(".")[2])
                    want = (b"\0" if sdk_to_acs else b"\xff") * 11 + bytes([int(c["counter"])])
                    assert iv == want, f"GCM IV {iv.hex()} is not the counter IV {want.hex()}"
                assert header.get("kid") == c["acsTransID"], "kid is not the acsTransID"
            else:
                raise ValueError(f"unknown kind {kind}")
            if json.loads(got) != json.loads(expect):
                raise ValueError(f"plaintext differs: {got[:80]!r}")
            print(f"ok    {c['name']}")
            passed += 1
        except Exception as ex:  # report every failure, then fail the run
            print(f"FAIL  {c['name']}: {type(ex).__name__}: {ex}")
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


def rfc(path: str):
    """RFC appendix values, taken from jwcrypto's own copy of them and checked here."""
    from jwcrypto import tests as t
    a2_key = jwk.JWK(**t.A2_key)
    e_a2_key = jwk.JWK(**t.E_A2_key)
    # RFC 7516 A.2 uses RSA1_5, which 3dstape does not do; recover its CEK so Swift can check A128CBC-HS256.
    parts = t.E_A2_vector.split(".")
    cek = e_a2_key._get_private_key().decrypt(ub64u(parts[1]), padding.PKCS1v15())
    # RFC 7518 B.1, computed independently and checked against the RFC's T.
    k = bytes(range(32))
    p = b"A cipher system must not be required to be secret, and it must be able to fall into the hands of the enemy without inconvenience"
    iv = bytes.fromhex("1af38c2dc2b96ffdd86694092341bc04")
    a = b"The second principle of Auguste Kerckhoffs"
    e, tag = cbc_hs256_seal(k, iv, p, a)
    assert tag.hex() == "652c3fa36b0a7c5b3219fab3a30bc1c4", tag.hex()
    doc = {
        "comment": "RFC 7515 A.1-A.3, RFC 7516 A.2 (content layer, CEK recovered), RFC 7518 B.1; via tools/interop/jose_interop.py rfc",
        "rfc7515_A1": {"key": t.SymmetricKeys["keys"][1], "compact": ".".join([b64u(bytes(t.A1_protected)), b64u(bytes(t.A1_payload)), b64u(bytes(t.A1_signature))])},
        "rfc7515_A2": {"key": t.A2_key, "compact": ".".join([b64u(bytes(t.A2_protected)), b64u(bytes(t.A2_payload)), b64u(bytes(t.A2_signature))])},
        "rfc7515_A3": {"key": t.A3_key, "compact": ".".join([b64u(bytes(t.A3_protected)), b64u(bytes(t.A3_payload)), b64u(bytes(t.A3_signature))])},
        "rfc7516_A2": {"compact": t.E_A2_vector, "cek": cek.hex(), "plaintext": t.E_A2_plaintext},
        "rfc7518_B1": {"k": k.hex(), "p": p.hex(), "iv": iv.hex(), "a": a.hex(), "e": e.hex(), "t": tag.hex()},
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote RFC vectors to {path}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("make", "check", "rfc"):
        sys.exit(__doc__)
    {"make": make, "rfc": rfc}.get(sys.argv[1], lambda p: sys.exit(check(p)))(sys.argv[2])
