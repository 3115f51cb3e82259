"""An app-channel client that is not 3dstape's: the SDK code of the Locust app user (tools/load/emv_sdk.py, Python
`cryptography`) driving the app flows of a recorded session once each, sequentially, over plain urllib, through an
HTTP proxy such as `3dstape record --decrypt substitute`. For tools/client-replay/check.sh: a session recorded from
an outside client, which client-replay then re-sends to a fresh server.

  python3 outside_client.py SESSION DS_URL CERTS_DIR PROXY_URL

The AReq goes to DS_URL + the recorded path; each challenge is answered as the Locust user does (emv_sdk.answer_for,
with the sandbox's answers); the ACS's RReq is taken by a listener of this process and answered. Prints one line per
flow (`card outcome`) and exits 1 when a flow fails.
"""
import json, os, sqlite3, sys, threading, urllib.request
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "load"))
import emv_sdk as sdk  # noqa: E402

ANSWERS = {"otp": "1234", "select": "2", "multi": "1,3"}


def app_flows(path):
    """The recorded app AReqs in order with their path and recorded CReqs (as tools/load/locustfile.py reads them)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute("SELECT e.url, CAST(e.request_body AS TEXT), m.three_ds_server_trans_id FROM exchanges e JOIN messages m "
                      "ON m.exchange_id = e.id WHERE m.message_type = 'AReq' AND m.direction = 'request' "
                      "AND e.request_body_compressed = 0 ORDER BY e.t_request_start").fetchall()
    creqs = {}
    for tid, text in db.execute("SELECT m.three_ds_server_trans_id, m.json FROM messages m JOIN exchanges e ON e.id = m.exchange_id "
                                "WHERE m.message_type = 'CReq' AND m.direction = 'request' ORDER BY e.t_request_start, m.id"):
        creqs.setdefault(tid, []).append(json.loads(text) if text else {})
    db.close()
    flows = []
    for url, body, tid in rows:
        areq = json.loads(body)
        if isinstance(areq, dict) and areq.get("deviceChannel") == "01":
            flows.append({"path": urlsplit(url).path or "/", "areq": areq, "creqs": creqs.get(tid, [])})
    return flows


class RReqs:
    """The 3DS Server's RReq endpoint: answers with an RRes and keeps the RReq for its transaction."""

    def __init__(self):
        self.got, self.lock, self.cond = {}, threading.Lock(), threading.Condition()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                size = min(int(self.headers.get("Content-Length") or 0), 1 << 20)
                rreq = json.loads(self.rfile.read(size))
                rres = {k: rreq[k] for k in ("threeDSServerTransID", "dsTransID", "acsTransID", "sdkTransID") if k in rreq}
                rres.update({"messageType": "RRes", "messageVersion": rreq.get("messageVersion"), "resultsStatus": "01"})
                body = json.dumps(rres).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                with owner.cond:
                    owner.got[rreq.get("threeDSServerTransID")] = rreq
                    owner.cond.notify_all()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/3ds/rreq"

    def wait(self, tid, timeout=10):
        with self.cond:
            self.cond.wait_for(lambda: tid in self.got, timeout=timeout)
            return self.got.pop(tid, None)


def main():
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    session, ds_url, certs_dir, proxy = sys.argv[1:]
    certs = sdk.DSCertificates(certs_dir)
    # Through the proxy for every URL, loopback included (urllib skips the proxy for no_proxy hosts).
    os.environ.pop("no_proxy", None), os.environ.pop("NO_PROXY", None)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy, "https": proxy}))

    def post(url, body, content_type):
        req = urllib.request.Request(url, data=body.encode() if isinstance(body, str) else body, method="POST",
                                     headers={"Content-Type": content_type})
        with opener.open(req, timeout=10) as r:
            return r.read().decode()

    rreqs, failed = RReqs(), 0
    for flow in app_flows(session):
        pan = flow["areq"].get("acctNumber", "").replace("*", "0")
        areq, key = sdk.fresh_areq(flow["areq"], certs, rreqs.url, pan, datetime.now(timezone.utc).strftime("%Y%m%d%H%M%S"))
        ares = json.loads(post(ds_url.rstrip("/") + flow["path"], json.dumps(areq), "application/json; charset=utf-8"))
        outcome = ares.get("transStatus") or f"Erro {ares.get('errorCode')}"
        try:
            if ares.get("transStatus") == "C":
                content = sdk.verify_acs_signed_content(ares["acsSignedContent"], certs)
                channel = sdk.AppChannel(key, sdk.public_jwk_key(content["acsEphemPubKey"]), areq["sdkReferenceNumber"], ares["acsTransID"],
                                         "A128CBC-HS256")
                base = {"threeDSServerTransID": areq["threeDSServerTransID"], "acsTransID": ares["acsTransID"], "messageType": "CReq",
                        "messageVersion": areq["messageVersion"], "sdkTransID": areq["sdkTransID"]}
                entry, cres = {}, {}
                for n in range(10):
                    cres = channel.open(post(content["acsURL"], channel.seal(dict(base, **entry)), "application/jose; charset=UTF-8"))
                    if cres.get("challengeCompletionInd") == "Y":
                        break
                    recorded = flow["creqs"][n + 1] if n + 1 < len(flow["creqs"]) else {}
                    entry = sdk.answer_for(cres.get("acsUiType") or "01", recorded, areq["messageVersion"], ANSWERS)
                outcome = cres.get("transStatus") or "-"
            if ares.get("transStatus") in ("C", "D"):
                rreq = rreqs.wait(areq["threeDSServerTransID"])
                if rreq is None:
                    raise sdk.SDKError("no RReq")
                outcome = rreq.get("transStatus") or outcome
        except (sdk.SDKError, KeyError, ValueError) as e:
            outcome, failed = f"failed: {e}", failed + 1
        print(f"{flow['areq'].get('acctNumber', '?')} {outcome}", flush=True)
    rreqs.server.shutdown()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
