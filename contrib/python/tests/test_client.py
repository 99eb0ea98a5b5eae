"""Tests of lcrun_client against a running lcd (the operator's socket in
$LCD_SOCKET, or $LCD_URL with $LCD_TOKEN).  tests/integration/sandbox-api.bats
runs them against a private lcd:

    PYTHONPATH=contrib/python python3 -m unittest discover -s contrib/python/tests
"""
import hashlib
import io
import os
import select
import socket
import tempfile
import threading
import time
import unittest
from unittest import mock

from lcrun_client import Client, CommandFailed, Conflict, LcdError, NotFound


class Base(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lcd = Client()
        try:
            cls.lcd.whoami()
        except LcdError as e:
            raise unittest.SkipTest(f"no lcd to test against: {e}")

    def sandbox(self, **kw):
        sb = self.lcd.create_sandbox(**kw)
        self.addCleanup(sb.destroy)
        return sb


class TestBasic(Base):
    def test_basic_run_and_context_manager(self):
        with self.lcd.create_sandbox(env={"A": "1"}, labels={"suite": "py"}) as sb:
            r = sb.run("echo $A; echo e >&2; exit 4")
            self.assertEqual((r.exit_code, r.stdout, r.stderr, r.ok), (4, "1\n", "e\n", False))
            self.assertTrue(sb.run(["true"]).ok)
            self.assertIn(sb.id, [s["id"] for s in self.lcd.sandboxes(labels={"suite": "py"})])
            self.assertEqual(sb.state, "running")
            sid = sb.id
        with self.assertRaises(NotFound):
            self.lcd.sandbox(sid)
        self.assertFalse(sb.destroy())  # gone already: not an error

    def test_basic_destroyed_on_exception(self):
        with self.assertRaises(RuntimeError):
            with self.lcd.create_sandbox() as sb:
                sid = sb.id
                raise RuntimeError("boom")
        with self.assertRaises(NotFound):
            self.lcd.sandbox(sid)

    def test_basic_files(self):
        sb = self.sandbox()
        data = os.urandom(5 << 20)
        sb.upload("/tmp/blob", data)
        self.assertEqual(sb.download("/tmp/blob"), data)
        self.assertEqual(sb.run(["sha256sum", "/tmp/blob"]).stdout.split()[0], hashlib.sha256(data).hexdigest())
        sb.upload("/tmp/t.txt", "text\n", mode=0o600)
        self.assertEqual(sb.run("stat -c %a /tmp/t.txt").stdout, "600\n")
        sb.upload("/tmp/stream.bin", io.BytesIO(b"streamed"))
        self.assertEqual(sb.download("/tmp/stream.bin"), b"streamed")
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "tree")
            os.makedirs(os.path.join(src, "sub"))
            with open(os.path.join(src, "sub", "f"), "w") as f:
                f.write("deep")
            with open(os.path.join(d, "local.bin"), "wb") as f:
                f.write(data[:1000])
            sb.upload_file(os.path.join(d, "local.bin"), "/tmp/local.bin")
            self.assertEqual(sb.download_file("/tmp/local.bin", os.path.join(d, "back.bin")), 1000)
            with open(os.path.join(d, "back.bin"), "rb") as f:
                self.assertEqual(f.read(), data[:1000])
            sb.upload_dir(src, "/tmp")
            self.assertEqual(sb.run("cat /tmp/tree/sub/f").stdout, "deep")
            out = os.path.join(d, "out")
            os.mkdir(out)
            sb.download_dir("/tmp/tree", out)
            with open(os.path.join(out, "tree", "sub", "f")) as f:
                self.assertEqual(f.read(), "deep")
        with self.assertRaises(NotFound):
            sb.download("/no/such/file")
        with self.assertRaises(LcdError) as cm:
            sb.download("/tmp/../etc/passwd")
        self.assertEqual(cm.exception.status, 400)

    def test_basic_stdin_binary_timeout_check(self):
        sb = self.sandbox()
        self.assertEqual(sb.run("tr a-z A-Z", stdin="shout").stdout, "SHOUT")
        r = sb.run("printf '\\377\\000\\001'", binary=True)
        self.assertEqual(r.stdout, b"\xff\x00\x01")
        r = sb.run("printf 'caf\\303\\251 \\377'")
        self.assertEqual(r.stdout, "caf\u00e9 \ufffd")  # invalid UTF-8 becomes U+FFFD
        r = sb.run("sleep 30", timeout=1)
        self.assertTrue(r.timed_out)
        self.assertEqual(r.exit_code, 124)
        with self.assertRaises(CommandFailed):
            sb.run("exit 2", check=True)
        r = sb.run("head -c 3000 /dev/zero", max_output=100)
        self.assertTrue(r.truncated)
        self.assertEqual(len(r.stdout), 100)


