#!/usr/bin/env bash
# `3dstape check` end to end with JUnit output, read by a JUnit library from PyPI (junitparser, in tools/check/.venv), as a
# CI system would read it: the demo app session's scenarios against `3dstape client` (every one passes), then against
# the same client told to misbehave (it never sends an Erro and takes a CRes with a wrong counter): exactly
# cres-counter-mismatch, cres-undecryptable and challenge-timeout fail. The gateway scenarios are skipped on this session.
# Usage: tools/check/check.sh [PATH-TO-3dstape]   (default .build/release/3dstape)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/tools/check"
bin=${1:-$root/.build/release/3dstape}
if [ ! -x "$here/.venv/bin/python" ] || ! "$here/.venv/bin/python" -c "import junitparser" 2>/dev/null; then
  python3 -m venv "$here/.venv" && "$here/.venv/bin/pip" install -q --disable-pip-version-check junitparser
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export THREEDSTAPE_HOME="$work/home"
"$bin" ca export --ds "$work/certs" >/dev/null
cp "$root/sessions/demo-app.3dstape" "$work/demo-app.3dstape"
client=("$bin" client --ds '{url}' --card 4000000000001067 --answer 1234 --certs "$work/certs" --cres-timeout 4 --ares-timeout 2 --rreq-timeout 9)

# The two runs at once (each replay listens on a free port; the runs mostly wait on the client's timeouts).
"$bin" check "$work/demo-app.3dstape" --junit "$work/conformant.xml" --report "$work/conformant" -- "${client[@]}" \
  > "$work/conformant.out" 2>&1 &
conformant=$!
"$bin" check "$work/demo-app.3dstape" --junit "$work/misbehaving.xml" --report "$work/misbehaving" -- "${client[@]}" \
  --misbehave no-erro,ignore-cres-errors > "$work/misbehaving.out" 2>&1 &
misbehaving=$!
status=0; wait "$conformant" || status=$?
[ "$status" -eq 0 ] || { tail -30 "$work/conformant.out"; echo "check: the conformant client did not pass (exit $status)"; exit 1; }
status=0; wait "$misbehaving" || status=$?
[ "$status" -eq 1 ] || { tail -30 "$work/misbehaving.out"; echo "check: the misbehaving client: exit $status, expected 1"; exit 1; }
for run in conformant misbehaving; do # exit 1 from an error before any verdict leaves no JUnit file: show why
  [ -s "$work/$run.xml" ] || { tail -30 "$work/$run.out"; echo "check: the $run run wrote no JUnit file"; exit 1; }
done

"$here/.venv/bin/python" - "$work/conformant.xml" "$work/misbehaving.xml" <<'PY'
import sys
from junitparser import JUnitXml, TestSuite, Failure, Skipped

def cases(path):
    xml = JUnitXml.fromfile(path)
    suites = [xml] if isinstance(xml, TestSuite) else list(xml)
    assert [s.name for s in suites] == ["3dstape check"], [s.name for s in suites]
    out = {}
    for case in suites[0]:
        kinds = {type(r) for r in case.result}
        out[case.name] = "fail" if Failure in kinds else "skip" if Skipped in kinds else "pass"
    return suites[0], out

# 27 scenarios apply to the app session; the 20 gateway scenarios (pxp-*, tp-*) need a gateway session and are skipped.
suite, conformant = cases(sys.argv[1])
assert len(conformant) == suite.tests == 47 and suite.failures == 0, (suite.tests, suite.failures, conformant)
assert sum(v == "pass" for v in conformant.values()) == 27, conformant
skipped = sorted(n for n, v in conformant.items() if v == "skip")
assert len(skipped) == 20 and all(n.startswith(("pxp-", "tp-")) for n in skipped), skipped
suite, misbehaving = cases(sys.argv[2])
failed = sorted(n for n, v in misbehaving.items() if v == "fail")
assert failed == ["challenge-timeout", "cres-counter-mismatch", "cres-undecryptable"], failed
assert suite.failures == 3 and len(misbehaving) == 47, (suite.failures, len(misbehaving))
print(f"check: junitparser read both JUnit files: conformant client 27/27 applicable passed, 20 gateway scenarios skipped; "
      f"misbehaving client failed {', '.join(failed)}")
PY
echo "check: ok"
