#!/usr/bin/env python3
"""Clients for tools/bench/replay.sh (and an interop check): an independent SDK + 3DS Server written with Python's
cryptography, talking to `3dstape replay` over plain sockets.

  replay_client.py timing PORT COUNT          COUNT connections, then one POST {"i": n} on each, all sent within 0.2 s;
                                              prints "n first_byte_ms kernel_first_byte_ms" per request (see `timing`)
  replay_client.py flows PORT AREQ.json N W   N app-channel challenge flows (AReq, CReq x2) with W workers;
                                              prints "flows N seconds S" and fails on any flow that does not end Y
"""
import json, os, socket, sys, time, uuid
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))


# SO_TIMESTAMPNS (Linux; Python's socket module does not name it): recvmsg then carries, as SCM_TIMESTAMPNS, the kernel's
# receive time of the data read (CLOCK_REALTIME, a struct timespec of two 64-bit fields).
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def timing(port, count, spread=0.2):
    """COUNT connections are opened first; one request goes out on each at a steady pace over `spread` seconds, so that
    all are in flight together (delays reach 1 s). A bare epoll loop (not asyncio) notes each first byte, so that the
    client adds as little of its own latency as it can.

    Two figures per request, both from the moment its request was written (the clock read right after `send` returns):
    - first_byte_ms: when this loop saw the answer's first byte (perf_counter after epoll returned): what an
      application sees, including the time this Python process waits for a core and its interpreter's own latency;
    - kernel_first_byte_ms: when the kernel queued the answer's first byte on the socket (SO_TIMESTAMPNS, read with
      it), less the same send moment on the same clock (CLOCK_REALTIME): what the replayer did, without this client's
      wake-up and scheduling."""
    import select
    import struct
    socks = []
    for n in range(count):
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        s.setblocking(False)
        socks.append(s)
    ep = select.epoll()
    by_fd = {s.fileno(): n for n, s in enumerate(socks)}
    for s in socks:
        ep.register(s.fileno(), select.EPOLLIN)
    sent, sent_real, first, kernel_first, next_send = {}, {}, {}, {}, 0
    ancillary = socket.CMSG_SPACE(16)
    start = time.perf_counter() + 0.2
    step = spread / count
    while len(first) < count:
        now = time.perf_counter()
        while next_send < count and now >= start + next_send * step:
            body = json.dumps({"i": next_send}).encode()
            socks[next_send].send(b"POST /bench HTTP/1.1\r\nHost: b\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                                  % (len(body), body))
            sent[next_send] = time.perf_counter()
            sent_real[next_send] = time.time_ns()
            next_send += 1
            now = time.perf_counter()
        timeout = max(0.0, start + next_send * step - now) if next_send < count else 2.0
        for fd, _ in ep.poll(timeout):
            t = time.perf_counter()
            n = by_fd[fd]
            if n not in first:
                first[n] = t
            try:
                _, cmsgs, _, _ = socks[n].recvmsg(65536, ancillary)
                for level, kind, data in cmsgs:
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16 and n not in kernel_first:
                        sec, nsec = struct.unpack("qq", data[:16])
                        kernel_first[n] = sec * 1_000_000_000 + nsec
            except BlockingIOError:
                pass
            ep.unregister(fd)
    for n in range(count):
        kernel = f"{(kernel_first[n] - sent_real[n]) / 1e6:.3f}" if n in kernel_first else "nan"
        print(n, f"{(first[n] - sent[n]) * 1000:.3f}", kernel)
        socks[n].close()


_local = __import__("threading").local()


def post(port, path, body, ctype):
    """POST on this worker's keep-alive connection (as SDK HTTP clients such as OkHttp and URLSession reuse theirs)."""
    import http.client
    for attempt in (1, 2):
        conn = getattr(_local, "conn", None)
        if conn is None:
            conn = _local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.request("POST", path, body=body, headers={"Content-Type": ctype})
            return conn.getresponse().read()
        except (http.client.HTTPException, OSError):
            conn.close()
            _local.conn = None
            if attempt == 2:
                raise


def flow(port, areq_template):
    import jose_interop as ji
    from cryptography.hazmat.primitives.asymmetric import ec
    key = ec.generate_private_key(ec.SECP256R1())
    areq = dict(areq_template)
    areq["threeDSServerTransID"] = str(uuid.uuid4())
    areq["sdkTransID"] = str(uuid.uuid4())
    areq["sdkEphemPubKey"] = ji.ec_jwk_public(key)
    ares = json.loads(post(port, "/ds/areq", json.dumps(areq).encode(), "application/json"))
    signed = ares["acsSignedContent"].split(".")
    content = json.loads(ji.ub64u(signed[1]))
    assert content["sdkEphemPubKey"] == areq["sdkEphemPubKey"], "acsSignedContent does not carry this SDK's key"
    z = key.exchange(ec.ECDH(), ji.pyca_public(content["acsEphemPubKey"]))
    cek = ji.emv_kdf(z, areq["sdkReferenceNumber"])
    acs_url = content["acsURL"]
    path = "/" + acs_url.split("://", 1)[1].split("/", 1)[1]
    header = {"alg": "dir", "enc": "A128CBC-HS256", "kid": ares["acsTransID"]}
    base = {"threeDSServerTransID": ares["threeDSServerTransID"], "acsTransID": ares["acsTransID"], "messageType": "CReq",
            "messageVersion": areq["messageVersion"], "sdkTransID": ares["sdkTransID"]}
    status = None
    for counter, extra in enumerate([{}, {"challengeDataEntry": "1234"}]):
        creq = dict(base, sdkCounterStoA=f"{counter:03d}", **extra)
        compact = ji.seal("A128CBC-HS256", cek, os.urandom(16), json.dumps(creq).encode(), header)
        cres = json.loads(ji.open_dir(post(port, path, compact.encode(), "application/jose; charset=UTF-8").decode(), cek))
        assert cres["acsCounterAtoS"] == f"{counter:03d}", cres
        assert cres["acsTransID"] == ares["acsTransID"] and cres["sdkTransID"] == areq["sdkTransID"]
        status = cres.get("transStatus")
    return status


def flows(port, template_path, n, workers):
    template = json.load(open(template_path))
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(lambda _: flow(port, template), range(n)))
    secs = time.perf_counter() - t0
    bad = [r for r in results if r != "Y"]
    print(f"flows {n} seconds {secs:.3f}")
    if bad:
        print(f"{len(bad)} flows did not end Y: {bad[:3]}")
        sys.exit(1)


if __name__ == "__main__":
    if sys.argv[1] == "timing":
        timing(int(sys.argv[2]), int(sys.argv[3]))
    else:
        flows(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
