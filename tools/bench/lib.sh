# Sourced by the benchmark scripts (proxy.sh, replay.sh, client-replay.sh, connections.sh, writer.sh): what each of
# them did in its own copy.

# bench_work PREFIX: a fresh temporary folder in $work (/tmp/PREFIX.XXXXXX) and an empty $pids; on exit every process
# in $pids is stopped and the folder removed.
bench_work() {
  work="$(mktemp -d "/tmp/$1.XXXXXX")"
  pids=()
  trap bench_cleanup EXIT
}
bench_cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }

# bench_binary ROOT PRODUCT [swift build options, default -c release]: the binary to measure, in $bench_bin.
# THREEDSTAPE_BENCH_BIN=PATH measures that binary instead of building ROOT's PRODUCT (to alternate two builds); it is
# refused (exit 2) when it is not an executable.
bench_binary() {
  local root="$1" product="$2"; shift 2
  local opts=("$@"); [ ${#opts[@]} -gt 0 ] || opts=(-c release)
  if [ -n "${THREEDSTAPE_BENCH_BIN:-}" ]; then
    bench_bin="$THREEDSTAPE_BENCH_BIN"
    [ -x "$bench_bin" ] || { echo "THREEDSTAPE_BENCH_BIN=$bench_bin is not an executable" >&2; exit 2; }
  else
    (cd "$root" && swift build "${opts[@]}" --product "$product" >/dev/null)
    bench_bin="$(cd "$root" && swift build "${opts[@]}" --show-bin-path)/$product"
  fi
}

# bench_per_exchange WIDTH COLUMN_WIDTH N MEASURE ARG...: for each ARG, runs `MEASURE ARG N/5` and `MEASURE ARG N` (each
# prints its counts, whole numbers, on one line) and prints a row: ARG (its last WIDTH characters), then each count's
# difference divided by 4N/5, the cost of one exchange without start-up and shutdown.
bench_per_exchange() {
  local width=$1 column=$2 n=$3 measure=$4; shift 4
  local small=$((n / 5)) arg first second
  for arg in "$@"; do
    first=$("$measure" "$arg" "$small")
    second=$("$measure" "$arg" "$n")
    python3 - "$width" "$column" "$((n - small))" "$arg" "$first" "$second" <<'PY'
import sys
width, column, d, arg = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
print(f"{arg[-width:]:<{width}}" + "".join(f" {(int(b) - int(a)) / d:{column},.0f}" for a, b in zip(sys.argv[5].split(), sys.argv[6].split())))
PY
  done
}
