# Uploads held open on three connections, 700 KB each, against a 1 MiB cap on what all connections may hold:
# prints how many connections were answered 503. Usage: partial_uploads.py PORT (HardeningEndToEndTests).
import socket, sys, time
port = int(sys.argv[1])
conns = []
for i in range(3):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"POST /ds/areq HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 800000\r\n\r\n")
    try:
        for k in range(0, 700000, 65536):
            s.sendall(b"x" * min(65536, 700000 - k)); time.sleep(0.005)
    except OSError:
        pass
    conns.append(s)
time.sleep(0.5)
refused = 0
for s in conns:
    s.settimeout(1)
    try:
        refused += s.recv(100).startswith(b"HTTP/1.1 503")
    except OSError:
        pass
print(refused)
