# SPDX-License-Identifier: LGPL-2.1-or-later
"""envd of `hutch serve --e2b` (docs/e2b-envd.md) with the real `e2b` npm
package (pinned below, installed into the tests' npm cache as test_mcp.py
does for the MCP SDK), driven by e2b-envd.mjs, and over raw HTTP for what
the SDK never sends: a malformed envelope, an unknown method, an oversize
message, a wrong token or sandbox on each route.

The server runs as root and as the unprivileged test user (`sbx`); the
SDK is its client from the test process. Every test ends with no hutch
sandbox left and no process of its marker alive."""

import http.client
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import uuid
from pathlib import Path

import pytest

from cgroupctl import poll_until
from conftest import live_with_marker, node_package, wait_pidfds
from test_serve import read_line

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "e2b-envd.mjs"
E2B_SPEC = "e2b@2.51.0"
API_KEY = "e2b_" + "0123456789abcdef" * 2
READY_TIMEOUT = 30


@pytest.fixture(scope="session")
def e2b_modules():
    pkg = node_package("e2b", E2B_SPEC, "dist/index.mjs")
    if pkg is None:
        pytest.fail(f"cannot install {E2B_SPEC} with npm (needs the npm registry once)")
    return pkg.parent  # node_modules


def kills_done(home, timeout=30):
    """Waits until no E2B record of the store @home says "killing": a kill
    is answered once the sandbox's processes are gone, and its keeper's
    exit and the removal of its files follow (docs/e2b.md), the hutch
    sandbox listed until then."""
    def killing():
        for rec in (Path(home) / "e2b").glob("*.json"):
            try:
                if json.loads(rec.read_text()).get("state") == "killing":
                    return True
            except (OSError, ValueError):
                continue
        return False
    poll_until(lambda: not killing(), timeout)


