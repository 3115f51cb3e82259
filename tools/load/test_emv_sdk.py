"""Tests of tools/load/emv_sdk.py against independent implementations (jwcrypto) and made-up faults; the end-to-end
proof that 3dstape's ACS opens what it seals is tools/load/check.sh (Locust against `3dstape sandbox`).

  tools/load/.venv/bin/python -m unittest discover -s tools/load -p 'test_*.py'
"""
import base64, json, os, sys, tempfile, unittest

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from jwcrypto import jwe, jwk, jws

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emv_sdk  # noqa: E402
from emv_sdk import ji  # noqa: E402


def write_certs(directory, key_type):
    """A DS root and a DS encryption certificate (RSA or EC) in the `sandbox certs` layout; returns (root, root's
    chain helper values, DS private key)."""
    root, leaf, leaf_key = ji.make_chain(key_type)
    pem = serialization.Encoding.PEM
    with open(os.path.join(directory, "ds-root.pem"), "wb") as f:
        f.write(root.public_bytes(pem))
    with open(os.path.join(directory, "ds-cert.pem"), "wb") as f:
        f.write(leaf.public_bytes(pem))
    with open(os.path.join(directory, "ds.json"), "w") as f:
        json.dump({"directoryServerID": "A999999999", "keyID": f"test-ds-{key_type}"}, f)
    return root, leaf, leaf_key


def signed_content(alg, leaf, leaf_key, payload):
    s = jws.JWS(json.dumps(payload).encode())
    der = leaf.public_bytes(serialization.Encoding.DER)
    s.add_signature(jwk.JWK.from_pyca(leaf_key), None, json.dumps({"alg": alg, "x5c": [base64.b64encode(der).decode()]}))
    return s.serialize(compact=True)


