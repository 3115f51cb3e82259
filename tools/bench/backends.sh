#!/usr/bin/env bash
# The event loop's two backends side by side: the default build (epoll) and the POSIX-only build (-DTHREEDSTAPE_POSIX_ONLY,
# poll(2), what macOS compiles), alternated so that both see the same machine: proxy.sh (1 and 16 connections) epoll,
# poll, epoll, poll; then connections.sh (idle keep-alive connections) epoll, poll. Prints 3dstape's rows of each run and
# poll's figures as a ratio of epoll's (requests/s, p50, p99; CPU and latency at the idle connections).
# BENCH_PORT_BASE (default 18181): proxy.sh listens on it and the 3 ports after it, connections.sh on BASE+10 and BASE+11.
# Usage: [BENCH_PORT_BASE=N] tools/bench/backends.sh [SECONDS per proxy run, default 5] [CONNECTIONS, default 5000] [SECONDS of the connections run, default 30]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
secs="${1:-5}"; conns="${2:-5000}"; csecs="${3:-30}"
out="$(mktemp -d /tmp/3dstape-backends.XXXXXX)"
trap 'status=$?; [ $status -eq 0 ] && rm -rf "$out" || echo "failed ($status); the runs so far are in $out"' EXIT
for round in 1 2; do
  for b in epoll poll; do
    BACKEND=$b BENCH_PORT_BASE="${BENCH_PORT_BASE:-18181}" bash "$here/proxy.sh" "$secs" > "$out/proxy-$b-$round.txt"
    echo "== proxy.sh, $b, round $round"; grep -E '^-- (under|one)|^path|^3dstape ' "$out/proxy-$b-$round.txt"
  done
done
for b in epoll poll; do
  BACKEND=$b BENCH_PORT_BASE="$(( ${BENCH_PORT_BASE:-18181} + 10 ))" bash "$here/connections.sh" "$conns" "$csecs" > "$out/conns-$b.txt"
  echo "== connections.sh $conns $csecs, $b"; cat "$out/conns-$b.txt"
done
python3 - "$out" <<'PY'
import re, sys, glob, statistics
out = sys.argv[1]
def rows(path):  # {16: (rps, p50, p99, cpu), 1: (...)}
    res, c = {}, None
    for line in open(path):
        if line.startswith("-- under load"): c = 16
        elif line.startswith("-- one connection"): c = 1
        elif line.startswith("3dstape ") and c:
            f = line.split(); res[c] = tuple(float(x) if x != "-" else 0.0 for x in (f[1], f[2], f[3], f[5]))
    return res
print("\n== poll / epoll (mean of the rounds)")
for c in (16, 1):
    m = {}
    for b in ("epoll", "poll"):
        rs = [rows(p)[c] for p in sorted(glob.glob(f"{out}/proxy-{b}-*.txt"))]
        m[b] = [statistics.mean(r[i] for r in rs) for i in range(4)]
    e, p = m["epoll"], m["poll"]
    print(f"proxy {c:>2} conn: req/s epoll {e[0]:.0f} poll {p[0]:.0f} ({p[0]/e[0]:.2f}x); p50 ms {e[1]:.3f} / {p[1]:.3f} "
          f"({p[1]/e[1]:.2f}x); p99 ms {e[2]:.3f} / {p[2]:.3f} ({p[2]/e[2]:.2f}x); cpu% {e[3]:.0f} / {p[3]:.0f}")
def conns(b):
    t = open(f"{out}/conns-{b}.txt").read()
    cpu = float(re.search(r"CPU over the run: ([\d.]+)%", t).group(1))
    p50 = float(re.search(r"p50_ms ([\d.]+)", t).group(1)); p99 = float(re.search(r"p99_ms ([\d.]+)", t).group(1))
    rss = float(re.search(r"peak_rss_mb (\d+)", t).group(1))
    return cpu, p50, p99, rss
e, p = conns("epoll"), conns("poll")
print(f"idle connections: cpu% epoll {e[0]:.1f} poll {p[0]:.1f} ({p[0]/max(e[0], 0.1):.2f}x); p50 ms {e[1]:.2f} / {p[1]:.2f}; "
      f"p99 ms {e[2]:.2f} / {p[2]:.2f}; peak RSS MiB {e[3]:.0f} / {p[3]:.0f}")
PY
