#!/usr/bin/python3
"""A CRI client for the tests: what kubelet asks of a runtime, without kubelet.

usage:
  cri-client.py --socket SOCK call METHOD [REQUEST-JSON]
      one RuntimeService call; the request is JSON in the proto's field
      names (snake_case or camelCase), the response is printed as JSON.
  cri-client.py exec URL [--stdin TEXT]
      attach to an Exec's streaming URL (WebSocket, v4.channel.k8s.io):
      stdout and stderr go to ours, the status is the command's exit code.
  cri-client.py image DIR REF OUT.tar [--entrypoint JSON]
      write DIR as a one-layer OCI image archive named REF (for
      `ctr images import`; no registry is reachable here).

The messages come from cri-runtime.proto beside this file (the part of
Kubernetes' runtime.v1 API these tests use), compiled on each start with
Debian's python3-grpc-tools (into $CRI_CLIENT_PB_DIR when set, once).
"""
import base64
import gzip
import hashlib
import io
import json
import os
import socket
import struct
import sys
import tarfile
import tempfile
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIME_METHODS = {
    "Version", "RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "PodSandboxStatus", "CreateContainer",
    "StartContainer", "StopContainer", "RemoveContainer", "ContainerStatus", "ExecSync", "Exec", "ContainerStats",
}


def load_api():
    """The compiled messages: kept in $CRI_CLIENT_PB_DIR when it is set (a
    test's many calls compile once), else in a temporary directory."""
    keep = os.environ.get("CRI_CLIENT_PB_DIR")
    out = keep or tempfile.mkdtemp(prefix="cri-client-")
    if not os.path.exists(os.path.join(out, "cri_runtime_pb2_grpc.py")):
        from grpc_tools import protoc
        os.makedirs(out, exist_ok=True)
        rc = protoc.main(["protoc", "-I" + HERE, "--python_out=" + out, "--grpc_python_out=" + out,
                          os.path.join(HERE, "cri-runtime.proto")])
        if rc != 0:
            sys.exit("cri-client: cannot compile cri-runtime.proto")
    sys.path.insert(0, out)
    import cri_runtime_pb2 as pb
    import cri_runtime_pb2_grpc as pbg
    if not keep:
        for f in os.listdir(out):
            os.unlink(os.path.join(out, f))
        os.rmdir(out)
    return pb, pbg


def call(sock, method, body):
    import grpc
    from google.protobuf import json_format
    if method not in RUNTIME_METHODS:
        sys.exit("cri-client: unknown method %s (one of %s)" % (method, ", ".join(sorted(RUNTIME_METHODS))))
    pb, pbg = load_api()
    req = json_format.Parse(body or "{}", getattr(pb, method + "Request")())
    with grpc.insecure_channel("unix://" + sock) as ch:
        stub = pbg.RuntimeServiceStub(ch)
        try:
            resp = getattr(stub, method)(req, timeout=120)
        except grpc.RpcError as e:
            print("cri-client: %s: %s: %s" % (method, e.code().name, e.details()), file=sys.stderr)
            return 1
    print(json_format.MessageToJson(resp, preserving_proto_field_name=True, indent=None))
    return 0


# ---- exec streams: RFC 6455 framing, Kubernetes' channel byte in front ----------

def ws_send(s, opcode, data):
    mask = os.urandom(4)
    head = bytes([0x80 | opcode])
    n = len(data)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", n)
    s.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))


def read_exact(f, n):
    b = f.read(n)
    if len(b) != n:
        raise EOFError
    return b


def ws_recv(f):
    """One whole message: (opcode, payload); fragments joined."""
    payload, opcode = b"", None
    while True:
        b0, b1 = read_exact(f, 2)
        op = b0 & 0x0F
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", read_exact(f, 2))[0]
        elif n == 127:
            n = struct.unpack(">Q", read_exact(f, 8))[0]
        mask = read_exact(f, 4) if b1 & 0x80 else None
        data = read_exact(f, n)
        if mask:
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        if op in (0x8, 0x9, 0xA):
            return op, data
        if opcode is None:
            opcode = op
        payload += data
        if b0 & 0x80:
            return opcode, payload


