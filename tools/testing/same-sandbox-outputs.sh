#!/usr/bin/env bash
# Behaviour-neutral check for a change to the sandbox or the client (TapSandbox): each binary runs `sandbox` on loopback and
# `client --json` against it for every test card, app and browser, in 2.1.0, 2.2.0 and 2.3.1 (the passing answers; a wrong
# answer and a cancel for the challenges that take one; both gateways), and the outcomes are compared run by run: the JSON
# (without its timings), what the client printed besides, its exit code, and at the end the sandbox's log. Transaction IDs,
# ports and the CAVV are fresh each run, so they are scrubbed. Usage:
#   tools/testing/same-sandbox-outputs.sh BEFORE-BIN AFTER-BIN   (SAME_PORT_BASE, default 42400: the sandboxes' ports)
# Prints "N of M outputs identical"; exits 1 if any differ.
set -euo pipefail
before=$(realpath "$1") after=$(realpath "$2")
port_base=${SAME_PORT_BASE:-42400}
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

cards=(4000000000001000 4000000000001018 4000000000001026 4000000000001034 4000000000001042 4000000000001059 4000000000001067
       4000000000001075 4000000000001083 4000000000001091 4000000000001109 4000000000001117 4000000000001125 4000000000001133
       4000000000001141 4000000000001158 4000000000001166 5555555555554444)
runs=()
for v in 2.1.0 2.2.0 2.3.1; do
  for ch in app browser; do
    for c in "${cards[@]}"; do
      runs+=("--card $c --channel $ch --message-version $v --answer 1234 --select 2 --oob")
      case $c in 4000000000001067 | 4000000000001083 | 4000000000001109) runs+=("--card $c --channel $ch --message-version $v --answer 9999 --select 1") ;; esac
      case $c in 4000000000001067) runs+=("--card $c --channel $ch --message-version $v --cancel") ;; esac
    done
  done
done
for g in pxp trustpayments; do runs+=("--card 4000000000001067 --answer 1234 --gateway $g" "--card 4000000000001018 --gateway $g"); done

scrub() { # ports, UUIDs (also cut short), long hex and base64url values (CAVV, keys) of one run's output
  sed -E 's/127\.0\.0\.1:[0-9]+/HOST/g; s/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f-]*/UUID/g; s/[A-Za-z0-9_-]{24,}/LONG/g'
}

run() { # BIN DIR PORT
  local bin=$1 dir=$2 port=$3 i=0
  mkdir -p "$dir"
  export THREEDSTAPE_HOME="$dir/home"
  "$bin" sandbox certs --out "$dir/certs" > /dev/null
  "$bin" sandbox --listen "127.0.0.1:$port" --ares-delay 0.2 > "$dir/sandbox.log" 2>&1 &
  local spid=$!
  pids+=("$spid")
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
  for r in "${runs[@]}"; do
    i=$((i + 1))
    # shellcheck disable=SC2086 # the words of a run, split as written above
    timeout 60 "$bin" client --ds "http://127.0.0.1:$port" --certs "$dir/certs" --json --timeout 3s --rreq-timeout 3s $r \
      > "$dir/$i.out" 2> "$dir/$i.err" && echo 0 > "$dir/$i.rc" || echo $? > "$dir/$i.rc"
    python3 - "$dir/$i.out" <<'PY'
import json, sys
p = sys.argv[1]
try:
    data = json.load(open(p))
except ValueError:
    sys.exit(0)
data.pop("timings", None)
open(p, "w").write(json.dumps(data, indent=1, sort_keys=True))
PY
    scrub < "$dir/$i.out" > "$dir/$i.out.s"
    scrub < "$dir/$i.err" > "$dir/$i.err.s"
  done
  kill "$spid"
  wait "$spid" 2> /dev/null || true
  # the log's lines in order of arrival can interleave an RReq's answer with the next AReq: compared as a sorted list
  scrub < "$dir/sandbox.log" | sort > "$dir/sandbox.log.s"
}
run "$before" "$work/before" "$port_base"
run "$after" "$work/after" "$((port_base + 1))"
same=0 differ=0 i=0
for r in "${runs[@]}" "sandbox log"; do
  i=$((i + 1))
  if [ "$r" = "sandbox log" ]; then
    b=("$work/before/sandbox.log.s") a=("$work/after/sandbox.log.s")
  else
    b=("$work/before/$i.out.s" "$work/before/$i.err.s" "$work/before/$i.rc") a=("$work/after/$i.out.s" "$work/after/$i.err.s" "$work/after/$i.rc")
  fi
  if diff <(cat "${b[@]}") <(cat "${a[@]}") > /dev/null; then
    same=$((same + 1))
  else
    differ=$((differ + 1))
    echo "differs: $r"
    diff <(cat "${b[@]}") <(cat "${a[@]}") | head -10 || true
  fi
done
echo "$same of $((same + differ)) outputs identical"
[ "$differ" -eq 0 ]