class DeviceDataTests(unittest.TestCase):
    def test_rsa_device_data_opens_with_jwcrypto(self):
        with tempfile.TemporaryDirectory() as d:
            _, _, ds_key = write_certs(d, "rsa")
            certs = emv_sdk.DSCertificates(d)
            for enc in emv_sdk.ENCS:
                compact = emv_sdk.encrypt_device_data({"DV": "1.6", "DD": {"C001": "x"}}, certs, enc)
                e = jwe.JWE()
                e.deserialize(compact, key=jwk.JWK.from_pyca(ds_key))
                self.assertEqual(json.loads(e.payload), {"DV": "1.6", "DD": {"C001": "x"}})
                header = json.loads(ji.ub64u(compact.split(".")[0]))
                self.assertEqual((header["alg"], header["enc"], header["kid"]), ("RSA-OAEP-256", enc, "test-ds-rsa"))

    def test_ec_device_data_uses_the_emv_kdf_with_the_ds_id(self):
        with tempfile.TemporaryDirectory() as d:
            _, _, ds_key = write_certs(d, "ec")
            certs = emv_sdk.DSCertificates(d)
            for enc in emv_sdk.ENCS:
                compact = emv_sdk.encrypt_device_data({"DV": "1.6"}, certs, enc)
                header = json.loads(ji.ub64u(compact.split(".")[0]))
                self.assertEqual((header["alg"], header["kid"]), ("ECDH-ES", "test-ds-ec"))
                full = ji.emv_kdf(ds_key.exchange(ec.ECDH(), ji.pyca_public(header["epk"])), "A999999999")
                self.assertEqual(json.loads(ji.open_dir(compact, full[:16] if enc == "A128GCM" else full)), {"DV": "1.6"})
                wrong = ji.emv_kdf(ds_key.exchange(ec.ECDH(), ji.pyca_public(header["epk"])), "B000000000")
                with self.assertRaises(Exception):
                    ji.open_dir(compact, wrong[:16] if enc == "A128GCM" else wrong)

    def test_missing_certificate_directory_names_the_file(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(emv_sdk.SDKError, "ds-root.pem"):
                emv_sdk.DSCertificates(d)


class ACSSignedContentTests(unittest.TestCase):
    payload = {"acsEphemPubKey": {"kty": "EC"}, "sdkEphemPubKey": {"kty": "EC"}, "acsURL": "http://127.0.0.1:1/acs/challenge"}

    def certs_for(self, d, root):
        write_certs(d, "ec")
        with open(os.path.join(d, "ds-root.pem"), "wb") as f:
            f.write(root.public_bytes(serialization.Encoding.PEM))
        return emv_sdk.DSCertificates(d)

    def test_ps256_and_es256_verify_to_the_root(self):
        for key_type, alg in (("rsa", "PS256"), ("ec", "ES256")):
            root, leaf, leaf_key = ji.make_chain(key_type)
            with tempfile.TemporaryDirectory() as d:
                certs = self.certs_for(d, root)
                self.assertEqual(emv_sdk.verify_acs_signed_content(signed_content(alg, leaf, leaf_key, self.payload), certs), self.payload)

    def test_a_flipped_signature_bit_is_refused_even_after_the_chain_was_trusted(self):
        for key_type, alg in (("rsa", "PS256"), ("ec", "ES256")):
            root, leaf, leaf_key = ji.make_chain(key_type)
            with tempfile.TemporaryDirectory() as d:
                certs = self.certs_for(d, root)
                good = signed_content(alg, leaf, leaf_key, self.payload)
                emv_sdk.verify_acs_signed_content(good, certs)
                head, body, sig = good.split(".")
                raw = bytearray(ji.ub64u(sig))
                raw[len(raw) // 2] ^= 1  # as `3dstape sandbox --bad-signature` does
                with self.assertRaisesRegex(emv_sdk.SDKError, "signature does not verify"):
                    emv_sdk.verify_acs_signed_content(".".join([head, body, ji.b64u(bytes(raw))]), certs)

    def test_a_chain_to_another_root_is_refused(self):
        root, _, _ = ji.make_chain("ec")
        _, other_leaf, other_key = ji.make_chain("ec")  # same names, another root key
        with tempfile.TemporaryDirectory() as d:
            certs = self.certs_for(d, root)
            with self.assertRaisesRegex(emv_sdk.SDKError, "not signed by"):
                emv_sdk.verify_acs_signed_content(signed_content("ES256", other_leaf, other_key, self.payload), certs)

    def test_alg_and_key_must_agree(self):
        root, leaf, leaf_key = ji.make_chain("rsa")
        with tempfile.TemporaryDirectory() as d:
            certs = self.certs_for(d, root)
            with self.assertRaisesRegex(emv_sdk.SDKError, "RS256"):
                emv_sdk.verify_acs_signed_content(signed_content("RS256", leaf, leaf_key, self.payload), certs)


class AppChannelTests(unittest.TestCase):
    def pair(self, enc):
        sdk_key, acs_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
        channel = emv_sdk.AppChannel(sdk_key, acs_key.public_key(), "SDK-REF", "acs-1", enc)
        cek = ji.emv_kdf(acs_key.exchange(ec.ECDH(), sdk_key.public_key()), "SDK-REF")
        return channel, cek

    def cres(self, cek, enc, counter, iv=None):
        gcm = enc == "A128GCM"
        iv = iv or (b"\xff" * 11 + bytes([counter]) if gcm else os.urandom(16))
        body = json.dumps({"messageType": "CRes", "acsCounterAtoS": f"{counter:03d}"}).encode()
        return ji.seal(enc, cek[16:] if gcm else cek, iv, body, {"alg": "dir", "enc": enc, "kid": "acs-1"})

    def test_creqs_open_with_jwcrypto_and_carry_the_counter(self):
        for enc in emv_sdk.ENCS:
            channel, cek = self.pair(enc)
            for n in range(3):
                compact = channel.seal({"messageType": "CReq"})
                e = jwe.JWE()
                e.deserialize(compact, key=jwk.JWK(kty="oct", k=ji.b64u(cek[:16] if enc == "A128GCM" else cek)))
                self.assertEqual(json.loads(e.payload)["sdkCounterStoA"], f"{n:03d}")
                self.assertEqual(json.loads(ji.ub64u(compact.split(".")[0]))["kid"], "acs-1")
                if enc == "A128GCM":
                    self.assertEqual(ji.ub64u(compact.split(".")[2]), b"\0" * 11 + bytes([n]))

    def test_cres_counter_iv_and_tag_are_checked(self):
        for enc in emv_sdk.ENCS:
            channel, cek = self.pair(enc)
            self.assertEqual(channel.open(self.cres(cek, enc, 0))["acsCounterAtoS"], "000")
            with self.assertRaisesRegex(emv_sdk.SDKError, "acsCounterAtoS '000', expected 001" if enc != "A128GCM" else "IV"):
                channel.open(self.cres(cek, enc, 0))
            head, ek, iv, ct, tag = self.cres(cek, enc, 1).split(".")
            raw = bytearray(ji.ub64u(ct))
            raw[0] ^= 1
            with self.assertRaisesRegex(emv_sdk.SDKError, "does not decrypt"):
                channel.open(".".join([head, ek, iv, ji.b64u(bytes(raw)), tag]))
            self.assertEqual(channel.open(self.cres(cek, enc, 1))["acsCounterAtoS"], "001")

    def test_gcm_cres_counter_mismatch_inside_a_right_iv(self):
        channel, cek = self.pair("A128GCM")
        body = json.dumps({"messageType": "CRes", "acsCounterAtoS": "007"}).encode()
        compact = ji.seal("A128GCM", cek[16:], b"\xff" * 11 + b"\0", body, {"alg": "dir", "enc": "A128GCM", "kid": "acs-1"})
        with self.assertRaisesRegex(emv_sdk.SDKError, "acsCounterAtoS '007', expected 000"):
            channel.open(compact)


class AnswerTests(unittest.TestCase):
    answers = {"otp": "1234", "select": "2", "multi": "1,3"}

    def test_masked_entries_take_the_scripted_answer_for_the_screen(self):
        self.assertEqual(emv_sdk.answer_for("01", {"challengeDataEntry": "***"}, "2.2.0", self.answers), {"challengeDataEntry": "1234"})
        self.assertEqual(emv_sdk.answer_for("03", {"challengeDataEntry": "***"}, "2.2.0", self.answers), {"challengeDataEntry": "1,3"})
        self.assertEqual(emv_sdk.answer_for("05", {"challengeHTMLDataEntry": "***"}, "2.2.0", self.answers),
                         {"challengeHTMLDataEntry": "otp=1234"})

    def test_clear_entries_are_sent_as_recorded(self):
        self.assertEqual(emv_sdk.answer_for("04", {"oobContinue": True, "sdkCounterStoA": "001"}, "2.2.0", self.answers), {"oobContinue": True})
        self.assertEqual(emv_sdk.answer_for("01", {"challengeCancel": "01"}, "2.2.0", self.answers), {"challengeCancel": "01"})
        self.assertEqual(emv_sdk.answer_for("07", {}, "2.3.1", self.answers), {"infoContinueIndicator": "01"})


if __name__ == "__main__":
    unittest.main()
