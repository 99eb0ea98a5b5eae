# raw-http.py -- run inside a gateway sandbox (python3 -c "$(cat raw-http.py)" ARGS):
# speaks HTTP/1.1 to the sandbox's own model gateway with its own token, the
# way a hostile program would: any request-target, any header, any number of
# requests on one connection.  Prints "STATUS BODY" per request, one a line.
#
#   METHOD TARGET [BODY] [-H 'Name: value']... [--repeat N] [--no-token]
#   [--hold SECONDS]  (keep the connection open after the answers, silent)
#   [--pad N]  (BODY, a JSON object, gets a member "pad" of N bytes)
#   [--size]   (print "STATUS BYTES" instead of the body)
import json
import os
import socket
import sys
import time

argv = sys.argv[1:]
hdrs, repeat, token, hold, pad, size = [], 1, True, 0, 0, False
pos = []
i = 0
while i < len(argv):
    a = argv[i]
    if a == "-H":
        hdrs.append(argv[i + 1]); i += 2; continue
    if a == "--repeat":
        repeat = int(argv[i + 1]); i += 2; continue
    if a == "--hold":
        hold = float(argv[i + 1]); i += 2; continue
    if a == "--pad":
        pad = int(argv[i + 1]); i += 2; continue
    if a == "--size":
        size = True; i += 1; continue
    if a == "--no-token":
        token = False; i += 1; continue
    pos.append(a); i += 1
method, target = pos[0], pos[1]
body = pos[2].encode() if len(pos) > 2 else b""
if pad:
    body = body.rstrip()[:-1] + b', "pad": "' + b"x" * pad + b'"}'
base = os.environ.get("ANTHROPIC_BASE_URL") or os.environ["OPENAI_BASE_URL"]
key = os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("OPENAI_API_KEY")
hostport = base.split("//", 1)[1].split("/", 1)[0]
host, port = hostport.rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=30)
f = s.makefile("rb")
head = "%s %s HTTP/1.1\r\nHost: %s\r\n" % (method, target, hostport)
if token:
    head += "x-api-key: %s\r\nAuthorization: Bearer %s\r\n" % (key, key)
for h in hdrs:
    head += h + "\r\n"
if body or method == "POST":
    head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
req = head.encode("latin-1") + b"\r\n" + body
for n in range(repeat):
    try:
        s.sendall(req)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the gateway answered (and closed) before the whole body was in: read its answer
    line = f.readline()
    if not line:
        print("closed")
        break
    status = line.split()[1].decode()
    length, chunked = None, False
    while True:
        h = f.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        k, _, v = h.decode("latin-1").partition(":")
        if k.strip().lower() == "content-length":
            length = int(v.strip())
        if k.strip().lower() == "transfer-encoding" and "chunked" in v.lower():
            chunked = True
    data = b""
    if chunked:
        while True:
            chunk = int(f.readline().split(b";")[0], 16)
            if chunk == 0:
                f.readline()
                break
            data += f.read(chunk)
            f.readline()
    elif length is not None:
        data = f.read(length)
    if size:
        print(status, len(data))
    elif repeat == 1 or n == repeat - 1:
        print(status, data.decode("utf-8", "replace").replace("\n", "\\n"))
    sys.stdout.flush()
if hold:
    time.sleep(hold)
