#!/usr/bin/env bash
# Instructions per exchange on the recorder's two busy threads (the network loop and the session writer), counted by
# callgrind, which the load of a shared machine does not move (unlike wall-clock or CPU time): N keep-alive POSTs of
# the 2 KB AReq-like JSON proxy.sh sends, through `record --reverse` to an nginx upstream answering the 3 KB ARes-like
# JSON, on CONNS connections at once. Each binary runs twice (N/5 and N requests): the difference divided by 4N/5 is the
# cost of one exchange, without start-up and shutdown.
# Needs: valgrind, nginx (Debian), python3. Loopback only.
# BENCH_PORT_BASE (default 18191) the first of its two ports; N (default 2000) requests; CONNS (default 1) connections.
# Usage: tools/bench/loop-instructions.sh BINARY [BINARY...]   (e.g. a release build of each of two commits)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
[ $# -ge 1 ] || { echo "usage: $0 BINARY [BINARY...]" >&2; exit 2; }
for b in "$@"; do [ -x "$b" ] || { echo "$b is not an executable" >&2; exit 2; }; done
n="${N:-2000}"; conns="${CONNS:-1}"
case "$n$conns" in *[!0-9]*) echo "N and CONNS must be whole numbers" >&2; exit 2;; esac
[ "$n" -ge 50 ] && [ "$conns" -ge 1 ] && [ "$conns" -le 64 ] || { echo "N must be at least 50 and CONNS 1 to 64" >&2; exit 2; }
base="${BENCH_PORT_BASE:-18191}"; UP=$base; TAPE=$((base + 1))
work="$(mktemp -d /tmp/3dstape-loopcost.XXXXXX)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

ares=$(python3 -c 'import json;print(json.dumps({"messageType":"ARes","messageVersion":"2.2.0","transStatus":"Y","eci":"05","acsTransID":"13c701a3-5a88-4c45-89e9-ef65e50a8bf9","dsTransID":"d7c1ee99-9478-44a6-b1f2-391e29c6b340","threeDSServerTransID":"8a880dc0-d2d2-4067-bcb1-b08d1690b26e","padding":"x"*2750}))')
mkdir -p "$work/upstream"
cat > "$work/upstream/nginx.conf" <<NGX
master_process off;
daemon off;
worker_processes 1;
pid $work/upstream/nginx.pid;
error_log $work/upstream/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/upstream/body;
  server { listen 127.0.0.1:$UP; location / { default_type application/json; return 200 '$ares'; } }
}
NGX
nginx -c "$work/upstream/nginx.conf" -p "$work/upstream" & pids+=($!)

# The client: CONNS threads, each its own keep-alive connection, N requests in all; exits 1 on any non-200.
cat > "$work/client.py" <<'PY'
import json, socket, sys, threading
port, total, conns = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
areq = {"messageType": "AReq", "messageVersion": "2.2.0", "threeDSServerTransID": "8a880dc0-d2d2-4067-bcb1-b08d1690b26e",
        "acctNumber": "4000000000001091", "deviceChannel": "02", "messageCategory": "01", "padding": "a" * 1800}
body = json.dumps(areq).encode()
req = (f"POST /ds/areq HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
       f"Content-Length: {len(body)}\r\n\r\n").encode() + body
bad = []
def one(count):
    s = socket.create_connection(("127.0.0.1", port)); buf = b""
    for _ in range(count):
        s.sendall(req)
        while b"\r\n\r\n" not in buf: buf += s.recv(65536)
        head, buf = buf.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 200"): bad.append(head[:40])
        length = next(int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:"))
        while len(buf) < length: buf += s.recv(65536)
        buf = buf[length:]
    s.close()
threads = [threading.Thread(target=one, args=(total // conns + (1 if i < total % conns else 0),)) for i in range(conns)]
for t in threads: t.start()
for t in threads: t.join()
sys.exit(1 if bad else 0)
PY
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$UP/" && break; sleep 0.1; done

measure() { # binary requests -> "loop writer" instructions on the two threads
  local bin=$1 reqs=$2 out="$work/cg.$RANDOM"
  rm -f "$work"/s.3dstape*
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out" \
    "$bin" record --reverse "http://127.0.0.1:$UP" --listen "127.0.0.1:$TAPE" --session "$work/s.3dstape" --quiet \
    2>"$work/tape.log" & local pid=$!
  for _ in $(seq 300); do curl -s -o /dev/null -X POST -d '{}' "http://127.0.0.1:$TAPE/ds/areq" && break; sleep 0.1; done
  python3 "$work/client.py" "$TAPE" "$reqs" "$conns" || { echo "a request failed through $bin" >&2; exit 1; }
  kill -INT "$pid"; wait "$pid" || true
  local loop=0 writer=0 f total
  for f in "$out"-*; do
    total=$(awk '/^summary:/ {print $2}' "$f")
    if grep -q 'SessionWriter.*runLoop\|runLoop.*SessionWriter' "$f"; then writer=$total
    elif grep -q '^thread: 1$\|^# thread: 1$' "$f" || [ "${f##*-}" = 01 ]; then loop=$total; fi
  done
  echo "$loop $writer"
}

printf '%-40s %14s %14s\n' binary loop_instr/exch writer_instr/exch
small=$((n / 5))
bench_per_exchange 40 14 "$n" measure "$@"
echo "($n and $small requests on $conns connection(s), callgrind; per exchange = difference / $((n - small)))"
