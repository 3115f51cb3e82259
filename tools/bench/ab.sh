#!/usr/bin/env bash
# A/B of two 3dstape binaries on one benchmark script, alternated (before, after, before, after …) so that the shared
# machine's drift falls on both: each round's full output goes to OUT/<script>-<a|b>-<round>.txt and is printed.
# Usage: [ROUNDS=2] [BENCH_PORT_BASE=N] tools/bench/ab.sh BEFORE_BIN AFTER_BIN OUT SCRIPT [SCRIPT ARGS…]
#   e.g. tools/bench/ab.sh /tmp/before/3dstape .build/release/3dstape /tmp/ab proxy.sh 5
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ $# -ge 4 ] || { sed -n 2,5p "$0" >&2; exit 2; }
before="$1"; after="$2"; out="$3"; script="$4"; shift 4
for b in "$before" "$after"; do [ -x "$b" ] || { echo "$b is not an executable" >&2; exit 2; }; done
[ -f "$here/$script" ] || { echo "no benchmark $here/$script" >&2; exit 2; }
mkdir -p "$out"
for round in $(seq "${ROUNDS:-2}"); do
  for side in a b; do
    bin=$before; [ $side = b ] && bin=$after
    echo "=== $script round $round: $([ $side = a ] && echo before || echo after) ($bin)"
    THREEDSTAPE_BENCH_BIN="$bin" bash "$here/$script" "$@" | tee "$out/${script%.sh}-$side-$round.txt"
  done
done
