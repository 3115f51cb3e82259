# 150 POSTs of 3,000 bytes on one keep-alive connection; prints how many were answered 200.
# Usage: keepalive_posts.py PORT (HardeningEndToEndTests: a full session stops recording, not the traffic).
import http.client, sys
ok = 0
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
for i in range(150):
    c.request("POST", "/echo/%d" % i, body=bytes((i * 7 + j) % 251 for j in range(3000)))
    r = c.getresponse(); r.read()
    ok += r.status == 200
print(ok)
