#!/usr/bin/env bash
# `3dstape client-replay` end to end with the release binary, on loopback: the app demo session (sessions/demo-app.3dstape,
# recorded on another machine, so its deviceData does not open and a minimal one is sent) re-sent to `3dstape replay
# --timing none` of itself, 3 passes with 4 transactions at once and fresh IDs and keys each time: every transaction
# answered as recorded (exit 0), the --json lines parse, and `diff` reads the live session against the recording.
# Then the same session against the sandbox with --bad-signature: every app challenge differs (exit 1).
# The gateway demos (PXP and Trust Payments calls re-sent in their places, the TP JWTs signed again with --jwt-secret;
# a wrong secret: exit 1). A session recorded from an outside client (the Locust app user's SDK code, Python, through
# `record --decrypt substitute` to a sandbox) client-replayed to a fresh sandbox with other keys: outcomes as recorded.
# Usage: tools/client-replay/check.sh [PATH-TO-3dstape]   (default .build/release/3dstape)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$root/.build/release/3dstape}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
export THREEDSTAPE_HOME="$work/home"
cp "$root/sessions/demo-app.3dstape" "$work/demo-app.3dstape"
"$bin" ca export --ds "$work/replay-certs" >/dev/null
"$bin" sandbox certs --out "$work/sandbox-certs" >/dev/null
cards=(); for c in 1000 1018 1026 1034 1042 1059 1067 1075 1083 1091 1109 1117 1125 1133 1166; do cards+=(--card "400000000000$c"); done

