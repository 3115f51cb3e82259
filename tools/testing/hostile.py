#!/usr/bin/env python3
"""Hostile clients for 3dstape's hardening tests (loopback only; bounded in count and time).

  hostile.py slowloris PORT COUNT SECONDS
      COUNT sockets each send a request head one byte every 0.2 s; prints "answered N closed M open K" after SECONDS
      (answered: got an HTTP status line; closed: the server closed without one; open: still open).
  hostile.py hold PORT COUNT SECONDS PID
      opens COUNT connections and holds them for SECONDS; prints "cpu_percent X" (process PID's CPU while they are held)
      and then, once they are closed, "after 200|none" for a request on a fresh connection.
  hostile.py cap PORT COUNT
      opens COUNT idle connections; prints "turned_away K" (how many were answered 503 at once) and, once they are
      closed, "after STATUS" for a request on a fresh connection.
  hostile.py flood PORT PATH MEGABYTES SECONDS PID
      sends "GET PATH" and then MEGABYTES of junk on the same socket, for at most SECONDS, while sampling the RSS of
      process PID; prints "sent_mb X peak_rss_mb Y first_line Z".
"""
import os, select, socket, sys, time


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0


def slowloris(port, count, seconds):
    head = b"POST /ds/areq HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 200
    socks = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port))
        s.setblocking(False)
        socks.append([s, 0, None])  # socket, bytes sent, outcome
    end = time.time() + seconds
    while time.time() < end and any(o is None for _, _, o in socks):
        for entry in socks:
            s, sent, outcome = entry
            if outcome is not None:
                continue
            # Read what the server said before sending more: a byte sent after its 408 and close draws a reset,
            # which would discard the 408 still unread.
            r, _, _ = select.select([s], [], [], 0)
            if r:
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                entry[2] = "answered" if data.startswith(b"HTTP/1.1 ") else "closed"
                continue
            try:
                if sent < len(head):
                    s.send(head[sent:sent + 1])
                    entry[1] += 1
            except OSError:
                entry[2] = "closed"
        time.sleep(0.2)
    answered = sum(1 for _, _, o in socks if o == "answered")
    closed = sum(1 for _, _, o in socks if o == "closed")
    print(f"answered {answered} closed {closed} open {count - answered - closed}")


def flood(port, path, megabytes, seconds, pid):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: a\r\n\r\n".encode())
    s.settimeout(0.5)
    junk = b"x" * (1 << 20)
    sent, peak = 0, rss_mb(pid)
    end = time.time() + seconds
    while sent < megabytes << 20 and time.time() < end:
        try:
            sent += s.send(junk)
        except socket.timeout:
            pass  # the server stopped reading: what we are checking
        except OSError:
            break
        peak = max(peak, rss_mb(pid))
    s.settimeout(10)
    try:
        first = s.recv(4096).split(b"\r\n")[0].decode(errors="replace")
    except OSError:
        first = "(none)"
    print(f"sent_mb {sent / (1 << 20):.1f} peak_rss_mb {peak:.1f} first_line {first}")


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def hold(port, count, seconds, pid):
    socks = []
    for _ in range(count):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            break
    time.sleep(0.3)
    t0, c0 = time.time(), cpu_ticks(pid)
    time.sleep(seconds)
    c1, t1 = cpu_ticks(pid), time.time()
    hz = os.sysconf("SC_CLK_TCK")
    print(f"cpu_percent {100 * (c1 - c0) / hz / (t1 - t0):.1f}")
    for s in socks:
        s.close()
    time.sleep(0.5)
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=3)
        s.sendall(b"GET /after HTTP/1.1\r\nHost: a\r\n\r\n")
        s.settimeout(5)
        line = s.recv(4096).split(b"\r\n")[0].decode()
        print(f"after {line.split(' ')[1] if line.startswith('HTTP/1.1 ') else 'none'}")
    except OSError as e:
        print(f"after none ({e})")


def client_hello_start():
    """The first 100 bytes of a TLS ClientHello (a handshake begun and not finished)."""
    import ssl
    ctx = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()[:100]


def cap(port, count, mode="begun"):
    """COUNT connections, each beginning a request (MODE begun: a head not finished; tls: part of a TLS ClientHello) or
    sending nothing (idle); prints how many got a 503 and which were closed without one (by their order: the oldest
    closed to make room for a newer one, or a new one refused on a TLS port), then what a request on a new plain
    connection got."""
    hello = client_hello_start() if mode == "tls" else b""
    socks = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        if mode == "begun":
            s.sendall(b"GET /begun HTTP/1.1\r\nHost: a\r\n")
        elif mode == "tls":
            s.sendall(hello)
        socks.append(s)
        time.sleep(0.05)
    turned, closed = 0, []
    for i, s in enumerate(socks):
        s.settimeout(0.3)
        try:
            data = s.recv(4096)
            if data.startswith(b"HTTP/1.1 503"):
                turned += 1
            elif data == b"":
                closed.append(i)
        except ConnectionResetError:
            closed.append(i)
        except OSError:
            pass
    print(f"turned_away {turned}")
    print(f"closed {len(closed)}")
    print(f"closed_at {','.join(map(str, closed)) or '-'}")
    for s in socks:
        s.close()
    time.sleep(0.3)
    if mode == "tls":
        return
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    s.sendall(b"GET /after HTTP/1.1\r\nHost: a\r\n\r\n")
    s.settimeout(5)
    line = s.recv(4096).split(b"\r\n")[0].decode()
    print(f"after {line.split(' ')[1] if line.startswith('HTTP/1.1 ') else 'none'}")


if __name__ == "__main__":
    if sys.argv[1] == "slowloris":
        slowloris(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    elif sys.argv[1] == "cap":
        cap(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "begun")
    elif sys.argv[1] == "hold":
        hold(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))
    else:
        flood(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]))
