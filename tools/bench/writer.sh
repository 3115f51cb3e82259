#!/usr/bin/env bash
# The session writer alone, beside Python's sqlite3 storing the same rows (issue 10: where the recorder's time goes).
# 3dstape: TapBench writes COUNT exchanges shaped as tools/bench/proxy.sh's (2 KB AReq-like request, 3 KB ARes-like
# response) through SessionWriter: masking, 3DS extraction and SQLite, on the writer's thread. The peer: Python's
# sqlite3 inserting the rows 3dstape stored (exchange + message rows), with the same settings, without masking or
# 3DS extraction. Each prints its process CPU per exchange; three alternated rounds, medians, and the ratio.
# THREEDSTAPE_BENCH_BIN=PATH measures that TapBench binary instead of building this tree's (to alternate two builds).
# Needs: python3 (standard library). Usage: tools/bench/writer.sh [COUNT, default 30000]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
count="${1:-30000}"
work="$(mktemp -d /tmp/3dstape-writer.XXXXXX)"
trap 'rm -rf "$work"' EXIT
. "$here/lib.sh"
bench_binary "$root" TapBench; bench="$bench_bin"

ours=(); peer=()
for round in 1 2 3; do
  rm -f "$work"/tape.3dstape*
  ours+=("$("$bench" writer "$work/tape.3dstape" "$count" | awk '{print $4}')")
  peer+=("$(python3 "$here/writer_peer.py" "$work/tape.3dstape" "$work/peer.db" "$count" | awk '{print $4}')")
done
rows=$(sqlite3 "$work/tape.3dstape" "SELECT (SELECT count(*) FROM exchanges) || ' exchanges, ' || (SELECT count(*) FROM messages) || ' message rows'" 2>/dev/null || echo "?")
python3 - "${ours[*]}" "${peer[*]}" "$count" "$rows" <<'PY'
import statistics, sys
ours = [float(x) for x in sys.argv[1].split()]; peer = [float(x) for x in sys.argv[2].split()]
print(f"session writer alone: {sys.argv[3]} exchanges per round ({sys.argv[4]} in the last file), three alternated rounds")
print(f"   3dstape SessionWriter (mask, extract, store)  {statistics.median(ours):7.2f} us CPU per exchange  (rounds {' '.join(f'{x:.2f}' for x in ours)})")
print(f"   Python sqlite3, the same rows (store only)    {statistics.median(peer):7.2f} us CPU per exchange  (rounds {' '.join(f'{x:.2f}' for x in peer)})")
print(f"   ratio {statistics.median(ours) / statistics.median(peer):.2f}x the peer")
PY