# The port a server printed on stderr ("... on http://127.0.0.1:PORT").
port_of() {
  for _ in $(seq 100); do
    p=$(sed -n 's/.* on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$1" | head -1)
    [ -n "$p" ] && { echo "$p"; return 0; }; sleep 0.1
  done
  echo "no port in $1" >&2; cat "$1" >&2; return 1
}

"$bin" replay "$work/demo-app.3dstape" --listen 127.0.0.1:0 --timing none --quiet --session "$work/replay.3dstape" 2>"$work/replay.log" &
pids+=($!)
rport=$(port_of "$work/replay.log")
status=0
"$bin" client-replay "$work/demo-app.3dstape" --certs "$work/replay-certs" --target "http://127.0.0.1:$rport" "${cards[@]}" --secret 1234 \
  --concurrency 4 --repeat 3 --json --session "$work/live.3dstape" >"$work/live.jsonl" 2>"$work/live.err" || status=$?
[ "$status" -eq 0 ] || { tail -20 "$work/live.jsonl" "$work/live.err"; echo "client-replay against replay: exit $status, expected 0"; exit 1; }
python3 - "$work/live.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
tx, summary = lines[:-1], lines[-1]["summary"]
assert len(tx) == 48 and all(t["match"] for t in tx), [t for t in tx if not t["match"]][:3]
assert sorted({t["pass"] for t in tx}) == [0, 1, 2] and summary["matched"] == 48 and summary["differed"] == 0, summary
print(f"client-replay: 48 of 48 transactions (16 x 3 passes) answered as recorded by the replay in {summary['seconds']} s")
PY
# The live run is a session the inspection commands read: 48 transactions, outcomes three times the recording's.
"$bin" ls "$work" --json >"$work/ls.json"
python3 - "$work/ls.json" <<'PY'
import json, re, sys
s = {e["file"].rsplit("/", 1)[-1]: e for e in json.load(open(sys.argv[1]))}
rec, live = s["demo-app.3dstape"], s["live.3dstape"]
assert live["transactions"] == 3 * rec["transactions"] == 48, (rec, live)
count = lambda o: {k: int(n) for k, n in re.findall(r"(\S+(?: \d+)?)\u00d7(\d+)", o)}
assert {k: 3 * v for k, v in count(rec["outcome"]).items()} == count(live["outcome"]), (rec["outcome"], live["outcome"])
print(f"client-replay: ls reads the live session: {live['transactions']} transactions, {live['outcome']}")
PY

"$bin" sandbox --listen 127.0.0.1:0 --bad-signature --quiet 2>"$work/sandbox.log" &
pids+=($!)
sport=$(port_of "$work/sandbox.log")
status=0
"$bin" client-replay "$work/demo-app.3dstape" --certs "$work/sandbox-certs" --target "http://127.0.0.1:$sport" "${cards[@]}" --secret 1234 \
  --json --session "$work/bad.3dstape" >"$work/bad.jsonl" 2>"$work/bad.err" || status=$?
[ "$status" -eq 1 ] || { tail -20 "$work/bad.jsonl" "$work/bad.err"; echo "client-replay against --bad-signature: exit $status, expected 1"; exit 1; }
python3 - "$work/bad.jsonl" <<'PY'
import json, sys
tx = [json.loads(l) for l in open(sys.argv[1])][:-1]
bad = [t for t in tx if not t["match"]]
# The eight app challenges (cards 1067 twice, 1075, 1083, 1091, 1109, 1117, 1125); frictionless, decoupled and Erro match.
assert len(bad) == 8 and all("acsSignedContent rejected" in (t["failure"] or "") for t in bad), bad[:3]
print(f"client-replay: against --bad-signature {len(bad)} of {len(tx)} transactions differ, each for acsSignedContent")
PY

# The gateway demos against the same sandbox's keys (a sandbox without --bad-signature): as recorded, without --card (their
# masked card numbers, in the AReq and in the gateway calls, are 3dstape's test cards); a wrong JWT secret differs.
"$bin" sandbox --listen 127.0.0.1:0 --quiet 2>"$work/sandbox-gw.log" &
pids+=($!)
gport=$(port_of "$work/sandbox-gw.log")
for gw in pxp trustpayments; do
  "$bin" client-replay "$root/sessions/demo-$gw.3dstape" --certs "$work/sandbox-certs" --target "http://127.0.0.1:$gport" \
    --secret 1234 --jwt-secret 3dstape-sandbox-gateway-secret --quiet --session "$work/gw-$gw.3dstape" >"$work/gw-$gw.out" 2>&1 \
    || { cat "$work/gw-$gw.out"; echo "client-replay of demo-$gw: expected exit 0"; exit 1; }
  tail -1 "$work/gw-$gw.out"
done
status=0
"$bin" client-replay "$root/sessions/demo-trustpayments.3dstape" --certs "$work/sandbox-certs" --target "http://127.0.0.1:$gport" "${cards[@]}" \
  --secret 1234 --jwt-secret wrong --quiet --session "$work/gw-wrong.3dstape" >"$work/gw-wrong.out" 2>&1 || status=$?
[ "$status" -eq 1 ] && grep -q "POST /tp/jwt/ .*errorcode: 0 → 30006" "$work/gw-wrong.out" \
  || { cat "$work/gw-wrong.out"; echo "client-replay with a wrong --jwt-secret: exit $status, expected 1 with the TP calls differing"; exit 1; }
echo "client-replay: with a wrong --jwt-secret the Trust Payments calls differ (Invalid JWT), exit 1"

# An outside client through record --decrypt substitute, then client-replayed to a fresh sandbox (its own home: other
# CA and ACS keys, an EC DS key and ES256).
py="$root/tools/load/.venv/bin/python"
"$py" -c "import cryptography, jwcrypto" 2>/dev/null || py="$root/tools/client-replay/.venv/bin/python"
if ! "$py" -c "import cryptography, jwcrypto" 2>/dev/null; then
  python3 -m venv "$root/tools/client-replay/.venv" && "$root/tools/client-replay/.venv/bin/pip" install -q --disable-pip-version-check cryptography jwcrypto
fi
"$bin" ca export --ds "$work/identity" >/dev/null
"$bin" sandbox --listen 127.0.0.1:0 --quiet 2>"$work/sandbox-rec.log" &
pids+=($!)
recport=$(port_of "$work/sandbox-rec.log")
"$bin" record --listen 127.0.0.1:0 --session "$work/outside.3dstape" --no-mask --decrypt substitute \
  --ds-cert "$work/sandbox-certs/ds-cert.pem" --ds-root "$work/sandbox-certs/ds-root.pem" 2>"$work/record.log" >/dev/null &
recpid=$!
pids+=($recpid)
pport=$(port_of "$work/record.log")
"$py" "$root/tools/client-replay/outside_client.py" "$work/demo-app.3dstape" "http://127.0.0.1:$recport" "$work/identity" \
  "http://127.0.0.1:$pport" >"$work/outside.out" || { cat "$work/outside.out"; echo "the outside client failed"; exit 1; }
kill -INT "$recpid"; wait "$recpid" 2>/dev/null || true
THREEDSTAPE_HOME="$work/home2" "$bin" sandbox certs --out "$work/fresh-certs" --ds-key ec >/dev/null
THREEDSTAPE_HOME="$work/home2" "$bin" sandbox --listen 127.0.0.1:0 --ds-key ec --sign ES256 --quiet 2>"$work/sandbox-fresh.log" &
pids+=($!)
fport=$(port_of "$work/sandbox-fresh.log")
status=0
"$bin" client-replay "$work/outside.3dstape" --certs "$work/fresh-certs" --target "http://127.0.0.1:$fport" --json \
  --session "$work/outside-live.3dstape" >"$work/outside.jsonl" 2>"$work/outside.err" || status=$?
[ "$status" -eq 0 ] || { tail -20 "$work/outside.jsonl" "$work/outside.err"; echo "client-replay of the outside client's session: exit $status, expected 0"; exit 1; }
python3 - "$work/outside.out" "$work/outside.jsonl" <<'PY'
import json, sys
recorded = [l.split()[1:] for l in open(sys.argv[1])]
lines = [json.loads(l) for l in open(sys.argv[2])]
tx = lines[:-1]
assert len(tx) == len(recorded) == 16 and all(t["match"] for t in tx), [t for t in tx if not t["match"]][:3]
# The recorded deviceData opened (the client encrypted it to 3dstape's substitution DS): no minimal one was sent.
assert not any("minimal" in n for t in tx for n in t["notes"]), [t["notes"] for t in tx][:3]
print(f"client-replay: the outside client's {len(tx)} app flows (recorded through record --decrypt substitute) answered as recorded "
      f"by a fresh EC/ES256 sandbox: {' '.join(t['live'] for t in tx)}")
PY
echo "client-replay: ok"
