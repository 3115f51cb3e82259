"""Load from a recorded 3dstape session with Locust (a distributed load engine; 3dstape itself stays one machine).

Each virtual user replays the session's 3DS flows against the target (`--host`): a 3DS Server or DS under test, or
`3dstape sandbox` / `3dstape replay`. Every AReq is sent with fresh transaction IDs (threeDSServerTransID, sdkTransID)
per user and flow.

  ThreeDSUser          browser (and 3RI) flows: the AReq; for a browser challenge the creq form and the challenge
                       page's post, with the IDs the ARes gave.
  AppChallengeUser     app flows, as an SDK and its 3DS Server (tools/load/emv_sdk.py, Python `cryptography`): a fresh
                       SDK ephemeral key and deviceData encrypted to the DS certificate; the ARes's acsSignedContent
                       verified to the DS root; the CReq/CRes channel from ECDH and the EMV KDF, each CReq sealed with
                       its counter (A128CBC-HS256 and A128GCM in turn, or THREEDSTAPE_ENC), each CRes opened and its
                       counter checked, answering each screen with the recorded CReq's entry (a masked one with the
                       sandbox's answers: THREEDSTAPE_ANSWER, default 1234; 2 for single select, 1,3 for multi);
                       then the ACS's RReq, taken by a listener of this process (THREEDSTAPE_RREQ_LISTEN, default
                       127.0.0.1:0; THREEDSTAPE_RREQ_URL when the ACS reaches it by another address) and awaited
                       beside the user's next flows (THREEDSTAPE_RREQ_TIMEOUT, default 30 s).
                       Needs THREEDSTAPE_CERTS=DIR as `3dstape sandbox certs --out DIR` (or, against the replayer,
                       `3dstape ca export --ds DIR`) writes it.

A class runs only when the session has flows for it. Statistics per message type (AReq, CReq, RReq, creq form,
challenge submit) and per whole flow (type "flow": app challenge from the AReq to the final CRes, app frictionless,
app decoupled up to its RReq, app erro for an Erro the recording has too); every
failed check is a Locust failure naming the reason (an ARes transStatus that differs from the recording, an
acsSignedContent that does not verify, a CRes counter, a missing RReq, ...). THREEDSTAPE_EXPECT_CHALLENGE=Y also
fails a challenge whose final CRes says otherwise.

  THREEDSTAPE_SESSION=sessions/demo-browser.3dstape locust -f tools/load/locustfile.py --host http://127.0.0.1:8080
  THREEDSTAPE_SESSION=sessions/demo-app.3dstape THREEDSTAPE_CERTS=certs locust -f tools/load/locustfile.py --host http://127.0.0.1:9443
  (headless: --headless -u 50 -r 10 -t 1m; distributed: --master, and --worker --master-host HOST on each worker,
  every worker given the same session and certificates, so that all drive the same app challenges)

Card numbers are stored masked (first 6 / last 4): the middle digits are filled with zeros unless THREEDSTAPE_PAN
gives a card to use instead.
"""
import json, os, re, sqlite3, sys, time, uuid
from base64 import urlsafe_b64decode, urlsafe_b64encode
from datetime import datetime, timezone
from urllib.parse import urlencode, urlsplit

import gevent
from locust import HttpUser, between, constant, events, task
from locust.contrib.fasthttp import FastHttpUser

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emv_sdk  # noqa: E402  (the SDK side of the app channel, beside this file)


@events.init.add_listener
def _refresh_loop_clock(**_kwargs):
    """gevent's loop caches the time of its last iteration; headless Locust sets its --run-time timer from that clock
    before the loop ever turned, so a slow start (imports, a loaded machine) cut a 4 s run to 0.35 s. Refreshed here,
    just before the timer is set."""
    gevent.get_hub().loop.update_now()


def _b64u(data: bytes) -> str:
    return urlsafe_b64encode(data).rstrip(b"=").decode()


