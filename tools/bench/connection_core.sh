#!/usr/bin/env bash
# Instructions per exchange of the connection core, counted by callgrind (which the load of a shared machine does not
# move), on two fixed workloads over one keep-alive connection on loopback:
#   replay: `replay --timing none` of sessions/demo-app.3dstape answering N frictionless AReqs (transaction IDs varied);
#   record: `record --reverse` to a small Python upstream (tools/testing/upstream.py), N POSTs of a 2 KB AReq-like JSON,
#           as tools/bench/proxy.sh sends.
# Each workload runs with N and 2N requests; (I(2N) - I(N)) / N is the cost of one exchange without start-up and shutdown.
# Needs: valgrind, python3, curl. Loopback only; every process it starts is stopped by it.
# Usage: tools/bench/connection_core.sh BINARY [N, default 300] [PORT_BASE, default 18381: two ports from here]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tape="${1:?usage: connection_core.sh BINARY [N] [PORT_BASE]}"
n="${2:-300}"
base="${3:-18381}"
[ -x "$tape" ] || { echo "$tape is not an executable" >&2; exit 2; }
command -v valgrind >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null; }
work="$(mktemp -d /tmp/3dstape-core-bench.XXXXXX)"
pids=()
# KEEP_CALLGRIND=DIR keeps the callgrind files there (for callgrind_annotate).
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true
  if [ -n "${KEEP_CALLGRIND:-}" ]; then mkdir -p "$KEEP_CALLGRIND" && cp "$work"/cg.* "$KEEP_CALLGRIND"/ 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
export THREEDSTAPE_HOME="$work/home"
wait_port() { for _ in $(seq 3600); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 not up" >&2; exit 1; }

# A keep-alive client: COUNT POSTs of BODY on one connection, each answer read whole (Content-Length) before the next.
cat > "$work/client.py" <<'PY'
import json, socket, sys
port, count, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
base = json.loads(open(sys.argv[4]).read()) if kind == "replay" else None
buf = b""
for i in range(count):
    if kind == "replay":
        areq = dict(base); areq["acctNumber"] = "4000000000001000"
        areq["threeDSServerTransID"] = areq["sdkTransID"] = "%08x-0000-4000-8000-%012x" % (i, i)
        body = json.dumps(areq, separators=(",", ":")).encode()
    else:
        body = json.dumps({"messageType": "AReq", "messageVersion": "2.2.0", "threeDSServerTransID": "8a880dc0-d2d2-4067-bcb1-b08d1690b26e",
                           "acctNumber": "4000000000001091", "deviceChannel": "02", "messageCategory": "01", "padding": "a" * 1800}).encode()
    s.sendall(b"POST /ds/areq HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, buf = buf.split(b"\r\n\r\n", 1)
    status = int(head.split(b" ", 2)[1])
    length = next(int(l.split(b":", 1)[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:"))
    while len(buf) < length:
        buf += s.recv(65536)
    buf = buf[length:]
    if status != 200:
        sys.exit(f"request {i}: status {status}")
s.close()
PY

# The instructions callgrind counted: "LOOP TOTAL", the network loop's thread (the main one, where the connection core
# runs) and all threads (the session writer's batches vary with timing, so the total is noisier).
instructions() {
  local loop total=0 f c
  loop=$(awk '/^(summary|totals):/ {print $2; exit}' "$1-01")
  for f in "$1"-*; do c=$(awk '/^(summary|totals):/ {print $2; exit}' "$f"); total=$((total + c)); done
  echo "$loop $total"
}

# run KIND COUNT -> instructions of one whole run serving COUNT requests
run() {
  local kind=$1 count=$2 port=$((base)) out="$work/cg.$1.$2"
  rm -f "$work"/*.3dstape-out
  if [ "$kind" = replay ]; then
    cp "$root/sessions/demo-app.3dstape" "$work/demo.3dstape"
    sqlite3 "$work/demo.3dstape" "SELECT CAST(request_body AS TEXT) FROM exchanges WHERE id = 1" > "$work/areq.json"
    ${VALGRIND:-valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file=$out} "$tape" replay "$work/demo.3dstape" --listen "127.0.0.1:$port" --timing none \
      --session "$work/r$count.3dstape-out" --quiet 2>"$work/vg.log" & local pid=$!
  else
    ${VALGRIND:-valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file=$out} "$tape" record --reverse "http://127.0.0.1:$upport" --listen "127.0.0.1:$port" \
      --session "$work/s$count.3dstape-out" --quiet 2>"$work/vg.log" & local pid=$!
  fi
  pids+=($pid)
  wait_port "$port"
  python3 "$work/client.py" "$port" "$count" "$kind" "$work/areq.json"
  kill -INT "$pid"; wait "$pid" || true
  [ -n "${VALGRIND:-}" ] || instructions "$out"
}

mkfifo "$work/up.stdin"
python3 "$root/tools/testing/upstream.py" <"$work/up.stdin" >"$work/up.txt" 2>&1 & pids+=($!)
exec {up_stdin}>"$work/up.stdin"
for _ in $(seq 100); do grep -q listening "$work/up.txt" 2>/dev/null && break; sleep 0.05; done
upport=$(awk '/listening/ {print $2}' "$work/up.txt")

# A first replay, not measured, makes the per-user directory's keys (seconds of RSA key generation), which no measured
# run must pay.
VALGRIND=env run replay 2 >/dev/null
for kind in ${KINDS:-replay record}; do
  read -r loop1 all1 <<<"$(run "$kind" "$n")"; read -r loop2 all2 <<<"$(run "$kind" $((2 * n)))"
  python3 -c "print(f'$kind: {($loop2 - $loop1) / $n:,.0f} instructions per exchange on the network loop, {($all2 - $all1) / $n:,.0f} in all threads (runs of $n and $((2 * n)) requests)')"
done
