"""N keep-alive connections through a proxy, each sending a small POST every few seconds, for a given time.
Prints one line: connections opened, requests, errors, the proxy's RSS sampled every 5 s (peak), and request latency (p50, p99).
Usage: connections.py PORT PROXY_PID CONNECTIONS SECONDS"""
import asyncio, os, random, re, sys, time

port, pid, n, secs = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
body = b'{"messageType":"AReq","messageVersion":"2.2.0","acctNumber":"4000000000001091","deviceChannel":"02","messageCategory":"01"}'
request = (b"POST /ds/areq HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "
           + str(len(body)).encode() + b"\r\n\r\n" + body)
stats = {"opened": 0, "requests": 0, "errors": 0}
errors = []
latencies = []  # seconds per request, from writing it to its whole response


def rss_mb():
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024


async def read_response(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))
    await reader.readexactly(length)
    return status


async def client(i, stop_at):
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as e:
        stats["errors"] += 1; errors.append(f"connect: {e}"); return
    stats["opened"] += 1
    await asyncio.sleep(random.random() * 3)
    try:
        while time.time() < stop_at:
            sent = time.perf_counter()
            writer.write(request)
            status = await read_response(reader)
            latencies.append(time.perf_counter() - sent)
            if status != 200:
                stats["errors"] += 1; errors.append(f"status {status}")
            stats["requests"] += 1
            await asyncio.sleep(2 + random.random() * 2)
    except (OSError, asyncio.IncompleteReadError) as e:
        stats["errors"] += 1; errors.append(f"{type(e).__name__}: {e}")
    finally:
        writer.close()


def latency():
    if not latencies:
        return "p50_ms - p99_ms -"
    s = sorted(latencies)
    return f"p50_ms {s[len(s) // 2] * 1000:.2f} p99_ms {s[min(len(s) - 1, len(s) * 99 // 100)] * 1000:.2f}"


async def main():
    stop_at = time.time() + secs
    tasks = []
    for i in range(n):  # opened in steps, as clients arrive
        tasks.append(asyncio.create_task(client(i, stop_at)))
        if i % 250 == 249:
            await asyncio.sleep(0.05)
    peak = 0
    samples = []
    while time.time() < stop_at:
        r = rss_mb(); peak = max(peak, r); samples.append(round(r))
        await asyncio.sleep(5)
    await asyncio.gather(*tasks)
    r = rss_mb(); peak = max(peak, r)
    print(f"connections {stats['opened']}/{n} requests {stats['requests']} errors {stats['errors']} peak_rss_mb {peak:.0f} "
          f"rss_samples_mb {','.join(map(str, samples))} {latency()}")
    if errors:
        print("first errors:", errors[:5])


asyncio.run(main())