def stream_exec(url, stdin_text):
    u = urllib.parse.urlsplit(url)
    s = socket.create_connection((u.hostname, u.port or 80), timeout=60)
    key = base64.b64encode(os.urandom(16)).decode()
    path = u.path + ("?" + u.query if u.query else "")
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
               "Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n" % (path, u.netloc, key)).encode())
    f = s.makefile("rb")
    status = f.readline()
    if b" 101 " not in status:
        sys.exit("cri-client: exec %s: %s" % (url, status.decode(errors="replace").strip()))
    while f.readline() not in (b"\r\n", b"\n", b""):
        pass
    if stdin_text is not None:
        ws_send(s, 0x2, b"\x00" + stdin_text.encode())
    code = 0
    try:
        while True:
            op, data = ws_recv(f)
            if op == 0x8:
                break
            if op == 0x9:
                ws_send(s, 0xA, data)
                continue
            if not data:
                continue
            ch, body = data[0], data[1:]
            if ch == 1:
                sys.stdout.buffer.write(body)
                sys.stdout.flush()
            elif ch == 2:
                sys.stderr.buffer.write(body)
                sys.stderr.flush()
            elif ch == 3 and body:
                st = json.loads(body)
                if st.get("status") != "Success":
                    code = 1
                    for c in (st.get("details") or {}).get("causes") or []:
                        if c.get("reason") == "ExitCode":
                            code = int(c.get("message", "1"))
                    if st.get("reason") != "NonZeroExitCode":
                        print("cri-client: exec: %s" % st.get("message"), file=sys.stderr)
    except EOFError:
        pass
    s.close()
    return code


# ---- a one-layer OCI image archive -----------------------------------------------

def blob(tf, data):
    d = hashlib.sha256(data).hexdigest()
    ti = tarfile.TarInfo("blobs/sha256/" + d)
    ti.size = len(data)
    tf.addfile(ti, io.BytesIO(data))
    return "sha256:" + d, len(data)


def write_image(src, ref, out, entrypoint):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as lt:
        for name in sorted(os.listdir(src)):
            lt.add(os.path.join(src, name), arcname=name)
    layer_tar = raw.getvalue()
    layer_gz = gzip.compress(layer_tar, mtime=0)
    diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
    config = {"architecture": "amd64", "os": "linux",
              "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
              "rootfs": {"type": "layers", "diff_ids": [diff_id]}}
    if entrypoint:
        config["config"]["Entrypoint"] = entrypoint
    with tarfile.open(out, "w") as tf:
        ld, ls = blob(tf, layer_gz)
        cd, cs = blob(tf, json.dumps(config).encode())
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
                    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": ld,
                                "size": ls}]}
        md, ms = blob(tf, json.dumps(manifest).encode())
        index = {"schemaVersion": 2, "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": ms,
            "annotations": {"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": ref}}]}
        for name, data in (("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'),
                           ("index.json", json.dumps(index).encode())):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return 0


def main(argv):
    sock = "/run/containerd/containerd.sock"
    if len(argv) >= 2 and argv[0] == "--socket":
        sock, argv = argv[1], argv[2:]
    if len(argv) >= 2 and argv[0] == "call":
        return call(sock, argv[1], argv[2] if len(argv) > 2 else None)
    if len(argv) >= 2 and argv[0] == "exec":
        stdin_text = None
        if len(argv) == 4 and argv[2] == "--stdin":
            stdin_text = argv[3]
        return stream_exec(argv[1], stdin_text)
    if len(argv) >= 4 and argv[0] == "image":
        ep = json.loads(argv[5]) if len(argv) == 6 and argv[4] == "--entrypoint" else None
        return write_image(argv[1], argv[2], argv[3], ep)
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
