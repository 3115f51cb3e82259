#!/usr/bin/env bash
# Distributed load on loopback: `3dstape replay` of the browser demo session, driven by one Locust master and two
# workers for a few seconds; checks that requests were made and none failed. Installs Locust (PyPI) into
# tools/load/.venv. Usage: tools/load/check.sh [SECONDS, default 6]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
secs="${1:-6}"
work="$(mktemp -d /tmp/3dstape-load.XXXXXX)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
if [ ! -x "$here/.venv/bin/locust" ]; then
  python3 -m venv "$here/.venv" && "$here/.venv/bin/pip" install -q --disable-pip-version-check locust
fi
(cd "$root" && swift build -c release --product 3dstape >/dev/null)
tape="$(cd "$root" && swift build -c release --show-bin-path)/3dstape"
export THREEDSTAPE_HOME="$work/home"
cp "$root/sessions/demo-browser.3dstape" "$work/session.3dstape"
"$tape" replay "$work/session.3dstape" --listen 127.0.0.1:0 --timing none --quiet --session "$work/replay.3dstape" 2>"$work/replay.log" &
pids+=($!)
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/.* on http:\/\/127\.0\.0\.1:\([0-9]*\);.*/\1/p' "$work/replay.log" | head -1)
  [ -n "$port" ] && break; sleep 0.1
done
[ -n "$port" ] || { echo "the replayer did not start"; cat "$work/replay.log"; exit 1; }
export THREEDSTAPE_SESSION="$work/session.3dstape"
locust="$here/.venv/bin/locust"
mport=$((20000 + RANDOM % 20000))
"$locust" -f "$here/locustfile.py" --headless --master --master-bind-host 127.0.0.1 --master-bind-port "$mport" --expect-workers 2 \
  -u 8 -r 8 -t "${secs}s" --host "http://127.0.0.1:$port" --csv "$work/load" --only-summary >"$work/master.log" 2>&1 &
master=$!
pids+=($master)
for w in 1 2; do
  "$locust" -f "$here/locustfile.py" --worker --master-host 127.0.0.1 --master-port "$mport" >"$work/worker$w.log" 2>&1 &
  pids+=($!)
done
wait "$master" || true
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
