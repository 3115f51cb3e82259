#!/usr/bin/env bash
# client-replay benchmark, on loopback, in one run:
#   1. app challenge flows per second that `3dstape client-replay` drives against `3dstape replay --timing none` of the app
#      demo session (its 8 app challenges, transactions 7-14: AReq, acsSignedContent check, ECDH, two CReq/CRes JWEs,
#      the RReq taken on its listener), REPEAT passes at CONCURRENCY transactions at once, and the client-replay process's
#      CPU per flow (user + system, from the kernel's accounting of the finished child), its start taken out: the CPU of a
#      one-pass run is subtracted and the rest divided by the flows between the two runs;
#   2. beside it, `openssl speed` for the crypto a client flow needs: P-256 key generation (one base-point multiplication,
#      as an ECDSA P-256 signature costs), ECDH P-256, the deviceData RSA-OAEP-256 encryption (an RSA-2048 public
#      operation) and the acsSignedContent JWS verification (an RSA-2048 verification for PS256, ECDSA P-256 for ES256).
#      Target: CPU per flow at most 2x that crypto.
#   3. the peer: Locust's app-channel user from tools/load (AppChallengeUser: fresh SDK key, deviceData to the DS key,
#      acsSignedContent verified, ECDH, CReq/CRes JWEs, the RReq on its own listener), one master and one worker with 10
#      users for LOCUST SECONDS against the same replay, in the same run: its app challenge flows per second beside
#      client-replay's, and the ratio (target >= 5x). Skipped when Locust cannot be installed into tools/load/.venv.
#      Beside it each one's CPU per flow: Locust's worker between two of its master's once-a-second history rows (its
#      start and ramp left out), client-replay's as in 1. Flows per second also measure the replayer both share 2 cores with.
# SIGN (PS256, the default, or ES256) is how the replayer signs acsSignedContent (`replay --sign`): with ES256 the
# server's signature costs a tenth of an RSA-2048 one and the client's JWS verification is an ECDSA verification, which
# the crypto figure then counts instead of an RSA public operation.
# THREEDSTAPE_BENCH_BIN=PATH measures that 3dstape binary instead of building this tree's (to alternate two builds).
# Usage: tools/bench/client-replay.sh [REPEAT, default 50] [CONCURRENCY, default 2] [LOCUST SECONDS, default 15] [SIGN]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
repeat="${1:-50}"; conc="${2:-2}"; lsecs="${3:-15}"; sign="${4:-PS256}"
case "$sign" in PS256|ES256) ;; *) echo "client-replay.sh: SIGN is PS256 or ES256, not $sign" >&2; exit 2;; esac
case "$repeat$conc$lsecs" in *[!0-9]*|"") echo "usage: tools/bench/client-replay.sh [REPEAT] [CONCURRENCY] [LOCUST SECONDS] (whole numbers)" >&2; exit 2;; esac
[ "$repeat" -ge 2 ] && [ "$conc" -ge 1 ] && [ "$lsecs" -ge 1 ] || { echo "client-replay.sh: REPEAT >= 2, CONCURRENCY >= 1, LOCUST SECONDS >= 1" >&2; exit 2; }
. "$here/lib.sh"
bench_work 3dstape-creplay-bench
bench_binary "$root" 3dstape; tape="$bench_bin"
export THREEDSTAPE_HOME="$work/home"
cp "$root/sessions/demo-app.3dstape" "$work/demo.3dstape"
"$tape" ca export --ds "$work/certs" >/dev/null
"$tape" replay "$work/demo.3dstape" --listen 127.0.0.1:0 --timing none --sign "$sign" --quiet --session "$work/replay.3dstape" 2>"$work/replay.log" &
pids+=($!)
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/.* on http:\/\/127\.0\.0\.1:\([0-9]*\);.*/\1/p' "$work/replay.log" | head -1)
  [ -n "$port" ] && break; sleep 0.1
done
[ -n "$port" ] || { echo "the replayer did not start"; cat "$work/replay.log"; exit 1; }

# ---- 1. client-replay, measured as a finished child (wall clock, CPU)
python3 - "$tape" "$work" "$port" "$repeat" "$conc" > "$work/creplay.txt" <<'PY'
import json, os, resource, subprocess, sys, time
tape, work, port, repeat, conc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
args = [tape, "client-replay", f"{work}/demo.3dstape", "--certs", f"{work}/certs", "--target", f"http://127.0.0.1:{port}",
        "--secret", "1234", "--concurrency", str(conc), "--json"]
