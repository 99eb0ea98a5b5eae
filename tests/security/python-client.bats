#!/usr/bin/env bats
# The Python client's download_dir unpacks a tar that a sandbox's files
# (or whatever answers on lcd's socket) made: nothing of it may land
# outside the directory asked for, on any Python the client supports.
# A stand-in for lcd on a unix socket answers with hostile archives; each
# case runs with tarfile's "data" filter and without it (as on the
# Pythons before 3.12 that have no backport: Debian 12's 3.11.2).

setup() {
	command -v python3 >/dev/null || skip "no python3"
	W=$(mktemp -d /tmp/lcrun-sec-py.XXXXXX)
	SRC=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
}

teardown() {
	rm -rf "$W"
}

# Serve each case's archive and run download_dir into a fresh directory;
# prints one line per case: NAME refused|extracted, then what the checks
# below found.  FILTER: "data" (as the Python has it) or "none" (removed).
cases() { # FILTER
	PYTHONPATH="$SRC/contrib/python" python3 - "$W" "$1" <<'PY'
import io, os, socketserver, stat, sys, tarfile, threading
from http.server import BaseHTTPRequestHandler

work, flt = sys.argv[1], sys.argv[2]
if flt == "none" and hasattr(tarfile, "data_filter"):
    del tarfile.data_filter          # as a Python without the filters
import lcrun_client
from lcrun_client import Client, Sandbox
UnsafeArchive = getattr(lcrun_client, "UnsafeArchive", ())

outside = os.path.join(work, "outside")   # nothing may appear here
os.makedirs(outside)
with open(os.path.join(outside, "victim"), "w") as f:
    f.write("host file\n")

def entry(t, name, kind="file", data=b"x\n", link="", mode=0o644, uid=0):
    i = tarfile.TarInfo(name)
    i.mode, i.uid, i.gid = mode, uid, uid
    if kind == "file":
        i.size = len(data)
        t.addfile(i, io.BytesIO(data))
        return
    i.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
              "chr": tarfile.CHRTYPE, "fifo": tarfile.FIFOTYPE}[kind]
    i.linkname = link
    if kind == "chr":
        i.devmajor, i.devminor = 1, 3
    t.addfile(i)

def archive(*entries):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            entry(t, *e[:2], **e[2] if len(e) > 2 else {})
    return b.getvalue()

rel = os.path.relpath(outside, os.path.join(work, "dl-x"))
CASES = {
    "absolute": archive(("%s/abs" % outside, "file")),
    "dotdot": archive(("%s/dotdot" % rel, "file")),
    "symlink-absolute": archive(("l", "sym", {"link": outside}), ("l/through-abs", "file")),
    "symlink-up": archive(("l", "sym", {"link": rel}), ("l/through-up", "file")),
    # each link alone stays inside; together they climb out
    "symlink-chain": archive(("d", "dir", {"mode": 0o755}), ("d/l", "sym", {"link": ".."}),
                             ("d/l/up", "sym", {"link": rel}), ("d/l/up/through-chain", "file")),
    "hardlink-absolute": archive(("h", "hard", {"link": os.path.join(outside, "victim")})),
    "hardlink-up": archive(("h", "hard", {"link": "%s/victim" % rel})),
    "hardlink-through-symlink": archive(("l", "sym", {"link": "."}), ("m", "sym", {"link": rel}),
                                        ("h", "hard", {"link": "m/victim"})),
    "device": archive(("null", "chr")),
    "fifo": archive(("pipe", "fifo")),
    "good": archive(("src", "dir", {"mode": 0o755}), ("src/main.c", "file", {"data": b"int main;\n"}),
                    ("src/link", "sym", {"link": "main.c"}), ("src/hard", "hard", {"link": "src/main.c"}),
                    ("src/suid", "file", {"mode": 0o4777, "uid": 4242})),
}

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = CASES[self.server.case]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-tar")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass

sock = os.path.join(work, "lcd.sock")
srv = socketserver.UnixStreamServer(sock, H)
srv.case = None
threading.Thread(target=srv.serve_forever, daemon=True).start()
sb = Sandbox(Client(socket=sock), "stand-in")
for name in CASES:
    srv.case = name
    dest = os.path.join(work, "dl-x")
    os.makedirs(dest)
    try:
        sb.download_dir("/work", dest)
        print(name, "extracted")
    except UnsafeArchive as e:
        print(name, "refused", e.member)
    except Exception as e:
        print(name, "error", type(e).__name__, e)
    for top, dirs, files in os.walk(dest):
        for f in files + dirs:
            p = os.path.join(top, f)
            st = os.lstat(p)
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) or stat.S_ISFIFO(st.st_mode):
                print(name, "special file", os.path.relpath(p, dest))
            if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                print(name, "setuid", os.path.relpath(p, dest))
            if st.st_uid != os.geteuid():
                print(name, "owner", st.st_uid, os.path.relpath(p, dest))
    if name == "good":
        with open(os.path.join(dest, "src/link")) as f:
            print(name, "link reads", f.read().strip())
        print(name, "hard link", os.stat(os.path.join(dest, "src/hard")).st_nlink)
    os.system("rm -rf '%s'" % dest)
    left = sorted(os.listdir(outside))
    if left != ["victim"]:
        print(name, "wrote outside", left)
    with open(os.path.join(outside, "victim")) as f:
        if f.read() != "host file\n":
            print(name, "changed the host file")
sb.client.close()
PY
}

check_cases() {
	echo "$output"
	[ "$status" -eq 0 ]
	for c in absolute dotdot symlink-absolute symlink-up symlink-chain hardlink-absolute hardlink-up \
		hardlink-through-symlink device fifo; do
		echo "$output" | grep -q "^$c refused " || { echo "$c was not refused"; return 1; }
	done
	echo "$output" | grep -q "^good extracted$"
	echo "$output" | grep -q "^good link reads int main;$"
	echo "$output" | grep -q "^good hard link 2$"
	if echo "$output" | grep -E " (wrote outside|changed the host file|special file|setuid|owner) "; then
		return 1
	fi
}

@test "python client: download_dir refuses what would leave the directory, with tarfile's data filter" {
	python3 -c 'import tarfile; tarfile.data_filter' 2>/dev/null || skip "this Python has no tarfile filters"
	run cases data
	check_cases
}

@test "python client: download_dir refuses what would leave the directory, on a Python without tarfile's filters" {
	run cases none
	check_cases
}
