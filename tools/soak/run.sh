#!/usr/bin/env bash
# A bounded soak: for MINUTES (default 1), the sandbox, the recorder and the replayer run side by side while mixed
# traffic goes through them: 3DS flows from the sandbox client (app and browser, frictionless and challenged) through
# the recorder and through the replayer, plain HTTP through the recorder, malformed requests, and clients that abort.
# RSS and open file descriptors of the three processes are sampled every 10 s and printed. Fails if any flow fails,
# a malformed request is not refused, or a process's RSS grows more than 10% after warm-up.
# Usage: tools/soak/run.sh [MINUTES] [PATH-TO-3dstape]   (default .build/release/3dstape)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
minutes=${1:-1}
bin=${2:-$root/.build/release/3dstape}
[ -x "$bin" ] || { echo "no $bin: build first (swift build -c release)"; exit 1; }
exec python3 "$root/tools/soak/soak.py" "$bin" "$minutes" "$root"