class TestMore(Base):
    def test_run_stream_order(self):
        sb = self.sandbox()
        t0 = time.monotonic()
        seen = []
        for kind, data in sb.run_stream("echo a; sleep 0.5; echo b >&2; sleep 0.5; echo c; exit 3"):
            seen.append((kind, data if kind != "exit" else data.exit_code, time.monotonic() - t0))
        self.assertEqual([(k, d) for k, d, _ in seen], [("stdout", "a\n"), ("stderr", "b\n"), ("stdout", "c\n"),
                                                        ("exit", 3)])
        self.assertLess(seen[0][2], seen[-1][2] - 0.7)  # the first line came long before the end

    def test_session(self):
        sb = self.sandbox()
        with sb.session(env={"S": "x"}) as sh:
            self.assertTrue(sh.run("cd /tmp && export V=42").ok)
            self.assertEqual(sh.run("pwd; echo $V$S").stdout, "/tmp\n42x\n")
            r = sh.run("exit 9")
            self.assertTrue(r.session_ended)
            self.assertEqual(r.exit_code, 9)
        with sb.session(workdir="/etc") as sh:
            self.assertEqual(sh.run("pwd").stdout, "/etc\n")

    def test_snapshot_fork_and_lifecycle(self):
        sb = self.sandbox(labels={"origin": "py"})
        sb.run("mkdir -p /work && echo kept > /work/state", check=True)  # /tmp is a tmpfs: not in snapshots
        name = f"py/snap-{os.getpid()}-{int(time.time())}"
        snap = sb.snapshot(name)
        self.assertEqual(snap["image"], name)
        self.assertTrue(snap["digest"].startswith("sha256:"))
        with self.lcd.create_sandbox(image=name) as again:
            self.assertEqual(again.run("cat /work/state").stdout, "kept\n")
        forks = sb.fork(3)
        self.assertEqual(len({f.id for f in forks}), 3)
        for f in forks:
            with f:
                self.assertEqual(f.run("cat /work/state").stdout, "kept\n")
                self.assertEqual(f.refresh()["labels"], {"origin": "py"})
        sb.pause()
        self.assertEqual(sb.state, "paused")
        with self.assertRaises(Conflict):
            sb.run("true")
        sb.resume()
        sb.stop()
        self.assertEqual(sb.state, "stopped")
        sb.start()
        self.assertEqual(sb.run("cat /work/state").stdout, "kept\n")

    def test_errors(self):
        with self.assertRaises(NotFound):
            self.lcd.create_sandbox(image="no/such-image")
        with self.assertRaises(LcdError) as cm:
            self.lcd.create_sandbox(ttl=-5)
        self.assertEqual((cm.exception.status, cm.exception.exit_code), (400, 121))
        with self.assertRaises(NotFound):
            self.lcd.sandbox("000000000000")
        with self.assertRaises(LcdError) as cm:
            Client(socket="/nonexistent/lcd.sock").whoami()
        self.assertEqual(cm.exception.exit_code, 125)


class _Counting(Client):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.made = []  # the thread of each new connection

    def _connection(self):
        self.made.append(threading.get_ident())
        return super()._connection()


