# net-probe.py PROTO,ADDR,PORT... — run inside a sandbox by net.bats.
# Sends every probe at once (tcp: connect and read a line; udp: a datagram
# and its answer; icmp: an echo request, PORT ignored) and prints one line
# per probe: "PROTO,ADDR,PORT ok ANSWER" or "PROTO,ADDR,PORT fail REASON".
import socket
import sys
import threading

TIMEOUT = 1.5
results = {}


def gateway(fam):
    """The default route's gateway ("gw4"/"gw6" stand for it)."""
    if fam == socket.AF_INET:
        for line in open("/proc/net/route").read().splitlines()[1:]:
            f = line.split()
            if f[1] == "00000000":
                return socket.inet_ntoa(int(f[2], 16).to_bytes(4, "little"))
    else:
        for line in open("/proc/net/ipv6_route"):
            f = line.split()
            if f[0] == "0" * 32 and f[1] == "00" and f[4] != "0" * 32:
                return socket.inet_ntop(socket.AF_INET6, bytes.fromhex(f[4]))
    raise OSError("no default route")


def probe(spec):
    proto, addr, port = spec.split(",")
    port = int(port)
    try:
        if addr in ("gw4", "gw6"):
            addr = gateway(socket.AF_INET if addr == "gw4" else socket.AF_INET6)
        fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
        if proto == "tcp":
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.settimeout(TIMEOUT)
            s.connect((addr, port))
            s.sendall(b"probe\n")
            data = s.recv(200)
        elif proto == "udp":
            s = socket.socket(fam, socket.SOCK_DGRAM)
            s.settimeout(TIMEOUT)
            s.sendto(b"probe\n", (addr, port))
            data, _ = s.recvfrom(200)
        elif proto == "icmp":
            # Unprivileged ICMP echo socket (net.ipv4.ping_group_range).
            if fam == socket.AF_INET:
                s = socket.socket(fam, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
                req = b"\x08\x00\x00\x00\x00\x00\x00\x01probe"
            else:
                s = socket.socket(fam, socket.SOCK_DGRAM, socket.IPPROTO_ICMPV6)
                req = b"\x80\x00\x00\x00\x00\x00\x00\x01probe"
            s.settimeout(TIMEOUT)
            s.sendto(req, (addr, 0))
            reply, _ = s.recvfrom(200)
            data = b"echo-reply" if reply[0] in (0, 129) else b""
        else:
            raise ValueError("unknown protocol " + proto)
        text = data.decode(errors="replace").strip()
        results[spec] = ("ok " + text) if text else "fail empty answer"
    except (OSError, ValueError) as e:
        results[spec] = "fail %s" % e


threads = [threading.Thread(target=probe, args=(s,)) for s in sys.argv[1:]]
for t in threads:
    t.start()
for t in threads:
    t.join()
for spec in sys.argv[1:]:
    print(spec, results[spec])
