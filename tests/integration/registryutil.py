# SPDX-License-Identifier: LGPL-2.1-or-later
"""Helpers for the tests of `hutch image pull` (test_image_pull.py): a
busybox OCI image layout made offline, Debian's docker-registry on
127.0.0.1 with its storage in a temporary folder, pushes with skopeo, and
a scriptable front server (plain HTTP or TLS with a trustme CA) that
proxies to the registry and can demand a Bearer token, redirect blobs to
another origin, cut a blob off, or answer with whatever a test scripts.
Every socket is bound to 127.0.0.1."""

import base64
import gzip
import hashlib
import http.client
import http.server
import io
import json
import os
import shutil
import socket
import ssl
import subprocess
import tarfile
import tempfile
import threading
import time
import urllib.parse
from contextlib import contextmanager
from pathlib import Path

BUSYBOX = "/bin/busybox"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tar(files):
    """A tar (bytes) of {path: bytes | ("dir",) | ("link", target)}."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for path, data in files.items():
            ti = tarfile.TarInfo(path)
            ti.mtime = 0
            if data == ("dir",):
                ti.type = tarfile.DIRTYPE
                ti.mode = 0o755
                t.addfile(ti)
            elif isinstance(data, tuple) and data[0] == "link":
                ti.type = tarfile.SYMTYPE
                ti.linkname = data[1]
                t.addfile(ti)
            else:
                ti.size = len(data)
                ti.mode = 0o755
                t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


class Layout:
    """An OCI image layout directory being written."""

    def __init__(self, root):
        self.root = Path(root)
        (self.root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
        (self.root / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
        self.index = {"schemaVersion": 2, "mediaType": MT_INDEX, "manifests": []}

    @classmethod
    def existing(cls, root):
        """A layout already written (to push it)."""
        self = cls.__new__(cls)
        self.root = Path(root)
        return self

    def blob(self, data):
        d = sha256(data)
        (self.root / "blobs" / "sha256" / d[7:]).write_bytes(data)
        return {"digest": d, "size": len(data)}

    def image(self, arch="amd64", marker=b"", big=0):
        """A busybox image's manifest for linux/@arch (bytes, descriptor):
        /bin/busybox, /bin/sh, /etc/marker (@marker), and @big bytes of
        incompressible data in /big when asked."""
        files = {"bin": ("dir",), "bin/busybox": Path(BUSYBOX).read_bytes(),
                 "bin/sh": ("link", "busybox"), "etc": ("dir",),
                 "etc/marker": marker or arch.encode()}
        if big:
            files["big"] = os.urandom(big)
        tar = _tar(files)
        layer = gzip.compress(tar, mtime=0)
        config = json.dumps({"architecture": arch, "os": "linux",
                             "config": {"Cmd": ["/bin/sh"]},
                             "rootfs": {"type": "layers", "diff_ids": [sha256(tar)]}}).encode()
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": MT_MANIFEST,
            "config": {"mediaType": MT_CONFIG, **self.blob(config)},
            "layers": [{"mediaType": MT_LAYER_GZIP, **self.blob(layer)}],
        }).encode()
        desc = {"mediaType": MT_MANIFEST, **self.blob(manifest),
                "platform": {"architecture": arch, "os": "linux"}}
        return manifest, desc

    def tag(self, desc, name):
        d = dict(desc)
        d["annotations"] = {"org.opencontainers.image.ref.name": name}
        self.index["manifests"].append(d)
        (self.root / "index.json").write_text(json.dumps(self.index))

    def tag_index(self, descs, name):
        """An image index of @descs, tagged @name."""
        idx = json.dumps({"schemaVersion": 2, "mediaType": MT_INDEX,
                          "manifests": descs}).encode()
        self.tag({"mediaType": MT_INDEX, **self.blob(idx)}, name)
        return sha256(idx)


class Registry:
    """Debian's docker-registry on 127.0.0.1:PORT, plain HTTP."""

    def __init__(self, workdir):
        self.dir = Path(workdir)
        self.port = free_port()
        self.config = self.dir / "registry.yml"
        self.config.write_text(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
            f"    rootdirectory: {self.dir / 'storage'}\n  delete:\n    enabled: true\n"
            f"http:\n  addr: 127.0.0.1:{self.port}\n")
        self.log = open(self.dir / "registry.log", "wb")
        self.proc = subprocess.Popen(["docker-registry", "serve", str(self.config)],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/v2/")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("docker-registry did not start: "
                                   + (self.dir / "registry.log").read_text())
            time.sleep(0.05)

    @property
    def host(self):
        return f"127.0.0.1:{self.port}"

    def push(self, layout, tag, dest, all_images=False):
        """skopeo copy oci:LAYOUT:TAG docker://127.0.0.1:PORT/DEST."""
        cmd = ["skopeo", "--insecure-policy", "copy", "--quiet", "--dest-tls-verify=false"]
        if all_images:
            cmd.append("--all")
        cmd += [f"oci:{layout.root}:{tag}", f"docker://{self.host}/{dest}"]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


