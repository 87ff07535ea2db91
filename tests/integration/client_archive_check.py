# SPDX-License-Identifier: LGPL-2.1-or-later
"""Driven by test_client_archive.py, as root or as the unprivileged test
user, with the arguments of client_python_check.py (CHECK HUTCH SOCKET
WORKSPACE CANARY): the Python client's download_tree/upload_tree (a tree
as tar, GET/PUT .../files/archive; check "tree"), and its exec WebSocket
and ports calls (check "terminal"). Prints "ok CHECK"."""

import io
import sys
import tarfile

import hutch

CHECK, HUTCH, SOCK, WS, CANARY = sys.argv[1:6]


def check_tree():
    with hutch.Client.connect(socket=SOCK, hutch=HUTCH) as c:
        sb = c.create("pyt", policy={"workspace": {"path": WS, "mode": "overlay"}})
        try:
            r = sb.exec(["sh", "-c", "mkdir -p t/d && echo a > t/d/a && ln -s d/a t/l"])
            assert r.ok, r
            tar = sb.download_tree("t")
            with tarfile.open(fileobj=io.BytesIO(tar)) as t:
                names = {m.name: m for m in t.getmembers()}
            assert set(names) == {"d", "d/a", "l"} and names["l"].linkname == "d/a", names
            sb.upload_tree("copy/t", tar, parents=True)
            assert sb.read_file("copy/t/d/a") == b"a\n"
            assert sb.download_tree("copy/t") == tar
            # A hostile archive: the typed error, naming the entry; nothing
            # written outside.
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as t:
                i = tarfile.TarInfo("../escape")
                t.addfile(i, io.BytesIO(b""))
            try:
                sb.upload_tree("copy/t", buf.getvalue())
                raise AssertionError("a '..' entry was accepted")
            except hutch.PermissionDenied as e:
                assert "entry '../escape'" in str(e), e
            assert not sb.exists("copy/escape")
            try:
                sb.download_tree("nowhere")
                raise AssertionError("a missing folder was archived")
            except hutch.NotFound:
                pass
        finally:
            sb.delete()


# Ctrl-C's target: SIGINT at its default before it says "ready", so the
# kernel ends it (a handler that only sets a flag, as dash's and Python's
# do, can miss a SIGINT that lands just before a blocking call).
READY_SLEEP = ("exec python3 -c 'import signal, time; signal.signal(signal.SIGINT, signal.SIG_DFL); "
               "print(\"ready\", flush=True); time.sleep(60)'")


def check_terminal():
    """The exec WebSocket (terminal.py): stdin, a terminal of the size
    asked, resize, Ctrl-C, the typed errors; ports and the preview URL."""
    with hutch.Client.connect(socket=SOCK, hutch=HUTCH) as c:
        sb = c.create("pyterm")
        try:
            with sb.terminal(["sh", "-c", "read a; echo got:$a; echo err >&2; exit 3"]) as t:
                assert t.id > 0
                t.write("line\n")
                out, err = t.wait(60)
                assert t.finished and t.exit_code == 3, (t.exit_code, out, err)
                assert out == b"got:line\n" and err == b"err\n", (out, err)
            with sb.terminal(["sh", "-c", "stty size; read x; stty size; " + READY_SLEEP],
                             tty=True, cols=100, rows=30) as t:
                seen = b""
                while b"30 100" not in seen:
                    seen += t.read(30)[0]
                t.resize(90, 20)
                t.write("\n")
                while b"20 90" not in seen or b"ready" not in seen:
                    seen += t.read(30)[0]
                t.write("\x03")
                t.wait(60)
                assert t.finished and t.exit_code != 0, t.exit_code
            try:
                c.terminal("no-such-sandbox", ["true"])
                raise AssertionError("a missing sandbox was accepted")
            except hutch.NotFound:
                pass
            try:
                hutch.Client(socket="/nonexistent/hutch.sock").terminal("pyterm", ["true"])
                raise AssertionError("no server, no error")
            except hutch.ConnectionFailed:
                pass
            assert sb.ports() == [] and sb.preview_url(8080) is None
            assert hutch.Client(url="http://127.0.0.1:7777", token="t").preview_url("x", 3000) == \
                "http://127.0.0.1:7777/v1/sandboxes/x/ports/3000/"
            info = sb.info()
            assert info.backend == "ns" and info.image is None and info.ports == [], info
        finally:
            sb.delete()


globals()["check_" + CHECK]()
print("ok", CHECK)
