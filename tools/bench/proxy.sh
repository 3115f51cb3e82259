#!/usr/bin/env bash
# Recording-proxy overhead, in one run, beside nginx (a reverse proxy that records nothing) and
# mitmproxy (mitmdump --mode reverse, saving flows): the same POST of a 2 KB AReq-like JSON answered
# with a 3 KB ARes-like JSON by an nginx upstream, keep-alive.
#   - under load: wrk, 2 threads, 16 connections
#   - one connection: wrk, 1 thread, 1 connection (added latency per exchange = p50 - direct p50)
# The upstream is its own nginx process and the nginx proxy another (one worker each), so each proxy has its own
# process as in a real deployment. Prints for each path requests/s, p50, p99, max, the proxy process's CPU% and
# requests/s per core of it, its peak RSS, and the ratio to nginx; and whether every request wrk completed is in
# the session file.
# Needs: wrk, nginx (Debian), mitmproxy (PyPI, into tools/bench/.venv), sqlite3. Loopback only.
# THREEDSTAPE_BENCH_BIN=PATH measures that binary instead of building this tree's; BENCH_PORT_BASE (default 18181) the first of its four ports.
# ROUNDS (default 3): alternated pairs of shorter windows under load after the main runs, each pair's ratio and the median.
# WRITER_CORE_ROUNDS (default 3): as many pairs with 3dstape's session writer alone on CPU 1 and all else on CPU 0.
# Usage: [BACKEND=epoll|poll] [ROUNDS=N] tools/bench/proxy.sh [SECONDS per run, default 10]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
secs="${1:-10}"
. "$here/lib.sh"
bench_work 3dstape-bench

command -v wrk >/dev/null && command -v nginx >/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk nginx >/dev/null; }
if [ ! -x "$here/.venv/bin/mitmdump" ]; then
  python3 -m venv "$here/.venv" && "$here/.venv/bin/pip" install -q --disable-pip-version-check mitmproxy
fi
# BACKEND=poll measures the POSIX-only build (-DTHREEDSTAPE_POSIX_ONLY: the poll(2) loop, in .build-posix) instead of the
# default epoll one; tools/bench/backends.sh runs both, alternated.
build=(-c release); [ "${BACKEND:-epoll}" = poll ] && build+=(-Xswiftc -DTHREEDSTAPE_POSIX_ONLY --build-path .build-posix)
# THREEDSTAPE_BENCH_BIN=PATH measures that 3dstape binary instead of building this tree's (to alternate two builds).
bench_binary "$root" 3dstape "${build[@]}"; tape="$bench_bin"

base="${BENCH_PORT_BASE:-18181}" # four ports from here
UP=$base; NGX=$((base + 1)); MITM=$((base + 2)); TAPE=$((base + 3))
ares=$(python3 -c 'import json;print(json.dumps({"messageType":"ARes","messageVersion":"2.2.0","transStatus":"Y","eci":"05","acsTransID":"13c701a3-5a88-4c45-89e9-ef65e50a8bf9","dsTransID":"d7c1ee99-9478-44a6-b1f2-391e29c6b340","threeDSServerTransID":"8a880dc0-d2d2-4067-bcb1-b08d1690b26e","padding":"x"*2750}))')
printf '%s' "$ares" > "$work/ares.json"
python3 - "$work/post.lua" <<'PY'
import json, sys
areq = {"messageType": "AReq", "messageVersion": "2.2.0", "threeDSServerTransID": "8a880dc0-d2d2-4067-bcb1-b08d1690b26e",
        "acctNumber": "4000000000001091", "deviceChannel": "02", "messageCategory": "01", "padding": "a" * 1800}
body = json.dumps(areq).replace("\\", "\\\\").replace('"', '\\"')
open(sys.argv[1], "w").write(f'wrk.method = "POST"\nwrk.body = "{body}"\nwrk.headers["Content-Type"] = "application/json"\n')
PY

# Two nginx processes, one worker each (master_process off): the upstream on its own, and the nginx proxy on its
# own, as in a real deployment, so that the nginx row is not halved by sharing one worker with its upstream.
for role in upstream proxy; do
  port=$UP; [ $role = proxy ] && port=$NGX
  if [ $role = upstream ]; then
    body="location / { default_type application/json; return 200 '$ares'; }"
    up=""
  else
    body='location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }'
    up="upstream up { server 127.0.0.1:$UP; keepalive 64; }"
  fi
  mkdir -p "$work/$role"
  cat > "$work/$role/nginx.conf" <<NGX
