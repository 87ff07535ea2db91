# SPDX-License-Identifier: LGPL-2.1-or-later
"""Driven by test_client_archive.py, as root or as the unprivileged test
user, with the arguments of client_python_check.py (CHECK HUTCH SOCKET
WORKSPACE CANARY): the Python client's download_tree/upload_tree (a tree
as tar, GET/PUT .../files/archive). Prints "ok CHECK"."""

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


globals()["check_" + CHECK]()
print("ok", CHECK)
