"""Load from a recorded 3dstape session with Locust (a distributed load engine; 3dstape itself stays one machine).

Each virtual user replays the session's 3DS flows against the target (`--host`): a 3DS Server or DS under test, or
`3dstape replay`. Every AReq is sent with fresh transaction IDs (threeDSServerTransID, sdkTransID) per user and
flow; for a browser challenge the creq form and the challenge page's post follow, with the IDs the ARes gave.

  THREEDSTAPE_SESSION=sessions/demo-browser.3dstape locust -f tools/load/locustfile.py --host http://127.0.0.1:8080
  (headless: --headless -u 50 -r 10 -t 1m; distributed: --master, and --worker --master-host HOST on each worker)

Card numbers are stored masked (first 6 / last 4): the middle digits are filled with zeros unless THREEDSTAPE_PAN
gives a card to use instead.
"""
import json, os, re, sqlite3, uuid
from base64 import urlsafe_b64decode, urlsafe_b64encode
from urllib.parse import urlencode, urlsplit

from locust import HttpUser, between, task


def _b64u(data: bytes) -> str:
    return urlsafe_b64encode(data).rstrip(b"=").decode()


def _load_flows(path):
    """The recorded AReqs, in order, with the path they were posted to."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute(
        "SELECT e.url, CAST(e.request_body AS TEXT) FROM exchanges e JOIN messages m ON m.exchange_id = e.id "
        "WHERE m.message_type = 'AReq' AND m.direction = 'request' AND e.request_body_compressed = 0 ORDER BY e.t_request_start").fetchall()
    db.close()
    flows = []
    for url, body in rows:
        try:
            areq = json.loads(body)
        except (TypeError, ValueError):
            continue
        flows.append((urlsplit(url).path or "/", areq))
    if not flows:
        raise SystemExit(f"{path}: no AReq to send")
    return flows


SESSION = os.environ.get("THREEDSTAPE_SESSION", "sessions/demo-browser.3dstape")
FLOWS = _load_flows(SESSION)


class ThreeDSUser(HttpUser):
    wait_time = between(0.01, 0.05)

    @task
    def flows(self):
        for path, recorded in FLOWS:
            areq = dict(recorded)
            areq["threeDSServerTransID"] = str(uuid.uuid4())
            if "sdkTransID" in areq:
                areq["sdkTransID"] = str(uuid.uuid4())
            pan = os.environ.get("THREEDSTAPE_PAN") or re.sub(r"\*", "0", areq.get("acctNumber", ""))
            areq["acctNumber"] = pan
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
