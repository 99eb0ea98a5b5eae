"""A client of lcd's HTTP API: sandboxes, maps and tasks (stdlib only).

    from lcrun_client import Client

    lcd = Client()                                  # LCD_URL/LCD_SOCKET, LCD_TOKEN
    with lcd.create_sandbox(memory="1G", env={"CI": "1"}) as sb:
        sb.upload("/work/main.c", b"int main(void) { return 0; }\\n")
        r = sb.run("cc -o /work/main /work/main.c && /work/main")
        print(r.exit_code, r.stdout)
        for kind, data in sb.run_stream(["make", "-C", "/work"]):
            print(kind, data)                       # "stdout"/"stderr" as it happens, "exit" last
        with sb.session() as sh:
            sh.run("cd /work && export X=1")
            print(sh.run("pwd; echo $X").stdout)    # /work, 1
        image = sb.snapshot("work/base")["image"]
        for child in sb.fork(4):
            with child:
                print(child.run("ls /work").stdout)
    # leaving the with block destroyed the sandbox

Where it connects: Client(url="http://HOST:PORT", token=...) for TCP, or
Client(socket="/path/lcd.sock"); by default $LCD_URL, else $LCD_SOCKET, else
$LCRUN_STATE_DIR/lcd.sock, else /run/lcrun/lcd.sock, with $LCD_TOKEN as the
bearer token when set.  Inside a task of lcd, LCD_SOCKET and LCD_TOKEN are
set (and this package is on PYTHONPATH), so Client() just works, with the
task's scope: its app's maps and functions and the sandboxes it makes.
"""

import base64
import copy
import http.client
import io
import json
import os
import select
import socket
import tarfile
import threading
import urllib.parse

__all__ = ["Client", "Sandbox", "Session", "ExecResult", "LcdError", "NotFound", "Forbidden", "Conflict",
           "QuotaExceeded", "UnsafeArchive"]

_CHUNK = 1 << 16


class LcdError(Exception):
    """lcd refused a request: .status (HTTP), .exit_code (lcctl's), .message."""

    def __init__(self, status, message, exit_code=None):
        super().__init__(f"lcd: {message} (HTTP {status})")
        self.status = status
        self.message = message
        self.exit_code = exit_code


class NotFound(LcdError):
    """404: no such sandbox, task, app, map key (or not one this caller may see)."""


class Forbidden(LcdError):
    """401/403: no or a wrong token, or outside the token's scope."""


class Conflict(LcdError):
    """409: wrong state (paused, stopped), a name taken, a claim lost."""


class QuotaExceeded(LcdError):
    """429: the app's sandboxes.max, or a function's queue, is full."""


_ERRORS = {404: NotFound, 401: Forbidden, 403: Forbidden, 409: Conflict, 429: QuotaExceeded}


class ExecResult:
    """What a command did: exit_code, stdout, stderr (str, or bytes with
    binary=True), timed_out, signal, truncated (output beyond the cap)."""

    def __init__(self, answer, binary=False):
        self.exit_code = answer.get("exit_code")
        self.signal = answer.get("signal", 0)
        self.timed_out = bool(answer.get("timed_out", False))
        self.truncated = bool(answer.get("truncated", False))
        self.session_ended = bool(answer.get("session_ended", False))
        out, err = answer.get("stdout", ""), answer.get("stderr", "")
        if binary:
            out, err = base64.b64decode(out), base64.b64decode(err)
        self.stdout, self.stderr = out, err

    @property
    def ok(self):
        return self.exit_code == 0

    def check(self):
        """Raise CommandFailed unless the command exited 0; returns self."""
        if not self.ok:
            raise CommandFailed(self)
        return self

    def __repr__(self):
        return (f"ExecResult(exit_code={self.exit_code!r}, stdout={self.stdout!r:.80}, "
                f"stderr={self.stderr!r:.80}, timed_out={self.timed_out})")


class UnsafeArchive(ValueError):
    """download_dir refused an entry of the archive (.member, its name):
    it would be written outside the directory, or is a link that leaves
    it, or a device, FIFO or other special file.  What came before it in
    the archive is extracted; nothing of it or after it is."""

    def __init__(self, member, why):
        super().__init__(f"archive entry {member!r}: {why}")
        self.member = member


