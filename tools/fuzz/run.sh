#!/usr/bin/env bash
# Fuzzes 3dstape's parsers with libFuzzer (the toolchain's -sanitize=fuzzer, with AddressSanitizer): the HTTP request
# and response parsers, JSON, JOSE compact parsing, decode's detection, form bodies, masking/3DS extraction, the
# session reader on corrupted session files, the HTTP server driver end to end with the replayer's handler
# (http-server: pipelined, slow, half-closed and unread input over a socketpair), and option values (durations, sizes,
# timing, jitter and fault rules).
# Seeds come from the repository's sessions, JOSE vectors and samples. Each target runs SECONDS (default 10);
# a crash fails the run and leaves its input in tools/fuzz/out/crash-* (make it a regression test).
# Usage: tools/fuzz/run.sh [SECONDS per target] [TARGET...]
#   env FUZZ_RUNS=N stops each target after N executions; FUZZ_OUT=DIR keeps corpora and logs there (two runs side by side).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
secs="${1:-10}"; shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(http-request http-response json jose decode form masking session http-server options client-hello)
out="${FUZZ_OUT:-$here/out}"; corpus="$out/corpus"
mkdir -p "$out"
# FUZZ_SANITIZE=fuzzer builds without AddressSanitizer (several times the executions per second, for long runs of
# the pure-Swift parsers); the default keeps it.
sanitize="${FUZZ_SANITIZE:-fuzzer,address}"
build=".build-fuzz"; [ "$sanitize" = "fuzzer,address" ] || build=".build-fuzz-${sanitize//,/-}"
(cd "$root" && swift build --product TapFuzz -Xswiftc -sanitize="$sanitize" -Xswiftc -DFUZZING -Xswiftc -use-ld=lld \
   --build-path "$build" 2>&1 | grep -E "error|Build of product" || true)
fuzz="$root/$build/debug/TapFuzz"
[ -x "$fuzz" ] || { echo "the fuzz build failed"; exit 1; }

# Seed corpora, made fresh each run from what the repository holds.
python3 - "$root" "$corpus" <<'PY'
import json, os, sqlite3, sys
root, corpus = sys.argv[1], sys.argv[2]
def put(target, name, data):
    d = os.path.join(corpus, target); os.makedirs(d, exist_ok=True)
    open(os.path.join(d, name), "wb").write(data if isinstance(data, bytes) else data.encode())
n = 0
for f in sorted(os.listdir(os.path.join(root, "sessions"))):
    if not f.endswith(".3dstape"): continue
    db = sqlite3.connect(f"file:{os.path.join(root, 'sessions', f)}?mode=ro", uri=True)
    for method, url, rh, rb, sh, sb, status in db.execute(
            "SELECT method, path, request_headers, request_body, response_headers, response_body, status FROM exchanges "
            "WHERE request_body_compressed = 0 AND response_body_compressed = 0 LIMIT 40"):
        rb, sb = rb or b"", sb or b""
        head = f"{method} {url or '/'} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in json.loads(rh or "[]")) + "\r\n"
        put("http-request", f"s{n}", head.encode() + rb)
        rhead = f"HTTP/1.1 {status or 200} OK\r\n" + "".join(f"{k}: {v}\r\n" for k, v in json.loads(sh or "[]")) + "\r\n"
        put("http-response", f"s{n}", rhead.encode() + sb)
        for body in (rb, sb):
            if body[:1] == b"{": put("json", f"s{n}-{len(body)}", body); put("masking", f"s{n}-{len(body)}", body)
            elif body.count(b".") in (2, 4): put("jose", f"s{n}-{len(body)}", body)
            elif b"=" in body: put("form", f"s{n}-{len(body)}", body)
            put("decode", f"s{n}-{len(body)}", body)
        n += 1
put("http-request", "chunked", b"POST /t HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n0\r\nT: 1\r\n\r\n")
put("http-response", "chunked", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
# http-server: a first byte (bit 0 the client reads as it goes, bit 1 it half-closes, the rest the piece size), then
# what the client sends: pipelined misses, answers from a timer (/chunked) and a hang (/gzip) of the reverse sample.
get = lambda p: b"GET %s HTTP/1.1\r\nHost: a\r\n\r\n" % p
for flags, name, body in ((0, "burst", get(b"/x") * 60), (1, "reading", get(b"/x") * 40 + get(b"/chunked") * 3),
                          (2, "half-close", get(b"/chunked") + get(b"/x") + b"GET /y HTTP/1.1\r\nHo"), (7, "slow", get(b"/chunked") * 2),
                          (3, "hang", get(b"/x") + get(b"/gzip") + get(b"/x")), (4, "bare-lf", b"GET /x HTTP/1.1\nHost: a\n\n"),
                          (1, "post", b"POST /ds/areq HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n" + get(b"/x")),
                          (0, "continue", b"POST /x HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}" + get(b"/x"))):
    put("http-server", name, bytes([flags]) + body)
vec = json.load(open(os.path.join(root, "Tests/TapJOSETests/Fixtures/python-vectors.json")))
def strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, (dict, list)):
        for x in (v.values() if isinstance(v, dict) else v):
            yield from strings(x)
