# SPDX-License-Identifier: LGPL-2.1-or-later
"""A tree inside a sandbox as tar, both ways (issue 19):
GET and PUT/POST /v1/sandboxes/{name}/files/archive?path=DIR (docs/api.md),
hutch_file_archive_get/put of the C API. The tar is written and read by
the sandbox's file builtin (src/shared/file-tar.h), inside the
sandbox, as root's and the unprivileged user's server.

The claim: a normal tree round-trips byte-identical (regular files,
directories, symlinks as symlinks, modes, mtimes), and each hostile
archive (a '..' path, an absolute path, a symlink then a file through it,
a symlink or a hard link pointing out, a device node, a huge entry, not a
tar at all) is refused with a message naming the entry, with nothing
written outside the directory it was sent to."""

import io
import tarfile

import pytest

from test_serve import create, make_workspace, server  # noqa: F401 (fixture)

NAME = "arc"
URL = f"/v1/sandboxes/{NAME}/files/archive"


def sh(api, script):
    ans = api.exec(NAME, ["sh", "-c", script])
    assert ans["outcome"]["exit_code"] == 0, ans
    return ans["stdout"]


@pytest.fixture
def box(server):  # noqa: F811
    ws = make_workspace(server)
    create(server.api, NAME, policy={"workspace": {"path": str(ws), "mode": "overlay"}})
    # The outside world the archives aim at: /tmp/outside, next to the
    # directories they are sent to, and a marker file there.
    sh(server.api, "mkdir -p /tmp/outside /tmp/dest && echo keep > /tmp/outside/marker")
    return server.api


