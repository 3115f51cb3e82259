#!/usr/bin/env bash
# Connections at scale: CONNECTIONS (default 5000) keep-alive clients through `3dstape record --reverse` to an nginx
# upstream (its own process), each sending a small AReq-like POST every 2–4 s for SECONDS (default 60). Prints the
# recorder's peak RSS and errors, and checks every request is in the session. Loopback only.
# Usage: [BACKEND=epoll|poll] tools/bench/connections.sh [CONNECTIONS] [SECONDS]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
n="${1:-5000}"; secs="${2:-60}"
. "$here/lib.sh"
bench_work 3dstape-conns
ulimit -n "$(ulimit -Hn)"
command -v nginx >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; }
# BACKEND=poll measures the POSIX-only build (-DTHREEDSTAPE_POSIX_ONLY: the poll(2) loop, in .build-posix) instead of the
# default epoll one; tools/bench/backends.sh runs both, alternated.
build=(-c release); [ "${BACKEND:-epoll}" = poll ] && build+=(-Xswiftc -DTHREEDSTAPE_POSIX_ONLY --build-path .build-posix)
(cd "$root" && swift build "${build[@]}" --product 3dstape >/dev/null)
tape="$(cd "$root" && swift build "${build[@]}" --show-bin-path)/3dstape"
base="${BENCH_PORT_BASE:-18191}" # two ports from here
UP=$base; TAPE=$((base + 1))
cat > "$work/nginx.conf" <<NGX
master_process off;
daemon off;
worker_processes 1;
worker_rlimit_nofile 30000;
pid $work/nginx.pid;
error_log $work/error.log warn;
events { worker_connections 16384; }
http {
  access_log off;
  keepalive_timeout 300s;
  keepalive_requests 100000;
  client_body_temp_path $work/body;
  server { listen 127.0.0.1:$UP backlog=8192; location / { default_type application/json; return 200 '{"messageType":"ARes","messageVersion":"2.2.0","transStatus":"Y"}'; } }
}
NGX
nginx -c "$work/nginx.conf" -p "$work" & pids+=($!)
"$tape" record --reverse "http://127.0.0.1:$UP" --listen "127.0.0.1:$TAPE" --session "$work/s.3dstape" --quiet \
  --max-connections $((n + 100)) --idle-timeout 300 2>"$work/tape.log" & tape_pid=$!
pids+=($tape_pid)
for _ in $(seq 100); do curl -s -o /dev/null -X POST -d x "http://127.0.0.1:$TAPE/ds/areq" && break; sleep 0.1; done
ticks0=$(awk '{print $14 + $15}' "/proc/$tape_pid/stat")
result=$(python3 "$here/connections.py" $TAPE "$tape_pid" "$n" "$secs")
ticks1=$(awk '{print $14 + $15}' "/proc/$tape_pid/stat")
echo "$result"
echo "3dstape (${BACKEND:-epoll} event loop) CPU over the run: $(python3 -c "print(f'{($ticks1 - $ticks0) / $(getconf CLK_TCK) / $secs * 100:.1f}')")% of a core"
kill -INT "$tape_pid"; wait "$tape_pid" 2>/dev/null || true
requests=$(echo "$result" | sed -n 's/.* requests \([0-9]*\) .*/\1/p')
stored=$(sqlite3 "$work/s.3dstape" "SELECT count(*) FROM exchanges WHERE path = '/ds/areq' AND status = 200")
echo "session: $stored exchanges stored for $requests requests (+1 readiness probe)"
grep -q "errors 0 " <<<"$result" && [ "$stored" -ge "$requests" ] || { echo "FAILED"; exit 1; }
