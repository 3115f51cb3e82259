#!/usr/bin/env bash
# Instructions the replayer spends per timed answer in replay.sh's part 1 (COUNT connections, one POST each, all sent
# within 0.2 s, seeded delays 10 ms - 1 s), counted by callgrind over all its threads (the network loop and the session
# writer): a count the machine's load does not move, for A/B comparisons of the timing path where wall-clock figures are
# noise (a shared machine). The replayer runs under callgrind; its counters are zeroed once it listens, then the client
# runs and the figure is instructions (Ir) / COUNT. Under callgrind the replayer is some 50x slower, so its answers are
# late and more of them fall due in one turn than in a real run: the count compares builds, the timing is replay.sh's.
# Needs: valgrind (callgrind_control), sqlite3, curl, python3.
# THREEDSTAPE_BENCH_BIN=PATH measures that binary (build the other side of an A/B yourself, release);
# BENCH_PORT_BASE=N (or THREEDSTAPE_BENCH_PORT_BASE=N) moves its three loopback ports to N..N+2 (default 18295).
# Usage: tools/bench/replay-timing-instructions.sh [COUNT, default 1000]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
count="${1:-1000}"
case "$count" in ''|*[!0-9]*) echo "COUNT is a whole number" >&2; exit 2;; esac
command -v valgrind >/dev/null && command -v callgrind_control >/dev/null || { echo "needs valgrind (callgrind)" >&2; exit 2; }
. "$here/lib.sh"
bench_work 3dstape-timing-instructions
bench_binary "$root" 3dstape; tape="$bench_bin"
export THREEDSTAPE_HOME="$work/home"
ulimit -n 8192 2>/dev/null || true
base="${BENCH_PORT_BASE:-${THREEDSTAPE_BENCH_PORT_BASE:-18295}}"; REC=$base; REP=$((base + 1))

# The one exchange to replay, recorded as replay.sh records it (lib.sh).
bench_record_one "$tape" $REC "$work/one.3dstape"

valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
  "$tape" replay "$work/one.3dstape" --listen "127.0.0.1:$REP" --timing none --jitter uniform:10ms-1s --seed 1 \
  --ignore-field i --session "$work/timing.3dstape" --quiet 2>"$work/rep.log" & rep=$!
pids+=($rep)
bench_wait_port $REP
sleep 1
callgrind_control -z $rep >/dev/null 2>&1  # counts from here
python3 "$here/replay_client.py" timing $REP "$count" > "$work/client-timing.txt"
sleep 1 # the writer's last batch
callgrind_control -d $rep >/dev/null 2>&1  # and up to here: a dump of its own, $work/cg.out.1
# BENCH_CALLGRIND_OUT=FILE keeps that dump (for callgrind_annotate).
if [ -n "${BENCH_CALLGRIND_OUT:-}" ]; then cp "$work"/cg.out.1 "$BENCH_CALLGRIND_OUT"; fi
kill -INT $rep; wait $rep 2>/dev/null || true
ir=$(awk '/^(summary|totals):/ {print $2; exit}' "$work"/cg.out.*)
answered=$(sqlite3 "$work/timing.3dstape" "SELECT count(*) FROM replay_matches WHERE miss IS NULL")
echo "replayer instructions per timed answer (callgrind, all threads, $count requests; $answered answered)"
python3 -c "print(f'   {int(\"$ir\") / $count:,.0f} Ir per answer   ({int(\"$ir\"):,} Ir in all)')"
