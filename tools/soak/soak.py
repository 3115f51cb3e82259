"""The soak driver (see run.sh): starts sandbox, recorder and replayer, drives mixed traffic, samples RSS and fds."""
import os, random, re, shutil, socket, subprocess, sys, tempfile, threading, time

binary, minutes, root = sys.argv[1], float(sys.argv[2]), sys.argv[3]
work = tempfile.mkdtemp(prefix="3dstape-soak-")
env = dict(os.environ, THREEDSTAPE_HOME=os.path.join(work, "home"), NO_COLOR="1")
procs = []


def start(args, ready):
    """Starts a 3dstape process and returns it with the port it printed after `ready`."""
    log = open(os.path.join(work, args[0] + ".log"), "w+")
    p = subprocess.Popen([binary] + args, stdout=log, stderr=log, env=env)
    procs.append(p)
    deadline = time.time() + 30
    while time.time() < deadline:
        log.flush(); log.seek(0)
        m = re.search(re.escape(ready) + r"(\d+)", log.read())
        if m:
            return p, int(m.group(1))
        if p.poll() is not None:
            break
        time.sleep(0.05)
    log.seek(0)
    sys.exit(f"{args[0]} did not start: {log.read()[-2000:]}")


def sample(p):
    with open(f"/proc/{p.pid}/status") as f:
        rss = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) // 1024
    return rss, len(os.listdir(f"/proc/{p.pid}/fd"))


failures = []
counts = {"flows via recorder": 0, "flows via replayer": 0, "plain http": 0, "malformed refused": 0, "aborted": 0}
lock = threading.Lock()


def fail(what):
    with lock:
        failures.append(what)


def count(what):
    with lock:
        counts[what] += 1


try:
    certs = os.path.join(work, "certs")
    subprocess.run([binary, "sandbox", "certs", "--out", certs], env=env, check=True, capture_output=True)
    recorder, rport = start(["record", "--listen", "127.0.0.1:0", "--session", os.path.join(work, "soak.3dstape"), "--quiet",
                             "--header-timeout", "2"], "recording on http://127.0.0.1:")
    sandbox, sport = start(["sandbox", "--listen", "127.0.0.1:0", "--quiet", "--proxy", f"http://127.0.0.1:{rport}"],
                           "sandbox DS + ACS on http://127.0.0.1:")
    replay_copy = os.path.join(work, "demo-app.3dstape")
    shutil.copy(os.path.join(root, "sessions", "demo-app.3dstape"), replay_copy)
    replayer, pport = start(["replay", replay_copy, "--listen", "127.0.0.1:0", "--quiet", "--timing", "fixed:0ms",
                             "--repeat", "cycle", "--session", os.path.join(work, "replay.3dstape")], "exchanges) on http://127.0.0.1:")
    watched = {"sandbox": sandbox, "recorder": recorder, "replayer": replayer}

    flows = [("4000000000001000", [], "Y", False), ("4000000000001067", ["--answer", "1234"], "Y", False),
             ("4000000000001018", [], "N", False), ("4000000000001067", ["--answer", "1234", "--channel", "browser"], "Y", False),
             ("4000000000001000", [], "Y", True)]

    def client(card, extra, expect, via_replayer):
        proxy = f"http://127.0.0.1:{pport if via_replayer else rport}"
        r = subprocess.run([binary, "client", "--ds", f"http://127.0.0.1:{sport}", "--card", card, "--certs", certs,
                            "--proxy", proxy, "--timeout", "10", "--json"] + extra, env=env, capture_output=True, text=True)
        status = re.search(r'"transStatus"\s*:\s*"?(\w+)', r.stdout)
        if r.returncode != 0 or not status or status.group(1) != expect:
            fail(f"flow {card} {' '.join(extra)} via {'replayer' if via_replayer else 'recorder'}: exit {r.returncode}, "
                 f"{(r.stdout + r.stderr)[-300:]}")
        else:
            count("flows via replayer" if via_replayer else "flows via recorder")

    def raw(port, data, expect_prefix=None, abort=False):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        try:
            s.sendall(data)
            if abort:
                return
            got = b""
            while not got.endswith(b"\r\n\r\n") and b"\r\n\r\n" not in got:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
            if expect_prefix and not got.startswith(expect_prefix):
                fail(f"raw request {data[:40]!r}: answered {got[:60]!r}, expected {expect_prefix!r}")
            return got
        finally:
            s.close()

    def plain():
        got = raw(rport, f"GET http://127.0.0.1:{sport}/ HTTP/1.1\r\nHost: 127.0.0.1:{sport}\r\nConnection: close\r\n\r\n".encode(), b"HTTP/1.1 200")
        if got and got.startswith(b"HTTP/1.1 200"):
            count("plain http")

    malformed = [b"POST /t5 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n-2\r\nxx\r\n0\r\n\r\n",
                 b"GET / HTTP/1.1\r\nHost: a\r\nX: a\nTransfer-Encoding: chunked\r\n\r\n",
                 b"GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n"]

    def bad():
        raw(rport, random.choice(malformed), b"HTTP/1.1 400")
        count("malformed refused")

    def aborted():
        port = random.choice([rport, pport])
        raw(port, f"POST http://127.0.0.1:{sport}/ds/areq HTTP/1.1\r\nHost: 127.0.0.1:{sport}\r\nContent-Length: 500\r\n\r\n{{\"a\":".encode(), abort=True)
        count("aborted")

    stop_at = time.time() + minutes * 60
    samples = []

    def sampler():
        t0 = time.time()
        while time.time() < stop_at + 0.5:
            row = {"t": round(time.time() - t0)}
            for name, p in watched.items():
                if p.poll() is not None:
                    fail(f"{name} exited with {p.returncode}")
                    return
                row[name] = sample(p)
            samples.append(row)
            print("t=%4ds  " % row["t"] + "  ".join(f"{n}: {row[n][0]} MB RSS, {row[n][1]} fds" for n in watched), flush=True)
            time.sleep(10)

    sampler_thread = threading.Thread(target=sampler)
    sampler_thread.start()

    def worker(seed):
        rnd = random.Random(seed)
        while time.time() < stop_at and len(failures) < 5:
            kind = rnd.random()
            try:
                if kind < 0.45:
                    client(*flows[rnd.randrange(len(flows))])
                elif kind < 0.7:
                    plain()
                elif kind < 0.85:
                    bad()
                else:
                    aborted()
            except Exception as e:  # a socket error is a failure of the run, not of the driver
                fail(f"{type(e).__name__}: {e}")

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    sampler_thread.join()

    print("traffic: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    # Growth after warm-up: the last sample against the highest of the warm-up samples (the first third, at least two).
    warm = max(2, len(samples) // 3)
    if len(samples) > warm:
        for name in watched:
            base = max(s[name][0] for s in samples[:warm])
            last = samples[-1][name][0]
            growth = (last - base) / base * 100 if base else 0
            print(f"{name}: RSS {base} MB after warm-up, {last} MB at the end ({growth:+.1f}%); fds {samples[warm - 1][name][1]} → {samples[-1][name][1]}")
            if growth > 10:
                fail(f"{name}: RSS grew {growth:.1f}% after warm-up ({base} → {last} MB)")
    if failures:
        print("SOAK FAILED:\n  " + "\n  ".join(failures[:10]))
        sys.exit(1)
    print("soak: ok")
finally:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
    shutil.rmtree(work, ignore_errors=True)