master_process off;
daemon off;
worker_processes 1;
pid $work/$role/nginx.pid;
error_log $work/$role/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/$role/body;
  proxy_temp_path $work/$role/proxy;
  $up
  server { listen 127.0.0.1:$port; $body }
}
NGX
done
nginx -c "$work/upstream/nginx.conf" -p "$work/upstream" & pids+=($!)
nginx -c "$work/proxy/nginx.conf" -p "$work/proxy" & ngx_pid=$!; pids+=($ngx_pid)
"$here/.venv/bin/mitmdump" --mode "reverse:http://127.0.0.1:$UP" --listen-host 127.0.0.1 -p $MITM -w "$work/flows.mitm" -q & mitm_pid=$!
pids+=($mitm_pid)
"$tape" record --reverse "http://127.0.0.1:$UP" --listen "127.0.0.1:$TAPE" --session "$work/bench.3dstape" --quiet 2>"$work/tape.log" & tape_pid=$!
pids+=($tape_pid)
for port in $UP $NGX $MITM $TAPE; do
  for _ in $(seq 100); do curl -s -o /dev/null -X POST -d x "http://127.0.0.1:$port/ds/areq" && break; sleep 0.1; done
done
check=$(curl -s -X POST -d '{}' "http://127.0.0.1:$TAPE/ds/areq" | head -c 40)
[ "${check:0:14}" = '{"messageType"' ] || { echo "3dstape did not answer with the ARes: $check"; exit 1; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
# 3dstape's two busy threads: the network loop (the main thread) and the session writer (named 3dstape-writer).
# (Looked for up to 2 s: a thread's name can lag its start, and a failed lookup ended the whole run under set -e.)
writer_tid() {
  for _ in $(seq 20); do
    for t in /proc/"$1"/task/*; do grep -qs '^3dstape-writer' "$t/comm" && { basename "$t"; return 0; }; done
    sleep 0.1
  done
  echo "3dstape's session writer thread not found in /proc/$1/task" >&2; return 1
}
thread_ticks() { awk '{print $14 + $15}' "/proc/$1/task/$2/stat"; }
declare -A SPLIT

run() { # name port threads conns pid -> "rps p50ms p99ms requests non2xx maxms cpu%"
  local before after wtid loop0 writer0
  [ -n "$5" ] && before=$(cpu_ticks "$5")
  if [ "$1" = 3dstape ]; then wtid=$(writer_tid "$5"); loop0=$(thread_ticks "$5" "$5"); writer0=$(thread_ticks "$5" "$wtid"); fi
  wrk -t"$3" -c"$4" -d"${secs}s" -s "$work/post.lua" --latency "http://127.0.0.1:$2/ds/areq" > "$work/wrk-$1-$4.txt"
  local cpu=-
  if [ -n "$5" ]; then after=$(cpu_ticks "$5"); cpu=$(python3 -c "print(f'{($after - $before) / $hz / $secs * 100:.0f}')"); fi
  local summary; summary=$(python3 "$here/wrk_summary.py" "$work/wrk-$1-$4.txt")
  if [ "$1" = 3dstape ]; then # microseconds of each thread's CPU per exchange wrk completed
    SPLIT[$4]=$(python3 -c "n = max(int('$summary'.split()[3]), 1); print(f'network loop {($(thread_ticks "$5" "$5") - $loop0) / $hz * 1e6 / n:.1f} us, session writer {($(thread_ticks "$5" "$wtid") - $writer0) / $hz * 1e6 / n:.1f} us')")
  fi
  echo "$summary $cpu"
}

declare -A R
total_tape=0
for load in "2 16" "1 1"; do
  set -- $load
  for target in direct:$UP: nginx:$NGX:$ngx_pid mitmproxy:$MITM:$mitm_pid 3dstape:$TAPE:$tape_pid; do
    IFS=: read -r name port pid <<<"$target"
    run "$name" "$port" "$1" "$2" "$pid" > "$work/run.txt" # not in a subshell: run() keeps the 3dstape CPU split
    R[$name-$2]=$(cat "$work/run.txt")
    if [ "$name" = 3dstape ]; then total_tape=$((total_tape + $(echo "${R[$name-$2]}" | cut -d' ' -f4))); fi
  done
done
# The ratio under load from one window each swings with the machine (nginx's own rate moved by a quarter between
# windows a minute apart on the 2-core machines): ROUNDS more pairs of shorter windows (default 3, each SECONDS/2 s,
# nginx then 3dstape), each pair's ratio and their median.
rounds="${ROUNDS:-3}"
case "$rounds" in ''|*[!0-9]*) echo "ROUNDS must be a whole number" >&2; exit 2;; esac
half=$(( secs / 2 > 1 ? secs / 2 : 1 ))
# One alternated pair under load, wrk run under "$@" (nothing, or taskset): sets n_rps and t_rps (nginx's and 3dstape's
# req/s) and counts 3dstape's requests in total_tape.
pair() {
  "$@" wrk -t2 -c16 -d"${half}s" -s "$work/post.lua" --latency "http://127.0.0.1:$NGX/ds/areq" > "$work/pair-nginx.txt"
  "$@" wrk -t2 -c16 -d"${half}s" -s "$work/post.lua" --latency "http://127.0.0.1:$TAPE/ds/areq" > "$work/pair-tape.txt"
  local n_sum t_sum
  n_sum=$(python3 "$here/wrk_summary.py" "$work/pair-nginx.txt"); t_sum=$(python3 "$here/wrk_summary.py" "$work/pair-tape.txt")
  total_tape=$((total_tape + $(echo "$t_sum" | cut -d' ' -f4)))
  n_rps=${n_sum%% *}; t_rps=${t_sum%% *}
}
pair_ratios=()
for _ in $(seq "$rounds"); do
  pair
  pair_ratios+=("$(python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$t_rps" "$n_rps")")
done

# Where the gap to nginx comes from: the same pairs with the session writer on a core of its own (CPU 1) and everything
# else (wrk, the upstream, the nginx proxy, 3dstape's network loop) on CPU 0. On a 2-core machine the writer's SQLite
# work otherwise takes its CPU from the load generator, the upstream and the loop. WRITER_CORE_ROUNDS (default 3; 0: none).
core_rounds="${WRITER_CORE_ROUNDS:-3}"
case "$core_rounds" in ''|*[!0-9]*) echo "WRITER_CORE_ROUNDS must be a whole number" >&2; exit 2;; esac
core_ratios=()
if [ "$core_rounds" -gt 0 ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  for p in "${pids[@]}"; do taskset -a -p -c 0 "$p" >/dev/null 2>&1 || true; done
  taskset -p -c 1 "$(writer_tid "$tape_pid")" >/dev/null
  for _ in $(seq "$core_rounds"); do
    pair taskset -c 0
    core_ratios+=("$(python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f} ({float(sys.argv[2]):.0f} against {float(sys.argv[1]):.0f} req/s)')" "$t_rps" "$n_rps")")
  done
fi

declare -A RSS
for x in nginx:$ngx_pid mitmproxy:$mitm_pid 3dstape:$tape_pid; do
  RSS[${x%%:*}]=$(( $(awk '/VmHWM/ {print $2}' "/proc/${x##*:}/status") / 1024 ))
done
kill -INT "$tape_pid"; wait "$tape_pid" 2>/dev/null || true
stored=$(sqlite3 "$work/bench.3dstape" "SELECT count(*) FROM exchanges WHERE path = '/ds/areq' AND status = 200")
expected=$((total_tape + 2)) # plus the readiness probe and the check request

echo
echo "3dstape (${BACKEND:-epoll} event loop) recording-proxy benchmark: POST 2 KB AReq -> 3 KB ARes, keep-alive, ${secs}s per run, $(nproc) cores;"
echo "upstream: its own nginx process (one worker); nginx proxy: its own process (one worker)"
for c in 16 1; do
  [ $c = 16 ] && echo "-- under load (wrk -t2 -c16)" || echo "-- one connection (wrk -t1 -c1)"
  printf '%-10s %9s %8s %8s %9s %6s %11s %8s %11s %7s\n' path req/s p50_ms p99_ms max_ms cpu% req/s/core peak_MiB ratio_nginx non2xx
  read -r nrps _ _ _ _ _ _ <<<"${R[nginx-$c]}"
  for name in direct nginx mitmproxy 3dstape; do
    read -r rps p50 p99 _ bad mx cpu <<<"${R[$name-$c]}"
    ratio=$(python3 -c "print(f'{$rps/$nrps:.2f}x')")
    per=$( [ "$cpu" = - ] && echo - || python3 -c "print(f'{$rps / max($cpu, 1) * 100:.0f}')" )
    printf '%-10s %9s %8s %8s %9s %6s %11s %8s %11s %7s\n' "$name" "$rps" "$p50" "$p99" "$mx" "$cpu" "$per" "${RSS[$name]:--}" "$ratio" "$bad"
  done
done
if [ "$rounds" -gt 0 ]; then
  echo "-- under load, $rounds alternated pairs of ${half} s (nginx, then 3dstape): x nginx ${pair_ratios[*]}; median $(printf '%s\n' "${pair_ratios[@]}" | sort -n | awk '{a[NR] = $1} END {print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}')x"
fi
if [ "${#core_ratios[@]}" -gt 0 ]; then
  echo "-- under load, the session writer alone on CPU 1, all else on CPU 0, $core_rounds alternated pairs of ${half} s: x nginx (nginx against 3dstape): ${core_ratios[*]}"
fi
echo "-- 3dstape's CPU per exchange: under load ${SPLIT[16]}; at one connection ${SPLIT[1]}"
echo "-- session file: $stored of $expected requests recorded ($(du -h "$work/bench.3dstape" | cut -f1))"
# What the writer's backpressure cost the traffic over all of 3dstape's runs, as its own summary says (no line: nothing).
bp=$(grep -h "session writer fell behind" "$work/tape.log" | sed 's/^3dstape: //' || true)
echo "-- 3dstape's backpressure: ${bp:-no request waited for the session writer}"
[ "$stored" -ge "$expected" ] && echo "no exchange missing" || { echo "MISSING EXCHANGES"; exit 1; }
