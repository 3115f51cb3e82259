#!/usr/bin/env bash
# Distributed load on loopback, two parts:
#   browser: `3dstape replay` of the browser demo session, one Locust master and two workers for SECONDS; requests
#            made and none failed.
#   app:     the app channel (AppChallengeUser: deviceData to the DS key, acsSignedContent verified, ECDH, CReq/CRes
#            JWE, RReq), one master and one worker with 10 users: against `3dstape replay --timing none` of the app demo
#            session (certificates from `ca export --ds`) for APP_SECONDS, no failure and at least 5 complete challenges
#            a second, its flows/s printed (the figure client-replay's benchmark compares); against `3dstape sandbox`
#            (EC DS key, ES256) for half that, every challenge ending Y; then single-process runs against a sandbox with
#            an RSA DS key and PS256, and against `sandbox --bad-signature`, where every challenge must fail on
#            acsSignedContent.
# The SDK code's own tests (tools/load/test_emv_sdk.py, against jwcrypto) run first. Installs Locust, cryptography and
# jwcrypto (PyPI) into tools/load/.venv. Usage: tools/load/check.sh [SECONDS, default 6] [APP_SECONDS, default 20]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
secs="${1:-6}"
app_secs="${2:-20}"
case "$secs$app_secs" in *[!0-9]*) echo "usage: tools/load/check.sh [SECONDS] [APP_SECONDS] (whole seconds)" >&2; exit 2;; esac
work="$(mktemp -d /tmp/3dstape-load.XXXXXX)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
py="$here/.venv/bin/python"
if ! "$py" -c "import locust, cryptography, jwcrypto" 2>/dev/null; then
  python3 -m venv "$here/.venv" && "$here/.venv/bin/pip" install -q --disable-pip-version-check locust cryptography jwcrypto
fi
locust="$here/.venv/bin/locust"
(cd "$root" && swift build -c release --product 3dstape >/dev/null)
tape="$(cd "$root" && swift build -c release --show-bin-path)/3dstape"
export THREEDSTAPE_HOME="$work/home"

echo "-- the SDK code against jwcrypto (tools/load/test_emv_sdk.py)"
"$py" -m unittest discover -s "$here" -p 'test_*.py' 2>&1 | tail -n 1

# wait_port LOG: the port of the first http://127.0.0.1:PORT the server logged.
wait_port() {
  local port=""
  for _ in $(seq 150); do
    port=$(sed -n 's/.* on http:\/\/127\.0\.0\.1:\([0-9]*\)[;( ].*/\1/p' "$1" | head -1)
    [ -n "$port" ] && { echo "$port"; return 0; }
    sleep 0.1
  done
  echo "the server did not start:" >&2; cat "$1" >&2; return 1
}

# master_and_workers NAME WORKERS USERS SECONDS HOST: a headless master on loopback and WORKERS workers; stats in $work/NAME_*.csv
master_and_workers() {
  local name=$1 workers=$2 users=$3 run=$4 host=$5 mport=$((20000 + RANDOM % 20000)) master w
  "$locust" -f "$here/locustfile.py" --headless --master --master-bind-host 127.0.0.1 --master-bind-port "$mport" --expect-workers "$workers" \
    -u "$users" -r "$users" -t "${run}s" --host "$host" --csv "$work/$name" --only-summary >"$work/$name-master.log" 2>&1 &
  master=$!
  pids+=($master)
  for w in $(seq "$workers"); do
    "$locust" -f "$here/locustfile.py" --worker --master-host 127.0.0.1 --master-port "$mport" >"$work/$name-worker$w.log" 2>&1 &
    pids+=($!)
  done
  wait "$master" || true
}

# one_process NAME USERS SECONDS HOST: a headless single-process run; stats in $work/NAME_*.csv
one_process() {
  "$locust" -f "$here/locustfile.py" --headless -u "$2" -r "$2" -t "${3}s" --host "$4" --csv "$work/$1" --only-summary >"$work/$1.log" 2>&1 || true
}