for i, s in enumerate(x for x in strings(vec) if x.count(".") in (2, 4) and len(x) > 20):
    put("jose", f"v{i}", s); put("decode", f"v{i}", s)
put("decode", "sample-jwe", open(os.path.join(root, "tools/samples/areq-sdkEncData.jwe"), "rb").read())
# Session files: a small one made here with the repository's schema (a copy of the reverse sample, vacuumed), and
# truncations of it.
import shutil, tempfile
tmp = tempfile.mkdtemp()
src = os.path.join(tmp, "s.3dstape")
shutil.copy(os.path.join(root, "sessions", "sample-reverse.3dstape"), src)
db = sqlite3.connect(src); db.execute("PRAGMA journal_mode=DELETE"); db.execute("VACUUM"); db.close()
whole = open(src, "rb").read()
put("session", "whole", whole)
for cut in (512, 4096, 8192, len(whole) // 2):
    put("session", f"cut{cut}", whole[:cut])
shutil.rmtree(tmp)
# Option values as the command line and rules files give them, the issue's trapping ones among them.
for i, v in enumerate(["250ms", "2.5s", "5m", "24h", "1e11s", "99999999999999999999s", "inf", "nan", "100us", "64KiB", "512MiB",
                       "original", "none", "scale:0.5", "scale:1e300", "fixed:1e11s", "uniform:10ms-50ms", "uniform:1e11s-2e11s",
                       "lognormal:100ms,0.5,2s", "ARes=2s", "CRes#2=500ms", "exchange:7=1s", "path:/acs/challenge=250ms",
                       "ARes=delay:99999999999999999999s", "ARes=erro:402@0.5", "CRes#1=bad-counter", "RReq=rreq-delay:1s",
                       "ARes=dribble:2s\nscale:3\n1e300", '[{"match": "ARes", "action": "hang"}, {"match": "ARes", "action": "reset"}]',
                       b"\x7f\xf0\x00\x00\x00\x00\x00\x00", b"\x44\x15\xaf\x1d\x78\xb5\x8c\x40"]):  # +inf; 1e20 (Doubles' bits)
    put("options", f"o{i}", v)
# ClientHellos as a pinned app's tunnel starts (SNI and ALPN), whole, cut short and split over two records.
def vec(n, b): return len(b).to_bytes(n, "big") + b
def hello(sni, alpn):
    ext = b"\x00\x00" + vec(2, vec(2, b"\x00" + vec(2, sni)))
    ext += b"\x00\x10" + vec(2, vec(2, b"".join(vec(1, p) for p in alpn)))
    body = b"\x03\x03" + bytes(32) + vec(1, b"") + vec(2, b"\x13\x01") + vec(1, b"\x00") + vec(2, ext)
    msg = b"\x01" + vec(3, body)
    return msg
m = hello(b"acs.example.com", [b"h2", b"http/1.1"])
put("client-hello", "whole", b"\x16\x03\x01" + vec(2, m))
put("client-hello", "cut", (b"\x16\x03\x01" + vec(2, m))[:40])
put("client-hello", "split", b"\x16\x03\x01" + vec(2, m[:20]) + b"\x16\x03\x01" + vec(2, m[20:]))
print(f"seed corpora from {n} recorded exchanges and the JOSE vectors")
PY

printf '%-14s %12s %10s %s\n' target executions exec/s result
status=0
for t in "${targets[@]}"; do
  mkdir -p "$corpus/$t"
  log="$out/$t.log"
  maxlen=(); [ "$t" = session ] && maxlen=(-max_len=131072)
  [ -n "${FUZZ_RUNS:-}" ] && maxlen+=(-runs="$FUZZ_RUNS")   # stop after this many executions (or SECONDS, if first)
  if (cd "$out" && SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0 "$fuzz" "$t" -max_total_time="$secs" -rss_limit_mb=4096 "${maxlen[@]}" \
        -artifact_prefix="$out/" "$corpus/$t" >"$log" 2>&1); then
    result="no crash"
  else
    result="CRASH: $(ls -t "$out"/crash-* "$out"/oom-* "$out"/timeout-* 2>/dev/null | head -1)"; status=1
  fi
  runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 \2/p' "$log" | tail -1)
  read -r n s <<<"${runs:-0 1}"
  printf '%-14s %12s %10s %s\n' "$t" "$n" "$(( n / (s > 0 ? s : 1) ))" "$result"
done
exit $status