for c in ["1067", "1075", "1083", "1091", "1109", "1117", "1125"]:
    args += ["--card", "400000000000" + c]
for t in range(7, 15):
    args += ["--transaction", str(t)]
def run(passes, session):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(args + ["--repeat", str(passes), "--session", session], capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    tx = [json.loads(l) for l in p.stdout.splitlines()][:-1]
    assert p.returncode == 0 and len(tx) == 8 * passes and all(t["match"] for t in tx), (p.returncode, p.stderr[-500:], [t for t in tx if not t["match"]][:2])
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
# The process's start (keys, TLS roots, the session read) is taken out: CPU per flow is the difference between a run of
# REPEAT passes and one of a single pass, over the flows between them; flows/s is the long run's.
w1, c1 = run(1, f"{work}/live1.3dstape")
wall, cpu = run(repeat, f"{work}/live.3dstape")
flows = 8 * repeat
print(flows, f"{wall:.3f}", f"{cpu:.3f}", f"{(cpu - c1) / (flows - 8) * 1e6:.0f}", f"{c1:.3f}")
PY
read flows wall cpu perflow startcpu < "$work/creplay.txt"
requests=$((flows * 3))   # each flow: one AReq and two CReqs sent (the RReq comes in)

# ---- 2. openssl speed for the client's crypto per flow
openssl speed -mr -seconds 2 ecdsap256 ecdhp256 rsa2048 2>/dev/null > "$work/speed.txt" || true
read keygen ecdh rsapub ecverify < <(python3 - "$work/speed.txt" <<'PY'
import sys
f = {}
for line in open(sys.argv[1]):
    if line.startswith("+F"):
        parts = line.strip().split(":")
        f[parts[0]] = [float(x) for x in parts[3:]]
# -mr: +F2 rsa (sign/s, verify/s), +F4 ecdsa (sign/s, verify/s), +F5 ecdh (op/s, s/op); printed as microseconds per operation
print(1e6 / f["+F4"][0], 1e6 / f["+F5"][0], 1e6 / f["+F2"][1], 1e6 / f["+F4"][1])
PY
)

# ---- 3. the peer: Locust's AppChallengeUser (1 master, 1 worker, 10 users), same replay, same run
lfps="-"; lcpu="-"
if ! "$root/tools/load/.venv/bin/python" -c "import locust, cryptography" 2>/dev/null; then
  (python3 -m venv "$root/tools/load/.venv" && "$root/tools/load/.venv/bin/pip" install -q --disable-pip-version-check locust cryptography jwcrypto) >/dev/null 2>&1 || true
fi
if [ -x "$root/tools/load/.venv/bin/locust" ]; then
  locust="$root/tools/load/.venv/bin/locust"; mport=$((20000 + RANDOM % 20000))
  export THREEDSTAPE_SESSION="$work/demo.3dstape" THREEDSTAPE_CERTS="$work/certs"
  "$locust" -f "$root/tools/load/locustfile.py" AppChallengeUser --headless --master --master-bind-host 127.0.0.1 --master-bind-port "$mport" \
    --expect-workers 1 -u 10 -r 10 -t "${lsecs}s" --host "http://127.0.0.1:$port" --csv "$work/locust" --csv-full-history --only-summary >"$work/locust.log" 2>&1 &
  lmaster=$!
  pids+=($lmaster)
  "$locust" -f "$root/tools/load/locustfile.py" AppChallengeUser --worker --master-host 127.0.0.1 --master-port "$mport" >"$work/locust-worker.log" 2>&1 &
  lworker=$!
  pids+=($lworker)
  # The worker's CPU (user + system, from /proc) sampled twice a second while it runs, for its CPU per flow below.
  python3 - "$lworker" > "$work/locust-worker-cpu.txt" 2>/dev/null <<'PY' &
import os, sys, time
pid, tick = sys.argv[1], os.sysconf("SC_CLK_TCK")
while True:
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        break
    print(f"{time.time():.3f} {(int(fields[11]) + int(fields[12])) / tick:.2f}", flush=True)
    time.sleep(0.5)
PY
  pids+=($!)
  wait "$lmaster" || true
  lfps=$(python3 -c "
import csv,sys
rows={r['Name']: r for r in csv.DictReader(open(sys.argv[1]))}
n=int(rows['app challenge']['Request Count']) if 'app challenge' in rows else 0
failed=int(rows['Aggregated']['Failure Count']) if 'Aggregated' in rows else 0
print(f'{n / float(sys.argv[2]):.1f}' if n and not failed else '-')" "$work/locust_stats.csv" "$lsecs" 2>/dev/null || echo "-")
  [ "$lfps" != "-" ] || { echo "Locust's run failed or completed no challenge:"; grep -v '^ *$' "$work/locust.log" | tail -n 15; }
  # Locust's CPU per flow: the worker's CPU between two of the master's once-a-second history rows (the first a second
  # after the load starts, the last a second before it ends), over the app challenges completed between them.
  lcpu=$(python3 - "$work/locust_stats_history.csv" "$work/locust-worker-cpu.txt" 2>/dev/null <<'PY' || echo "-"
import bisect, csv, sys
rows = [(float(r["Timestamp"]), int(r["Total Request Count"])) for r in csv.DictReader(open(sys.argv[1]))
        if r["Name"] == "app challenge" and int(r["Total Request Count"]) > 0]
samples = [tuple(map(float, l.split())) for l in open(sys.argv[2]) if l.strip()]
if len(rows) < 4 or len(samples) < 4: print("-"); sys.exit()
(t0, n0), (t1, n1) = rows[1], rows[-2]
times = [s[0] for s in samples]
def cpu_at(t):
    i = min(max(bisect.bisect_left(times, t), 1), len(samples) - 1)
    (ta, ca), (tb, cb) = samples[i - 1], samples[i]
    return ca + (cb - ca) * (t - ta) / (tb - ta) if tb > ta else cb
print(f"{(cpu_at(t1) - cpu_at(t0)) / (n1 - n0) * 1e6:.0f}" if n1 > n0 else "-")
PY
)
fi

python3 - "$flows" "$wall" "$perflow" "$requests" "$keygen" "$ecdh" "$rsapub" "$lfps" "$conc" "$startcpu" "$lsecs" "$sign" "$ecverify" "$lcpu" <<'PY'
import sys
flows, wall, per, requests = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
keygen, ecdh, rsapub = float(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7])
lfps, conc, start, lsecs, sign, ecverify, lcpu = sys.argv[8], sys.argv[9], float(sys.argv[10]), sys.argv[11], sys.argv[12], float(sys.argv[13]), sys.argv[14]
# Key generation, ECDH, the RSA-OAEP deviceData encryption (to the DS's RSA-2048 certificate) and the JWS verification
# (RSA or ECDSA): the target's measure. The ACS certificate's own verification (ECDSA, by the DS's P-256 root) is
# shown beside it: client-replay verifies the one chain once per run and remembers it, as an SDK may.
jws = rsapub if sign == "PS256" else ecverify
crypto = keygen + ecdh + rsapub + jws
print(f"client-replay: {flows} app challenge flows against replay --timing none --sign {sign} at --concurrency {conc}: "
      f"{flows / wall:.1f} flows/s, {requests / wall:.1f} requests/s, CPU {per:.0f} us per flow (beyond the process's start: "
      f"{start * 1000:.0f} ms for a one-pass run)")
print(f"openssl speed: P-256 keygen {keygen:.0f} us + ECDH {ecdh:.0f} us + RSA-2048 public op (deviceData) {rsapub:.0f} us + {sign} verification {jws:.0f} us = {crypto:.0f} us per flow; "
      f"client-replay CPU per flow is {per / crypto:.1f}x that (target <= 2x); with the certificate's ECDSA verification too ({ecverify:.0f} us), {per / (crypto + ecverify):.1f}x")
if lfps != "-":
    print(f"peer: Locust AppChallengeUser (1 master, 1 worker, 10 users, {lsecs} s, same replay) {lfps} app challenge flows/s; "
          f"client-replay {flows / wall:.1f} flows/s ({flows / wall / float(lfps):.1f}x; target >= 5x)")
    if lcpu != "-":
        print(f"peer CPU: Locust's worker {float(lcpu):.0f} us per app challenge flow; client-replay {per:.0f} us "
              f"({float(lcpu) / per:.1f}x less CPU per flow)")
else:
    print("peer: Locust not available or its run failed; no peer figure")
PY
