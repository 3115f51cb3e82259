"""Browser tests of `3dstape web`: headless Chromium (Debian's chromium + chromium-driver) driven by Selenium.

Run by tools/web/check.sh, which makes the venv. Arguments: the 3dstape binary, a work directory, a screenshot
directory. The work directory gets: a demo recording and its replay (`3dstape demo`), a copy of the browser demo
session, a session holding HTML/script injection attempts, a 100,000-exchange session, a live session that
`3dstape record` writes while the page is open, and symbolic links that point outside the directory.
"""
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.support.ui import Select, WebDriverWait

BIN, WORK, SHOTS = sys.argv[1], sys.argv[2], sys.argv[3]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.makedirs(SHOTS, exist_ok=True)
os.makedirs(WORK, exist_ok=True)
results = []


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    results.append(what)
    print("  ok  " + what, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_http(url, seconds=20):
    end = time.time() + seconds
    while time.time() < end:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except urllib.error.HTTPError:
            return
        except Exception:
            time.sleep(0.1)
    raise AssertionError(f"{url} did not answer in {seconds} s")


# ---------- the sessions the tests read ----------

def make_injection_session(src, dst):
    """A copy of a recorded session whose first exchange carries markup and script in its URL, a header, the
    response body (inside a 3DS message) and the label."""
    shutil.copy(src, dst)
    db = sqlite3.connect(dst)
    db.execute("PRAGMA journal_mode=DELETE")
    evil = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
    row = db.execute("SELECT id, request_headers, response_body FROM exchanges ORDER BY id LIMIT 1").fetchone()
    headers = json.loads(row[1]) + [["X-Evil", evil]]
    body = json.loads(row[2])
    body["cardholderInfo"] = evil
    db.execute("UPDATE exchanges SET url = url || ?, request_headers = ?, response_body = ?, response_body_compressed = 0 WHERE id = ?",
               ("?q=" + evil, json.dumps(headers), json.dumps(body).encode(), row[0]))
    db.execute("UPDATE meta SET value = ? WHERE key = 'label'", (evil,))
    db.commit()
    db.close()
    return evil


def make_big_session(src, dst, n=100_000):
    """n exchanges (AReq → ARes, bodies of a real recorded pair) in a session with the recorder's own schema."""
    s = sqlite3.connect(src)
    schema = [r[0] for r in s.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid")]
    meta = s.execute("SELECT key, value FROM meta").fetchall()
    x = s.execute("SELECT request_headers, request_body, response_headers, response_body, url, host, path FROM exchanges "
                  "WHERE id IN (SELECT exchange_id FROM messages WHERE message_type = 'AReq') ORDER BY id LIMIT 1").fetchone()
    s.close()
    if os.path.exists(dst):
        os.remove(dst)
    db = sqlite3.connect(dst)
    db.execute("PRAGMA journal_mode=WAL")
    for stmt in schema:
        db.execute(stmt)
    db.executemany("INSERT INTO meta(key, value) VALUES (?, ?)",
                   [(k, "100,000 generated exchanges" if k == "label" else v) for k, v in meta])
    db.execute("INSERT INTO connections(id, client_addr, accepted_at, mode) VALUES (1, '127.0.0.1:1', 1796000000, 'reverse')")
    t0 = 1796000000.0
    rows, msgs = [], []
    for i in range(1, n + 1):
        t = t0 + i * 0.002
        status = "Y" if i % 10 else "N"
        rows.append((i, 1, i, "POST", x[4], x[5], x[6], x[0], x[1], len(x[1]), 200, x[2], x[3], len(x[3]),
                     t, t + 0.0001, t + 0.0002, t + 0.0011, t + 0.0012))
        server = f"00000000-0000-4000-8000-{i:012d}"
        msgs.append((2 * i - 1, i, "request", "body", "AReq", "2.2.0", server, None))
        msgs.append((2 * i, i, "response", "body", "ARes", "2.2.0", server, status))
    db.executemany("INSERT INTO exchanges(id, connection_id, seq, method, url, host, path, request_headers, request_body, "
                   "request_wire_size, status, response_headers, response_body, response_wire_size, t_request_start, t_upstream_connect, "
                   "t_request_sent, t_first_byte, t_done) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    db.executemany("INSERT INTO messages(id, exchange_id, direction, location, message_type, message_version, "
                   "three_ds_server_trans_id, trans_status) VALUES (?,?,?,?,?,?,?,?)", msgs)
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


class Upstream(BaseHTTPRequestHandler):
    """A stand-in server for the live test: answers every POST with a small ARes-like JSON."""
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps({"messageType": "ARes", "messageVersion": "2.2.0", "transStatus": "Y",
                           "threeDSServerTransID": "8a880dc0-d2d2-4067-bcb1-b08d1690b26e"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    print("== preparing sessions in " + WORK, flush=True)
    t = time.time()
    subprocess.run([BIN, "demo", "--quiet", "--out", os.path.join(WORK, "demo.3dstape")], check=True, stdout=subprocess.DEVNULL)
    shutil.copy(os.path.join(ROOT, "sessions", "demo-browser.3dstape"), os.path.join(WORK, "demo-browser.3dstape"))
    evil = make_injection_session(os.path.join(ROOT, "sessions", "demo-app.3dstape"), os.path.join(WORK, "inject.3dstape"))
    make_big_session(os.path.join(ROOT, "sessions", "demo-app.3dstape"), os.path.join(WORK, "big.3dstape"))
    outside = os.path.join(os.path.dirname(WORK), "outside-" + os.path.basename(WORK))
    os.makedirs(outside, exist_ok=True)
    shutil.copy(os.path.join(ROOT, "sessions", "demo-browser.3dstape"), os.path.join(outside, "secret.3dstape"))
    os.symlink(os.path.join(outside, "secret.3dstape"), os.path.join(WORK, "link-out.3dstape"))
    os.symlink("/etc/passwd", os.path.join(WORK, "passwd.3dstape"))
    os.symlink(os.path.join(WORK, "demo-browser.3dstape"), os.path.join(WORK, "link-in.3dstape"))
    print(f"   sessions ready in {time.time() - t:.1f} s", flush=True)

    # The live session: a stand-in upstream, and the recorder writing into WORK while the page is open.
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    rec_port = free_port()
    recorder = subprocess.Popen([BIN, "record", "--reverse", f"http://127.0.0.1:{upstream.server_address[1]}", "--listen",
                                 f"127.0.0.1:{rec_port}", "--session", os.path.join(WORK, "live.3dstape"), "--quiet"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_http(f"http://127.0.0.1:{rec_port}/")

    def through_recorder():
        req = urllib.request.Request(f"http://127.0.0.1:{rec_port}/ds/areq", method="POST", headers={"Content-Type": "application/json"},
                                     data=json.dumps({"messageType": "AReq", "messageVersion": "2.2.0", "deviceChannel": "02",
                                                      "threeDSServerTransID": "8a880dc0-d2d2-4067-bcb1-b08d1690b26e"}).encode())
        urllib.request.urlopen(req, timeout=5).read()

    through_recorder()
    port = free_port()
    web = subprocess.Popen([BIN, "web", WORK, "--listen", f"127.0.0.1:{port}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}/"
    wait_http(base)

    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1440,1000"):
        opts.add_argument(a)
    opts.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    def waiter(seconds, poll=0.5):
        # The timeline is virtualised and polled live: rows are replaced while a condition reads them, so a
        # row found a moment ago may be gone; the condition is then simply tried again.
        return WebDriverWait(driver, seconds, poll_frequency=poll, ignored_exceptions=(StaleElementReferenceException,))

    wait = waiter(15)

    def shot(name):
        path = os.path.join(SHOTS, name + ".png")
        driver.save_screenshot(path)
        return path

    def rows():
        return driver.find_elements(By.CSS_SELECTOR, "#timeline .xrow")

    def row_ids():
        # read in the page in one step, so that no row can be replaced between finding and reading it
        return driver.execute_script("return [...document.querySelectorAll('#timeline .xrow')].map(r => r.dataset.id)")

    def console_errors():
        return [e for e in driver.get_log("browser") if e["level"] == "SEVERE" and "favicon" not in e["message"]]

    try:
        print("== sessions list", flush=True)
        driver.get(base)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "tr.session-row"))
        names = [e.get_attribute("data-name") for e in driver.find_elements(By.CSS_SELECTOR, "tr.session-row")]
        check({"demo.3dstape", "demo-replay.3dstape", "demo-browser.3dstape", "big.3dstape", "inject.3dstape", "live.3dstape"} <= set(names),
              f"the sessions list shows the sessions in the directory ({len(names)} rows)")
        check("link-out.3dstape" not in names and "passwd.3dstape" not in names and "link-in.3dstape" in names,
              "links out of the directory are not listed; a link to a file inside it is")
        driver.find_element(By.CSS_SELECTOR, "th[data-key=exchanges]").click()
        driver.find_element(By.CSS_SELECTOR, "th[data-key=exchanges]").click()
        first = driver.find_element(By.CSS_SELECTOR, "tr.session-row").get_attribute("data-name")
        check(first == "big.3dstape", "sorting by exchanges, descending, puts the 100,000-exchange session first")
        shot("1-sessions")

        print("== the demo session's timeline", flush=True)
        driver.find_element(By.CSS_SELECTOR, "tr.session-row[data-name='demo.3dstape'] a").click()
        wait.until(lambda d: len(rows()) > 5)
        total = int(driver.find_element(By.ID, "count").text.split()[0])
        check(total >= 30, f"the demo session opens: {total} exchanges, {len(rows())} rows drawn")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#timeline .xrow svg.waterfall rect")) > 0, "the waterfall draws phase bars")
        shot("2-timeline")

        print("== filters", flush=True)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#f-type option[value=CRes]"))
        Select(driver.find_element(By.ID, "f-type")).select_by_value("CRes")
        wait.until(lambda d: int(d.find_element(By.ID, "count").text.split()[0]) < total)
        wait.until(lambda d: rows() and all("CRes" in r.find_element(By.CSS_SELECTOR, ".types").text for r in rows()))
        cres = int(driver.find_element(By.ID, "count").text.split()[0])
        check(0 < cres < total and all("CRes" in r.text for r in rows()), f"the CRes filter narrows the timeline to {cres} of {total}")
        shot("3-timeline-filtered-cres")
        Select(driver.find_element(By.ID, "f-type")).select_by_value("")
        Select(driver.find_element(By.ID, "f-status")).select_by_value("N")
        wait.until(lambda d: int(d.find_element(By.ID, "count").text.split()[0]) < total)
        n_status = int(driver.find_element(By.ID, "count").text.split()[0])
        check(0 < n_status < total, f"the transStatus N filter narrows it to {n_status}")
        Select(driver.find_element(By.ID, "f-status")).select_by_value("")
        driver.find_element(By.ID, "f-errors").click()
        wait.until(lambda d: int(d.find_element(By.ID, "count").text.split()[0]) < total)
        n_err = int(driver.find_element(By.ID, "count").text.split()[0])
        check(0 < n_err < total, f"'errors only' narrows it to {n_err} (the Erro flows)")
        driver.find_element(By.ID, "f-errors").click()
        wait.until(lambda d: int(d.find_element(By.ID, "count").text.split()[0]) == total)
        driver.find_element(By.ID, "f-search").send_keys("/ds/areq")
        wait.until(lambda d: int(d.find_element(By.ID, "count").text.split()[0]) < total)
        check(all("/ds/areq" in r.find_element(By.CSS_SELECTOR, "span[title]").get_attribute("title") for r in rows()),
              "the search box narrows the timeline to URLs that hold the text")

        print("== a decrypted CRes", flush=True)
        driver.find_element(By.ID, "f-search").send_keys(Keys.CONTROL, "a")
        driver.find_element(By.ID, "f-search").send_keys(Keys.BACKSPACE)
        wait.until(lambda d: int(d.find_element(By.ID, "count").text.split()[0]) == total)
        Select(driver.find_element(By.ID, "f-type")).select_by_value("CRes")
        wait.until(lambda d: int(d.find_element(By.ID, "count").text.split()[0]) == cres and rows()
                   and all("CRes" in r.text for r in rows()))
        rows()[0].click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".msg[data-type=CRes]"))
        cres_box = driver.find_element(By.CSS_SELECTOR, ".msg[data-type=CRes]")
        keys = {e.get_attribute("data-key"): e for e in cres_box.find_elements(By.CSS_SELECTOR, "tr[data-key]")}
        check("decrypted" in cres_box.find_element(By.TAG_NAME, "h4").text, "the CRes is marked decrypted: " + cres_box.find_element(By.TAG_NAME, "h4").text)
        check({"acsTransID", "acsCounterAtoS", "messageType"} <= set(keys), "the CRes shows its decrypted fields: " + ", ".join(sorted(keys)[:8]) + " …")
        ui = keys.get("acsUiType")
        if ui:
            check(ui.find_element(By.CSS_SELECTOR, "td.key").get_attribute("title").startswith("The challenge screen"),
                  "hovering acsUiType shows its meaning from the glossary")
            check(ui.find_element(By.CSS_SELECTOR, "td.value").get_attribute("title") != "", "and its value's meaning: "
                  + ui.find_element(By.CSS_SELECTOR, "td.value").get_attribute("title"))
        shot("4-exchange-cres-decrypted")

        print("== masked values", flush=True)
        driver.get(base + "#/s/demo.3dstape/x/1")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".msg[data-type=AReq]"))
        masked = driver.find_elements(By.CSS_SELECTOR, ".msg[data-type=AReq] tr[data-key=acctNumber] .masked")
        check(masked and "*" in masked[0].text, "the AReq's acctNumber is shown masked and marked as masked: " + (masked[0].text if masked else ""))
        shot("5-exchange-areq-masked")

        print("== a challenge's sequence diagram", flush=True)
        driver.get(base + "#/s/demo.3dstape/tx")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "tr.tx-row"))
        shot("6-transactions")
        challenge = next(r for r in driver.find_elements(By.CSS_SELECTOR, "tr.tx-row")
                         if "CReq" in r.text and "RReq" in r.text and "app" in r.text)
        challenge.click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#diagram svg g.participant"))
        parts = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#diagram svg g.participant text")]
        labels = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#diagram svg g.message text.label")]
        check(parts == ["SDK", "3DS Server", "DS", "ACS"], "the challenge's diagram has the participants SDK, 3DS Server, DS, ACS: " + str(parts))
        for m in ("AReq", "ARes C", "CReq", "CRes", "RReq", "RRes"):
            check(any(l.startswith(m) for l in labels), f"… and a {m} arrow")
        sdk_to_acs = driver.find_elements(By.CSS_SELECTOR, "#diagram svg g.message.request[data-from=SDK][data-to=ACS]")
        check(len(sdk_to_acs) >= 1, f"CReqs go from the SDK to the ACS ({len(sdk_to_acs)})")
        shot("7-transaction-diagram")
        areq_id = driver.find_element(By.CSS_SELECTOR, "#diagram svg g.message.request").get_attribute("data-exchange")
        driver.get(base + f"#/s/demo.3dstape/x/{areq_id}")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".decoded[data-element=acsSignedContent]"))
        asc = driver.find_element(By.CSS_SELECTOR, ".decoded[data-element=acsSignedContent]")
        keys = {e.get_attribute("data-key") for e in asc.find_elements(By.CSS_SELECTOR, "tr[data-key]")}
        check({"alg", "x5c", "acsURL", "acsEphemPubKey", "sdkEphemPubKey"} <= keys,
              "the challenge ARes's acsSignedContent is decoded: JWS header (alg, x5c) and payload (acsURL, both ephemeral keys)")
        check(driver.find_elements(By.CSS_SELECTOR, ".decoded[data-element=sdkEncData]"), "and the AReq's sdkEncData shows its JWE header")
        driver.execute_script("arguments[0].scrollIntoView()", asc)
        shot("8-exchange-acs-signed-content")
        driver.back()
        driver.back()

        print("== a replay session", flush=True)
        driver.get(base + "#/s/demo-replay.3dstape/tx")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "tr.tx-row"))
        driver.find_elements(By.CSS_SELECTOR, "tr.tx-row")[0].click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#diagram svg text.replay"))
        prov = driver.find_elements(By.CSS_SELECTOR, "#diagram svg text.replay")[0].text
        check(prov.startswith("from #") and "scheduled" in prov and "actual" in prov,
              "a replay's diagram names the recorded exchange each answer came from, with its delays: " + prov)
        shot("8-replay-diagram")
        driver.find_element(By.CSS_SELECTOR, "#diagram svg g.message.response").click()
        wait.until(lambda d: d.find_elements(By.ID, "replay-info"))
        check("recorded exchange #" in driver.find_element(By.ID, "replay-info").text, "and an exchange of it: "
              + driver.find_element(By.ID, "replay-info").text[:160])
        shot("9-replay-exchange")
        driver.find_element(By.ID, "recorded-link").click()
        wait.until(lambda d: "/s/demo.3dstape/x/" in d.current_url and d.find_elements(By.CSS_SELECTOR, ".msg"))
        check(True, "which links to the recorded exchange in the recording: " + driver.current_url.split("#")[1])

        print("== validation and diff", flush=True)
        driver.get(base + "#/s/demo.3dstape/validation")
        wait.until(lambda d: d.find_elements(By.ID, "validation-summary"))
        check(driver.find_element(By.ID, "validation-summary").text.startswith("0 errors"),
              "validation of the demo recording: " + driver.find_element(By.ID, "validation-summary").text)
        shot("10-validation")
        driver.get(base + "#/")
        wait.until(lambda d: d.find_elements(By.ID, "diff-a"))
        Select(driver.find_element(By.ID, "diff-a")).select_by_value("demo.3dstape")
        Select(driver.find_element(By.ID, "diff-b")).select_by_value("demo-replay.3dstape")
        driver.find_element(By.ID, "diff-go").click()
        wait.until(lambda d: d.find_elements(By.ID, "diff-summary"))
        check("no differences" in driver.find_element(By.ID, "diff-summary").text,
              "the diff of the recording and its replay: " + driver.find_element(By.ID, "diff-summary").text)
        shot("11-diff")
        driver.get(base + "#/diff/demo.3dstape/demo-browser.3dstape")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#changes tr.change"))
        changes = driver.find_elements(By.CSS_SELECTOR, "#changes tr.change")
        check(len(changes) > 0 and any(r.find_elements(By.TAG_NAME, "a") for r in changes),
              f"the diff of two different sessions lists {len(changes)} differences, each linked to its exchanges")
        shot("11b-diff-changes")

        print("== injection", flush=True)
        driver.get(base + "#/")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "tr.session-row"))
        driver.get(base + "#/s/inject.3dstape/x/1")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".msg"))
        time.sleep(0.5)
        page = driver.find_element(By.TAG_NAME, "main").text
        check(evil in page, "markup from the session is shown as text (URL, header, message element)")
        check(driver.execute_script("return window.__pwned === undefined && document.querySelectorAll('main img, main script').length === 0"),
              "and runs nothing: no img or script element was made, window.__pwned is unset")
        shot("12-injection-exchange")
        driver.get(base + "#/")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "tr.session-row[data-name='inject.3dstape']"))
        check(driver.execute_script("return window.__pwned === undefined"), "the label with markup in the sessions list runs nothing either")
        shot("13-injection-sessions")

        print("== path traversal", flush=True)
        for path in ("api/sessions/..%2F..%2F..%2Fetc%2Fpasswd", "api/sessions/%2Fetc%2Fpasswd", "api/sessions/link-out.3dstape",
                     "api/sessions/passwd.3dstape/exchanges", "../../etc/passwd", "api/sessions/../../../etc/passwd",
                     "%2e%2e/%2e%2e/etc/passwd", "app.js/../../etc/passwd"):
            try:
                with socket.create_connection(("127.0.0.1", port)) as s:
                    s.sendall(f"GET /{path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
                    answer = b""
                    while chunk := s.recv(65536):
                        answer += chunk
                code = int(answer.split(b" ", 2)[1])
            except Exception as e:
                raise AssertionError(f"/{path}: {e}")
            check(code in (400, 404) and b"root:" not in answer, f"GET /{path} is refused ({code})")
        req = urllib.request.Request(base + "api/sessions", headers={"Host": f"evil.example:{port}"})
        try:
            urllib.request.urlopen(req, timeout=5)
            code = 200
        except urllib.error.HTTPError as e:
            code = e.code
        check(code == 421, f"a request for another host name (DNS rebinding) is refused ({code})")

        print("== live", flush=True)
        driver.get(base + "#/s/live.3dstape")
        wait.until(lambda d: len(rows()) >= 1)
        before = len(rows())
        time.sleep(0.7)
        through_recorder()
        t = time.time()
        waiter(5, 0.02).until(lambda d: len(rows()) > before)
        live_s = time.time() - t
        check(live_s < 1.0, f"live: an exchange recorded while the page is open shows {live_s * 1000:.0f} ms after its answer")
        shot("14-live")

        print("== 100,000 exchanges", flush=True)
        timings = []
        for attempt in range(3):
            driver.get(base + "#/")
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "tr.session-row"))
            t = time.time()
            driver.get(base + "#/s/big.3dstape")
            waiter(10, 0.01).until(lambda d: len(rows()) >= 20)
            timings.append(time.time() - t)
        first_screen = min(timings)
        total = int(driver.find_element(By.ID, "count").text.split()[0])
        check(total == 100_000, f"the large session holds {total} exchanges")
        check(len(rows()) < 200, f"only the visible rows are in the page ({len(rows())})")
        check(max(timings) < 1.0, "its first screen is drawn in " + ", ".join(f"{x * 1000:.0f}" for x in timings) + " ms (three loads)")
        box = driver.find_element(By.ID, "timeline")
        t = time.time()
        driver.execute_script("arguments[0].scrollTop = arguments[0].scrollHeight", box)
        waiter(10, 0.01).until(
            lambda d: "100000" in row_ids())
        check(True, f"scrolled to the end, exchange #100000 is drawn in {(time.time() - t) * 1000:.0f} ms")
        shot("15-large-session-end")
        Select(driver.find_element(By.ID, "f-status")).select_by_value("N")
        t = time.time()
        wait.until(lambda d: d.find_element(By.ID, "count").text.startswith("10000 "))
        check(True, f"the transStatus filter on 100,000 exchanges answers in {(time.time() - t) * 1000:.0f} ms (10,000 rows)")

        errors = console_errors()
        check(not errors, "no errors in the browser's console" + (": " + str(errors[:3]) if errors else ""))
    except Exception:
        shot("failure")
        print("the page at the failure:", driver.current_url, driver.find_element(By.TAG_NAME, "main").text[:600], sep="\n")
        raise
    finally:
        driver.quit()
        web.send_signal(signal.SIGINT)
        recorder.send_signal(signal.SIGINT)
        for p in (web, recorder):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        upstream.shutdown()
        shutil.rmtree(outside, ignore_errors=True)
    print(f"web: {len(results)} checks passed; screenshots in {SHOTS}")


if __name__ == "__main__":
    main()
