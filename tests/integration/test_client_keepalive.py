# SPDX-License-Identifier: LGPL-2.1-or-later
"""The clients' kept connection (issue 19: keep-alive, docs/clients.md)
and their publish/unpublish calls. Against a scripted server on a unix
socket (the failures a real server cannot be made to show on cue): a
connection the server closed while idle is replaced once and the call
succeeds; an answer cut in the middle is an error and is never sent
again. Against the real `hutch serve`, as root and as the user: several
calls go on one connection, over the unix socket and over TCP, and
publish_port/publishPort, unpublish_port/unpublishPort work."""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import REPO
from test_serve import as_euid, create, server  # noqa: F401 (a fixture)

sys.path.insert(0, str(REPO / "clients" / "python"))
import hutch  # noqa: E402

HERE = Path(__file__).resolve().parent
CHECK_MJS = HERE / "client_keepalive_check.mjs"
VERSION = b'{"version":"x","api_major":1,"api_minor":5}\n'


class Scripted:
    """An HTTP/1.1 server on a unix socket: @mode "idle" answers one
    request per connection and closes it (no "Connection: close": as an
    idle timeout after the answer); "cut" answers the first request of its
    first connection, then cuts the second answer in the middle. Counts
    connections and the requests it read."""

    def __init__(self, path, mode):
        self.path, self.mode = path, mode
        self.conns = self.requests = 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    @staticmethod
    def read_head(c):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = c.recv(4096)
            if not chunk:
                return None
            data += chunk
        return data

    def answer(self, c, body, cut=False):
        head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        c.sendall(head + (body[:10] if cut else body))

    def loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns += 1
            with c:
                while self.read_head(c) is not None:
                    self.requests += 1
                    if self.mode == "idle":
                        self.answer(c, VERSION)
                        break
                    if self.mode == "cut" and self.conns == 1 and self.requests == 2:
                        self.answer(c, VERSION, cut=True)
                        break
                    self.answer(c, VERSION)

    def close(self):
        self.sock.close()
        self.thread.join(5)


@pytest.fixture
def scripted(tmp_path):
    made = []

    def make(mode):
        s = Scripted(str(tmp_path / f"{mode}.sock"), mode)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def node():
    n = shutil.which("node")
    if not n:
        pytest.fail("needs node (Node 18+): tools/deps.sh installs nodejs")
    return n


def run_mjs(argv, runner=None):
    full = [node(), str(CHECK_MJS), str(REPO / "clients" / "typescript" / "index.js"), *argv]
    if runner is not None:
        full = runner.argv(full[1:], verb=None)
        full[full.index(runner.hutch)] = node()
    r = subprocess.run(full, capture_output=True, text=True, timeout=120,
                       env=runner.env({}) if runner is not None else None)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_python_replaces_a_connection_closed_while_idle(scripted):
    s = scripted("idle")
    c = hutch.Client(socket=s.path)
    assert [c.version()["api_major"] for _ in range(3)] == [1, 1, 1]
    c.close()
    # Each call after the first found its kept connection closed, and went
    # once more on a new one: three answers, three connections.
    assert (s.conns, s.requests) == (3, 3)


def test_python_never_resends_after_a_cut_answer(scripted):
    s = scripted("cut")
    c = hutch.Client(socket=s.path)
    assert c.version()["api_major"] == 1
    with pytest.raises(hutch.ConnectionFailed):
        c.version()
    # The cut request was not sent again; the next call gets a new
    # connection (the cut one is never reused).
    assert (s.conns, s.requests) == (1, 2)
    assert c.version()["api_major"] == 1
    assert (s.conns, s.requests) == (2, 3)
    c.close()


def test_typescript_replaces_and_never_resends(scripted):
    s = scripted("idle")
    out = run_mjs([s.path, "fake-idle"])
    assert out["versions"] == [1, 1, 1] and (s.conns, s.requests) == (3, 3), out
    s = scripted("cut")
    out = run_mjs([s.path, "fake-cut"])
    assert (out["first"], out["second"], out["third"]) == (1, "ConnectionFailed", 1), out
    assert (s.conns, s.requests) == (2, 3), out


def test_kept_connection_with_hutch_serve(server):  # noqa: F811
    api = server.api
    name = "ka-" + os.urandom(3).hex()
    create(api, name)
    api.exec(name, ["true"])
    with as_euid(server.uid):
        c = hutch.Client(socket=api.sock_path)
        c.exec(name, ["true"])
        kept = c._idle.sock
        for _ in range(3):
            assert c.exec(name, ["true"]).outcome.exit_code == 0
            c.get(name)
        # Every call went on the one connection.
        assert c._idle is not None and c._idle.sock is kept
        # An error answer leaves it usable.
        with pytest.raises(hutch.ApiError):
            c.get("nope-" + os.urandom(3).hex())
        assert c._idle.sock is kept
        pub = c.publish_port(name, 8000)
        assert pub["port"] == 8000 and pub["host_port"] > 0, pub
        assert c.ports(name) == [pub]
        c.unpublish_port(name, 8000)
        assert c.ports(name) == []
        with pytest.raises(hutch.ApiError) as e:
            c.unpublish_port(name, 8000)
        assert e.value.status == 404
        assert c._idle.sock is kept
        c.close()
    out = run_mjs([api.sock_path, "real", name], runner=server.runner)
    assert out["reused"] and out["connections"] == 1, out
    assert out["published"]["port"] == 8000 and out["published"]["hostPort"] > 0, out
    assert out["listed"] == [out["published"]] and out["after"] == [], out
    assert out["again"] == "NotFound 404", out


def test_kept_connection_over_tcp(server):  # noqa: F811
    runner = server.runner
    tdir = runner.make_dir(mode=0o700, name="ka-token")
    token = os.urandom(24).hex()
    tfile = tdir / "token"
    tfile.write_text(token + "\n")
    os.chmod(tfile, 0o600)
    runner.chown(tdir)
    sock = str(server.state / "ka-tcp.sock")
    _, _, addr = server.start("--socket", sock, "--listen", "127.0.0.1:0", "--token-file",
                              str(tfile), expect_tcp=True)
    c = hutch.Client(url=f"http://{addr}", token=token)
    c.version()
    kept = c._idle.sock
    for _ in range(3):
        assert c.version()["api_major"] == 1
        assert c.list() == []
    assert c._idle.sock is kept
    c.close()
    # The twin: a wrong token is an error, and the connection is not kept
    # (the front closes it after a refused head).
    bad = hutch.Client(url=f"http://{addr}", token=token + "x")
    with pytest.raises(hutch.ApiError) as e:
        bad.version()
    assert e.value.status == 401 and bad._idle is None
    bad.close()
