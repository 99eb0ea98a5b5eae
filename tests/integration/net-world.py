# net-world.py PORTS ADDR... — the test hosts' service: on each ADDR, TCP
# and UDP on each of the comma-separated PORTS answer "hello ADDR PORT
# PROTO".  Prints "ready" once listening; runs until killed.
import selectors
import socket
import sys

sel = selectors.DefaultSelector()
ports = [int(p) for p in sys.argv[1].split(",")]
for addr in sys.argv[2:]:
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    for port in ports:
        for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
            s = socket.socket(fam, kind)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((addr, port))
            if kind == socket.SOCK_STREAM:
                s.listen(64)
            sel.register(s, selectors.EVENT_READ, (addr, port))

sys.stdout.write("ready\n")
sys.stdout.flush()
while True:
    for key, _ in sel.select():
        s = key.fileobj
        addr, port = key.data
        if s.type == socket.SOCK_STREAM:
            c, _ = s.accept()
            c.settimeout(1)
            try:
                c.recv(100)
                c.sendall(("hello %s %d tcp\n" % (c.getsockname()[0], port)).encode())
            except OSError:
                pass
            c.close()
        else:
            data, peer = s.recvfrom(200)
            s.sendto(("hello %s %d udp\n" % (addr, port)).encode(), peer)
