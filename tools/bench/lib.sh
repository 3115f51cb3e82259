# Sourced by the benchmark scripts (proxy.sh, replay.sh, replay-timing-instructions.sh, replay-flow-instructions.sh, loop-instructions.sh,
# writer-reader-instructions.sh, client-replay.sh, connections.sh, writer.sh): what each of
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

# bench_wait_port PORT: waits up to 3 minutes for something to listen on 127.0.0.1:PORT (valgrind starts slowly), else
# says so and exits 1.
bench_wait_port() {
  for _ in $(seq 1800); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
  echo "port $1 not up"; exit 1
}

# bench_record_one TAPE REC_PORT SESSION: records one exchange (POST /bench {"i":0}, answered by tools/testing/upstream.py)
# through `TAPE record --reverse` listening on REC_PORT into SESSION, the session the replay benchmarks replay. ROOT
# is taken from $root. The upstream exits when its stdin closes: a FIFO held open here (/dev/zero once made it read
# zeros on one of the two cores, and fill gigabytes, through a whole run); it is stopped once the exchange is recorded.
bench_record_one() {
  local tape="$1" port="$2" session="$3" up upport="" rec
  mkfifo "$work/up.stdin"
  python3 "$root/tools/testing/upstream.py" <"$work/up.stdin" >"$work/up.txt" 2>&1 & up=$!; pids+=($up)
  exec {bench_up_stdin}>"$work/up.stdin"
  # Its port once it says so (a fixed half-second sleep was too short while other builds loaded the machine).
  for _ in $(seq 200); do upport=$(awk '/listening/ {print $2}' "$work/up.txt"); [ -n "$upport" ] && break; sleep 0.05; done
  [ -n "$upport" ] || { echo "the upstream did not start: $(cat "$work/up.txt")"; exit 1; }
  "$tape" record --reverse "http://127.0.0.1:$upport" --listen "127.0.0.1:$port" --session "$session" --quiet 2>/dev/null & rec=$!
  bench_wait_port "$port"
  curl -s -o /dev/null -X POST -H 'Content-Type: application/json' -d '{"i":0}' "http://127.0.0.1:$port/bench"
  kill -INT $rec; wait $rec || true
  kill $up 2>/dev/null || true
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