class E2bServer:
    """hutch serve --e2b as @runner's caller, with its own store, on
    loopback ports the kernel picks."""

    def __init__(self, runner):
        self.runner = runner
        self.home = runner.make_dir(0o700, "e2b-home")
        self.state = runner.make_dir(0o700, "e2b-state")
        self.env = {"HUTCH_HOME": str(self.home), "HUTCH_STATE_DIR": str(self.state)}
        key = self.home / "api-key"
        key.write_text(API_KEY + "\n")
        os.chmod(key, 0o600)
        runner.chown(key)
        self.proc = subprocess.Popen(
            runner.argv(["serve", "--e2b", "--api-key-file", str(key),
                         "--e2b-listen", "127.0.0.1:0", "--e2b-envd-listen", "127.0.0.1:0"],
                        verb=None),
            env=runner.env(self.env), cwd=str(runner.base_dir), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        lines = [read_line(self.proc, READY_TIMEOUT), read_line(self.proc, READY_TIMEOUT)]
        if None in lines:
            self.stop()
            raise AssertionError(f"hutch serve --e2b did not start: {lines}")
        assert lines[0].startswith("e2b api on http://"), lines
        assert lines[1].startswith("e2b envd on http://"), lines
        self.api = lines[0].split("on ", 1)[1]
        self.envd = lines[1].split("on ", 1)[1]
        self.envd_port = int(self.envd.rsplit(":", 1)[1])

    def sandboxes(self):
        kills_done(self.home)
        ls = self.runner.run_raw(["ls", "--json"], env=self.env)
        assert ls.returncode == 0, ls.stderr
        return json.loads(ls.stdout)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for sb in (json.loads(self.runner.run_raw(["ls", "--json"], env=self.env).stdout or "[]")
                   if self.home.exists() else []):
            self.runner.run_raw(["rm", "--force", sb["name"]], env=self.env)
        for d in (self.home, self.state):
            shutil.rmtree(d, ignore_errors=True)

    def create(self):
        """A sandbox through the control plane: (id, envd access token)."""
        host, port = self.api[len("http://"):].rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=120)
        c.request("POST", "/sandboxes", body=json.dumps({"templateID": "base", "timeout": 300}),
                  headers={"X-API-Key": API_KEY, "Content-Type": "application/json"})
        r = c.getresponse()
        body = json.loads(r.read())
        c.close()
        assert r.status == 201, body
        return body["sandboxID"], body["envdAccessToken"]

    def control(self, method, path, body=None):
        """One request to the control plane with the API key: (status,
        body bytes)."""
        host, port = self.api[len("http://"):].rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=120)
        try:
            c.request(method, path, body=None if body is None else json.dumps(body),
                      headers={"X-API-Key": API_KEY, "Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def kill(self, sid):
        host, port = self.api[len("http://"):].rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=120)
        c.request("DELETE", f"/sandboxes/{sid}", headers={"X-API-Key": API_KEY})
        r = c.getresponse()
        r.read()
        c.close()
        return r.status


@pytest.fixture
def server(sbx):
    s = E2bServer(sbx)
    yield s
    s.stop()


def sdk_script(modules, tmp_path, driver):
    """@driver (a .mjs of this folder) copied into tmp_path/e2b-lib beside
    the e2b SDK's node_modules: (node, the copy's path)."""
    node = shutil.which("node")
    assert node, "needs node"
    lib = tmp_path / "e2b-lib"
    lib.mkdir(exist_ok=True)
    if not (lib / "node_modules").exists():
        (lib / "node_modules").symlink_to(modules)
    script = lib / os.path.basename(driver)
    if not script.exists():
        shutil.copy2(driver, script)
    return node, script


def sdk_env(server, tmp_path):
    """The environment that points the SDK at @server."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
            "E2B_API_URL": server.api, "E2B_SANDBOX_URL": server.envd, "E2B_API_KEY": API_KEY}


def run_driver(server, modules, tmp_path, driver, *args):
    """Runs SDK driver @driver with @args to its end; returns the JSON of
    its last line, which must not hold an "error"."""
    node, script = sdk_script(modules, tmp_path, driver)
    r = subprocess.run([node, str(script), *args], env=sdk_env(server, tmp_path),
                       capture_output=True, text=True, timeout=300, cwd=str(script.parent))
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert "error" not in out, out
    return out


def drive(server, modules, tmp_path, scenario, arg=None):
    """Runs one scenario of e2b-envd.mjs; returns its JSON."""
    return run_driver(server, modules, tmp_path, DRIVER, scenario, *([arg] if arg else []))


def test_commands(server, e2b_modules, tmp_path):
    marker = f"/bin/sleep{uuid.uuid4().hex[:8]}"
    out = drive(server, e2b_modules, tmp_path, "commands", "exec -a " + marker + " sleep")
    assert out["run"] == {"exitCode": 0, "stdout": "hello\nbar baz\n/tmp\n", "stderr": "oops\n"}
    # A failing command raises the SDK's CommandExitError with its code...
    assert out["fail"]["isExit"] and out["fail"]["exitCode"] == 3, out
    assert out["fail"]["stdout"] == "partial\n"
    # ...and one past its timeoutMs the SDK's TimeoutError, killed.
    assert out["timeout"]["isTimeout"] and out["timeout"]["fast"], out
    assert out["onStdout"] and out["listed"] and out["kill"], out
    assert out["afterKill"] == {"name": "CommandExitError", "error": "signal: killed",
                                "exitCode": -1}
    # Its negative twin: once killed it is no longer listed nor killable.
    assert out["listedAfterKill"] is False and out["killAgain"] is False
    assert out["closeStdin"] == "line\ndone\n"
    assert out["reattached"] and out["killTicks"], out  # commands.connect()
    # Input a command never reads: resource_exhausted (the SDK's
    # RateLimitError) after 5 s, and the broker still answers kill().
    assert out["deaf"] == "RateLimitError" and out["deafKill"] is True, out
    # kill() reaches the command's children too (its twin: alive before).
    assert out["familyBefore"] and out["killFamily"] and out["familyAfter"], out
    # The sandbox was killed at the end: nothing of it is left running.
    assert server.sandboxes() == []
    assert wait_pidfds(list(live_with_marker(marker)), 30) == set()


def test_pty(server, e2b_modules, tmp_path):
    out = drive(server, e2b_modules, tmp_path, "pty")
    assert out["first"] and out["size"] and out["tty"], out
    assert out["resized"] and out["kill"], out
    assert out["afterKill"]["name"] == "CommandExitError", out
    assert out["left"] == 0
    assert server.sandboxes() == []


def test_files(server, e2b_modules, tmp_path):
    out = drive(server, e2b_modules, tmp_path, "files")
    assert out["write"] == {"name": "a.txt", "path": "/tmp/e2b/a.txt", "type": "file"}
    assert out["read"] == "alpha\n"
    assert out["readBytes"] == [0, 1, 2, 255, 10]  # the octet-stream upload
    assert out["streamed"] == "part1-part2"  # octet-stream, chunked
    assert out["many"] == ["/tmp/e2b/m1", "/tmp/e2b/m2"]  # multipart, two parts
    assert out["list"] == [["a.txt", "file", "/tmp/e2b/a.txt"], ["bin", "file", "/tmp/e2b/bin"],
                           ["m1", "file", "/tmp/e2b/m1"], ["m2", "file", "/tmp/e2b/m2"]]
    assert "/tmp/e2b/sub/deeper" in out["listDeep"]
    assert out["exists"] == [True, False]
    assert out["makeDir"] == [True, False]  # made, then already there
    assert out["info"] == {"name": "a.txt", "type": "file", "size": 6, "mode": 0o644,
                           "permissions": "-rw-r--r--"}
    assert out["rename"] == {"path": "/tmp/e2b/new/b.txt", "old": False, "read": "alpha\n"}
    assert out["removed"] and out["readMissing"] == "FileNotFoundError"
    assert out["watchCreate"] and out["watchRemove"], out
    # Signed URLs (no token header): the right signature works both ways,
    # a forged one is refused.
    assert out["signedDown"] == {"status": 200, "text": "alpha\n", "signed": True}
    assert out["signedUp"] == {"status": 200, "read": "uploaded"}
    assert out["forged"] == 401
    assert out["catBack"] == "alpha\n"
    assert server.sandboxes() == []


def test_wall(server, e2b_modules, tmp_path):
    """The SDK's commands and files stay inside hutch's wall."""
    canary = tmp_path / "canary.txt"
    canary.write_text("the host's secret\n")
    os.chmod(tmp_path, 0o755)
    os.chmod(canary, 0o644)
    marker = f"/tmp/e2b-marker-{uuid.uuid4().hex[:8]}"
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    try:
        out = drive(server, e2b_modules, tmp_path, "wall", f"{canary},{port},{marker}")
        # Negative twins: the host reads the canary and reaches the port.
        assert canary.read_text() == "the host's secret\n"
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        listener.close()
    assert out["canary"]["exitCode"] != 0 and "secret" not in (out["canary"]["stdout"] or "")
    assert out["net"]["exitCode"] != 0 and "connected" not in (out["net"]["stdout"] or "")
    assert out["markerInside"] is True
    assert not Path(marker).exists()  # the sandbox's /tmp is not the host's


def test_access(server, e2b_modules, tmp_path):
    out = drive(server, e2b_modules, tmp_path, "access")
    assert out["wrongToken"] == "AuthenticationError"
    assert out["wrongTokenFiles"] == "AuthenticationError"
    assert out["unknown"]["notFound"], out
    assert out["running"] is True and out["unknownRunning"] is False
    assert server.sandboxes() == []


def test_kill_ends_streams(server, e2b_modules, tmp_path):
    out = drive(server, e2b_modules, tmp_path, "killstream")
    assert out["kill"] is True
    # The command was killed with its sandbox: its stream ended (with the
    # outcome "signal: killed", or unavailable when the keeper went first).
    assert out["ended"] in ("TimeoutError", "CommandExitError"), out
    assert out["running"] is False
    assert server.sandboxes() == []


def test_pause_ends_streams(server, e2b_modules, tmp_path):
    out = drive(server, e2b_modules, tmp_path, "pausewatch")
    assert out["paused"] is True, out
    assert out["watchEnded"] != "still open" and out["commandEnded"] != "still open", out
    # unavailable (the SDK's TimeoutError); not_found when the walk met the
    # sandbox mid-stop before its record said paused.
    assert out["watchEnded"] in ("TimeoutError", "NotFoundError"), out
    assert out["running"] is False  # and the watch did not start it again
    assert server.sandboxes() == []


# ---- raw HTTP: what the SDK never sends ----

def envd_request(server, method, path, body=b"", headers=None):
    c = http.client.HTTPConnection("127.0.0.1", server.envd_port, timeout=60)
    c.putrequest(method, path, skip_accept_encoding=True)
    h = {"Content-Length": str(len(body))}
    h.update(headers or {})
    for k, v in h.items():
        c.putheader(k, v)
    c.endheaders()
    if body:
        c.send(body)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, r.getheader("Content-Type"), data


def envelope(payload, flags=0):
    return struct.pack(">BI", flags, len(payload)) + payload


def frames(data):
    """The (flags, JSON) of each envelope of a stream answer."""
    out, i = [], 0
    while i < len(data):
        flags, n = struct.unpack(">BI", data[i:i + 5])
        out.append((flags, json.loads(data[i + 5:i + 5 + n])))
        i += 5 + n
    return out


def test_raw_protocol(server):
    sid, token = server.create()
    auth = {"E2b-Sandbox-Id": sid, "X-Access-Token": token}
    unary = dict(auth, **{"Content-Type": "application/json"})
    stream = dict(auth, **{"Content-Type": "application/connect+json"})
    try:
        # The unary twin that works: List answers {"processes": ...}.
        st, ct, body = envd_request(server, "POST", "/process.Process/List", b"{}", unary)
        assert st == 200 and ct == "application/json", body
        assert "processes" in json.loads(body) or json.loads(body) == {"processes": []}
        # An unknown method: the Connect error shape.
        st, ct, body = envd_request(server, "POST", "/process.Process/Nope", b"{}", unary)
        assert (st, json.loads(body)["code"]) == (501, "unimplemented"), body
        st, _, body = envd_request(server, "POST", "/filesystem.Filesystem/CreateWatcherX",
                                   b"{}", unary)
        assert st == 501 and json.loads(body)["code"] == "unimplemented"
        # An unknown field is refused (deny by default), not ignored.
        st, _, body = envd_request(server, "POST", "/filesystem.Filesystem/Stat",
                                   b'{"path":"/","evil":1}', unary)
        assert (st, json.loads(body)["code"]) == (400, "invalid_argument"), body
        # The wrong codec: 415.
        st, _, _ = envd_request(server, "POST", "/process.Process/List", b"{}",
                                dict(auth, **{"Content-Type": "application/proto"}))
        assert st == 415
        # A stream: the good envelope runs; start, data, end, end-of-stream.
        msg = json.dumps({"process": {"cmd": "/bin/echo", "args": ["raw"]}}).encode()
        st, ct, body = envd_request(server, "POST", "/process.Process/Start", envelope(msg),
                                    stream)
        assert st == 200 and ct == "application/connect+json", body
        fr = frames(body)
        assert fr[0][1]["event"]["start"]["pid"] > 0
        assert any("data" in f[1].get("event", {}) for f in fr[1:-1])
        assert fr[-2][1]["event"]["end"]["status"] == "exit status 0"
        assert fr[-1] == (2, {})
        # Malformed envelopes: compressed flag, truncated, two messages.
        for bad in (envelope(msg, flags=1), envelope(msg)[:-3], envelope(msg) + envelope(msg)):
            st, _, body = envd_request(server, "POST", "/process.Process/Start", bad, stream)
            assert (st, json.loads(body)["code"]) == (400, "invalid_argument"), body
        # An envelope that says 4 GiB: refused from its head.
        st, _, body = envd_request(server, "POST", "/process.Process/Start",
                                   b"\x00\xff\xff\xff\xff{}", stream)
        assert (st, json.loads(body)["code"]) == (429, "resource_exhausted"), body
        # A unary body over 4 MiB: refused from the head, before any byte.
        st, _, body = envd_request(server, "POST", "/filesystem.Filesystem/Stat", b"",
                                   dict(unary, **{"Content-Length": str(5 << 20)}))
        assert (st, json.loads(body)["code"]) == (429, "resource_exhausted"), body
        # Wrong token, unknown sandbox, no sandbox id.
        st, _, body = envd_request(server, "POST", "/process.Process/List", b"{}",
                                   dict(unary, **{"X-Access-Token": "x" * 43}))
        assert (st, json.loads(body)["code"]) == (401, "unauthenticated"), body
        st, _, body = envd_request(server, "POST", "/process.Process/List", b"{}",
                                   dict(unary, **{"E2b-Sandbox-Id": "b" * 20}))
        assert (st, json.loads(body)["code"]) == (404, "not_found"), body
        st, _, body = envd_request(server, "POST", "/process.Process/List", b"{}",
                                   {"Content-Type": "application/json"})
        assert st == 404
        # A stream's refusal travels in its end-of-stream frame: an unknown
        # member, a tag (not kept, so refused), a wrong token.
        for bad, code in (({"process": {"cmd": "/bin/true", "evil": 1}}, "invalid_argument"),
                          ({"process": {"cmd": "/bin/true"}, "tag": "t"}, "unimplemented")):
            st, _, body = envd_request(server, "POST", "/process.Process/Start",
                                       envelope(json.dumps(bad).encode()), stream)
            assert st == 200 and frames(body) == [(2, frames(body)[0][1])], body
            assert frames(body)[0][1]["error"]["code"] == code, body
        st, _, body = envd_request(server, "POST", "/process.Process/Start", envelope(msg),
                                   dict(stream, **{"X-Access-Token": "x" * 43}))
        assert st == 200 and frames(body)[-1][1]["error"]["code"] == "unauthenticated"
        # REST: /health and /files.
        assert envd_request(server, "GET", "/health", headers=auth)[0] == 204
        assert envd_request(server, "GET", "/health",
                            headers={"E2b-Sandbox-Id": "c" * 20})[0] == 502
        st, _, body = envd_request(server, "GET", "/files?path=%2Fetc%2Fhostname",
                                   headers={"E2b-Sandbox-Id": sid})
        assert st == 401 and json.loads(body)["code"] == 401
        st, _, body = envd_request(server, "GET", "/files?path=%2Fnope", headers=auth)
        assert st == 404 and json.loads(body)["code"] == 404
        st, _, body = envd_request(server, "POST", "/files?path=%2Ftmp%2Fm", b"x",
                                   dict(auth, **{"Content-Type": "application/octet-stream",
                                                 "X-Metadata-k": "v"}))
        assert st == 501, body  # file metadata: refused, never dropped
        st, _, body = envd_request(server, "GET", "/files?path=%2Ftmp%2Fm&username=mallory",
                                   headers=auth)
        assert st == 400, body
    finally:
        assert server.kill(sid) == 204
    # Killed: its envd answers 502 on /health and not_found on calls.
    assert envd_request(server, "GET", "/health", headers=auth)[0] == 502
    assert server.sandboxes() == []
