#!/usr/bin/env bash
# The POSIX-only build, what macOS compiles, checked on Linux: first that no Linux-only symbol appears outside the Linux
# backend's files (linux-symbols.sh), then a build with -Xswiftc -DTHREEDSTAPE_POSIX_ONLY (the poll(2) event loop, pipe
# wake-ups, accept + fcntl, no MSG_NOSIGNAL) into its own build path (.build-posix, so the normal build is not
# invalidated), and the in-process suites on it: the event loop and platform layer, the HTTP server, the proxy, the
# replayer and the sandbox. The whole suite passes too (`swift test --skip-build -Xswiftc -DTHREEDSTAPE_POSIX_ONLY
# --build-path .build-posix`); these are the ones that exercise the loop, chosen to keep the stage to a few minutes.
# Usage: tools/platform/check.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
bash tools/platform/linux-symbols.sh
flags=(-Xswiftc -DTHREEDSTAPE_POSIX_ONLY --build-path .build-posix)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
started=$(date +%s)
swift build --build-tests "${flags[@]}" > "$log" 2>&1 || { grep -E "error:" "$log" | head -30; echo "POSIX-only build failed"; exit 1; }
if grep -E "^/.*/(Sources|Tests)/.*warning:" "$log"; then echo "POSIX-only build has warnings"; exit 1; fi
built=$(date +%s)
swift test --skip-build "${flags[@]}" \
  --filter 'TapHTTPServiceTests|TapProxyTests|TapReplayTests|TapSandboxTests' > "$log" 2>&1 || true
grep -E "Test run with|Executed .* tests" "$log" || true
grep -q "Test run with .* passed" "$log" || { grep -E "✘" "$log" | head -50; echo "POSIX-only suites failed"; exit 1; }
echo "POSIX-only (poll) build $((built - started)) s, suites $(( $(date +%s) - built )) s"
