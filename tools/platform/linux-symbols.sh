#!/usr/bin/env bash
# Fails if a Linux-only symbol appears outside the Linux backend's files, so that the POSIX-only build
# (-Xswiftc -DTHREEDSTAPE_POSIX_ONLY, what macOS compiles) stays free of them: epoll_*, eventfd, timerfd_*, signalfd,
# accept4, MSG_NOSIGNAL, SOCK_NONBLOCK, SOCK_CLOEXEC, prctl, PR_SET_*, pthread_setname_np, the CLinux shim's Linux-only
# wrappers, a qualified `Glibc.` call, and an `import Glibc` not under `#if canImport(Glibc)`. Comments are not code:
# `//` text is ignored. Scans Sources/ and Tests/ (Swift, C and headers).
# Usage: tools/platform/linux-symbols.sh [REPOSITORY ROOT, default this one]
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
python3 - "$root" <<'PY'
import os, re, sys
root = sys.argv[1]
# The Linux backend: the only files that may name these symbols.
allowed = {"Sources/CLinux/shim.c", "Sources/CLinux/include/CLinux.h", "Sources/TapNet/PlatformLinux.swift"}
symbol = re.compile(r"\b(epoll_\w+|EPOLL\w+|eventfd\w*|EFD_\w+|timerfd_\w+|TFD_\w+|signalfd\w*|accept4|MSG_NOSIGNAL|SOCK_NONBLOCK|"
                    r"SOCK_CLOEXEC|prctl|PR_SET_\w+|pthread_setname_np|clinux_(?:accept4\w*|epoll\w*|set_child_subreaper|enable_rx_timestamps|recv_stamped|set_timer_slack|timer_slack|unsent_bytes))\b|\bGlibc\.")
found = []
for top in ("Sources", "Tests"):
    for dirpath, _, files in os.walk(os.path.join(root, top)):
        for name in files:
            if not name.endswith((".swift", ".c", ".h")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if rel in allowed:
                continue
            previous = ""
            for number, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                code = line.split("//", 1)[0]
                m = symbol.search(code)
                if m:
                    found.append(f"{rel}:{number}: {m.group(0)}: {line.strip()}")
                if code.strip() == "import Glibc" and previous != "#if canImport(Glibc)":
                    found.append(f"{rel}:{number}: import Glibc outside #if canImport(Glibc)")
                if code.strip():
                    previous = code.strip()
if found:
    print("Linux-only symbols outside the Linux backend (" + ", ".join(sorted(allowed)) + "):")
    print("\n".join(found))
    sys.exit(1)
print(f"linux-symbols: no Linux-only symbol outside {len(allowed)} Linux backend files")
PY
