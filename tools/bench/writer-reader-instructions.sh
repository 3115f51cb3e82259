#!/usr/bin/env bash
# Instructions per exchange of the session writer and the session reader, counted by callgrind, which the load of a
# shared machine does not move (unlike wall-clock or CPU time). Writer: `TapBench writer` storing N exchanges shaped as
# tools/bench/writer.sh's (2 KB AReq-like request, 3 KB ARes-like response: masking, 3DS extraction, SQLite). Reader:
# `3dstape export FILE --format har` reading that file back (every exchange, its timeline and its messages). Each runs
# twice (N/5 and N exchanges): the difference divided by 4N/5 is the cost of one exchange, without start-up and shutdown.
# Needs: valgrind. No network.
# N (default 2000) exchanges. Usage: tools/bench/writer-reader-instructions.sh BIN_DIR [BIN_DIR...]
#   (each BIN_DIR a release build's bin path holding TapBench and 3dstape, e.g. of two commits)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
[ $# -ge 1 ] || { echo "usage: $0 BIN_DIR [BIN_DIR...]" >&2; exit 2; }
for d in "$@"; do
  for b in TapBench 3dstape; do [ -x "$d/$b" ] || { echo "$d/$b is not an executable" >&2; exit 2; }; done
done
n="${N:-2000}"
case "$n" in ''|*[!0-9]*) echo "N must be a whole number" >&2; exit 2;; esac
[ "$n" -ge 50 ] && [ "$n" -le 1000000 ] || { echo "N must be from 50 to 1000000" >&2; exit 2; }
work="$(mktemp -d /tmp/3dstape-wrcost.XXXXXX)"
trap 'rm -rf "$work"' EXIT

instructions() { # command... -> the instructions callgrind counted, all threads
  local out="$work/cg.$RANDOM"
  valgrind --tool=callgrind --callgrind-out-file="$out" "$@" >/dev/null 2>"$work/valgrind.log" \
    || { echo "failed under valgrind: $* (see below)" >&2; tail -5 "$work/valgrind.log" >&2; exit 1; }
  awk '/^summary:/ {s += $2} /^totals:/ {t += $2} END {print (s ? s : t)}' "$out"
  rm -f "$out"
}

measure() { # bin_dir count -> "writer reader" instructions
  local dir=$1 count=$2 tape="$work/s.3dstape"
  rm -f "$work"/s.3dstape*
  local w r
  w=$(instructions "$dir/TapBench" writer "$tape" "$count")
  r=$(instructions "$dir/3dstape" export "$tape" --format har)
  echo "$w $r"
}

printf '%-50s %16s %16s\n' binaries writer_instr/exch reader_instr/exch
small=$((n / 5))
bench_per_exchange 50 16 "$n" measure "$@"
echo "($n and $small exchanges, callgrind; per exchange = difference / $((n - small)))"
