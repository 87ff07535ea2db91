# SPDX-License-Identifier: LGPL-2.1-or-later
"""Driven by test_client_python.py, as root or as the unprivileged test
user: CHECK HUTCH SOCKET WORKSPACE CANARY. Each check is a function below;
an assert that fails exits non-zero with its traceback. Prints "ok CHECK"."""

import os
import socket as pysocket
import subprocess
import sys

import hutch

CHECK, HUTCH, SOCK, WS, CANARY = sys.argv[1:6]


def expect(exc_type, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except exc_type as e:
        return e
    raise AssertionError(f"{fn.__name__} did not raise {exc_type.__name__}")


def check_surface():
    assert not os.path.exists(SOCK)
    with hutch.Client.connect(socket=SOCK, hutch=HUTCH) as c:
        server = c._server
        assert server is not None, "the client did not start a server"
        v = c.version()
        assert v["api_major"] == 1 and v["api_minor"] >= 1, v
        assert any(r["path"] == "/v1/sandboxes/{name}/exec" for r in c.routes())
        # A second client finds the running server and does not own it.
        with hutch.Client.connect(socket=SOCK, hutch=HUTCH) as c2:
            assert c2._server is None
            assert c2.list() == []
        assert server.poll() is None

        sb = c.create("pyc", policy={"workspace": {"path": WS, "mode": "overlay"}})
        info = sb.info()
        assert info.name == "pyc" and len(info.id) == 16 and info.state in ("running", "stopped")
        assert [s.name for s in c.list()] == ["pyc"]

        r = sb.exec(["sh", "-c", 'printf "%s" "$GREETING"; printf err >&2; exit 3'],
                    env={"GREETING": "hi"})
        assert isinstance(r, hutch.ExecResult) and isinstance(r.outcome, hutch.Outcome)
        assert (r.exit_code, r.outcome.reason, r.outcome.signal) == (3, "exited", None)
        assert r.stdout == b"hi" and r.stderr == b"err" and not r.ok
        r = sb.exec(["sh", "-c", "kill -9 $$"])
        assert r.outcome.signal == 9 and r.outcome.reason == "signaled", r.outcome
        r = sb.exec(["cat"], stdin=b"\x00\xff bytes")
        assert r.stdout == b"\x00\xff bytes" and r.ok
        r = sb.exec(["pwd"], cwd="/tmp")
        assert r.stdout_text == "/tmp\n"
        r = sb.exec(["sleep", "30"], timeout_ms=200)
        assert r.outcome.reason == "timeout", r.outcome

        events = list(sb.exec_stream(["sh", "-c", "echo one; echo two >&2; exit 4"]))
        assert isinstance(events[-1], hutch.Outcome) and events[-1].exit_code == 4
        chunks = [e for e in events if isinstance(e, hutch.OutputChunk)]
        assert b"".join(e.data for e in chunks if e.stream == "stdout") == b"one\n"
        assert b"".join(e.data for e in chunks if e.stream == "stderr") == b"two\n"
        assert isinstance(sb.exec_detached(["sleep", "1"]), int)

        # Files.
        sb.write_file("notes.txt", "hello\n", mode=0o600)
        assert sb.read_file("notes.txt") == b"hello\n"
        st = sb.stat("notes.txt")
        assert (st.type, st.size, st.mode) == ("file", 6, "0600")
        sb.write_file("/workspace/bin.dat", b"\x00\x01", mode="0755")
        names = {f.name: f for f in sb.list_files("/workspace")}
        assert names["bin.dat"].mode == "0755" and "host.txt" in names
        assert sb.exists("notes.txt") and not sb.exists("nope.txt")
        # API 1.2: parents, mkdir, move, the recursive list.
        sb.write_file("deep/er/f.txt", "f", parents=True)
        sb.mkdir("deep/other", mode=0o700)
        expect(hutch.Conflict, sb.mkdir, "deep/other")
        sb.mkdir("deep/other", parents=True)
        sb.move("deep/er/f.txt", "deep/other/g.txt")
        expect(hutch.Conflict, sb.move, "notes.txt", "deep/other/g.txt")
        tree = {f.name: f.type for f in sb.list_files("deep", recursive=True)}
        assert tree == {"er": "dir", "other": "dir", "other/g.txt": "file"}, tree
        assert {f.name for f in sb.list_files("deep", recursive=True, depth=1)} == {"er", "other"}
        sb.remove_file("notes.txt")
        assert not sb.exists("notes.txt")
        e = expect(hutch.NotFound, sb.read_file, "nope.txt")
        assert e.status == 404 and e.code == "not_found"
        # Confinement: the host canary, readable here (the negative twin),
        # is not there for the sandbox, through any path.
        with open(CANARY) as f:
            assert f.read().startswith("canary")
        for p in (CANARY, "../../../../../" + CANARY, "/proc/1/root" + CANARY):
            expect(hutch.ApiError, sb.read_file, p)
        r = sb.exec(["cat", CANARY])
        assert r.exit_code != 0 and b"canary" not in r.stdout

        # Diff and apply: the overlay keeps the host unchanged until apply.
        changes = {ch["path"]: ch for ch in sb.diff()}
        assert "bin.dat" in changes, changes
        assert not os.path.exists(os.path.join(WS, "bin.dat"))
        sb.apply(paths=["bin.dat"])
        with open(os.path.join(WS, "bin.dat"), "rb") as f:
            assert f.read() == b"\x00\x01"
        assert isinstance(sb.audit(limit=5), list)

        # Snapshots.
        sb.stop()
        assert sb.info().state == "stopped"
        sb.snapshot("base")
        assert "base" in c.snapshots()
        sb.write_file("after.txt", "x")
        sb.stop()
        sb.restore("base")
        assert not sb.exists("after.txt")
        fork = c.create("pyc2", from_snapshot="base")
        assert fork.info().parent is not None
        e = expect(hutch.Conflict, c.remove_snapshot, "base")
        assert e.status == 409
        fork.delete()
        sb.delete()
        c.remove_snapshot("base")
        assert c.list() == [] and c.snapshots() == []
    # close() stopped the server it started.
    assert server.wait(timeout=30) is not None
    expect(hutch.ConnectionFailed, hutch.Client(socket=SOCK).version)


def check_errors():
    # No server: a clear ConnectionFailed, no autostart asked.
    e = expect(hutch.ConnectionFailed, hutch.Client.connect, socket=SOCK, autostart=False)
    assert "does not exist" in str(e), e
    # A stale socket: bound, nobody listening.
    s = pysocket.socket(pysocket.AF_UNIX, pysocket.SOCK_STREAM)
    s.bind(SOCK)
    s.close()
    e = expect(hutch.ConnectionFailed, hutch.Client(socket=SOCK).version)
    assert "stale" in str(e), e
    os.unlink(SOCK)
    with hutch.Client.connect(socket=SOCK, hutch=HUTCH) as c:
        e = expect(hutch.InvalidArgument, c.create, "Bad Name!")
        assert e.status == 400 and e.code == "invalid_argument" and e.field == "/name", e
        e = expect(hutch.NotFound, c.get, "nosuch")
        assert e.code == "not_found" and e.message
        c.create("errs")
        e = expect(hutch.Conflict, c.create, "errs")
        assert e.code == "conflict"
        e = expect(hutch.InvalidArgument, c.exec, "errs", ["true"], env={"1BAD": "x"})
        assert e.field == "/env/1BAD", e
        e = expect(hutch.InvalidArgument, c.exec, "errs", ["true"], cwd="rel")
        assert e.field == "/cwd"
        expect(TypeError, c.exec, "errs", "true")
        e = expect(hutch.InvalidArgument, c.snapshot, "errs", "Bad!")
        assert e.field == "/snapshot"
        c.delete("errs")

    # TCP: the token, and a wrong one.
    tok = os.path.join(os.path.dirname(SOCK), "token")
    with open(os.open(tok, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write("t" * 32 + "\n")
    p = subprocess.Popen([HUTCH, "serve", "--socket", SOCK, "--listen", "127.0.0.1:0",
                          "--token-file", tok], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True)
    try:
        port = None
        while port is None:
            line = p.stdout.readline()
            assert line, p.stderr.read()
            if line.startswith("listening on tcp:"):
                port = line.strip().rsplit(":", 1)[1]
        url = f"http://127.0.0.1:{port}"
        assert hutch.Client(url=url, token="t" * 32).version()["api_major"] == 1
        e = expect(hutch.Unauthorized, hutch.Client(url=url, token="w" * 32).version)
        assert e.status == 401 and e.code == "unauthorized"
        e = expect(hutch.Unauthorized, hutch.Client(url=url).list)
        assert e.status == 401
    finally:
        p.terminate()
        p.wait(timeout=30)
        p.stdout.close()
        p.stderr.close()
    e = expect(hutch.ConnectionFailed, hutch.Client(url=url, token="t" * 32).version)
    assert "refused" in str(e), e


def check_run():
    # The one-liner starts a server for the call and stops it.
    r = hutch.run(["sh", "-c", "cat host.txt; echo changed > host.txt; cat /etc/hostname"],
                  workspace=WS, timeout=60, socket=SOCK, hutch=HUTCH)
    assert r.ok and r.stdout.startswith(b"from the host\n"), r
    with open(os.path.join(WS, "host.txt")) as f:
        assert f.read() == "from the host\n"  # an overlay: the host is unchanged
    r = hutch.run(["sh", "-c", "sleep 30"], workspace=WS, timeout=0.3, socket=SOCK, hutch=HUTCH)
    assert r.outcome.reason == "timeout" and not r.ok
    r = hutch.run(["cat", CANARY], workspace=None, socket=SOCK, hutch=HUTCH)
    assert r.exit_code != 0 and b"canary" not in r.stdout
    r = hutch.run(["true"], workspace=WS, allow_hosts=["example.test"], socket=SOCK, hutch=HUTCH)
    assert r.ok, r
    assert not os.path.exists(SOCK) or expect(hutch.ConnectionFailed,
                                              hutch.Client(socket=SOCK).version)
    with hutch.Client.connect(socket=SOCK, hutch=HUTCH) as c:
        assert c.list() == []  # run removed its sandboxes


globals()["check_" + CHECK]()
print("ok", CHECK)
