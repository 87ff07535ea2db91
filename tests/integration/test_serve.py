# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch serve (docs/api.md): the HTTP API driven over its unix socket with
http.client, as root and as the unprivileged user, each server with its
own HUTCH_HOME and HUTCH_STATE_DIR. Every route of docs/api.yaml is served
and exercised, streaming exec and a hangup that kills the command, the
files API's path-escape attempts, bad input that changes nothing and
leaves the server serving, slow clients that block nobody, and TCP that
refuses requests without the token."""

import base64
import http.client
import json
import os
import re
import secrets
import select
import signal
import socket
import threading
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from conftest import REPO, free_vm_templates, kill_quietly, live_with_marker, wait_pidfds

SPEC = REPO / "docs" / "api.yaml"
READY_TIMEOUT = 30
HTTP_TIMEOUT = 60
METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


# ---- the client ----


@contextmanager
def as_euid(uid):
    """Runs the block with effective uid @uid: a unix socket's peer
    credentials are those of connect()."""
    if uid is None or uid == os.geteuid():
        yield
        return
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(0)


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, uid=None, timeout=HTTP_TIMEOUT):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path
        self.uid = uid

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        with as_euid(self.uid):
            s.connect(self.unix_path)
        self.sock = s


class Response:
    def __init__(self, status, headers, data):
        self.status = status
        self.headers = headers
        self.data = data

    @property
    def json(self):
        return json.loads(self.data)

    @property
    def error(self):
        """The error object of a JSON error answer."""
        body = self.json
        assert set(body) == {"error"}, body
        assert set(body["error"]) == {"code", "message", "field"}, body
        return body["error"]

    def __repr__(self):
        return f"<{self.status} {self.data[:300]!r}>"


class Api:
    """One server's client: call() makes one request on a new connection
    and records the route it hit."""

    def __init__(self, sock_path, uid):
        self.sock_path = sock_path
        self.uid = uid
        self.hits = set()

    def connection(self, timeout=HTTP_TIMEOUT):
        return UnixConnection(self.sock_path, self.uid, timeout)

    def call(self, method, url, body=None, headers=None, timeout=HTTP_TIMEOUT):
        headers = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        c = self.connection(timeout)
        try:
            c.request(method, url, body=body, headers=headers)
            r = c.getresponse()
            resp = Response(r.status, dict(r.getheaders()), r.read())
        finally:
            c.close()
        self.hits.add((method, url.split("?")[0]))
        return resp

    def ok(self, method, url, body=None, status=200, **kw):
        r = self.call(method, url, body, **kw)
        assert r.status == status, f"{method} {url}: {r}"
        return r

    def exec(self, name, argv, **fields):
        r = self.ok("POST", f"/v1/sandboxes/{name}/exec", {"argv": argv, **fields})
        return r.json

    def stream(self, name, body, timeout=HTTP_TIMEOUT):
        """Opens a streaming exec; returns (connection, response)."""
        c = self.connection(timeout)
        c.request(
            "POST",
            f"/v1/sandboxes/{name}/exec/stream",
            body=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        self.hits.add(("POST", f"/v1/sandboxes/{name}/exec/stream"))
        return c, c.getresponse()


def read_lines(resp):
    """The NDJSON lines of a whole streamed answer."""
    return [json.loads(line) for line in resp.read().decode().splitlines()]


def output_bytes(lines, stream):
    out = b""
    for line in lines:
        if line.get("stream") == stream:
            if line["encoding"] == "utf-8":
                out += line["data"].encode()
            else:
                assert line["encoding"] == "base64", line
                out += base64.b64decode(line["data"])
    return out


def field_bytes(ans, stream):
    data = ans[stream]
    if ans[f"{stream}_encoding"] == "base64":
        return base64.b64decode(data)
    assert ans[f"{stream}_encoding"] == "utf-8"
    return data.encode()


# ---- the server ----


def read_line(proc, timeout):
    """One line of @proc's stdout within @timeout seconds, or None."""
    buf = b""
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return None
        b = os.read(fd, 1)
        if not b:
            return None
        buf += b
    return buf.decode().rstrip("\n")


