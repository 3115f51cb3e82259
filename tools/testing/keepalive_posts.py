# 150 POSTs of 3,000 bytes on one keep-alive connection; prints how many were answered STATUS (default 200).
# Usage: keepalive_posts.py PORT [STATUS] (HardeningEndToEndTests: a full session stops recording, not the traffic;
# a replay answers its misses 404).
import http.client, sys
want = int(sys.argv[2]) if len(sys.argv) > 2 else 200
ok = 0
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
for i in range(150):
    c.request("POST", "/echo/%d" % i, body=bytes((i * 7 + j) % 251 for j in range(3000)))
    r = c.getresponse(); r.read()
    ok += r.status == want
print(ok)