def _inside(path, root):
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _safe_members(tar, root):
    """tar's members, each checked just before extractall takes it, against
    the tree as extracted so far: refused (UnsafeArchive) when its name is
    absolute or holds '..', when it would be written through a link that
    leaves root, when it is a link whose target leaves root (a symbolic
    link may not be absolute: the host, not the sandbox, would read it),
    or when it is not a file, directory or link.  Each is extracted as the
    caller's own, without setuid, setgid, sticky or group/other write
    bits.  Checked on every Python, with tarfile's "data" filter on top
    where there is one (3.12, and backports)."""
    for m in tar:
        name = m.name
        if os.path.isabs(name) or ".." in name.split("/"):
            raise UnsafeArchive(name, "an absolute name, or one with '..'")
        if not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
            raise UnsafeArchive(name, "a device, FIFO or other special file")
        target = os.path.join(root, name)
        parent = os.path.realpath(os.path.dirname(target))
        if not _inside(parent, root) or (not m.issym() and not _inside(os.path.realpath(target), root)):
            raise UnsafeArchive(name, "it would be written through a link that leaves the directory")
        if m.issym():
            if os.path.isabs(m.linkname) or not _inside(os.path.realpath(os.path.join(parent, m.linkname)), root):
                raise UnsafeArchive(name, f"a symbolic link to {m.linkname!r}, outside the directory")
        if m.islnk():
            if (os.path.isabs(m.linkname) or ".." in m.linkname.split("/")
                    or not _inside(os.path.realpath(os.path.join(root, m.linkname)), root)):
                raise UnsafeArchive(name, f"a hard link to {m.linkname!r}, outside the directory")
        m = copy.copy(m)
        m.uid, m.gid, m.uname, m.gname = os.geteuid(), os.getegid(), "", ""
        m.mode &= 0o755
        yield m


def _extract(data, local_dir):
    os.makedirs(local_dir, exist_ok=True)
    root = os.path.realpath(local_dir)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as t:
        kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        t.extractall(root, members=_safe_members(t, root), **kw)


