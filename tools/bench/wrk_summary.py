#!/usr/bin/env python3
"""Reads wrk --latency output; prints "requests_per_s p50_ms p99_ms requests non2xx max_ms" on one line."""
import re, sys

t = open(sys.argv[1]).read()


def ms(v):
    n, u = re.match(r"([\d.]+)(us|ms|s)", v).groups()
    return float(n) * {"us": 0.001, "ms": 1, "s": 1000}[u]


rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
p50 = ms(re.search(r"^\s+50%\s+(\S+)", t, re.M).group(1))
p99 = ms(re.search(r"^\s+99%\s+(\S+)", t, re.M).group(1))
req = int(re.search(r"(\d+) requests in", t).group(1))
errs = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
mx = ms(re.search(r"^\s+Latency\s+\S+\s+\S+\s+(\S+)", t, re.M).group(1))
print(f"{rps:.0f} {p50:.3f} {p99:.3f} {req} {errs.group(1) if errs else 0} {mx:.3f}")
