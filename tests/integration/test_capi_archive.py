# SPDX-License-Identifier: LGPL-2.1-or-later
"""The C API's hutch_file_archive_get/put (include/hutch.h, a tree as tar)
through capi-probe against the installed libhutch, as root and as the
user (test_capi.py's harness): a tree round-trips byte-identical; a '..'
entry is -EPERM with the entry named in err->message and nothing written
outside; a limit below the archive's size is -EFBIG."""

import io
import tarfile

from test_capi import api, installed, workspace  # noqa: F401 (fixtures)

EPERM, EFBIG = 1, 27


def test_archive_round_trip_and_refusals(api):  # noqa: F811
    ws = workspace(api)
    api.create("arcc", "--workspace", f"{ws}:overlay")
    r, _ = api.exec("arcc", "sh", "-c", "mkdir -p /tmp/o t/d && echo x > t/d/f && ln -s d/f t/l")
    assert r.returncode == 0, r.stderr
    g = api.probe("archive-get", "arcc", "t", str(1 << 20), text=False)
    assert g.returncode == 0, g.stderr
    with tarfile.open(fileobj=io.BytesIO(g.stdout)) as t:
        assert sorted(t.getnames()) == ["d", "d/f", "l"]
    assert api.ok("archive-put", "arcc", "copy/t", "1", input=g.stdout, text=False) == {}
    g2 = api.probe("archive-get", "arcc", "copy/t", str(1 << 20), text=False)
    assert g2.returncode == 0 and g2.stdout == g.stdout
    e = api.err("archive-get", "arcc", "t", "512")
    assert e["error"] == EFBIG and "limit" in e["message"], e
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        t.addfile(tarfile.TarInfo("../o/escape"), io.BytesIO(b""))
    e = api.err("archive-put", "arcc", "/tmp/d", "1", input=buf.getvalue(), text=False)
    assert e["error"] == EPERM and "entry '../o/escape'" in e["message"], e
    r, _ = api.exec("arcc", "sh", "-c", "ls -A /tmp/o")
    assert r.stdout == "", r.stdout