def _load_flows(path):
    """The recorded AReqs, in order, with the path they were posted to, what answered each (ARes transStatus or
    Erro code) and, for the app channel, the entries of the recorded CReqs of its challenge (decrypted when recorded)."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = db.execute(
            "SELECT e.id, e.url, CAST(e.request_body AS TEXT), m.three_ds_server_trans_id FROM exchanges e "
            "JOIN messages m ON m.exchange_id = e.id WHERE m.message_type = 'AReq' AND m.direction = 'request' "
            "AND e.request_body_compressed = 0 ORDER BY e.t_request_start").fetchall()
        answers = {eid: (mtype, status, code) for eid, mtype, status, code in db.execute(
            "SELECT exchange_id, message_type, trans_status, error_code FROM messages WHERE direction = 'response'")}
        creqs = {}
        for tid, text in db.execute("SELECT m.three_ds_server_trans_id, m.json FROM messages m JOIN exchanges e ON e.id = m.exchange_id "
                                    "WHERE m.message_type = 'CReq' AND m.direction = 'request' ORDER BY e.t_request_start, m.id"):
            try:
                creqs.setdefault(tid, []).append(json.loads(text) if text else {})
            except ValueError:
                creqs.setdefault(tid, []).append({})
        db.close()
    except sqlite3.Error as e:
        raise SystemExit(f"{path}: not a readable 3dstape session ({e})")
    flows = []
    for eid, url, body, tid in rows:
        try:
            areq = json.loads(body)
        except (TypeError, ValueError):
            continue
        if not isinstance(areq, dict):
            continue
        mtype, status, code = answers.get(eid, (None, None, None))
        flows.append({"path": urlsplit(url).path or "/", "areq": areq, "answer": mtype, "transStatus": status,
                      "errorCode": code, "creqs": creqs.get(tid, [])})
    if not flows:
        raise SystemExit(f"{path}: no AReq to send")
    return flows


SESSION = os.environ.get("THREEDSTAPE_SESSION", "sessions/demo-browser.3dstape")
ALL_FLOWS = _load_flows(SESSION)
FLOWS = [(f["path"], f["areq"]) for f in ALL_FLOWS if f["areq"].get("deviceChannel") != "01"]
APP_FLOWS = [f for f in ALL_FLOWS if f["areq"].get("deviceChannel") == "01"]


def _pan(areq):
    return os.environ.get("THREEDSTAPE_PAN") or re.sub(r"\*", "0", areq.get("acctNumber", ""))


class ThreeDSUser(HttpUser):
    """Browser and 3RI flows (the app channel is AppChallengeUser's)."""
    abstract = not FLOWS
    wait_time = between(0.01, 0.05)

    @task
    def flows(self):
        for path, recorded in FLOWS:
            areq = dict(recorded)
            areq["threeDSServerTransID"] = str(uuid.uuid4())
            if "sdkTransID" in areq:
                areq["sdkTransID"] = str(uuid.uuid4())
            areq["acctNumber"] = _pan(areq)
            with self.client.post(path, json=areq, name="AReq", catch_response=True) as r:
                try:
                    ares = r.json()
                except ValueError:
                    r.failure(f"not JSON: HTTP {r.status_code}")
                    continue
                if ares.get("messageType") not in ("ARes", "Erro"):
                    r.failure(f"expected ARes, got {ares.get('messageType')}")
                    continue
                if ares.get("threeDSServerTransID") != areq["threeDSServerTransID"]:
                    r.failure("the ARes does not carry this AReq's threeDSServerTransID")
                    continue
            if ares.get("transStatus") == "C" and areq.get("deviceChannel") == "02" and ares.get("acsURL"):
                self._browser_challenge(ares, areq)

    def _browser_challenge(self, ares, areq):
        creq = {"threeDSServerTransID": ares["threeDSServerTransID"], "acsTransID": ares["acsTransID"], "messageType": "CReq",
                "messageVersion": areq["messageVersion"], "challengeWindowSize": "05"}
        acs = urlsplit(ares["acsURL"])
        form = urlencode({"creq": _b64u(json.dumps(creq).encode()), "threeDSSessionData": _b64u(b"load-" + uuid.uuid4().hex.encode())})
        with self.client.post(acs.path, data=form, headers={"Content-Type": "application/x-www-form-urlencoded"}, name="creq form",
                              catch_response=True) as page:
            if ares["acsTransID"] not in page.text:
                page.failure("the challenge page does not carry the acsTransID")
                return
            action = re.search(r'<form[^>]*action="([^"]+)"', page.text)
            fields = dict(re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', page.text))
        if not action:
            return
        fields.update({"answer": os.environ.get("THREEDSTAPE_ANSWER", "1234"), "action": "submit"})
        with self.client.post(urlsplit(action.group(1)).path, data=urlencode(fields),
                              headers={"Content-Type": "application/x-www-form-urlencoded"}, name="challenge submit", catch_response=True) as final:
            cres = re.search(r'name="cres" value="([^"]+)"', final.text)
            if not cres:
                final.failure("no final cres form")
                return
            value = cres.group(1)
            body = json.loads(urlsafe_b64decode(value + "=" * (-len(value) % 4)))
            if body.get("acsTransID") != ares["acsTransID"]:
                final.failure("the cres is for another transaction")


class RReqListener:
    """The 3DS Server's RReq endpoint for this Locust process: answers each RReq with an RRes and hands it to the
    user waiting for that threeDSServerTransID (an RReq nobody waits for is answered and dropped, so nothing piles
    up). Started by the first app user of the process; workers on other machines each have their own."""

    def __init__(self, listen: str, advertised: str | None):
        from gevent.pywsgi import WSGIServer
        host, _, port = listen.rpartition(":")
        if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise SystemExit(f"THREEDSTAPE_RREQ_LISTEN {listen!r}: expected HOST:PORT")
        self.waiting = {}
        self.server = WSGIServer((host.strip("[]"), int(port)), self._app, log=None, error_log=None)
        try:
            self.server.start()
        except OSError as e:
            raise SystemExit(f"THREEDSTAPE_RREQ_LISTEN {listen}: cannot listen there ({e.strerror})")
        bound = self.server.server_port
        self.url = (advertised.rstrip("/") if advertised else f"http://{host}:{bound}") + "/3ds/rreq"

    def expect(self, threeds_server_trans_id):
        from gevent.event import AsyncResult
        waiter = self.waiting[threeds_server_trans_id] = AsyncResult()
        return waiter

    def forget(self, threeds_server_trans_id):
        self.waiting.pop(threeds_server_trans_id, None)

    def _app(self, environ, start_response):
        try:
            size = min(int(environ.get("CONTENT_LENGTH") or 0), 1 << 20)
            rreq = json.loads(environ["wsgi.input"].read(size))
            if not isinstance(rreq, dict) or rreq.get("messageType") != "RReq":
                raise ValueError("not an RReq")
        except (ValueError, TypeError):
            start_response("400 Bad Request", [("Content-Type", "text/plain")])
            return [b"expected an RReq (JSON)"]
        waiter = self.waiting.pop(rreq.get("threeDSServerTransID"), None)
        if waiter is not None:
            waiter.set(rreq)
        rres = {k: rreq[k] for k in ("threeDSServerTransID", "dsTransID", "acsTransID", "sdkTransID") if k in rreq}
        rres.update({"messageType": "RRes", "messageVersion": rreq.get("messageVersion"), "resultsStatus": "01"})
        start_response("200 OK", [("Content-Type", "application/json; charset=utf-8")])
        return [json.dumps(rres).encode()]


class AppSettings:
    """What every app user of this process shares, read once from the environment when Locust starts (so that a
    missing or bad value stops the process with its reason before any user runs): the DS certificates, the encs,
    the answers, the RReq timeout and listener."""

    def __init__(self):
        certs_dir = os.environ.get("THREEDSTAPE_CERTS")
        if not certs_dir:
            raise SystemExit("AppChallengeUser needs THREEDSTAPE_CERTS=DIR ('3dstape sandbox certs --out DIR', or "
                             "'3dstape ca export --ds DIR' against the replayer)")
        try:
            self.certs = emv_sdk.DSCertificates(certs_dir)
        except emv_sdk.SDKError as e:
            raise SystemExit(f"THREEDSTAPE_CERTS: {e}")
        encs = os.environ.get("THREEDSTAPE_ENC", "both")
        if encs not in ("both",) + emv_sdk.ENCS:
            raise SystemExit(f"THREEDSTAPE_ENC {encs!r}: expected A128CBC-HS256, A128GCM or both")
        self.encs = emv_sdk.ENCS if encs == "both" else (encs,)
        self.answers = {"otp": os.environ.get("THREEDSTAPE_ANSWER", "1234"), "select": "2", "multi": "1,3"}
        self.rreq_timeout = _seconds("THREEDSTAPE_RREQ_TIMEOUT", 30)
        self.expect_challenge = os.environ.get("THREEDSTAPE_EXPECT_CHALLENGE")
        self.listener = RReqListener(os.environ.get("THREEDSTAPE_RREQ_LISTEN", "127.0.0.1:0"), os.environ.get("THREEDSTAPE_RREQ_URL"))


@events.init.add_listener
def _app_settings(environment, runner=None, **_kwargs):
    """Reads the app users' settings in each process that runs users (not on a master), when they are to run."""
    from locust.runners import MasterRunner
    if APP_FLOWS and not isinstance(runner, MasterRunner) and AppChallengeUser in (environment.user_classes or []):
        AppChallengeUser.settings = AppSettings()


class AppChallengeUser(FastHttpUser):
    """App flows as an SDK and its 3DS Server: fresh keys and deviceData, acsSignedContent verified, the encrypted
    challenge answered as recorded, the RReq awaited (module docstring)."""
    abstract = not APP_FLOWS
    wait_time = constant(0)
    settings = None  # the process's AppSettings, read at Locust's init

    def on_start(self):
        if AppChallengeUser.settings is None:  # a runner that fired no init (a library use of this file)
            AppChallengeUser.settings = AppSettings()
        s = AppChallengeUser.settings
        self.sdk, self.certs, self.encs, self.answers = emv_sdk, s.certs, s.encs, s.answers
        self.rreq_timeout, self.expect_challenge, self.listener = s.rreq_timeout, s.expect_challenge, s.listener
        self.passes = 0

    @task
    def flows(self):
        # Each flow takes the encs in turn from one pass over the session to the next, so that every challenge
        # screen is driven under both.
        for n, flow in enumerate(APP_FLOWS):
            enc = self.encs[(n + self.passes) % len(self.encs)]
            started = time.perf_counter()
            kind = self._flow(flow, enc, started)
            if kind:
                self._record("flow", kind, started)
        self.passes += 1

    def _record(self, request_type, name, started, error=None):
        """A statistics entry of our own (a whole flow, or the RReq's wait), failed with `error` when given."""
        self.environment.events.request.fire(request_type=request_type, name=name, response_time=(time.perf_counter() - started) * 1000,
                                             response_length=0, exception=error, context={})

    def _flow(self, flow, enc, started):
        """One recorded app flow; returns the flow's kind when it completed, None after a failure (reported)."""
        sdk, listener = self.sdk, self.listener
        try:
            areq, key = sdk.fresh_areq(flow["areq"], self.certs, listener.url, _pan(flow["areq"]),
                                       datetime.now(timezone.utc).strftime("%Y%m%d%H%M%S"))
        except sdk.SDKError as e:
            self._record("flow", "app AReq", time.perf_counter(), sdk.SDKError(f"could not build the AReq: {e}"))
            return None
        tid = areq["threeDSServerTransID"]
        waiter = listener.expect(tid)
        awaiting_rreq = False
        try:
            with self.client.post(flow["path"], data=json.dumps(areq), headers={"Content-Type": "application/json; charset=utf-8"},
                                  name="AReq", catch_response=True) as r:
                ares, problem = _ares_check(r, areq, flow)
                if problem:
                    r.failure(problem)
                    return None
                if ares.get("messageType") == "Erro":
                    return "app erro"  # the Erro the recording has (checked above)
                challenge = None
                if ares.get("transStatus") == "C":
                    try:
                        challenge = self._challenge_keys(ares, areq, key, enc)
                    except sdk.SDKError as e:
                        r.failure(f"ARes rejected: {e}")
                        return None
            if ares.get("transStatus") == "C":
                status = self._challenge(ares, areq, flow, challenge)
                if status is None:
                    return None
                if self.expect_challenge and status != self.expect_challenge:
                    self._record("flow", "app challenge", time.perf_counter(),
                                 sdk.SDKError(f"final CRes transStatus {status}, expected {self.expect_challenge} (THREEDSTAPE_EXPECT_CHALLENGE)"))
                    return None
                awaiting_rreq = True
                gevent.spawn(self._rreq, tid, waiter, status, None)
                return "app challenge"
            if ares.get("transStatus") == "D":
                # The result comes with the ACS's RReq: the flow is complete (and counted) when it arrives.
                awaiting_rreq = True
                gevent.spawn(self._rreq, tid, waiter, None, started)
            return "app frictionless" if ares.get("transStatus") != "D" else None
        finally:
            if not awaiting_rreq:
                listener.forget(tid)

    def _challenge_keys(self, ares, areq, key, enc):
        """The checks on a challenge ARes and the channel they give: acsSignedContent, this SDK's key echoed, ECDH."""
        sdk = self.sdk
        signed = ares.get("acsSignedContent")
        if not isinstance(signed, str):
            raise sdk.SDKError("challenge ARes without acsSignedContent")
        content = sdk.verify_acs_signed_content(signed, self.certs)
        if content["sdkEphemPubKey"] != areq["sdkEphemPubKey"] and not _same_ec_key(content["sdkEphemPubKey"], areq["sdkEphemPubKey"]):
            raise sdk.SDKError("acsSignedContent: sdkEphemPubKey is not this SDK's key")
        acs_url = content["acsURL"]
        if not isinstance(acs_url, str) or urlsplit(acs_url).scheme not in ("http", "https"):
            raise sdk.SDKError(f"acsSignedContent: acsURL {acs_url!r} is not an http(s) URL")
        acs_trans_id = ares.get("acsTransID")
        if not isinstance(acs_trans_id, str):
            raise sdk.SDKError("ARes without acsTransID")
        channel = sdk.AppChannel(key, sdk.public_jwk_key(content["acsEphemPubKey"]), areq["sdkReferenceNumber"], acs_trans_id, enc)
        return acs_url, channel

    def _challenge(self, ares, areq, flow, challenge):
        """The CReq/CRes rounds until the final CRes; returns its transStatus, None after a failure (reported)."""
        sdk = self.sdk
        acs_url, channel = challenge
        base = {"threeDSServerTransID": areq["threeDSServerTransID"], "acsTransID": ares["acsTransID"], "messageType": "CReq",
                "messageVersion": areq["messageVersion"], "sdkTransID": areq["sdkTransID"]}
        entry, recorded = {}, flow["creqs"]
        for n in range(10):
            body = channel.seal(dict(base, **entry))
            with self.client.post(acs_url, data=body, headers={"Content-Type": "application/jose; charset=UTF-8"},
                                  name="CReq", catch_response=True) as r:
                text = r.text or ""
                if r.status_code != 200:
                    r.failure(f"HTTP {r.status_code} to the CReq: {text[:200]}")
                    return None
                if text.lstrip().startswith("{"):
                    r.failure(f"the ACS answered the CReq with {_describe_erro(text)}")
                    return None
                try:
                    cres = channel.open(text)
                except sdk.SDKError as e:
                    r.failure(str(e))
                    return None
                for member in ("threeDSServerTransID", "acsTransID", "sdkTransID"):
                    if cres.get(member) != base[member]:
                        r.failure(f"CRes {member} {cres.get(member)!r} is not this transaction's")
                        return None
                if cres.get("messageType") != "CRes":
                    r.failure(f"expected a CRes, got messageType {cres.get('messageType')!r}")
                    return None
                if cres.get("challengeCompletionInd") == "Y":
                    status = cres.get("transStatus")
                    if status not in ("Y", "N", "U", "A", "R"):
                        r.failure(f"final CRes transStatus {status!r}")
                        return None
                    return status
            ui = cres.get("acsUiType") or "01"
            entry = sdk.answer_for(ui, recorded[n + 1] if n + 1 < len(recorded) else {}, areq["messageVersion"], self.answers)
        self._record("CReq", "CReq", time.perf_counter(), sdk.SDKError("no final CRes after 10 CReqs"))
        return None

    def _rreq(self, tid, waiter, final_status, decoupled_since):
        """Waits, beside the user's next flows, for the ACS's RReq (the 3DS Server's result): it must come within
        THREEDSTAPE_RREQ_TIMEOUT and carry the final CRes's transStatus. A decoupled flow completes with it."""
        started = time.perf_counter()
        try:
            rreq = waiter.get(timeout=self.rreq_timeout)
        except gevent.Timeout:
            self._record("RReq", "RReq", started, self.sdk.SDKError(f"no RReq within {self.rreq_timeout:g} s (THREEDSTAPE_RREQ_TIMEOUT)"))
            return
        finally:
            self.listener.forget(tid)
        if final_status is not None and rreq.get("transStatus") != final_status:
            self._record("RReq", "RReq", started, self.sdk.SDKError(f"RReq transStatus {rreq.get('transStatus')!r}, final CRes said {final_status}"))
            return
        self._record("RReq", "RReq", started)
        if decoupled_since is not None:
            self._record("flow", "app decoupled", decoupled_since)


def _ares_check(r, areq, flow):
    """The answer to an app AReq: (message, None) when it is an ARes for this AReq whose transStatus is the recorded
    one, or the Erro the recording has; (None, reason) otherwise."""
    try:
        ares = json.loads(r.content or b"")
    except ValueError:
        return None, f"not JSON: HTTP {r.status_code}"
    if not isinstance(ares, dict):
        return None, f"not a JSON object: HTTP {r.status_code}"
    mtype = ares.get("messageType")
    if mtype == "Erro":
        if flow["answer"] == "Erro" and ares.get("errorCode") == flow["errorCode"]:
            return ares, None
        return None, f"{_describe_erro(json.dumps(ares))}; the recording has {flow['answer']} {flow['transStatus'] or flow['errorCode'] or ''}".rstrip()
    if mtype != "ARes":
        return None, f"expected ARes, got {mtype!r}"
    for member in ("threeDSServerTransID", "sdkTransID"):
        if ares.get(member) != areq[member]:
            return None, f"the ARes does not carry this AReq's {member}"
    if flow["answer"] == "ARes" and flow["transStatus"] and ares.get("transStatus") != flow["transStatus"]:
        return None, f"ARes transStatus {ares.get('transStatus')!r}, the recording has {flow['transStatus']}"
    if flow["answer"] == "Erro":
        return None, f"ARes transStatus {ares.get('transStatus')!r}, the recording has Erro {flow['errorCode']}"
    return ares, None


def _describe_erro(text):
    try:
        erro = json.loads(text)
        return f"Erro {erro.get('errorCode')} ({erro.get('errorDescription')}: {str(erro.get('errorDetail'))[:160]})"
    except (ValueError, AttributeError):
        return f"JSON that is not an Erro: {text[:120]}"


def _same_ec_key(a, b):
    return isinstance(a, dict) and isinstance(b, dict) and all(a.get(k) == b.get(k) for k in ("kty", "crv", "x", "y"))


def _seconds(name, default):
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1
    if not 0 < value <= 3600:
        raise SystemExit(f"{name} {text!r}: expected seconds, more than 0 and at most 3600")
    return value