def tar_of(*members):
    """A tar stream of (TarInfo, bytes or None), written by Python's tarfile."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def member(name, kind=tarfile.REGTYPE, mode=0o644, link="", mtime=1_600_000_000):
    i = tarfile.TarInfo(name)
    i.type, i.mode, i.linkname, i.mtime = kind, mode, link, mtime
    return i


def outside_untouched(api):
    """Nothing but the marker in /tmp/outside, and no stray entry in /tmp."""
    assert sh(api, "ls -A /tmp/outside; cat /tmp/outside/marker") == "marker\nkeep\n"
    assert sh(api, "ls -A /tmp | sort") == "dest\noutside\n"


def make_tree(api):
    sh(api, """set -e
        mkdir -p tree/src/deep tree/empty tree/locked
        printf 'int main(void) { return 0; }\\n' > tree/src/main.c
        printf '#!/bin/sh\\necho run\\n' > tree/run.sh && chmod 0750 tree/run.sh
        head -c 300000 /dev/urandom > tree/src/deep/blob.bin
        : > tree/empty-file
        ln -s src/main.c tree/link-in
        ln -s /etc/passwd tree/link-abs
        long=tree/src/deep/$(printf 'n%.0s' $(seq 1 120)).txt && echo long > $long
        chmod 0700 tree/empty && chmod 0555 tree/locked
        find tree -exec touch -h -d @1600000000 {} +
    """)


def test_round_trip_is_byte_identical(box):
    api = box
    make_tree(api)
    r = api.ok("GET", f"{URL}?path=tree")
    assert r.headers["Content-Type"] == "application/x-tar"
    first = r.data
    with tarfile.open(fileobj=io.BytesIO(first)) as t:
        got = {m.name: m for m in t.getmembers()}
        assert t.extractfile("src/main.c").read() == b"int main(void) { return 0; }\n"
    long = "src/deep/" + "n" * 120 + ".txt"
    assert set(got) == {"src", "src/main.c", "src/deep", "src/deep/blob.bin", long, "run.sh",
                        "empty", "empty-file", "locked", "link-in", "link-abs"}
    assert got["run.sh"].mode == 0o750 and got["empty"].mode == 0o700
    assert got["locked"].isdir() and got["locked"].mode == 0o555
    # Symlinks as symlinks, never followed (the absolute one names the
    # sandbox's /etc/passwd: its content is not in the archive).
    assert got["link-in"].issym() and got["link-in"].linkname == "src/main.c"
    assert got["link-abs"].issym() and got["link-abs"].linkname == "/etc/passwd"
    assert all(m.mtime == 1600000000 for m in got.values())
    assert got["src/deep/blob.bin"].size == 300000

    # Back in, elsewhere: the same bytes out again, the same files.
    r = api.call("PUT", f"{URL}?path=copy/of/tree", first)
    assert r.status == 404, r  # the twin: no parents, no directory
    ans = api.ok("PUT", f"{URL}?path=copy/of/tree&parents=true", first).json
    assert ans == {"path": "copy/of/tree", "size": len(first)}
    assert api.ok("GET", f"{URL}?path=copy/of/tree").data == first
    listing = ("find . -mindepth 1 -type f | sort | xargs sha256sum; "
               "stat -c '%n %a %Y %F' $(find . -mindepth 1 | sort); find . -type l -exec readlink {} +")
    assert sh(api, f"cd tree && {listing}") == sh(api, f"cd copy/of/tree && {listing}")
    # POST is the same as PUT, over an existing tree: files replaced.
    sh(api, "echo changed > tree/src/main.c")
    api.ok("POST", f"{URL}?path=tree", first)
    assert sh(api, "cat tree/src/main.c") == "int main(void) { return 0; }\n"


def test_tar_from_python_lands_with_modes_and_no_setuid(box):
    api = box
    data = tar_of(
        (member("pkg", tarfile.DIRTYPE, 0o755), None),
        (member("pkg/tool", mode=0o4755), b"#!/bin/sh\n"),
        (member("pkg/group", mode=0o2750), b"g"),
        (member("pkg/ro", tarfile.DIRTYPE, 0o555), None),
        (member("pkg/ro/inside"), b"filled before the mode"),
        (member("pkg/hard", tarfile.LNKTYPE, link="pkg/tool"), None),
        (member("pkg/rel", tarfile.SYMTYPE, link="ro/inside"), None),
    )
    api.ok("PUT", f"{URL}?path=/tmp/dest", data)
    out = sh(api, "cd /tmp/dest/pkg && stat -c '%n %a' tool group ro ro/inside && "
                  "cat rel && stat -c %h tool")
    assert out == "tool 755\ngroup 750\nro 555\nro/inside 644\nfilled before the mode2\n"


@pytest.mark.parametrize("members,status,words", [
    ([(member("../escape"), b"x")], 403, "'..' component"),
    ([(member("a/../../escape"), b"x")], 403, "'..' component"),
    ([(member("/tmp/outside/abs"), b"x")], 403, "absolute path"),
    ([(member("up", tarfile.SYMTYPE, link="../outside"), None)], 403, "pointing outside"),
    ([(member("abs", tarfile.SYMTYPE, link="/../tmp/outside"), None)], 403, "pointing outside"),
    ([(member("sub", tarfile.DIRTYPE, 0o755), None),
      (member("sub/up", tarfile.SYMTYPE, link="../../outside"), None)], 403, "pointing outside"),
    # A symlink that stays inside, then a file through it: never followed.
    ([(member("self", tarfile.SYMTYPE, link="."), None),
      (member("self/through"), b"x")], 400, "symlink on the way"),
    ([(member("hl", tarfile.LNKTYPE, link="../outside/marker"), None)], 403, "hard link"),
    ([(member("hl", tarfile.LNKTYPE, link="/tmp/outside/marker"), None)], 403, "hard link"),
    ([(member("dev", tarfile.CHRTYPE), None)], 403, "device node"),
    ([(member("fifo", tarfile.FIFOTYPE), None)], 403, "device node or fifo"),
])
def test_hostile_archives_are_refused(box, members, status, words):
    api = box
    r = api.call("PUT", f"{URL}?path=/tmp/dest", tar_of(*members))
    assert r.status == status, r
    assert words in r.error["message"] and "entry '" in r.error["message"], r
    outside_untouched(api)


def test_planted_symlink_is_not_followed(box):
    """The sandbox's own symlink to the outside, in the directory an
    archive goes to: the archive's file goes through it only in its
    name; the twin through a real directory lands."""
    api = box
    sh(api, "ln -s /tmp/outside /tmp/dest/evil && mkdir /tmp/dest/real")
    r = api.call("PUT", f"{URL}?path=/tmp/dest", tar_of((member("evil/planted"), b"x")))
    assert r.status == 400 and "symlink on the way" in r.error["message"], r
    outside_untouched(api)
    # A file entry over the symlink itself replaces the link, never writes
    # through it.
    api.ok("PUT", f"{URL}?path=/tmp/dest", tar_of((member("evil"), b"now a file"),
                                                  (member("real/ok"), b"ok")))
    assert sh(api, "cat /tmp/dest/evil /tmp/dest/real/ok; test -L /tmp/dest/evil || echo file") == \
        "now a fileokfile\n"
    outside_untouched(api)
    # A download never follows the symlink as the directory asked for.
    sh(api, "ln -s /tmp/outside /tmp/dest/evil2")
    r = api.call("GET", f"{URL}?path=/tmp/dest/evil2")
    assert r.status == 400 and r.error["code"] == "invalid_path", r


def test_huge_entry_and_garbage_are_refused(box):
    api = box
    # A header announcing 1 TiB with a few bytes behind it: refused
    # before a byte is written.
    # Base-256 (GNU) and pax sizes alike.
    for fmt in (tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
        info = member("huge")
        info.size = 1 << 40
        head = info.tobuf(fmt)
        r = api.call("PUT", f"{URL}?path=/tmp/dest", head + b"x" * 1024)
        assert r.status == 413 and "entry 'huge'" in r.error["message"], r
        assert "limit" in r.error["message"], r
    assert sh(api, "ls -A /tmp/dest") == ""
    r = api.call("PUT", f"{URL}?path=/tmp/dest", b"this is not a tar archive\n" * 40)
    assert r.status == 400 and "checksum" in r.error["message"], r
    r = api.call("PUT", f"{URL}?path=/tmp/dest", b"")
    assert r.status == 400 and "empty" in r.error["message"], r
    # Truncated: in the middle of a file its header announces more than
    # the archive holds; after the data, in the padding, it is truncated.
    good = tar_of((member("f"), b"y" * 5000))
    r = api.call("PUT", f"{URL}?path=/tmp/dest", good[:2000])
    assert r.status == 413 and "more than the archive holds" in r.error["message"], r
    r = api.call("PUT", f"{URL}?path=/tmp/dest", good[:512 + 5010])
    assert r.status == 400 and "truncated" in r.error["message"], r
    outside_untouched(api)


def test_errors_of_the_route(box):
    api = box
    r = api.call("GET", URL)
    assert r.status == 400 and "path" in r.error["message"], r
    r = api.call("GET", f"{URL}?path=hello.txt")
    assert r.status == 409 and r.error["code"] == "not_a_directory", r
    r = api.call("GET", f"{URL}?path=nowhere")
    assert r.status == 404, r
    r = api.call("PUT", f"{URL}?path=x&parents=maybe", b"")
    assert r.status == 400 and "parents" in r.error["message"], r
    r = api.call("GET", "/v1/sandboxes/nobody/files/archive?path=.")
    assert r.status == 404, r


def test_entry_cap_on_download(box):
    api = box
    sh(api, "mkdir many && cd many && seq 1 100001 | xargs touch")
    r = api.call("GET", f"{URL}?path=many")
    assert r.status == 413 and "100000 entries" in r.error["message"], r
    sh(api, "rm many/1")  # the twin: at the cap, it is written
    r = api.ok("GET", f"{URL}?path=many")
    with tarfile.open(fileobj=io.BytesIO(r.data)) as t:
        assert len(t.getnames()) == 100000


def test_vm_backend_round_trip_and_refusal(server):  # noqa: F811
    """The same builtin in the microVM's agent (src/guest): a tree out and
    back in, and a '..' entry refused with nothing written outside."""
    ws = make_workspace(server)
    r = server.hutch("create", "vmarc", "--backend", "vm", "--vm-accel", "tcg",
                     "--workspace", str(ws))
    assert r.returncode == 0, r.stderr
    api = server.api
    url = "/v1/sandboxes/vmarc/files/archive"
    ans = api.exec("vmarc", ["sh", "-c", "mkdir -p /tmp/o /tmp/d/t/s && echo v > /tmp/d/t/s/f && "
                                         "ln -s s/f /tmp/d/t/l"])
    assert ans["outcome"]["exit_code"] == 0, ans
    tar = api.ok("GET", f"{url}?path=/tmp/d/t").data
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        assert sorted(t.getnames()) == ["l", "s", "s/f"]
    api.ok("PUT", f"{url}?path=/tmp/d/copy&parents=true", tar)
    assert api.ok("GET", f"{url}?path=/tmp/d/copy").data == tar
    r = api.call("PUT", f"{url}?path=/tmp/d", tar_of((member("../o/escape"), b"x")))
    assert r.status == 403 and "entry '../o/escape'" in r.error["message"], r
    ans = api.exec("vmarc", ["sh", "-c", "ls -A /tmp/o"])
    assert ans["stdout"] == "", ans