class CommandFailed(Exception):
    def __init__(self, result):
        super().__init__(f"command exited {result.exit_code}: {result.stderr!r:.200}")
        self.result = result


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=None):
        super().__init__("lcd", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


def _q(s):
    return urllib.parse.quote(str(s), safe="")


def _command(cmd):
    if isinstance(cmd, str):
        return {"cmd": cmd}
    return {"argv": [str(a) for a in cmd]}


def _where(body, env, workdir, user):
    """What exec, sessions and create share: env, workdir, user."""
    if env:
        body["env"] = {str(k): str(v) for k, v in env.items()}
    if workdir:
        body["workdir"] = workdir
    if user is not None:
        body["user"] = str(user)
    return body


def _exec_body(cmd, env, workdir, user, timeout, stdin, binary, max_output):
    body = _where(_command(cmd), env, workdir, user)
    if timeout:
        body["timeout"] = int(timeout)
    if stdin is not None:
        data = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
        body["stdin"] = base64.b64encode(data).decode()
    if binary:
        body["encoding"] = "base64"
    if max_output is not None:
        body["max_output"] = int(max_output)
    return body


_IDEMPOTENT = ("GET", "HEAD", "PUT", "DELETE")


def _dropped(sock):
    """True when an idle connection's socket has something to read: the
    server closed it (EOF) or broke the protocol; either way, not reusable."""
    p = select.poll()
    p.register(sock, select.POLLIN)
    return bool(p.poll(0))


class _Kept:
    """A thread's idle connection to lcd, closed when the thread ends (its
    thread-local data goes) or the Client is collected."""
    __slots__ = ("conn", "pid")

    def __init__(self):
        self.conn, self.pid = None, None

    def take(self):
        conn, self.conn = self.conn, None
        return conn

    def __del__(self):
        try:
            if self.conn is not None:
                self.conn.close()
        except Exception:  # noqa: BLE001 -- at interpreter exit, modules may be gone
            pass


class Client:
    """A connection to lcd.  Each thread keeps its own open connection
    between requests (HTTP keep-alive), so one Client may be shared by
    threads and a process after fork never reuses its parent's."""

    def __init__(self, socket=None, url=None, token=None, timeout=None):
        url = url or (None if socket else os.environ.get("LCD_URL"))
        if url:
            u = urllib.parse.urlsplit(url)
            if u.scheme not in ("http", "https") or not u.hostname:
                raise ValueError(f"url {url!r}: expected http://HOST:PORT")
            self._tcp = (u.scheme, u.hostname, u.port or (443 if u.scheme == "https" else 80))
            self.endpoint = url
        else:
            self._tcp = None
            self.endpoint = (socket or os.environ.get("LCD_SOCKET")
                             or os.path.join(os.environ.get("LCRUN_STATE_DIR") or "/run/lcrun", "lcd.sock"))
        self.token = token if token is not None else os.environ.get("LCD_TOKEN") or None
        self.timeout = timeout
        self._idle = threading.local()

    # ---- HTTP ----

    def _connection(self):
        if self._tcp:
            scheme, host, port = self._tcp
            cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
            return cls(host, port, timeout=self.timeout)
        return _UnixConnection(self.endpoint, timeout=self.timeout)

    def _take(self):
        """This thread's idle connection if lcd still holds it open, else a
        new one; returns (connection, reused)."""
        kept = getattr(self._idle, "kept", None)
        conn = kept and kept.take()
        if conn is not None:
            if kept.pid == os.getpid() and conn.sock is not None and not _dropped(conn.sock):
                return conn, True
            conn.close()
        return self._connection(), False

    def _done(self, conn, resp):
        """The caller is through with resp: its connection is kept for this
        thread's next request when the answer was read to its end and lcd
        keeps the connection open; otherwise it is closed."""
        kept = getattr(self._idle, "kept", None)
        if kept is None:
            kept = self._idle.kept = _Kept()
        if (resp is not None and resp.isclosed() and not resp.will_close and conn.sock is not None
                and kept.conn is None):
            kept.conn, kept.pid = conn, os.getpid()
        else:
            conn.close()

    def close(self):
        """Close this thread's idle connection (others close with their
        threads, or when the Client is collected)."""
        kept = getattr(self._idle, "kept", None)
        conn = kept and kept.take()
        if conn is not None:
            conn.close()

    def _send(self, method, path, body=None, raw=None, length=None):
        """Send a request; returns (connection, response) for the caller to read."""
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        elif raw is not None:
            headers["Content-Type"] = "application/octet-stream"
            if isinstance(raw, (bytes, bytearray, memoryview)):
                data = bytes(raw)
            else:
                data = raw
                if length is not None:
                    headers["Content-Length"] = str(length)
                else:
                    headers["Transfer-Encoding"] = "chunked"
        # A kept connection lcd closed since its last answer (a restart) is
        # found before use (_take); if it breaks anyway while this request
        # is sent, nothing reached lcd whole and the request goes again on a
        # new connection; if it breaks before the answer, only a request
        # that is safe to repeat goes again.
        replayable = data is None or isinstance(data, bytes)
        while True:
            conn, reused = self._take()
            try:
                try:
                    if not replayable and length is None:  # a file object of unknown length
                        conn.request(method, "/v1" + path, body=data, headers=headers, encode_chunked=True)
                    else:
                        conn.request(method, "/v1" + path, body=data, headers=headers)
                except (BrokenPipeError, ConnectionResetError):
                    if reused and replayable:
                        conn.close()
                        continue
                    raise
                try:
                    resp = conn.getresponse()
                except (http.client.RemoteDisconnected, ConnectionResetError):
                    if reused and replayable and method in _IDEMPOTENT:
                        conn.close()
                        continue
                    raise
                break
            except (ConnectionRefusedError, FileNotFoundError) as e:
                conn.close()
                raise LcdError(0, f"cannot reach lcd at {self.endpoint} (is it running?): {e}", 125) from None
            except BaseException:
                conn.close()
                raise
        if resp.status >= 300:
            text = resp.read()
            self._done(conn, resp)
            try:
                err = json.loads(text)
                msg, code = err.get("error", text.decode(errors="replace")), err.get("exit_code")
            except ValueError:
                msg, code = text.decode(errors="replace"), None
            raise _ERRORS.get(resp.status, LcdError)(resp.status, msg, code)
        return conn, resp

    def request(self, method, path, body=None):
        """One JSON request under /v1; returns the parsed answer (raises LcdError)."""
        conn, resp = self._send(method, path, body=body)
        try:
            text = resp.read()
        finally:
            self._done(conn, resp)
        return json.loads(text) if text else None

    # ---- who, sandboxes ----

    def whoami(self):
        """{"kind": "operator"} or {"kind": "task", "task", "app", "function"}."""
        return self.request("GET", "/whoami")

    def create_sandbox(self, image=None, *, memory=None, cpus=None, pids=None, limits=None, net=None, env=None,
                       secrets=None, user=None, workdir=None, ttl=None, idle_timeout=None, labels=None, name=None,
                       mounts=None, model_gateway=None):
        """Make a sandbox and return it.  image: a stored image (a snapshot's
        name too) or "host" (the default); limits: a named set ("small") or
        a dict; memory/cpus/pids: single limits; net: a policy name or
        {"mode", "allow", "hosts"}; secrets: names (a task: only those its
        function declares); mounts: operator only; model_gateway:
        {"provider": "anthropic", "secret": "ANTHROPIC_API_KEY",
        "budget_usd": 5}: the model API through lcd's gateway, the key
        staying outside the sandbox."""
        req = {}
        if image:
            req["image"] = image
        lim = dict(limits) if isinstance(limits, dict) else {}
        if memory is not None:
            lim["memory"] = memory
        if cpus is not None:
            lim["cpus"] = cpus
        if pids is not None:
            lim["pids"] = pids
        if isinstance(limits, str):
            if lim:
                raise ValueError("limits as a set name does not mix with memory/cpus/pids")
            req["limits"] = limits
        elif lim:
            req["limits"] = lim
        for key, val in (("net", net), ("secrets", secrets), ("ttl", ttl), ("idle_timeout", idle_timeout),
                         ("labels", labels), ("name", name), ("mounts", mounts), ("model_gateway", model_gateway)):
            if val is not None:
                req[key] = val
        _where(req, env, workdir, user)
        info = self.request("POST", "/sandboxes", req)
        return Sandbox(self, info["id"], info)

    def sandbox(self, id_or_name):
        """An existing sandbox (raises NotFound)."""
        info = self.request("GET", f"/sandboxes/{_q(id_or_name)}")
        return Sandbox(self, info["id"], info)

    def sandboxes(self, labels=None, app=None, state=None):
        """Descriptions of the sandboxes this caller may see."""
        q = []
        for k, v in (labels or {}).items():
            q.append(("label", f"{k}={v}"))
        if app:
            q.append(("app", app))
        if state:
            q.append(("state", state))
        qs = ("?" + urllib.parse.urlencode(q)) if q else ""
        return self.request("GET", f"/sandboxes{qs}")["sandboxes"]

    # ---- maps ----

    def _app(self, app):
        app = app or os.environ.get("LC_TASK_APP")
        if not app:
            raise ValueError("no app given and LC_TASK_APP is not set")
        return app

    def map_get(self, map, key, app=None, default=None):
        try:
            return self.request("GET", f"/apps/{_q(self._app(app))}/maps/{_q(map)}/keys/{_q(key)}")["value"]
        except NotFound as e:
            if "no key" in e.message:
                return default
            raise

    def map_set(self, map, key, value, app=None, ttl=None, if_absent=False):
        """True when set; False when if_absent and a live value was there."""
        body = {"value": str(value), "if_absent": bool(if_absent)}
        if ttl:
            body["ttl"] = int(ttl)
        try:
            self.request("PUT", f"/apps/{_q(self._app(app))}/maps/{_q(map)}/keys/{_q(key)}", body)
            return True
        except Conflict:
            if if_absent:
                return False
            raise

    def _request_or(self, method, path, refusal, text):
        """True when lcd did it; False when it refused with that error
        class saying text; any other error raises."""
        try:
            self.request(method, path)
            return True
        except refusal as e:
            if text in e.message:
                return False
            raise

    def map_delete(self, map, key, app=None):
        path = f"/apps/{_q(self._app(app))}/maps/{_q(map)}/keys/{_q(key)}"
        return self._request_or("DELETE", path, NotFound, "no key")

    def map_list(self, map, app=None, prefix=None):
        qs = "?" + urllib.parse.urlencode({"prefix": prefix}) if prefix else ""
        keys = self.request("GET", f"/apps/{_q(self._app(app))}/maps/{_q(map)}{qs}")["keys"]
        return {k["key"]: k["value"] for k in keys}

    # ---- tasks ----

    def spawn(self, function, args=None, app=None):
        """Queue a task of app:function; returns its id."""
        path = f"/apps/{_q(self._app(app))}/functions/{_q(function)}/spawn"
        return self.request("POST", path, {"args": {} if args is None else args})["id"]

    def spawn_map(self, function, args_list, app=None):
        """One task per argument set, all or none; returns their ids."""
        path = f"/apps/{_q(self._app(app))}/functions/{_q(function)}/spawn_map"
        return self.request("POST", path, {"args": list(args_list)})["ids"]

    def task(self, task_id):
        return self.request("GET", f"/tasks/{_q(task_id)}")

    def cancel(self, task_id):
        """Cancel a queued or running task (its sandboxes go with it):
        True; False when it had ended already."""
        return self._request_or("POST", f"/tasks/{_q(task_id)}/cancel", Conflict, "has already ended")

    def wait(self, task_id, timeout=None):
        """Wait for a task to end and return it (its "state", "result" …);
        with a timeout (seconds), return it as it is when the time runs out."""
        import time
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = 60 if deadline is None else max(0, min(60, deadline - time.monotonic()))
            conn, resp = self._send("GET", f"/tasks/{_q(task_id)}/result?wait={int(left + 0.999)}")
            try:
                task = json.loads(resp.read())
            finally:
                self._done(conn, resp)
            if resp.status == 200 or (deadline is not None and time.monotonic() >= deadline):
                return task


class _Scoped:
    """A context manager that closes the object on exit, whatever happened
    in the block."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class Sandbox(_Scoped):
    """A sandbox made through lcd.  As a context manager it is destroyed on
    exit, whatever happened in the block."""

    def __init__(self, client, id, info=None):
        self.client = client
        self.id = id
        self.info = info or {}

    def __repr__(self):
        return f"Sandbox({self.id!r})"

    def close(self):
        self.destroy()

    def _path(self, rest=""):
        return f"/sandboxes/{_q(self.id)}{rest}"

    def refresh(self):
        self.info = self.client.request("GET", self._path())
        return self.info

    @property
    def state(self):
        return self.refresh()["state"]

    def run(self, cmd, *, env=None, workdir=None, user=None, timeout=None, stdin=None, binary=False,
            max_output=None, check=False):
        """Run cmd (a shell line, or an argv list) and wait; output is
        captured (1 MiB per stream by default: see .truncated)."""
        body = _exec_body(cmd, env, workdir, user, timeout, stdin, binary, max_output)
        r = ExecResult(self.client.request("POST", self._path("/exec"), body), binary)
        return r.check() if check else r

    def run_stream(self, cmd, *, env=None, workdir=None, user=None, timeout=None, stdin=None, binary=False):
        """Run cmd and yield ("stdout", text), ("stderr", text) as the output
        happens, in order, and last ("exit", ExecResult)."""
        body = _exec_body(cmd, env, workdir, user, timeout, stdin, binary, None)
        conn, resp = self.client._send("POST", self._path("/exec?stream=1"), body=body)
        try:
            for line in resp:
                ev = json.loads(line)
                for kind in ("stdout", "stderr"):
                    if kind in ev:
                        yield kind, base64.b64decode(ev[kind]) if binary else ev[kind]
                if "error" in ev:
                    raise LcdError(resp.status, ev["error"], ev.get("exit_code"))
                if "exit_code" in ev:
                    resp.read()  # the stream's end, so that the connection can be kept
                    yield "exit", ExecResult(ev)
                    return
            raise LcdError(resp.status, "the stream ended without a status", 125)
        finally:
            self.client._done(conn, resp)

    # ---- files ----

    def upload(self, path, data, mode=None):
        """Write a file in the sandbox: data is bytes, str, or a binary file
        object (streamed).  It belongs to the sandbox's user."""
        q = f"?path={_q(path)}" + (f"&mode={mode:o}" if mode is not None else "")
        length = None
        if isinstance(data, str):
            data = data.encode()
        elif hasattr(data, "read"):
            try:
                length = os.fstat(data.fileno()).st_size - data.tell()
            except (AttributeError, OSError, io.UnsupportedOperation):
                length = None
        conn, resp = self.client._send("PUT", self._path("/files" + q), raw=data, length=length)
        try:
            return json.loads(resp.read())
        finally:
            self.client._done(conn, resp)

    def upload_file(self, local_path, path, mode=None):
        with open(local_path, "rb") as f:
            return self.upload(path, f, mode if mode is not None else os.stat(local_path).st_mode & 0o777)

    def upload_dir(self, local_dir, path):
        """Copy a local directory into the (existing) directory path."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
            t.add(local_dir, arcname=os.path.basename(os.path.normpath(local_dir)))
        buf.seek(0)
        conn, resp = self.client._send("PUT", self._path(f"/files?path={_q(path)}&tar=1"), raw=buf.getvalue())
        try:
            return json.loads(resp.read())
        finally:
            self.client._done(conn, resp)

    def download(self, path):
        """A file's bytes."""
        conn, resp = self.client._send("GET", self._path(f"/files?path={_q(path)}"))
        try:
            return resp.read()
        finally:
            self.client._done(conn, resp)

    def download_file(self, path, local_path):
        """Stream a file to local_path; returns its size."""
        conn, resp = self.client._send("GET", self._path(f"/files?path={_q(path)}"))
        n = 0
        try:
            with open(local_path, "wb") as f:
                while True:
                    chunk = resp.read(_CHUNK)
                    if not chunk:
                        break
                    f.write(chunk)
                    n += len(chunk)
        finally:
            self.client._done(conn, resp)
        return n

    def download_dir(self, path, local_dir):
        """Copy the directory (or file) path into the local directory.  The
        sandbox wrote what comes back: an entry that would land outside
        local_dir (through a name or a link), or that is not a file,
        directory or link, raises UnsafeArchive; files are the caller's,
        without setuid/setgid bits."""
        conn, resp = self.client._send("GET", self._path(f"/files?path={_q(path)}&tar=1"))
        try:
            data = resp.read()
        finally:
            self.client._done(conn, resp)
        _extract(data, local_dir)

    # ---- sessions, images, lifecycle ----

    def session(self, shell=None, env=None, workdir=None, user=None):
        """A persistent shell: cd and exported variables carry from one
        run to the next.  Use it as a context manager (or close it)."""
        body = _where({"shell": shell} if shell else {}, env, workdir, user)
        info = self.client.request("POST", self._path("/sessions"), body)
        return Session(self, info["id"])

    def snapshot(self, name):
        """Save the sandbox as image name; returns {"image", "digest"}."""
        return self.client.request("POST", self._path("/snapshot"), {"name": name})

    def fork(self, n=1):
        """n new sandboxes from a snapshot of this one (same settings)."""
        out = self.client.request("POST", self._path("/fork"), {"n": int(n)})
        return [Sandbox(self.client, i) for i in out["ids"]]

    def pause(self):
        return self.client.request("POST", self._path("/pause"))

    def resume(self):
        return self.client.request("POST", self._path("/resume"))

    def stop(self):
        return self.client.request("POST", self._path("/stop"))

    def start(self):
        return self.client.request("POST", self._path("/start"))

    def destroy(self):
        """Terminate and remove; True if it was there, False if already gone."""
        try:
            self.client.request("DELETE", self._path())
            return True
        except NotFound:
            return False


class Session(_Scoped):
    """A persistent shell in a sandbox; closed on leaving a with block."""

    def __init__(self, sandbox, id):
        self.sandbox = sandbox
        self.id = id
        self.closed = False

    def __repr__(self):
        return f"Session({self.sandbox.id!r}, {self.id!r})"

    def run(self, cmd, timeout=None, binary=False, max_output=None, check=False):
        """Run a shell line in the session.  A timeout ends the session."""
        body = {"cmd": cmd}
        if timeout:
            body["timeout"] = int(timeout)
        if binary:
            body["encoding"] = "base64"
        if max_output is not None:
            body["max_output"] = int(max_output)
        r = ExecResult(self.sandbox.client.request(
            "POST", self.sandbox._path(f"/sessions/{_q(self.id)}/run"), body), binary)
        if r.session_ended:
            self.closed = True
        return r.check() if check else r

    def close(self):
        if self.closed:
            return
        self.closed = True
        try:
            self.sandbox.client.request("DELETE", self.sandbox._path(f"/sessions/{_q(self.id)}"))
        except NotFound:
            pass
