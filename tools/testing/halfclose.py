#!/usr/bin/env python3
"""Half-close through a tunnel (issue 27, tester's find): an upstream and a client driver, loopback only.

  halfclose.py upstream silent|finishes   print "listening PORT", then serve: `silent` reads to EOF, never sends, closes;
                                          `finishes` sends "bye" and its FIN first, then reads to EOF and prints it.
  halfclose.py client PROXY UPSTREAM silent|finishes
      silent:   10 tunnels, each sends 100 bytes and shuts down writing; each must see EOF (the tunnel ended), then an
                11th CONNECT is answered (prints its status line).
      finishes: reads "bye" and EOF, then still sends and shuts down; prints what it read and whether it saw the end.
"""
import socket
import sys
import threading


def serve(conn, mode):
    with conn:
        if mode == "finishes":
            conn.sendall(b"bye")
            conn.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            b = conn.recv(65536)
            if not b:
                break
            data += b
        print("upstream got %d bytes: %s" % (len(data), data[:40].decode(errors="replace")), flush=True)


def upstream(mode):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    print("listening %d" % s.getsockname()[1], flush=True)
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c, mode), daemon=True).start()


def tunnel(proxy, up):
    c = socket.create_connection(("127.0.0.1", proxy), timeout=5)
    c.sendall(("CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (up, up)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = c.recv(1)
        if not b:
            break
        head += b
    return c, head.split(b"\r\n")[0].decode()


def client(proxy, up, mode):
    if mode == "silent":
        held = []
        for _ in range(10):
            c, status = tunnel(proxy, up)
            assert " 200 " in status + " ", status
            c.sendall(b"x" * 100)
            c.shutdown(socket.SHUT_WR)
            held.append(c)
        for c in held:
            assert c.recv(10) == b"", "the tunnel did not end"
        c, status = tunnel(proxy, up)
        print("11th:", status, flush=True)
    else:
        c, status = tunnel(proxy, up)
        assert " 200 " in status + " ", status
        data = b""
        while True:
            b = c.recv(100)
            if not b:
                break
            data += b
        print("client read:", data.decode(), flush=True)
        c.sendall(b"after the upstream finished")
        c.shutdown(socket.SHUT_WR)
        print("client saw the end:", c.recv(10) == b"", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "upstream":
        upstream(sys.argv[2])
    else:
        client(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
