#!/usr/bin/env bash
# Instructions the replayer spends per app-channel challenge flow (AReq, two CReq/CRes, and the RReq it sends to the
# 3DS Server's listener), counted by callgrind: a count the machine's load does not move, for A/B comparisons of the
# replayer's hot path where wall-clock figures are noise (a shared machine). The replayer runs under callgrind; its counters are
# zeroed once it has started and WARM flows have run, then FLOWS flows are counted (the Python SDK of replay.sh, one at a
# time) and the RReqs they trigger; the figure is instructions (Ir) / FLOWS.
# Needs: valgrind (callgrind_control), sqlite3, python3 with cryptography + jwcrypto (tools/interop/.venv, made if missing).
# THREEDSTAPE_BENCH_BIN=PATH measures that binary (build the other side of an A/B yourself, release);
# BENCH_PORT_BASE=N (or THREEDSTAPE_BENCH_PORT_BASE=N) moves its two loopback ports to N..N+1 (default 18291).
# Usage: tools/bench/replay-flow-instructions.sh [FLOWS, default 40] [WARM, default 5]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
nflows="${1:-40}"; warm="${2:-5}"
case "$nflows$warm" in *[!0-9]*) echo "FLOWS and WARM are whole numbers" >&2; exit 2;; esac
. "$here/lib.sh"
bench_work 3dstape-flow-instructions
command -v valgrind >/dev/null && command -v callgrind_control >/dev/null || { echo "needs valgrind (callgrind)" >&2; exit 2; }
venv="$root/tools/interop/.venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check jwcrypto cryptography
fi
py="$venv/bin/python"
bench_binary "$root" 3dstape; tape="$bench_bin"
export THREEDSTAPE_HOME="$work/home"
base="${BENCH_PORT_BASE:-${THREEDSTAPE_BENCH_PORT_BASE:-18291}}"; REP=$base

# The 3DS Server's RReq listener: tools/testing/upstream.py answers every POST (exits when its stdin closes).
mkfifo "$work/up.stdin"
python3 "$root/tools/testing/upstream.py" <"$work/up.stdin" >"$work/up.txt" 2>&1 & pids+=($!)
exec {up_stdin}>"$work/up.stdin"
for _ in $(seq 50); do grep -q listening "$work/up.txt" 2>/dev/null && break; sleep 0.1; done
upport=$(awk '/listening/ {print $2}' "$work/up.txt")

cp "$root/sessions/demo-app.3dstape" "$work/demo.3dstape"
python3 - "$work/flow-areq.json" "$(sqlite3 "$work/demo.3dstape" "SELECT CAST(request_body AS TEXT) FROM exchanges WHERE id = 7")" "$upport" <<'PY'
import json, sys
a = json.loads(sys.argv[2]); a["acctNumber"] = "4000000000001067"; a["threeDSServerURL"] = f"http://127.0.0.1:{sys.argv[3]}/3ds/rreq"
json.dump(a, open(sys.argv[1], "w"))
PY
valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
  "$tape" replay "$work/demo.3dstape" --listen "127.0.0.1:$REP" --timing none --session "$work/flows.3dstape" --quiet \
  2>"$work/rep.log" & rep=$!
pids+=($rep)
bench_wait_port $REP
"$py" "$here/replay_client.py" flows $REP "$work/flow-areq.json" "$warm" 1 >/dev/null   # warm-up (key loading, caches)
sleep 1
callgrind_control -z $rep >/dev/null  # counts from here
"$py" "$here/replay_client.py" flows $REP "$work/flow-areq.json" "$nflows" 1 >/dev/null
sleep 2 # the last RReq (sent just after its final CRes) and its RRes
callgrind_control -d $rep >/dev/null  # and up to here: a dump of its own, $work/cg.out.1
kill -INT $rep; wait $rep 2>/dev/null || true
ir=$(awk '/^(summary|totals):/ {print $2; exit}' "$work"/cg.out.*)
rreqs=$(sqlite3 "$work/flows.3dstape" "SELECT count(*) FROM replay_matches WHERE outcome = 'RReq delivered'")
echo "replayer instructions per app challenge flow (callgrind, $nflows flows counted after $warm, one at a time; $rreqs RReqs delivered in all)"
python3 -c "print(f'   {int(\"$ir\") / $nflows:,.0f} Ir per flow   ({int(\"$ir\"):,} Ir in all)')"
