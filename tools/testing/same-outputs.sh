#!/usr/bin/env bash
# Behaviour-neutral check for a restructuring: runs the same read-only commands with two 3dstape binaries over the
# committed sessions and compares what each printed (standard output, standard error and exit code, byte for byte).
# Covered: `scenarios` (text and JSON), `replay --help`, `check --help`, `check SESSION -- false` over the demo sessions
# (its per-scenario verdicts and skips), `validate --rules`; and over every sessions/*.3dstape `ls`, `show` (text, JSON,
# each exchange), `export --format json|har|mermaid`, `validate` (text, JSON), `diff` of each pair.
# Usage: tools/testing/same-outputs.sh BEFORE-BIN AFTER-BIN   Prints "N of M outputs identical"; exits 1 if any differ.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
before=$(realpath "$1") after=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export THREEDSTAPE_HOME="$work/home"

commands=()
add() { commands+=("$*"); }
add scenarios
add scenarios --json
add replay --help
add check --help
add ls "$root/sessions"
add ls "$root/sessions" --json
sessions=("$root"/sessions/*.3dstape)
for s in "${sessions[@]}"; do
  add show "$s"
  add show "$s" --json
  # every exchange in full (headers, bodies, messages, replay notes)
  n=$(sqlite3 "$s" 'SELECT count(*) FROM exchanges' 2>/dev/null || echo 0)
  for ((i = 1; i <= n; i++)); do add show "$s" --exchange "$i"; done
  for f in json har mermaid; do add export "$s" --format "$f"; done
  add validate "$s"
  add validate "$s" --json
  for t in "${sessions[@]}"; do [ "$s" = "$t" ] || add diff "$s" "$t"; done
done
for s in "$root"/sessions/demo-*.3dstape; do add check "$s" --json -- false; done

run() { # BIN DIR: one file per command
  local bin=$1 dir=$2 i=0
  mkdir -p "$dir"
  for c in "${commands[@]}"; do
    i=$((i + 1))
    # shellcheck disable=SC2086 # the words of a command, split as written above (no path holds a space)
    ( mkdir -p "$dir.cwd" && cd "$dir.cwd" && "$bin" $c ) > "$dir/$i.out" 2> "$dir/$i.err" && echo 0 > "$dir/$i.rc" || echo $? > "$dir/$i.rc"
    # check's report carries wall-clock figures (run times, the replayer's delays) and dated folders: the verdicts are compared
    if [[ $c == check\ *--json* ]]; then
      python3 - "$dir/$i.out" <<'PY'
import json, re, sys
p = sys.argv[1]
text = open(p).read()
try:
    data = json.loads(text)
except ValueError:
    sys.exit(0)
def scrub(v):
    if isinstance(v, dict):
        return {k: scrub(x) for k, x in v.items() if not re.search(r"(?i)(ms|seconds|duration|elapsed|time|at)$", k)}
    if isinstance(v, list):
        return [scrub(x) for x in v]
    if isinstance(v, str):
        return re.sub(r"check-\d{8}-\d{6}", "check-<t>", re.sub(r"\d+(\.\d+)? ?(ms|s)\b", "<t>", v))
    return v
open(p, "w").write(json.dumps(scrub(data), indent=1, sort_keys=True))
PY
    fi
  done
}
run "$before" "$work/before"
run "$after" "$work/after"
same=0 differ=0 i=0
for c in "${commands[@]}"; do
  i=$((i + 1))
  if cmp -s "$work/before/$i.out" "$work/after/$i.out" && cmp -s "$work/before/$i.err" "$work/after/$i.err" \
     && cmp -s "$work/before/$i.rc" "$work/after/$i.rc"; then
    same=$((same + 1))
  else
    differ=$((differ + 1))
    echo "differs: 3dstape ${c//$root\//}"
    diff <(cat "$work/before/$i.out" "$work/before/$i.err" "$work/before/$i.rc") \
         <(cat "$work/after/$i.out" "$work/after/$i.err" "$work/after/$i.rc") | head -10 || true
  fi
done
echo "$same of ${#commands[@]} outputs identical"
[ "$differ" -eq 0 ]
