#!/usr/bin/env bash
# Interchange with mitmproxy (from PyPI, in tools/interchange/.venv):
#  1. `3dstape export --format har` of each sample session is read by `mitmdump -nr FILE.har`; every exchange comes
#     back with the method, URL, status and request size that sqlite3 reads from the session file itself;
#  2. mitmproxy writes the flows it read as its own HAR (hardump); `3dstape import` turns that into a session, and
#     `3dstape diff` finds no difference in the 3DS messages against the original.
# Usage: tools/interchange/check.sh [PATH-TO-3dstape]   (default .build/release/3dstape)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/tools/interchange"
bin=${1:-$root/.build/release/3dstape}
if [ ! -x "$here/.venv/bin/mitmdump" ]; then
  python3 -m venv "$here/.venv" && "$here/.venv/bin/pip" install -q --disable-pip-version-check mitmproxy
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for name in demo-app demo-browser; do
  cp "$root/sessions/$name.3dstape" "$work/$name.3dstape"
  "$bin" export "$work/$name.3dstape" --format har --out "$work/$name.har" 2>/dev/null
  HAR_FLOWS_OUT="$work/$name.flows" "$here/.venv/bin/mitmdump" -q -nr "$work/$name.har" -s "$here/har_flows.py" \
    --set hardump="$work/$name-mitm.har" >/dev/null
  sqlite3 -json "$work/$name.3dstape" \
    "SELECT method, url, status, length(request_body) AS request_bytes FROM exchanges WHERE request_body_compressed = 0 ORDER BY t_request_start, id" \
    > "$work/$name.sqlite.json"
  python3 - "$work/$name.flows" "$work/$name.sqlite.json" "$name" <<'PY'
import json, sys
flows = [json.loads(l) for l in open(sys.argv[1])]
rows = json.load(open(sys.argv[2]))
assert len(flows) == len(rows), f"{sys.argv[3]}: mitmproxy read {len(flows)} flows, the session has {len(rows)} exchanges"
for f, r in zip(flows, rows):
    for k in ("method", "url", "status", "request_bytes"):
        assert f[k] == r[k], f"{sys.argv[3]}: {k} {f[k]!r} != {r[k]!r} ({r['url']})"
print(f"{sys.argv[3]}: mitmdump read all {len(flows)} exchanges of the HAR export (method, URL, status, request size as sqlite3 reads them)")
PY
  "$bin" import "$work/$name-mitm.har" --session "$work/$name-from-mitm.3dstape" >/dev/null
  "$bin" diff "$work/$name.3dstape" "$work/$name-from-mitm.3dstape" --timing-tolerance off | tail -1
done
echo "interchange: ok"
