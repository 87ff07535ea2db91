# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch serve --e2b's control plane (docs/e2b.md, issue 20), driven by the
real `e2b` npm package (pinned below, installed into the tests' cache as
test_mcp.py does for the MCP SDK) through e2b-control.mjs, with only the
SDK's own environment variables pointing it at the local server: create,
getInfo, list (filters, pages), setTimeout, kill, pause and connect with
the files kept, a lifetime that really ends the sandbox (and one that
pauses it), the allowlist a create may narrow and never widen (checked
from inside the sandbox against a loopback upstream), wrong keys and
unknown ids with the SDK's errors, a sandbox port reached by Host, and
nothing left behind after a kill or the server's end. As root and as the
unprivileged user (the server runs as them; node is only a TCP client)."""

import http.client
import json
import os
import re
import select
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import kill_quietly, node_package
from test_e2b_envd import kills_done
from test_serve import read_line

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "e2b-control.mjs"
E2B_SPEC = "e2b@2.51.0"
KEY = "e2b_hutch_test_key_0123456789abcdef"
READY_TIMEOUT = 30
DOMAIN = "e2b.localhost"


@pytest.fixture(scope="session")
def e2b_sdk():
    pkg = node_package("e2b", E2B_SPEC, "dist/index.mjs")
    if pkg is None:
        pytest.fail(f"cannot install {E2B_SPEC} with npm (needs the npm registry once)")
    return pkg / "dist" / "index.mjs"


class E2bServer:
    """hutch serve --e2b as @runner's caller, with its own store and key."""

    def __init__(self, runner, sdk, flags=(), same_store_as=None):
        self.runner = runner
        self.sdk_path = sdk
        if same_store_as:
            self.home, self.state = same_store_as.home, same_store_as.state
            self.key_file = same_store_as.key_file
        else:
            self.home = runner.make_dir(mode=0o700, name="e2b-home")
            self.state = runner.make_dir(mode=0o700, name="e2b-state")
            keydir = runner.make_dir(mode=0o700, name="e2b-key")
            self.key_file = keydir / "key"
            self.key_file.write_text(KEY + "\n")
            os.chmod(self.key_file, 0o600)
            runner.chown(keydir)
        self.env = {"HUTCH_HOME": str(self.home), "HUTCH_STATE_DIR": str(self.state)}
        self.proc = subprocess.Popen(
            runner.argv(["serve", "--e2b", "--api-key-file", str(self.key_file),
                         "--e2b-listen", "127.0.0.1:0", "--e2b-envd-listen", "127.0.0.1:0",
                         "--e2b-domain", DOMAIN, *flags], verb=None),
            env=runner.env(self.env), cwd=str(runner.base_dir), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        api = read_line(self.proc, READY_TIMEOUT)
        envd = read_line(self.proc, READY_TIMEOUT)
        if not api or not envd:
            self.proc.kill()
            raise AssertionError(f"hutch serve --e2b did not start: "
                                 f"{self.proc.communicate()[1].decode()}")
        self.api_url = api.split(" on ")[1]
        self.envd_url = envd.split(" on ")[1]

    def sdk_env(self, key=KEY):
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
                "E2B_SDK": str(self.sdk_path), "E2B_API_URL": self.api_url,
                "E2B_SANDBOX_URL": self.envd_url, "E2B_API_KEY": key, "E2B_DOMAIN": DOMAIN}

    def sdk(self, step, arg=None, key=KEY):
        """Runs one step of the driver; returns its JSON answer."""
        r = subprocess.run(["node", str(DRIVER), step, json.dumps(arg or {})],
                           env=self.sdk_env(key), capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"e2b-control.mjs {step}: {r.stdout}{r.stderr}"
        return json.loads(r.stdout.strip().splitlines()[-1])

    def hutch(self, *args, **kw):
        return self.runner.run_raw(list(args), env=self.env, **kw)

    def sandboxes(self):
        kills_done(self.home)
        r = self.hutch("ls", "--json")
        assert r.returncode == 0, r.stderr
        return {sb["name"]: sb for sb in json.loads(r.stdout)}

    def request(self, method, path, body=None, headers=None):
        host, port = self.api_url.removeprefix("http://").rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def stop(self):
        """SIGTERM; the server must end cleanly (status 0, no sanitizer
        report) and leave no sandbox behind."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            kill_quietly(self.proc.pid)
            _, err = self.proc.communicate()
        err = err.decode(errors="replace")
        assert self.proc.returncode == 0, f"hutch serve --e2b exited {self.proc.returncode}: {err}"
        for marker in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
            assert marker not in err, err
        return err

    def cleanup(self):
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.communicate(timeout=120)
                except subprocess.TimeoutExpired:
                    kill_quietly(self.proc.pid)
                    self.proc.communicate()
        finally:
            r = self.hutch("ls", "--json")
            for sb in json.loads(r.stdout or "[]") if r.returncode == 0 else []:
                self.hutch("rm", "--force", sb["name"])


@pytest.fixture
def e2b(sbx, e2b_sdk):
    """A started server of @sbx's mode; extra flags through e2b.start()."""
    servers = []

    class Starter:
        runner = sbx

        def start(self, *flags):
            s = E2bServer(sbx, e2b_sdk, flags)
            servers.append(s)
            return s

    try:
        yield Starter()
    finally:
        for s in servers:
            s.cleanup()


def wait_for(pred, timeout=60, what="condition"):
    """Polls @pred (each poll is a real request) until true, at most @timeout s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def name_of(sid):
    return f"e2b-{sid}"


# ---- lifecycle ----


def test_create_info_list_timeout_kill(e2b):
    srv = e2b.start()
    a = srv.sdk("create", {"metadata": {"suite": "hutch", "n": "1"}, "timeoutMs": 120000})
    sid = a["sandboxId"]
    assert re.fullmatch(r"[a-z0-9]{20}", sid), a
    # secure by default: envd's access token comes with the create
    assert a["envdAccessToken"] and len(a["envdAccessToken"]) >= 32, a
    assert a["host8000"] == f"8000-{sid}.{DOMAIN}"
    i = a["info"]
    assert i["templateId"] == "base" and i["state"] == "running", i
    assert i["metadata"] == {"suite": "hutch", "n": "1"}
    assert i["endAt"] - i["startedAt"] == 120000
    assert i["envdVersion"] >= "0.6.4"
    assert name_of(sid) in srv.sandboxes()
    # the base template's working directory and home (docs/e2b.md "Templates")
    r = srv.hutch("exec", name_of(sid), "--", "sh", "-c",
                  "pwd; echo $HOME; umask; command -v python3; command -v tput")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:3] == ["/home/user", "/home/user", "0022"], r.stdout
    assert len(r.stdout.splitlines()) == 5, r.stdout

    b = srv.sdk("create", {"metadata": {"suite": "other"}})
    listed = srv.sdk("list")
    # newest first
    assert [x["sandboxId"] for x in listed] == [b["sandboxId"], sid], listed
    only = srv.sdk("list", {"query": {"metadata": {"suite": "hutch"}}})
    assert [x["sandboxId"] for x in only] == [sid], only
    assert srv.sdk("list", {"query": {"state": ["paused"]}}) == []
    pages = srv.sdk("pages", {"limit": 1})
    assert pages == [[b["sandboxId"]], [sid]], pages

    assert len(srv.sdk("metrics", {"id": sid})) == 1  # test_e2b_metrics.py
    before = srv.sdk("info", {"id": sid})
    after = srv.sdk("setTimeout", {"id": sid, "ms": 600000})
    assert after["endAt"] > before["endAt"], (before, after)
    assert after["endAt"] - time.time() * 1000 > 500000

    assert srv.sdk("kill", {"id": sid}) == {"killed": True}
    assert name_of(sid) not in srv.sandboxes()
    # gone: the SDK's own answers for a missing sandbox
    assert srv.sdk("kill", {"id": sid}) == {"killed": False}
    assert srv.sdk("infoError", {"id": sid})["error"] == "SandboxNotFoundError"
    assert [x["sandboxId"] for x in srv.sdk("list")] == [b["sandboxId"]]
    # the server's end destroys the rest
    srv.stop()
    assert srv.sandboxes() == {}


def test_wrong_api_key_and_unknown_ids(e2b):
    srv = e2b.start()
    e = srv.sdk("listError", key="e2b_not_the_key_0123456789abcdef")
    assert e["error"] == "AuthenticationError", e
    e = srv.sdk("createError", {}, key="e2b_not_the_key_0123456789abcdef")
    assert e["error"] == "AuthenticationError", e
    assert srv.sandboxes() == {}
    # the raw shapes: {code, message}
    status, _, body = srv.request("GET", "/v2/sandboxes")
    assert status == 401 and json.loads(body)["code"] == 401, body
    status, _, body = srv.request("GET", "/v2/sandboxes", headers={"X-API-Key": KEY})
    assert status == 200 and json.loads(body) == [], body
    for sid in ("aaaaaaaaaaaaaaaaaaaa", "nope", "..%2f..%2fetc"):
        status, _, body = srv.request("GET", f"/sandboxes/{sid}", headers={"X-API-Key": KEY})
        assert status == 404 and json.loads(body)["code"] == 404, (sid, body)
    assert srv.sdk("infoError", {"id": "aaaaaaaaaaaaaaaaaaaa"})["error"] == "SandboxNotFoundError"
    assert srv.sdk("connectError", {"id": "aaaaaaaaaaaaaaaaaaaa"})["error"] == "SandboxNotFoundError"
    e = srv.sdk("setTimeoutError", {"id": "aaaaaaaaaaaaaaaaaaaa", "ms": 1000})
    assert e["error"] == "SandboxNotFoundError", e
    # bad bodies: 400 with the member named, nothing made
    for body in (b"{", b'{"templateID": 1}', b'{"templateID":"base","bogus":1}',
                 b'{"templateID":"base","timeout":999999}'):
        status, _, ans = srv.request("POST", "/v2/sandboxes", body=body,
                                     headers={"X-API-Key": KEY})
        assert status == 400 and json.loads(ans)["code"] == 400, (body, ans)
    # an oversize body is refused from its head, before a byte of it
    host, port = srv.api_url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as s:
        s.sendall(f"POST /v2/sandboxes HTTP/1.1\r\nHost: x\r\nX-API-Key: {KEY}\r\n"
                  f"Content-Length: {2 << 20}\r\n\r\n".encode())
        ans = b""
        while chunk := s.recv(65536):
            ans += chunk
    assert ans.startswith(b"HTTP/1.1 413 "), ans
    # framing a relay could be fooled by: refused (the SDK's own chunked
    # bodies pass, above)
    for te in (b"Transfer-Encoding: gzip\r\n",
               b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"):
        with socket.create_connection((host, int(port)), timeout=60) as s:
            s.sendall(b"POST /v2/sandboxes HTTP/1.1\r\nHost: x\r\nX-API-Key: " + KEY.encode() +
                      b"\r\n" + te + b"\r\n0\r\n\r\n")
            ans = b""
            while chunk := s.recv(65536):
                ans += chunk
        assert ans.startswith(b"HTTP/1.1 400 "), (te, ans)
    # an unknown template: 404, nothing left
    e = srv.sdk("createError", {"template": "no-such-template"})
    assert e["error"] != None and "404" in e["message"], e
    assert srv.sandboxes() == {}
    srv.stop()


def test_lifetime_expiry_kills(e2b):
    srv = e2b.start()
    short = srv.sdk("create", {"timeoutMs": 2000})["sandboxId"]
    long = srv.sdk("create", {"timeoutMs": 300000})["sandboxId"]
    # the server's own timer ends it: nothing but time passes
    wait_for(lambda: name_of(short) not in srv.sandboxes(), what="the sandbox's end")
    assert srv.sdk("infoError", {"id": short})["error"] == "SandboxNotFoundError"
    # negative twin: the other one lives on
    assert name_of(long) in srv.sandboxes()
    assert srv.sdk("info", {"id": long})["state"] == "running"
    srv.stop()


def paused_state(srv):
    """The hutch sandbox of a paused E2B one: frozen, still running, as
    root (its processes kept: test_e2b_pause_memory.py); stopped, its
    files kept, for a user whose sandboxes have no cgroup to freeze."""
    return "running" if srv.runner.uid == 0 else "stopped"


def test_lifetime_expiry_pauses_with_autopause(e2b):
    srv = e2b.start()
    sid = srv.sdk("create", {"timeoutMs": 2000, "lifecycle": {"onTimeout": "pause"}})["sandboxId"]
    r = srv.hutch("exec", name_of(sid), "--", "sh", "-c", "echo kept > /root/f")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: srv.sdk("info", {"id": sid})["state"] == "paused", what="the pause")
    assert srv.sandboxes()[name_of(sid)]["state"] == paused_state(srv)
    c = srv.sdk("connect", {"id": sid})
    assert c["info"]["state"] == "running"
    r = srv.hutch("exec", name_of(sid), "--", "cat", "/root/f")
    assert r.returncode == 0 and r.stdout == "kept\n", r
    srv.stop()
    assert srv.sandboxes() == {}


def test_pause_and_connect_keep_the_files(e2b):
    srv = e2b.start()
    sid = srv.sdk("create")["sandboxId"]
    r = srv.hutch("exec", name_of(sid), "--", "sh", "-c", "echo hello > /root/kept.txt")
    assert r.returncode == 0, r.stderr
    assert srv.sandboxes()[name_of(sid)]["state"] == "running"
    assert srv.sdk("pause", {"id": sid}) == {"paused": True}
    assert srv.sandboxes()[name_of(sid)]["state"] == paused_state(srv)
    assert srv.sdk("info", {"id": sid})["state"] == "paused"
    assert [x["sandboxId"] for x in srv.sdk("list", {"query": {"state": ["paused"]}})] == [sid]
    # a second pause: the SDK's false (409)
    assert srv.sdk("pause", {"id": sid}) == {"paused": False}
    c = srv.sdk("connect", {"id": sid, "opts": {"timeoutMs": 60000}})
    assert c["info"]["state"] == "running"
    r = srv.hutch("exec", name_of(sid), "--", "cat", "/root/kept.txt")
    assert r.returncode == 0 and r.stdout == "hello\n", r
    # a snapshot is a template: a new sandbox starts from its files
    snap = srv.sdk("snapshot", {"id": sid, "opts": {"name": "kept-snap"}})
    assert snap == {"snapshotId": "kept-snap", "names": ["kept-snap"]}, snap
    other = srv.sdk("create", {"template": "kept-snap"})
    assert other["info"]["templateId"] == "kept-snap"
    r = srv.hutch("exec", name_of(other["sandboxId"]), "--", "cat", "/root/kept.txt")
    assert r.returncode == 0 and r.stdout == "hello\n", r
    assert srv.sdk("kill", {"id": other["sandboxId"]}) == {"killed": True}
    assert srv.sdk("kill", {"id": sid}) == {"killed": True}
    assert srv.sandboxes() == {}
    # snapshots outlive their sandboxes (and the server)
    r = srv.hutch("snapshot", "rm", "kept-snap")
    assert r.returncode == 0, r.stderr
    srv.stop()


# ---- the network wall ----


def curl_code(srv, sid, url):
    r = srv.hutch("exec", name_of(sid), "--", "curl", "-sS", "-o", "/dev/null", "-w",
                  "%{http_code}", url)
    return r.stdout.strip()


def test_allowlist_narrowed_never_widened(e2b, upstream):
    a, b = "a.example.test", "b.example.test"
    p = upstream.port
    srv = e2b.start("--allow-host", f"{a}:{p}", "--allow-host", f"{b}:{p}",
                    "--resolve", f"{a}:127.0.0.1", "--resolve", f"{b}:127.0.0.1",
                    "--allow-private", "127.0.0.0/8")
    # a host outside the server's allowlist: refused, nothing made
    e = srv.sdk("createError", {"network": {"allowOut": [f"c.example.test:{p}"]}})
    assert e["error"] and "400" in e["message"] and "allowlist" in e["message"], e
    e = srv.sdk("createError", {"network": {"allowOut": [f"*.example.test:{p}"]}})
    assert e["error"] and "400" in e["message"], e
    assert srv.sandboxes() == {}
    # narrowed to a: a answers, b is refused by hutch-proxy from inside
    narrow = srv.sdk("create", {"network": {"allowOut": [f"{a}:{p}"]}})["sandboxId"]
    assert curl_code(srv, narrow, f"http://{a}:{p}/narrow-a") == "200"
    assert curl_code(srv, narrow, f"http://{b}:{p}/narrow-b") == "403"
    assert not any(q["path"] == "/narrow-b" for q in upstream.requests)
    # negative twin: without a network body, the server's whole allowlist
    wide = srv.sdk("create")["sandboxId"]
    assert curl_code(srv, wide, f"http://{b}:{p}/wide-b") == "200"
    # no internet at all
    none = srv.sdk("create", {"allowInternetAccess": False})["sandboxId"]
    assert curl_code(srv, none, f"http://{a}:{p}/none-a") != "200"
    assert not any(q["path"] == "/none-a" for q in upstream.requests)
    # a deny entry on top
    deny = srv.sdk("create", {"network": {"denyOut": [f"{b}"]}})["sandboxId"]
    assert curl_code(srv, deny, f"http://{a}:{p}/deny-a") == "200"
    assert curl_code(srv, deny, f"http://{b}:{p}/deny-b") == "403"
    srv.stop()
    assert srv.sandboxes() == {}


# ---- ports by Host ----

SERVER_PY = r"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("port %s path %s" % (sys.argv[1], self.path)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def host_get(url, host, path="/"):
    hp = url.removeprefix("http://")
    h, p = hp.rsplit(":", 1)
    c = http.client.HTTPConnection(h, int(p), timeout=60)
    try:
        c.request("GET", path, headers={"Host": host})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def test_port_by_host(e2b):
    srv = e2b.start()
    a = srv.sdk("create")
    sid = a["sandboxId"]
    r = srv.hutch("exec", "-d", name_of(sid), "--", "python3", "-c", SERVER_PY, "8000")
    assert r.returncode == 0, r.stderr

    def up():
        st, body = host_get(srv.envd_url, a["host8000"], "/x?y=1")
        return (st, body) if st == 200 else None

    st, body = wait_for(up, what="the server in the sandbox")
    assert body == b"port 8000 path /x?y=1"
    # the control plane's listener serves sandbox hosts too
    st, body = host_get(srv.api_url, a["host8000"], "/y")
    assert st == 200 and body == b"port 8000 path /y"
    # negative twins: a port where nothing listens, an unknown sandbox
    st, body = host_get(srv.envd_url, f"8001-{sid}.{DOMAIN}")
    assert st == 502 and json.loads(body)["code"] == 502, body
    st, body = host_get(srv.envd_url, f"8000-aaaaaaaaaaaaaaaaaaaa.{DOMAIN}")
    assert st == 502, body
    # paused: no port
    assert srv.sdk("pause", {"id": sid}) == {"paused": True}
    st, body = host_get(srv.envd_url, a["host8000"])
    assert st == 502, body
    srv.stop()
    assert srv.sandboxes() == {}


# ---- the server's end ----


def test_killed_server_leftovers_destroyed_by_the_next(e2b):
    srv = e2b.start()
    sid = srv.sdk("create")["sandboxId"]
    assert name_of(sid) in srv.sandboxes()
    # SIGKILL: no chance to clean up; the sandbox and its record stay
    srv.proc.kill()
    srv.proc.communicate()
    assert name_of(sid) in srv.sandboxes()
    # the next server on the same store destroys them before it listens
    nxt = E2bServer(srv.runner, srv.sdk_path, (), same_store_as=srv)
    try:
        assert srv.sandboxes() == {}
        assert nxt.sdk("list") == []
        # negative twin: a second server on the same store is refused
        r = srv.runner.run_raw(["serve", "--e2b", "--api-key-file", str(nxt.key_file),
                                "--e2b-listen", "127.0.0.1:0", "--e2b-envd-listen",
                                "127.0.0.1:0"], env=nxt.env, timeout=READY_TIMEOUT)
        assert r.returncode != 0 and "another hutch serve --e2b" in r.stderr, r
        nxt.stop()
    finally:
        nxt.cleanup()


def test_an_unreadable_record_does_not_keep_its_sandbox(e2b):
    """The running and killing states are written without fsync
    (docs/e2b.md): after a power loss a record can be empty. The next
    server destroys its sandbox all the same (by the name its create gave
    it) and removes the record; the twin, a readable record, is the test
    above."""
    srv = e2b.start()
    empty = srv.sdk("create")["sandboxId"]
    garbled = srv.sdk("create")["sandboxId"]
    srv.proc.kill()
    srv.proc.communicate()
    table = srv.home / "e2b"
    (table / f"{empty}.json").write_text("")
    (table / f"{garbled}.json").write_text('{"sandboxID": "')
    assert {name_of(empty), name_of(garbled)} <= set(srv.sandboxes())
    nxt = E2bServer(srv.runner, srv.sdk_path, (), same_store_as=srv)
    try:
        assert srv.sandboxes() == {}
        assert not (table / f"{empty}.json").exists()
        assert not (table / f"{garbled}.json").exists()
        assert nxt.sdk("list") == []
        nxt.stop()
    finally:
        nxt.cleanup()


def test_refuses_to_start_without_a_usable_key(e2b):
    runner = e2b.runner
    d = runner.make_dir(mode=0o700, name="e2b-nokey")
    r = runner.run_raw(["serve", "--e2b"], env={"HUTCH_HOME": str(d)}, timeout=READY_TIMEOUT)
    assert r.returncode != 0 and "--api-key-file" in r.stderr, r
    key = d / "key"
    key.write_text(KEY + "\n")
    os.chmod(key, 0o644)
    runner.chown(d)
    r = runner.run_raw(["serve", "--e2b", "--api-key-file", str(key)],
                       env={"HUTCH_HOME": str(d)}, timeout=READY_TIMEOUT)
    assert r.returncode != 0 and "other users" in r.stderr, r
    r = runner.run_raw(["serve", "--e2b", "--api-key-file", str(key), "--from", "x"],
                       env={"HUTCH_HOME": str(d)}, timeout=READY_TIMEOUT)
    assert r.returncode != 0, r
    os.chmod(key, 0o600)
    for domain in ("", ".", "Evil.test", "a b"):
        r = runner.run_raw(["serve", "--e2b", "--api-key-file", str(key), "--e2b-domain", domain],
                           env={"HUTCH_HOME": str(d)}, timeout=READY_TIMEOUT)
        assert r.returncode != 0 and "--e2b-domain" in r.stderr, (domain, r)


# A WebSocket echo server (python3-websockets 10's asyncio API), as in
# test_ports_preview.py.
WS_SERVER = r"""
import asyncio, sys, websockets
async def echo(ws, path=None):
    async for m in ws:
        await ws.send("echo:" + m)
async def main():
    async with websockets.serve(echo, "127.0.0.1", int(sys.argv[1])):
        await asyncio.Future()
asyncio.run(main())
"""


def ws_roundtrip(url, host, text):
    """A WebSocket handshake with Host @host on @url's listener, one masked
    text frame, the echo's payload (or the handshake's answer if not 101)."""
    h, p = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((h, int(p)), timeout=60) as s:
        s.sendall((f"GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                   "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(1)
            if not chunk:
                return head
            head += chunk
        if not head.startswith(b"HTTP/1.1 101"):
            return head
        payload = text.encode()
        mask = os.urandom(4)
        s.sendall(bytes([0x81, 0x80 | len(payload)]) + mask +
                  bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        hdr = s.recv(2, socket.MSG_WAITALL)
        n = hdr[1] & 0x7F
        return s.recv(n, socket.MSG_WAITALL).decode()


def test_websocket_by_host(e2b):
    srv = e2b.start()
    a = srv.sdk("create")
    r = srv.hutch("exec", "-d", name_of(a["sandboxId"]), "--", "python3", "-c", WS_SERVER,
                  "8765")
    assert r.returncode == 0, r.stderr
    host = f"8765-{a['sandboxId']}.{DOMAIN}"

    def up():
        ans = ws_roundtrip(srv.envd_url, host, "hi")
        return ans if isinstance(ans, str) else None

    assert wait_for(up, what="the WebSocket server in the sandbox") == "echo:hi"
    # negative twin: no Host of a sandbox, no relay (envd's own answer)
    ans = ws_roundtrip(srv.envd_url, "127.0.0.1", "hi")
    assert isinstance(ans, bytes) and not ans.startswith(b"HTTP/1.1 101"), ans
    srv.stop()


# ---- with envd (e2b-envd.c): the SDK alone ----


def test_end_to_end_with_the_sdk_alone(e2b):
    srv = e2b.start()
    out = srv.sdk("endToEnd")
    assert out["run"] == {"exitCode": 0, "stdout": "/home/user\n/home/user\n"}, out
    assert out["port"] == {"status": 200, "body": "kept across a pause\n"}, out
    assert out["paused"] is True and out["runningWhilePaused"] is False, out
    assert out["runningAfterConnect"] is True, out
    assert out["read"] == "kept across a pause\n", out
    assert out["killed"] is True and out["runningAfterKill"] is False, out
    assert srv.sandboxes() == {}
    srv.stop()


def test_trickled_head_is_cut_and_others_served(e2b):
    srv = e2b.start()
    host, port = srv.api_url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as s:
        s.sendall(b"GET /v2/sandboxes HTTP/1.1\r\nX-Pad: ")
        closed = False
        # a byte a second, never the head's end: the server must close it
        # at its head deadline (10 s), long before 40 bytes went
        for _ in range(40):
            r, _, _ = select.select([s], [], [], 1.0)
            if r:
                closed = s.recv(65536) == b""
                break
            try:
                s.sendall(b"a")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
        assert closed, "a head trickled for 40 s was not cut"
        # meanwhile (and after) a client with a whole head is served
        status, _, body = srv.request("GET", "/v2/sandboxes", headers={"X-API-Key": KEY})
        assert status == 200, body
    srv.stop()