@contextmanager
def running_registry(prefix, fill=None):
    """A Registry in a temporary folder named @prefix..., holding the amd64
    busybox of an OCI layout there, tagged "amd" (reg.amd, reg.layout);
    @fill(reg, layout) pushes what the tests need. Stopped and removed
    after, also when the fill fails."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    reg = None
    try:
        reg = Registry(d)
        layout = Layout(d / "layout")
        _, reg.amd = layout.image("amd64")
        layout.tag(reg.amd, "amd")
        reg.layout = layout
        if fill is not None:
            fill(reg, layout)
        yield reg
    finally:
        if reg is not None:
            reg.close()
        shutil.rmtree(d, ignore_errors=True)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class FrontHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "front"

    def log_message(self, *args):
        pass

    def _send(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def do_GET(self):
        f = self.server.front
        with f.lock:
            f.requests.append((self.path, dict(self.headers.items())))
        path = urllib.parse.urlsplit(self.path).path
        if path in f.routes:
            return f.routes[path](self)
        if path == "/token":
            return self._token()
        if f.bearer and path.startswith("/v2/"):
            if self.headers.get("Authorization") != f"Bearer {f.bearer}":
                realm = f"{f.scheme}://127.0.0.1:{f.port}/token"
                return self._send(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', [
                    ("WWW-Authenticate",
                     f'Bearer realm="{realm}",service="test-registry",'
                     f'scope="repository:{f.scope}:pull"'),
                    ("Content-Type", "application/json")])
        if f.basic and path.startswith("/v2/"):
            want = "Basic " + base64.b64encode(f.basic.encode()).decode()
            if self.headers.get("Authorization") != want:
                return self._send(401, b"{}", [("WWW-Authenticate", 'Basic realm="test"')])
        if f.redirect_blobs and "/blobs/" in path:
            return self._send(307, headers=[("Location", f.redirect_blobs + self.path)])
        return self._forward()

    def _token(self):
        f = self.server.front
        if f.token_userpass is not None:
            want = "Basic " + base64.b64encode(f.token_userpass.encode()).decode()
            if self.headers.get("Authorization") != want:
                return self._send(401, b'{"details":"bad credentials"}')
        body = json.dumps({"token": f.bearer, "expires_in": 300}).encode()
        return self._send(200, body, [("Content-Type", "application/json")])

    def _forward(self):
        f = self.server.front
        if f.upstream is None:
            return self._send(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"no"}]}')
        c = http.client.HTTPConnection("127.0.0.1", f.upstream, timeout=30)
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() in ("accept", "range")}
        c.request("GET", self.path, headers=headers)
        r = c.getresponse()
        body = r.read()
        keep = [(k, v) for k, v in r.getheaders()
                if k.lower() in ("content-type", "docker-content-digest", "content-range",
                                 "location", "www-authenticate")]
        if f.cut_after is not None and "/blobs/" in self.path and r.status in (200, 206):
            # Promise the whole body, send @cut_after bytes, hang up.
            self.send_response(r.status)
            for k, v in keep:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[:f.cut_after])
            self.wfile.flush()
            self.close_connection = True
            return
        self._send(r.status, body, keep)


class Front:
    """A server on 127.0.0.1 in front of the registry on @upstream (or in
    front of nothing: every answer scripted in @routes). With @cert (a
    trustme LeafCert) it speaks TLS."""

    def __init__(self, upstream=None, cert=None):
        self.upstream = upstream
        self.routes = {}
        self.bearer = None
        self.scope = ""
        self.token_userpass = None
        self.basic = None
        self.redirect_blobs = None
        self.cut_after = None
        self.requests = []
        self.lock = threading.Lock()
        self.server = _Server(("127.0.0.1", 0), FrontHandler)
        self.server.front = self
        self.port = self.server.server_address[1]
        self.scheme = "http"
        if cert is not None:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            cert.configure_cert(ctx)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
            self.scheme = "https"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def host(self):
        return f"127.0.0.1:{self.port}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()



class ConnectProxy:
    """An HTTP CONNECT proxy on 127.0.0.1 that records each CONNECT
    target and tunnels the bytes (or answers 403 when @refuse)."""

    def __init__(self, refuse=False):
        self.refuse = refuse
        self.targets = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.closing = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        with c:
            head = b""
            while b"\r\n\r\n" not in head:
                b = c.recv(1)
                if not b:
                    return
                head += b
            target = head.split(b" ")[1].decode()
            self.targets.append(target)
            if self.refuse:
                c.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                return
            host, port = target.rsplit(":", 1)
            with socket.create_connection((host.strip("[]"), int(port))) as u:
                c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                t = threading.Thread(target=self._pump, args=(u, c), daemon=True)
                t.start()
                self._pump(c, u)
                t.join(30)

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes accept()
        except OSError:
            pass
        self.sock.close()
        self.thread.join(5)