class TestKeepAlive(Base):
    """One connection per thread, kept between requests (named test_basic_*
    so that the TCP run covers them too)."""

    def counted(self):
        """A fresh Client whose new connections are counted in .made."""
        if self.lcd._tcp is None:
            return _Counting(socket=self.lcd.endpoint)
        return _Counting(url=self.lcd.endpoint, token=self.lcd.token)

    def test_basic_keepalive_one_connection_for_many_requests(self):
        c = self.counted()
        self.assertEqual(c.whoami(), self.lcd.whoami())
        with c.create_sandbox() as sb:
            sb.upload("/tmp/f", b"x" * 100000)
            self.assertEqual(sb.download("/tmp/f"), b"x" * 100000)
            self.assertEqual(sb.run("echo hi").stdout, "hi\n")
            self.assertEqual([k for k, _ in sb.run_stream("echo a; echo b >&2")], ["stdout", "stderr", "exit"])
            with self.assertRaises(NotFound):  # an error answer leaves the connection usable
                c.sandbox("000000000000")
            with sb.session() as sh:
                self.assertEqual(sh.run("echo s").stdout, "s\n")
        self.assertEqual(len(c.made), 1, "every request above should have used one connection")

    def test_basic_keepalive_threads_have_their_own(self):
        c = self.counted()
        c.whoami()
        errors, together = [], threading.Barrier(4)  # all alive at once: distinct thread ids

        def worker():
            try:
                together.wait(10)
                for _ in range(5):
                    c.whoami()
            except Exception as e:  # noqa: BLE001 -- reported below
                errors.append(e)
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(c.made), 5)  # this thread's and one per worker, each used for all its requests
        self.assertEqual(len(set(c.made)), 5)

    def test_basic_keepalive_a_closed_connection_is_replaced(self):
        c = self.counted()
        c.whoami()
        # lcd's end goes away (as in a restart): it sees our end shut, closes its own
        conn = c._idle.kept.conn
        conn.sock.shutdown(socket.SHUT_WR)
        self.assertTrue(select.select([conn.sock], [], [], 10)[0], "lcd did not close its end")
        self.assertEqual(c.whoami(), self.lcd.whoami())
        self.assertEqual(len(c.made), 2)
        # closed after the check before use: a request that is safe to repeat goes again
        c.whoami()
        conn = c._idle.kept.conn
        conn.sock.shutdown(socket.SHUT_WR)
        self.assertTrue(select.select([conn.sock], [], [], 10)[0], "lcd did not close its end")
        with mock.patch("lcrun_client.client._dropped", return_value=False):
            self.assertEqual(c.whoami(), self.lcd.whoami())
        self.assertEqual(len(c.made), 3)

    def test_basic_keepalive_not_shared_across_fork(self):
        c = self.counted()
        c.whoami()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                ok = c.whoami() == self.lcd.whoami() and len(c.made) == 2
                os.write(w, b"1" if ok else b"0")
            finally:
                os._exit(0)
        os.close(w)
        self.assertEqual(os.read(r, 1), b"1", "the child should have made its own connection")
        os.close(r)
        os.waitpid(pid, 0)
        c.whoami()  # the parent's connection still serves it
        self.assertEqual(len(c.made), 1)


class TestTCP(Base):
    def test_tcp_whoami_and_token(self):
        url = os.environ.get("LCD_URL")
        if not url:
            self.skipTest("LCD_URL is not set (the unix socket is in use)")
        self.assertEqual(self.lcd.whoami(), {"kind": "operator"})
        with self.assertRaises(LcdError) as cm:
            Client(url=url, token="wrong-token-wrong-token").whoami()
        self.assertEqual(cm.exception.status, 401)
        with self.lcd.create_sandbox() as sb:
            self.assertEqual(sb.run("echo over tcp").stdout, "over tcp\n")


if __name__ == "__main__":
    unittest.main()
