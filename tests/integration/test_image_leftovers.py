# SPDX-License-Identifier: LGPL-2.1-or-later
"""Image leftovers of issue 17 (docs/images-run.md):
  - a one-shot `hutch run --image` holds an in-use mark while it runs:
    `hutch image rm` of its image is refused during the run and allowed
    after it (the twin), and a mark left by a killed run is stale;
  - an exec in a persistent sandbox runs as the image's User (as root,
    whose sandboxes hold a range of ids), the twin an image without one;
  - a layer's xattrs are kept: user.* (never user.overlay.*, trusted.*),
    and, imported as root, a file capability (as revision 2).
(Images of more than 64 layers: test_image_many_layers.py.)"""

import io
import os
import struct
import subprocess
import tarfile
import time
from pathlib import Path

import imageutil
from test_image_run import NO_USER, images, out, root_images  # noqa: F401 (fixtures)
from test_image_store import store  # noqa: F401 (fixture)


def wait_line(p, want):
    line = p.stdout.readline()
    assert line == want, (line, p.poll(), p.stderr.read() if p.poll() is not None else "")


def test_image_rm_is_refused_while_a_run_uses_it(images):
    p = images.store.popen("run", "--image", "bb", "--", "sh", "-c", "echo ready; read x",
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    try:
        wait_line(p, "ready\n")
        r = images.hutch("image", "rm", "bb")
        assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
        assert "used by run" in r.stderr, r.stderr
        assert out(images.hutch("image", "inspect", "bb"))
        p.stdin.write("go\n")
        p.stdin.close()
        assert p.wait(timeout=60) == 0, p.stderr.read()
    finally:
        p.kill()
        p.wait()
    # The twin: the run over, its mark is gone and rm works.
    r = images.hutch("image", "rm", "bb")
    assert r.returncode == 0, r.stderr
    assert images.hutch("image", "inspect", "bb").returncode != 0


def test_a_killed_runs_mark_is_stale(images):
    p = images.store.popen("run", "--image", "bb", "--", "sh", "-c", "echo ready; read x",
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    try:
        wait_line(p, "ready\n")
        assert images.hutch("image", "rm", "bb").returncode == 125
        # SIGKILL: the run cannot remove its mark.
        p.kill()
        p.wait()
        marks = list((images.store.home / "images" / "refs").glob("*/run:*"))
        assert marks, "the killed run left no mark to test"
        # Wait for the sandbox's own processes to go (the event: no
        # process of that pid; the supervisor was the holder).
        deadline = time.monotonic() + 30
        while images.hutch("image", "rm", "bb").returncode != 0:
            assert time.monotonic() < deadline, "a dead run's mark still holds the image"
            time.sleep(0.05)
    finally:
        p.kill()
        p.wait()
    assert images.hutch("image", "inspect", "bb").returncode != 0


# ---- exec in a persistent sandbox runs as the image's User ----


def test_exec_runs_as_the_images_user(root_images):
    st = root_images.store
    st.create("appbox", "--image", "app")
    r = st.exec("appbox", "sh", "-c", "id -u; id -g; echo $HOME $USER")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1000", "1000", "/home/app", "app"]
    # What it writes is the image user's.
    r = st.exec("appbox", "sh", "-c", "touch /tmp/mine && stat -c %u /tmp/mine")
    assert r.returncode == 0 and r.stdout.strip() == "1000", (r.stdout, r.stderr)
    # Twin: an image without User execs as the sandbox's root.
    st.create("bbbox", "--image", "bb")
    r = st.exec("bbbox", "sh", "-c", "id -u")
    assert r.returncode == 0 and r.stdout.strip() == "0", (r.stdout, r.stderr)


# ---- layer xattrs: file capabilities and user.* are kept ----

CAP_NET_RAW = 13


def caps(revision, rootid=None):
    """struct vfs_cap_data (revision 2) or vfs_ns_cap_data (3): cap_net_raw
    permitted and effective."""
    data = struct.pack("<IIIII", (revision << 24) | 1, 1 << CAP_NET_RAW, 0, 0, 0)
    return data + (struct.pack("<I", rootid) if revision == 3 else b"")


def xattr_layer():
    t = imageutil.TarBuilder()
    entries = {
        "ping": {"security.capability": caps(2), "user.origin": b"layer",
                 "user.overlay.opaque": b"y", "trusted.overlay.opaque": b"y"},
        "ping3": {"security.capability": caps(3, 0)},
        "ping3other": {"security.capability": caps(3, 1000)},
    }
    for name, xattrs in entries.items():
        ti = t._info(name, tarfile.REGTYPE, 0o755)
        data = b"#!/bin/sh\n"
        ti.size = len(data)
        ti.pax_headers = {f"SCHILY.xattr.{k}": v.decode("utf-8", "surrogateescape")
                          for k, v in xattrs.items()}
        t.tar.addfile(ti, io.BytesIO(data))
    ti = t._info("data", tarfile.DIRTYPE, 0o755)
    ti.pax_headers = {"SCHILY.xattr.user.dir": "kept"}
    t.tar.addfile(ti)
    return t.bytes()


def xattrs(path):
    return {n: os.getxattr(path, n, follow_symlinks=False)
            for n in os.listxattr(path, follow_symlinks=False)}


def test_layer_xattrs_are_kept(store):
    layout = store.work / "xattrs"
    imageutil.write_oci_layout(layout, imageutil.make_image(layers=[xattr_layer()],
                                                            compression=("gzip",)), ref=None)
    store.give(layout)
    store.ok("import", str(layout), "xa:1")
    root = Path(store.inspect("xa:1")["layers"][0]["path"])
    ping = xattrs(root / "ping")
    assert ping.get("user.origin") == b"layer", ping
    assert xattrs(root / "data").get("user.dir") == b"kept"
    # SECURITY: never overlayfs's own (a forged opaque dir or whiteout),
    # nor trusted.*.
    assert "user.overlay.opaque" not in ping and "trusted.overlay.opaque" not in ping, ping
    if store.runner.mode == "root":
        # Kept as revision 2 (no root id): the sandbox's root's, through
        # the idmapped layer; a revision 3 one with root id 0 likewise.
        assert ping.get("security.capability") == caps(2), ping
        assert xattrs(root / "ping3").get("security.capability") == caps(2)
        # Twin: one for another namespace's root is not kept.
        assert "security.capability" not in xattrs(root / "ping3other")
    else:
        # An unprivileged user cannot set a file capability: not kept.
        assert "security.capability" not in ping, ping
