#!/usr/bin/env python3
"""A small HTTP/1.1 upstream for 3dstape's end-to-end tests: an independent server (Python's http.server),
plain or TLS. Prints "listening PORT" once ready; exits when stdin closes or on SIGTERM.

  upstream.py [--port N] [--tls CERT.pem KEY.pem [--client-ca CA.pem]]

--port N listens on 127.0.0.1:N (default: a free port, the one printed); in a terminal, Ctrl-D or Ctrl-C stops it.

Endpoints: POST /ds/areq (an ARes-like answer), /chunked, /gzip, /gzip2 (gzip inside gzip), /slow?ms=N (prints 'slow N started' when it begins), /close (close-delimited), /bad-chunk (a signed chunk size),
/big?kb=N, anything else echoes method, path, headers and body length as JSON.
"""
import gzip, json, os, signal, ssl, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse, parse_qs


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(n) if n else b""

    def send_json(self, obj, status=200, extra=None):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self):
        url = urlparse(self.path)
        q = parse_qs(url.query)
        body = self.body()
        if url.path == "/ds/areq":
            areq = json.loads(body or b"{}")
            self.send_json({"messageType": "ARes", "messageVersion": areq.get("messageVersion", "2.2.0"),
                            "threeDSServerTransID": areq.get("threeDSServerTransID"),
                            "dsTransID": "d7c1ee99-9478-44a6-b1f2-391e29c6b340",
                            "acsTransID": "13c701a3-5a88-4c45-89e9-ef65e50a8bf9",
                            "transStatus": "Y", "eci": "05", "authenticationValue": "AAABBZEEBgAAAAAAAAQGAAAAAAA=",
                            "padding": "x" * 2600})
        elif url.path == "/chunked":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in [b'{"messageType":', b'"Erro","errorCode":"203",', b'"padding":"' + b"y" * 5000 + b'"}']:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        elif url.path == "/bad-chunk":
            # A hostile server: a signed chunk size (this killed the recorder in forward mode once).
            self.wfile.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-2\r\nxx\r\n0\r\n\r\n")
            self.close_connection = True
        elif url.path == "/gzip":
            data = gzip.compress(json.dumps({"messageType": "RReq", "transStatus": "N", "acctNumber": "4000000000001091"}).encode())
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif url.path == "/gzip2":
            # gzip inside gzip (Content-Encoding: gzip, gzip): the recorder undoes both layers before it masks.
            data = gzip.compress(gzip.compress(json.dumps({"messageType": "RReq", "acctNumber": "4000000000001000", "cvv": 123}).encode()))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip, gzip")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif url.path == "/slow":
            print(f"slow {q.get('ms', ['100'])[0]} started", flush=True)  # tests wait for this, not a fixed time
            time.sleep(int(q.get("ms", ["100"])[0]) / 1000)
            self.send_json({"slept_ms": int(q.get("ms", ["100"])[0])})
        elif url.path == "/close":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"until close")
            self.close_connection = True
        elif url.path == "/big":
            self.send_json({"data": "z" * (1024 * int(q.get("kb", ["64"])[0]))})
        else:
            self.send_json({"method": self.command, "path": self.path, "body_length": len(body),
                            "body": body.decode("utf-8", "replace")[:200],
                            "headers": {k: v for k, v in self.headers.items()}})

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any


def main():
    args = sys.argv[1:]
    port = 0
    if args[:1] == ["--port"]:
        if len(args) < 2 or not args[1].isdigit() or not 0 < int(args[1]) < 65536:
            sys.exit("upstream.py: --port takes a port number from 1 to 65535")
        port, args = int(args[1]), args[2:]
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    if args and args[0] == "--tls":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args[1], args[2])
        if len(args) > 4 and args[3] == "--client-ca":
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(args[4])
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print(f"listening {server.server_address[1]}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    try:
        sys.stdin.read()  # exit when the parent closes stdin
    except KeyboardInterrupt:
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