class Server:
    """hutch serve as @runner's caller, with its own store."""

    def __init__(self, runner):
        self.runner = runner
        self.home = runner.make_dir(mode=0o700, name="serve-home")
        self.state = runner.make_dir(mode=0o700, name="serve-state")
        self.env = {"HUTCH_HOME": str(self.home), "HUTCH_STATE_DIR": str(self.state)}
        self.procs = []

    @property
    def uid(self):
        return self.runner.uid

    def start(self, *args, expect_tcp=False):
        """Starts a server; returns (proc, unix path, tcp "host:port")."""
        proc = subprocess.Popen(
            self.runner.argv(["serve", *args], verb=None),
            env=self.runner.env(self.env),
            cwd=str(self.runner.base_dir),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.procs.append(proc)
        line = read_line(proc, READY_TIMEOUT)
        if line is None:
            self.stop(proc)
            raise AssertionError(f"hutch serve did not start: {proc.stderr.read().decode()}")
        assert line.startswith("listening on unix:"), line
        unix = line[len("listening on unix:"):]
        tcp = None
        if expect_tcp:
            line = read_line(proc, READY_TIMEOUT)
            assert line and line.startswith("listening on tcp:"), line
            tcp = line[len("listening on tcp:"):]
        return proc, unix, tcp

    def run_fail(self, *args):
        """hutch serve ARGS that must refuse to start."""
        return self.runner.run_raw(["serve", *args], env=self.env, timeout=READY_TIMEOUT)

    def stop(self, proc):
        """SIGTERM, then checks that the server exited cleanly: status 0 and
        nothing from a sanitizer (CI runs this suite on an ASan build)."""
        if proc.returncode is not None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            kill_quietly(proc.pid)
            _, err = proc.communicate()
        err = err.decode(errors="replace")
        assert proc.returncode == 0, f"hutch serve exited {proc.returncode}: {err}"
        for marker in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
            assert marker not in err, err

    def hutch(self, *args):
        return self.runner.run_raw(list(args), env=self.env)

    def cleanup(self):
        """Stops the servers, then removes every sandbox (stopping its
        keeper): nothing of the test may keep running."""
        errors = []
        for proc in self.procs:
            try:
                self.stop(proc)
            except AssertionError as e:
                errors.append(str(e))
        r = self.hutch("ls", "--json")
        if r.returncode != 0:
            errors.append(f"hutch ls failed: {r.stderr}")
        for sb in json.loads(r.stdout or "[]") if r.returncode == 0 else []:
            rm = self.hutch("rm", "--force", sb["name"])
            if rm.returncode != 0:
                errors.append(f"hutch rm --force {sb['name']} failed: {rm.stderr}")
        free_vm_templates(self.home)
        assert not errors, "\n".join(errors)

    def fingerprint(self):
        """The store's tree: what a refused request must not change."""
        out = {}
        for root, dirs, files in os.walk(self.home):
            for n in dirs + files:
                p = Path(root) / n
                st = p.lstat()
                out[str(p.relative_to(self.home))] = (st.st_mode, st.st_size, st.st_mtime_ns)
        return out


@pytest.fixture(params=["root", "user"])
def server(request):
    runner = request.getfixturevalue(f"{request.param}_runner")
    srv = Server(runner)
    try:
        proc, path, _ = srv.start()
        srv.proc = proc
        srv.api = Api(path, srv.uid)
        yield srv
    finally:
        srv.cleanup()


def make_workspace(server):
    ws = server.runner.make_dir(name="ws")
    (ws / "hello.txt").write_text("hello from the host\n")
    server.runner.chown(ws)
    return ws


def create(api, name, **body):
    r = api.ok("POST", "/v1/sandboxes", {"name": name, **body}, status=201)
    sb = r.json
    assert sb["name"] == name
    assert re.fullmatch(r"[0-9a-f]{16}", sb["id"])
    assert r.headers["Location"] == f"/v1/sandboxes/{name}"
    return sb


# ---- the spec ----


def spec_routes():
    """{(METHOD, path): sorted query parameter names} of docs/api.yaml."""
    spec = yaml.safe_load(SPEC.read_text())
    assert spec["openapi"].startswith("3.0"), spec["openapi"]

    def resolve(p):
        if "$ref" in p:
            node = spec
            for part in p["$ref"].lstrip("#/").split("/"):
                node = node[part]
            return node
        return p

    out = {}
    for path, item in spec["paths"].items():
        common = [resolve(p) for p in item.get("parameters", [])]
        for method in METHODS:
            if method not in item:
                continue
            op = item[method]
            params = common + [resolve(p) for p in op.get("parameters", [])]
            out[(method.upper(), path)] = sorted(p["name"] for p in params if p["in"] == "query")
            assert op.get("responses"), f"{method} {path} has no responses"
            # Every path parameter of the template is declared.
            declared = {p["name"] for p in params if p["in"] == "path"}
            assert declared == set(re.findall(r"\{(\w+)\}", path)), (method, path)
    return spec, out


def test_spec_refs_resolve():
    spec = yaml.safe_load(SPEC.read_text())
    text = SPEC.read_text()
    for ref in re.findall(r'\$ref: "?(#/[^"\s}]+)', text):
        node = spec
        for part in ref[2:].split("/"):
            assert part in node, f"unresolved {ref}"
            node = node[part]


def test_routes_match_spec(server):
    """Every route the server dispatches is in docs/api.yaml with the same
    query parameters, and every route of the spec is dispatched."""
    _, spec = spec_routes()
    served = {
        (r["method"], r["path"]): sorted(r["query"] or [])
        for r in server.api.ok("GET", "/v1/routes").json["routes"]
    }
    assert set(served) == set(spec), (
        f"only served: {set(served) - set(spec)}; only in the spec: {set(spec) - set(served)}"
    )
    for route, query in served.items():
        assert query == spec[route], f"{route}: served {query}, spec {spec[route]}"


# ---- every route, once, in a sandbox's life ----


def route_of(routes, method, path):
    for m, pattern in routes:
        rx = "^" + re.sub(r"\{\w+\}", "[^/]+", pattern) + "$"
        if m == method and re.match(rx, path):
            return (m, pattern)
    return None


def test_every_route(server):
    api = server.api
    ws = make_workspace(server)
    suffix = secrets.token_hex(3)
    a, b, snap = f"a-{suffix}", f"b-{suffix}", f"a-{suffix}.s1"

    assert api.ok("GET", "/v1/version").json["api_major"] == 1
    sb = create(api, a, policy={"workspace": {"path": str(ws), "mode": "overlay"}})
    assert sb["state"] == "stopped" and sb["parent"] is None
    assert a in [s["name"] for s in api.ok("GET", "/v1/sandboxes").json["sandboxes"]]
    assert api.ok("GET", f"/v1/sandboxes/{a}").json["id"] == sb["id"]
    # The id is accepted where a name is.
    assert api.ok("GET", f"/v1/sandboxes/{sb['id']}").json["name"] == a

    ans = api.exec(a, ["cat", "/workspace/hello.txt"])
    assert ans["outcome"]["exit_code"] == 0
    assert ans["stdout"] == "hello from the host\n"
    assert api.ok("GET", f"/v1/sandboxes/{a}").json["state"] == "running"

    c, resp = api.stream(a, {"argv": ["sh", "-c", "echo one; echo two >&2"]})
    assert resp.status == 200
    assert resp.getheader("Content-Type") == "application/x-ndjson"
    lines = read_lines(resp)
    c.close()
    assert output_bytes(lines, "stdout") == b"one\n"
    assert output_bytes(lines, "stderr") == b"two\n"

    # Files: write, read, stat, list, remove.
    r = api.ok("PUT", f"/v1/sandboxes/{a}/files?path=/workspace/new.txt&mode=0600", b"new\n")
    assert r.json == {"path": "/workspace/new.txt", "size": 4}
    assert api.ok("GET", f"/v1/sandboxes/{a}/files?path=/workspace/new.txt").data == b"new\n"
    st = api.ok("GET", f"/v1/sandboxes/{a}/files/stat?path=/workspace/new.txt").json
    assert st["type"] == "file" and st["size"] == 4 and st["mode"] == "0600", st
    entries = api.ok("GET", f"/v1/sandboxes/{a}/files/list?path=/workspace").json["entries"]
    assert [e["name"] for e in entries] == ["hello.txt", "new.txt"]
    api.ok("POST", f"/v1/sandboxes/{a}/files/mkdir?path=/tmp/d&parents=true")
    api.ok("PUT", f"/v1/sandboxes/{a}/files?path=/tmp/d/m.txt", b"x")
    api.ok("POST", f"/v1/sandboxes/{a}/files/move", {"from": "/tmp/d/m.txt", "to": "scratch.txt"})
    tree = api.ok("GET", f"/v1/sandboxes/{a}/files/archive?path=/tmp/d").data  # test_file_archive.py
    api.ok("PUT", f"/v1/sandboxes/{a}/files/archive?path=/tmp/e/f&parents=true", tree)
    api.ok("POST", f"/v1/sandboxes/{a}/files/archive?path=/tmp/e/f", tree)
    api.ok("DELETE", f"/v1/sandboxes/{a}/files?path=scratch.txt", status=204)
    r = api.call("GET", f"/v1/sandboxes/{a}/files/stat?path=scratch.txt")
    assert r.status == 404 and r.error["code"] == "not_found"

    # The overlay keeps the host folder untouched until apply.
    assert not (ws / "new.txt").exists()
    changes = api.ok("GET", f"/v1/sandboxes/{a}/diff").json["changes"]
    assert [(ch["path"], ch["kind"]) for ch in changes] == [("new.txt", "added")], changes
    patch = api.ok("GET", f"/v1/sandboxes/{a}/diff/patch?path=new.txt").data.decode()
    assert "+++ b/new.txt" in patch and "\n+new\n" in patch, patch
    assert api.ok("POST", f"/v1/sandboxes/{a}/apply", {"paths": ["new.txt"]}).json == {"applied": 1}
    assert (ws / "new.txt").read_text() == "new\n"

    assert api.ok("GET", f"/v1/sandboxes/{a}/audit?limit=10").json == {"entries": []}
    # The execs as processes (test_processes_api.py).
    from test_processes_api import exercise_process_routes

    exercise_process_routes(api, a)
    assert api.ok("GET", f"/v1/sandboxes/{a}/ports").json == {"running": True, "ports": []}
    # Publish and unpublish on the running sandbox (test_ports_api.py).
    pub = api.ok("POST", f"/v1/sandboxes/{a}/ports", {"port": 8000}, status=201).json
    assert pub["port"] == 8000 and pub["host_port"] > 0, pub
    api.ok("DELETE", f"/v1/sandboxes/{a}/ports/8000", status=204)
    # Input for a running detached exec (test_exec_stdin.py).
    xid = api.ok("POST", f"/v1/sandboxes/{a}/exec",
                 {"argv": ["cat"], "detach": True, "stdin_open": True}, status=202).json["id"]
    api.ok("POST", f"/v1/sandboxes/{a}/execs/{xid}/stdin?close=1", b"in\n", status=204)
    assert api.ok("GET", f"/v1/sandboxes/{a}/execs/{xid}?wait=1").json["outcome"]["exit_code"] == 0
    # The dashboard's routes (docs/ui.md): the history, the stats, their stream.
    hist = api.ok("GET", f"/v1/sandboxes/{a}/history?limit=50").json["entries"]
    assert hist[0]["argv"] == ["cat", "/workspace/hello.txt"], hist
    assert hist[0]["outcome"]["reason"] == "exited"
    assert api.ok("GET", f"/v1/sandboxes/{a}/stats").json["running"] is True
    c = api.connection()
    c.request("GET", f"/v1/sandboxes/{a}/stats/stream")
    api.hits.add(("GET", f"/v1/sandboxes/{a}/stats/stream"))
    resp = c.getresponse()
    assert resp.getheader("Content-Type") == "text/event-stream"
    event = resp.readline().decode()
    c.close()
    assert event.startswith("data: ") and json.loads(event[6:])["running"] is True, event
    # Without an upgrade (the WebSocket itself: test_terminal.py).
    assert api.call("GET", f"/v1/sandboxes/{a}/exec/ws").status == 426

    # Snapshots: take, list, create from, restore, and remove. Stopped
    # first: a running sandbox is frozen for its snapshot, which needs a
    # cgroup the unprivileged user may not have.
    api.exec(a, ["sh", "-c", "echo kept > /root/state.txt"])
    api.ok("POST", f"/v1/sandboxes/{a}/stop", status=204)
    assert api.ok("GET", f"/v1/sandboxes/{a}").json["state"] == "stopped"
    r = api.ok("POST", f"/v1/sandboxes/{a}/snapshots", {"snapshot": snap}, status=201)
    assert r.json == {"snapshot": snap, "sandbox": a}
    assert {"name": snap} in api.ok("GET", "/v1/snapshots").json["snapshots"]
    assert create(api, b, from_snapshot=snap)["parent"] == snap
    assert api.ok("GET", f"/v1/sandboxes/{b}/files?path=/root/state.txt").data == b"kept\n"
    api.exec(a, ["sh", "-c", "echo changed > /root/state.txt"])
    api.ok("POST", f"/v1/sandboxes/{a}/restore", {"snapshot": snap}, status=204)
    assert api.ok("GET", f"/v1/sandboxes/{a}/files?path=/root/state.txt").data == b"kept\n"

    # An empty merge patch changes nothing (test_update_api.py has the rest).
    assert api.ok("PATCH", f"/v1/sandboxes/{b}", {"policy": {}}).json["changed"] == []
    api.ok("DELETE", f"/v1/sandboxes/{b}", status=204)
    # Still the parent of a.
    r = api.call("DELETE", f"/v1/snapshots/{snap}")
    assert r.status == 409, r
    api.ok("DELETE", f"/v1/sandboxes/{a}", status=204)
    api.ok("DELETE", f"/v1/snapshots/{snap}", status=204)
    assert api.ok("GET", "/v1/sandboxes").json["sandboxes"] == []
    assert api.ok("GET", "/v1/snapshots").json["snapshots"] == []

    routes = {(r["method"], r["path"]) for r in api.ok("GET", "/v1/routes").json["routes"]}
    hit = {route_of(routes, m, p) for m, p in api.hits}
    assert routes - hit == set(), f"routes not exercised: {routes - hit}"


# ---- exec ----


def test_exec_outcome_and_output(server):
    api = server.api
    name = f"x-{secrets.token_hex(3)}"
    create(api, name)

    ans = api.exec(name, ["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert ans["outcome"]["exit_code"] == 3 and ans["outcome"]["reason"] == "exited"
    assert (ans["stdout"], ans["stderr"]) == ("out\n", "err\n")

    ans = api.exec(name, ["no-such-command"])
    assert ans["outcome"]["exit_code"] == 127

    assert api.exec(name, ["cat"], stdin="from the request\n")["stdout"] == "from the request\n"
    raw = bytes(range(256))
    ans = api.exec(name, ["cat"], stdin_base64=base64.b64encode(raw).decode())
    assert ans["stdout_encoding"] == "base64"
    assert field_bytes(ans, "stdout") == raw
    assert api.exec(name, ["cat"])["stdout"] == ""

    ans = api.exec(name, ["sh", "-c", 'echo "$GREETING"; pwd'], env=["GREETING=hi"], cwd="/tmp")
    assert ans["stdout"] == "hi\n/tmp\n"

    ans = api.exec(name, ["head", "-c", "100000", "/dev/zero"], output_limit=1000)
    assert ans["outcome"]["stdout_truncated"] is True
    assert field_bytes(ans, "stdout") == b"\0" * 1000
    assert ans["outcome"]["stderr_truncated"] is False

    ans = api.exec(name, ["sleep", "30"], timeout_ms=300)
    assert ans["outcome"]["reason"] == "timeout", ans

    r = api.ok("POST", f"/v1/sandboxes/{name}/exec", {"argv": ["true"], "detach": True}, status=202)
    assert isinstance(r.json["id"], int)


def test_stream_lines(server):
    api = server.api
    name = f"s-{secrets.token_hex(3)}"
    create(api, name)
    # 90000 bytes of a 3-byte character: the pipe's reads split some of
    # them, and every chunk must still be text.
    text = "\u20ac" * 30000
    script = "yes '\u20ac' | head -n 30000 | tr -d '\\n'; printf '\\377\\376' >&2; exit 4"
    c, resp = api.stream(name, {"argv": ["sh", "-c", script]})
    assert resp.status == 200
    lines = read_lines(resp)
    c.close()
    assert "started" in lines[0] and isinstance(lines[0]["started"]["id"], int)
    assert set(lines[-1]) == {"outcome"}
    assert lines[-1]["outcome"]["exit_code"] == 4
    for line in lines[1:-1]:
        assert set(line) == {"stream", "data", "encoding"}, line
        if line["stream"] == "stdout":
            assert line["encoding"] == "utf-8", "a character was split between chunks"
    assert output_bytes(lines, "stdout") == text.encode()
    assert output_bytes(lines, "stderr") == b"\xff\xfe"
    assert [ln["encoding"] for ln in lines if ln.get("stream") == "stderr"] == ["base64"]


def wait_fifo(path, timeout):
    """What a writer puts into the FIFO @path, waiting at most @timeout s."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return os.read(fd, 64) if ready else b""
    finally:
        os.close(fd)


@pytest.mark.parametrize("route", ["exec/stream", "exec"])
def test_disconnect_kills_command(server, route):
    """A client that goes away kills its command, streaming or not."""
    api = server.api
    name = f"d-{secrets.token_hex(3)}"
    # The command says it runs through a FIFO in a mount-mode workspace.
    ws = server.runner.make_dir(name="ws")
    server.runner.chown(ws)
    fifo = ws / "ready.fifo"
    os.mkfifo(fifo, 0o666)
    os.chmod(fifo, 0o666)
    create(api, name, policy={"workspace": {"path": str(ws), "mode": "mount"}})
    marker = f"{secrets.randbelow(10**6)}"
    argv = ["sh", "-c", f"echo ready > /workspace/ready.fifo; exec sleep 1000.{marker}"]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(HTTP_TIMEOUT)
    with as_euid(server.uid):
        s.connect(api.sock_path)
    body = json.dumps({"argv": argv}).encode()
    s.sendall(
        f"POST /v1/sandboxes/{name}/{route} HTTP/1.1\r\nHost: x\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode() + body
    )
    api.hits.add(("POST", f"/v1/sandboxes/{name}/{route}"))
    assert wait_fifo(fifo, HTTP_TIMEOUT) == b"ready\n", "the command did not start"
    pids = live_with_marker(f"sleep 1000.{marker}")
    assert pids, "the command is not running"
    s.close()
    assert wait_pidfds(list(pids), 30) == set(), "the command outlived its client"
    # The server is fine and the sandbox still serves.
    assert api.exec(name, ["echo", "after"])["stdout"] == "after\n"


# ---- files: nothing outside the sandbox ----


def test_files_cannot_leave_the_sandbox(server):
    api = server.api
    runner = server.runner
    ws = make_workspace(server)
    name = f"f-{secrets.token_hex(3)}"
    create(api, name, policy={"workspace": {"path": str(ws), "mode": "overlay"}})
    secret_dir = runner.make_dir(name="secret")
    secret = secret_dir / "secret.txt"
    secret_text = f"host secret {secrets.token_hex(8)}\n"
    secret.write_text(secret_text)
    runner.chown(secret_dir)
    up = "../" * 12
    api.exec(
        name,
        [
            "sh",
            "-c",
            f"ln -s {secret} /root/abs-link; ln -s {up}{str(secret)[1:]} /root/rel-link; "
            f"ln -s /proc/1/root /root/magic; ln -s {secret_dir} /root/dir-link",
        ],
    )
    attempts = [
        str(secret),
        f"{up}{str(secret)[1:]}",
        f"/workspace/{up}{str(secret)[1:]}",
        f"/proc/1/root{secret}",
        f"/proc/self/root{secret}",
        f"/proc/{server.proc.pid}/root{secret}",
        f"/proc/{os.getpid()}/root{secret}",
        f"/proc/1/cwd/{up}{str(secret)[1:]}",
        "/root/abs-link",
        "/root/rel-link",
        f"/root/magic{secret}",
        "/root/dir-link/secret.txt",
    ]
    for path in attempts:
        r = api.call("GET", f"/v1/sandboxes/{name}/files?path={path}")
        assert secret_text.encode() not in r.data, (path, r)
        assert r.status in (400, 403, 404, 409), (path, r)
        # stat describes a symlink itself, never what it points to.
        r = api.call("GET", f"/v1/sandboxes/{name}/files/stat?path={path}")
        if r.status == 200:
            assert r.json["type"] == "symlink", (path, r)
        else:
            assert r.status in (400, 403, 404, 409), (path, r)

    for path in [str(secret_dir), f"{up}{str(secret_dir)[1:]}", f"/proc/1/root{secret_dir}",
                 f"/proc/{server.proc.pid}/root{secret_dir}", "/root/dir-link/"]:
        r = api.call("GET", f"/v1/sandboxes/{name}/files/list?path={path}")
        assert b"secret.txt" not in r.data, (path, r)
        assert r.status in (400, 403, 404, 409), (path, r)

    # Writes and removals through the same paths reach nothing of the host.
    for path in [
        f"{up}{str(secret_dir)[1:]}/pwned",
        f"{secret_dir}/pwned",
        f"/proc/1/root{secret_dir}/pwned",
        f"/proc/{server.proc.pid}/root{secret_dir}/pwned",
        "/root/dir-link/pwned",
    ]:
        r = api.call("PUT", f"/v1/sandboxes/{name}/files?path={path}", b"pwned")
        assert not (secret_dir / "pwned").exists(), (path, r)
    for path in [str(secret), f"{up}{str(secret)[1:]}", "/root/dir-link/secret.txt"]:
        api.call("DELETE", f"/v1/sandboxes/{name}/files?path={path}")
        assert secret.read_text() == secret_text, path
    # The overlay workspace: the host folder changes only on apply.
    api.ok("PUT", f"/v1/sandboxes/{name}/files?path=/workspace/hello.txt", b"overwritten\n")
    api.ok("DELETE", f"/v1/sandboxes/{name}/files?path=/workspace/hello.txt", status=204)
    assert (ws / "hello.txt").read_text() == "hello from the host\n"


# ---- bad input ----


def raw_request(api, data, timeout=HTTP_TIMEOUT):
    """Sends @data on a new connection; returns (status, body)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    with as_euid(api.uid):
        s.connect(api.sock_path)
    try:
        s.sendall(data)
    except OSError:
        pass  # the server may close before reading it all
    got = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    s.close()
    status = int(got.split(b" ", 2)[1]) if got.startswith(b"HTTP/1.") else None
    return status, got.partition(b"\r\n\r\n")[2]


def test_bad_input(server):
    api = server.api
    ok = f"ok-{secrets.token_hex(3)}"
    gone = f"gone-{secrets.token_hex(3)}"
    create(api, ok)
    create(api, gone)
    api.ok("DELETE", f"/v1/sandboxes/{gone}", status=204)
    exec_url = f"/v1/sandboxes/{ok}/exec"
    cases = [
        # (method, url, body, status, code, field)
        ("POST", "/v1/sandboxes", b"{not json", 400, "invalid_json", None),
        ("POST", "/v1/sandboxes", b"[]", 400, "invalid_argument", None),
        ("POST", "/v1/sandboxes", b'{"name":"a","name":"b"}', 400, "invalid_json", None),
        ("POST", "/v1/sandboxes", {"name": 5}, 400, "invalid_argument", "/name"),
        ("POST", "/v1/sandboxes", {"name": "n1", "bogus": 1}, 400, "invalid_argument", "/bogus"),
        ("POST", "/v1/sandboxes", {}, 400, "invalid_argument", "/name"),
        ("POST", "/v1/sandboxes", {"name": "Bad Name"}, 400, "invalid_argument", "/name"),
        ("POST", "/v1/sandboxes", {"name": "n1", "policy": []}, 400, "invalid_argument", "/policy"),
        ("POST", "/v1/sandboxes", {"name": "n1", "policy": {"limits": {"memory": "lots"}}},
         400, "invalid_argument", "/policy/limits/memory"),
        ("POST", "/v1/sandboxes", {"name": "n1", "policy": {"nope": 1}},
         400, "invalid_argument", "/policy/nope"),
        ("POST", "/v1/sandboxes", {"name": "n1", "from_snapshot": "nope"}, 404, "not_found", None),
        ("POST", "/v1/sandboxes", {"name": ok}, 409, "conflict", None),
        ("POST", "/v1/sandboxes", b"x" * ((1 << 20) + 1), 413, "too_large", None),
        ("POST", exec_url, {"argv": []}, 400, "invalid_argument", "/argv"),
        ("POST", exec_url, {"argv": "ls"}, 400, "invalid_argument", "/argv"),
        ("POST", exec_url, {"argv": ["ls", 1]}, 400, "invalid_argument", "/argv/1"),
        ("POST", exec_url, {"argv": ["ls"], "timeout_ms": -1}, 400, "invalid_argument",
         "/timeout_ms"),
        ("POST", exec_url, {"argv": ["ls"], "timeout_ms": "1s"}, 400, "invalid_argument",
         "/timeout_ms"),
        ("POST", exec_url, {"argv": ["ls"], "env": ["NOEQUALS"]}, 400, "invalid_argument",
         "/env/0"),
        ("POST", exec_url, {"argv": ["ls"], "cwd": "relative"}, 400, "invalid_argument", "/cwd"),
        ("POST", exec_url, {"argv": ["ls"], "stdin_base64": "!!!"}, 400, "invalid_argument",
         "/stdin_base64"),
        ("POST", exec_url, {"argv": ["ls"], "stdin": "a", "stdin_base64": "YQ=="}, 400,
         "invalid_argument", "/stdin_base64"),
        ("POST", exec_url, {"argv": ["ls"], "output_limit": 1 << 30}, 400, "invalid_argument",
         "/output_limit"),
        ("POST", exec_url, {"argv": ["ls"], "detach": True, "stdin": "x"}, 400,
         "invalid_argument", "/detach"),
        ("POST", exec_url + "/stream", {"argv": ["ls"], "output_limit": 1}, 400,
         "invalid_argument", "/output_limit"),
        ("POST", "/v1/sandboxes/nope/exec", {"argv": ["true"]}, 404, "not_found", None),
        ("POST", f"/v1/sandboxes/{gone}/exec", {"argv": ["true"]}, 404, "not_found", None),
        ("POST", f"/v1/sandboxes/{gone}/exec/stream", {"argv": ["true"]}, 404, "not_found",
         None),
        ("GET", f"/v1/sandboxes/{gone}", None, 404, "not_found", None),
        ("GET", "/v1/sandboxes/nope", None, 404, "not_found", None),
        ("DELETE", "/v1/sandboxes/nope", None, 404, "not_found", None),
        ("GET", "/v1/sandboxes/UPPER", None, 400, "invalid_argument", None),
        ("GET", "/v1/sandboxes/" + "a" * 64, None, 400, "invalid_argument", None),
        ("GET", "/v1/sandboxes/..", None, 400, "invalid_argument", None),
        ("GET", f"/v1/sandboxes/{ok}/files", None, 400, "invalid_argument", None),
        ("GET", f"/v1/sandboxes/{ok}/files?path=/x&bogus=1", None, 400, "invalid_argument",
         None),
        ("GET", f"/v1/sandboxes/{ok}/files?path=/x&path=/y", None, 400, "invalid_argument",
         None),
        ("GET", f"/v1/sandboxes/{ok}/files?path=/etc%00/passwd", None, 400, "invalid_argument",
         None),
        ("PUT", f"/v1/sandboxes/{ok}/files?path=/root/f&mode=999", b"x", 400,
         "invalid_argument", None),
        ("GET", f"/v1/sandboxes/{gone}/files?path=/etc/hostname", None, 404, "not_found", None),
        ("GET", "/v1/nothing", None, 404, "no_such_route", None),
        ("GET", "/v1/sandboxes/", None, 404, "no_such_route", None),
        ("PATCH", "/v1/sandboxes", None, 405, "method_not_allowed", None),
        ("GET", exec_url, None, 405, "method_not_allowed", None),
        ("GET", "/v1/version", b"unexpected", 400, "invalid_argument", None),
        ("DELETE", "/v1/snapshots/nope", None, 404, "not_found", None),
        ("POST", f"/v1/sandboxes/{ok}/snapshots", {}, 400, "invalid_argument", "/snapshot"),
        ("POST", f"/v1/sandboxes/{ok}/snapshots", {"snapshot": "A/B"}, 400, "invalid_argument",
         "/snapshot"),
        ("POST", f"/v1/sandboxes/{ok}/restore", {"snapshot": "nope"}, 404, "not_found", None),
        ("POST", f"/v1/sandboxes/{ok}/apply", {"paths": "x"}, 400, "invalid_argument", "/paths"),
        ("POST", f"/v1/sandboxes/{ok}/apply", {"force": "yes"}, 400, "invalid_argument",
         "/force"),
        ("GET", f"/v1/sandboxes/{ok}/audit?limit=0", None, 400, "invalid_argument", None),
        ("GET", f"/v1/sandboxes/{ok}/audit?limit=x", None, 400, "invalid_argument", None),
    ]
    before = server.fingerprint()
    for method, url, body, status, code, field in cases:
        r = api.call(method, url, body)
        assert r.status == status, (method, url, body, r)
        err = r.error
        assert err["code"] == code, (method, url, err)
        assert err["field"] == field, (method, url, err)
        assert err["message"] and "\n" not in err["message"]
        assert api.ok("GET", "/v1/version").json["api_major"] == 1
    assert server.fingerprint() == before, "a refused request changed the store"

    # Framing errors come from evhttp before any route: still refused.
    status, _ = raw_request(
        api, b"POST " + exec_url.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: "
        + str((16 << 20) + 1).encode() + b"\r\n\r\n"
    )
    assert status == 413
    status, _ = raw_request(api, b"GET /v1/version HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
    assert status == 431  # the front's (serve-front.c), in JSON: test_serve_flood.py
    status, _ = raw_request(api, b"NONSENSE\r\n\r\n")
    assert status == 400
    assert api.ok("GET", "/v1/version").json["api_major"] == 1
    assert server.fingerprint() == before


def test_slow_clients_block_nobody(server):
    api = server.api
    name = f"w-{secrets.token_hex(3)}"
    create(api, name)
    held = []
    for data in [
        b"GET /v1/vers",  # half a request line
        b"GET /v1/version HTTP/1.1\r\nHost: x\r\n",  # headers never end
        b"POST /v1/sandboxes HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"na",  # half a body
    ]:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with as_euid(server.uid):
            s.connect(api.sock_path)
        s.sendall(data)
        held.append(s)
    # A streaming exec whose client never reads.
    c, resp = api.stream(name, {"argv": ["sh", "-c", "exec cat /dev/zero"]})
    assert resp.status == 200
    try:
        # Answered while the slow ones hold their connections: the client
        # gives up well before the server's 60 s timeout would free them.
        r = api.call("POST", f"/v1/sandboxes/{name}/exec", {"argv": ["echo", "served"]},
                     timeout=20)
        assert r.status == 200 and r.json["stdout"] == "served\n", r
        assert api.call("GET", "/v1/sandboxes", timeout=20).status == 200
    finally:
        c.close()
        for s in held:
            s.close()


# Root only: freezing needs a cgroup, which the plain user has none of here.
@pytest.mark.parametrize("server", ["root"], indirect=True)
def test_a_long_call_blocks_nobody(server):
    """A route that takes long runs in a worker: a file read in a sandbox
    that is held frozen (through its keeper's socket) cannot finish until it
    is thawed, yet the server answers others meanwhile; then it finishes."""
    api = server.api
    name = f"l-{secrets.token_hex(3)}"
    create(api, name)
    api.ok("PUT", f"/v1/sandboxes/{name}/files?path=/root/f", b"frozen\n")
    keeper = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    keeper.connect(str(server.state / name / "keeper.sock"))
    keeper.send(json.dumps({"op": "freeze"}).encode())
    assert json.loads(keeper.recv(65536))["op"] == "ok"
    result = {}

    def read_file():
        result["r"] = api.call("GET", f"/v1/sandboxes/{name}/files?path=/root/f", timeout=60)

    t = threading.Thread(target=read_file)
    t.start()
    try:
        # The read waits on the frozen sandbox; the server does not.
        for _ in range(5):
            assert api.call("GET", "/v1/sandboxes", timeout=20).status == 200
            assert api.call("GET", "/v1/version", timeout=20).status == 200
        assert t.is_alive() and "r" not in result
    finally:
        keeper.close()  # thaws
    t.join(60)
    assert not t.is_alive()
    assert result["r"].status == 200 and result["r"].data == b"frozen\n", result["r"]


# ---- the socket, the peer, TCP ----


def test_socket_is_private(server):
    path = Path(server.api.sock_path)
    assert path == server.state / "api.sock"
    st = path.lstat()
    assert st.st_mode & 0o777 == 0o600 and st.st_uid == server.uid
    assert path.parent.stat().st_mode & 0o777 == 0o700
    # A second server on the same socket refuses and the first serves on.
    r = server.run_fail()
    assert r.returncode == 125 and "another hutch serve" in r.stderr, r.stderr
    assert server.api.ok("GET", "/v1/version").status == 200


def test_other_uid_is_refused(user_runner):
    """The user's server refuses a peer of another uid (here root, which
    can reach the socket whatever its mode)."""
    srv = Server(user_runner)
    try:
        proc, path, _ = srv.start()
        if srv.uid == os.geteuid():
            pytest.skip("needs root to be a peer of another uid")
        r = Api(path, None).call("GET", "/v1/version")
        assert r.status == 403 and r.error["code"] == "permission_denied", r
        assert Api(path, srv.uid).ok("GET", "/v1/version").status == 200
    finally:
        srv.cleanup()


def tcp_call(addr, headers):
    host, port = addr.rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=HTTP_TIMEOUT)
    try:
        c.request("GET", "/v1/version", headers=headers)
        r = c.getresponse()
        return Response(r.status, dict(r.getheaders()), r.read())
    finally:
        c.close()


def test_tcp_needs_the_token(server):
    runner = server.runner
    tdir = runner.make_dir(mode=0o700, name="token")
    token = secrets.token_urlsafe(32)
    tfile = tdir / "token"
    tfile.write_text(token + "\n")
    os.chmod(tfile, 0o600)
    runner.chown(tdir)
    sock = str(server.state / "tcp.sock")

    # Never TCP without a token, nor with one everyone can read.
    r = server.run_fail("--socket", sock, "--listen", "127.0.0.1:0")
    assert r.returncode == 125 and "token" in r.stderr, r.stderr
    os.chmod(tfile, 0o604)
    r = server.run_fail("--socket", sock, "--listen", "127.0.0.1:0", "--token-file", str(tfile))
    assert r.returncode == 125 and "other users" in r.stderr, r.stderr
    os.chmod(tfile, 0o600)
    r = server.run_fail("--socket", sock, "--listen", "localhost:0", "--token-file", str(tfile))
    assert r.returncode == 125, r.stderr

    proc, _, addr = server.start(
        "--socket", sock, "--listen", "127.0.0.1:0", "--token-file", str(tfile), expect_tcp=True
    )
    assert addr.startswith("127.0.0.1:")
    r = tcp_call(addr, {})
    assert r.status == 401 and r.error["code"] == "unauthorized"
    assert r.headers.get("WWW-Authenticate") == "Bearer"
    for bad in [f"Bearer {token}x", f"Bearer {token[:-1]}", f"Basic {token}", token, "Bearer "]:
        r = tcp_call(addr, {"Authorization": bad})
        assert r.status == 401, (bad, r)
    r = tcp_call(addr, {"Authorization": f"Bearer {token}"})
    assert r.status == 200 and r.json["api_major"] == 1
    # Only the address asked for is bound.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.2", int(addr.rsplit(":", 1)[1])), timeout=10)
    # The unix socket needs no token.
    assert Api(sock, server.uid).ok("GET", "/v1/version").status == 200
    server.stop(proc)
    assert not Path(sock).exists()