echo "-- browser: Locust, one master and two workers, against 3dstape replay of the browser demo session"
cp "$root/sessions/demo-browser.3dstape" "$work/session.3dstape"
"$tape" replay "$work/session.3dstape" --listen 127.0.0.1:0 --timing none --quiet --session "$work/replay.3dstape" 2>"$work/replay.log" &
pids+=($!)
port=$(wait_port "$work/replay.log")
THREEDSTAPE_SESSION="$work/session.3dstape" master_and_workers load 2 8 "$secs" "http://127.0.0.1:$port"
python3 - "$work/load_stats.csv" <<'PY'
import csv, sys
rows = {r["Name"]: r for r in csv.DictReader(open(sys.argv[1]))}
total = rows["Aggregated"]
n, failed = int(total["Request Count"]), int(total["Failure Count"])
for name in ("AReq", "creq form", "challenge submit"):
    r = rows.get(name)
    print(f"  {name:17} {r['Request Count'] if r else 0:>6} requests, {r['Failure Count'] if r else 0} failed, median {r['Median Response Time'] if r else '-'} ms")
print(f"locust (1 master, 2 workers): {n} requests, {failed} failed")
sys.exit(0 if n > 50 and failed == 0 and "creq form" in rows else 1)
PY

echo "-- app: Locust's AppChallengeUser against 3dstape replay of the app demo session and 3dstape sandbox (EC and RSA keys)"
app="$work/demo-app.3dstape"
cp "$root/sessions/demo-app.3dstape" "$app"
"$tape" sandbox certs --out "$work/certs-ec" --ds-key ec >/dev/null
"$tape" sandbox certs --out "$work/certs-rsa" --ds-key rsa >/dev/null
"$tape" ca export --ds "$work/certs-replay" --ds-key ec >/dev/null
"$tape" sandbox --listen 127.0.0.1:0 --ds-key ec --sign ES256 --quiet 2>"$work/sandbox-ec.log" &
pids+=($!)
"$tape" sandbox --listen 127.0.0.1:0 --ds-key rsa --sign PS256 --quiet 2>"$work/sandbox-rsa.log" &
pids+=($!)
"$tape" sandbox --listen 127.0.0.1:0 --ds-key ec --sign ES256 --bad-signature --quiet 2>"$work/sandbox-bad.log" &
pids+=($!)
"$tape" replay "$app" --listen 127.0.0.1:0 --timing none --quiet --session "$work/replay-app.3dstape" 2>"$work/replay-app.log" &
pids+=($!)
ec_port=$(wait_port "$work/sandbox-ec.log"); rsa_port=$(wait_port "$work/sandbox-rsa.log")
bad_port=$(wait_port "$work/sandbox-bad.log"); replay_port=$(wait_port "$work/replay-app.log")
export THREEDSTAPE_SESSION="$app"
sandbox_secs=$(( app_secs / 2 > 5 ? app_secs / 2 : 5 ))
THREEDSTAPE_CERTS="$work/certs-replay" master_and_workers app 1 10 "$app_secs" "http://127.0.0.1:$replay_port"
THREEDSTAPE_CERTS="$work/certs-ec" THREEDSTAPE_EXPECT_CHALLENGE=Y master_and_workers ec 1 10 "$sandbox_secs" "http://127.0.0.1:$ec_port"
THREEDSTAPE_CERTS="$work/certs-rsa" THREEDSTAPE_EXPECT_CHALLENGE=Y one_process rsa 4 4 "http://127.0.0.1:$rsa_port"
THREEDSTAPE_CERTS="$work/certs-ec" one_process bad 2 3 "http://127.0.0.1:$bad_port"
if ! "$py" "$here/load_report.py" "$work" "$app_secs"; then
  for log in "$work"/app-master.log "$work"/ec-master.log "$work"/rsa.log "$work"/bad.log "$work"/sandbox-*.log "$work"/replay-app.log; do
    [ -f "$log" ] && { echo "-- ${log##*/}"; grep -v '^ *$' "$log" | grep -v -E '^(Type|--------|POST|flow|RReq|  *Aggregated)' | tail -n 8; }
  done
  exit 1
fi
