# SPDX-License-Identifier: LGPL-2.1-or-later
"""Files written through envd with a user are that user's (issue 20;
docs/e2b-envd.md "Users"), with the real `e2b` SDK (e2b-file-owner.mjs),
and the HTTP API's `user` on the same operations (docs/api.md "Files").

The image is test_e2b_user.py's busybox with E2B's layout (an account
`user`, uid 1000, home /home/user owned by it). Claims, each with its twin:
  - `files.write(..., {user: 'user'})` makes a file owned by uid 1000
    inside (`stat -c %u`), and the parents it makes too; `{user: 'root'}`
    makes one owned by 0; `makeDir` and `rename` give what they make to
    the user; an existing directory keeps its owner;
  - the user can then rewrite its file in place;
  - a symlink the sandbox planted at the target is replaced, never
    followed (its target keeps its bytes and owner), and one planted as a
    parent is refused (the SDK's error), nothing made through it; the
    twin: a real directory there is written through;
  - a template without an account `user`: writing as `user` is the SDK's
    error, never a file owned by someone else.
Run as root and as the test user with sub-ids (the sandbox then has a
range of ids, so uid 1000 exists inside)."""

import os
import subprocess

import pytest

import imageutil
from test_e2b_envd import e2b_modules, run_driver  # noqa: F401 (fixture)
from test_e2b_user import Server, e2b_layer, subids  # noqa: F401 (fixture)
from test_image_run import Images
from test_serve import Api, read_line

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(HERE, "e2b-file-owner.mjs")
READY_TIMEOUT = 60


@pytest.fixture(params=["root", "user"])
def images(request, subids):  # noqa: F811
    im = Images(request.getfixturevalue(f"{request.param}_runner"))
    layers = [imageutil.layer0(), imageutil.layer1()]
    im.add("e2bu", layers=layers + [e2b_layer(True)],
           config={"Env": ["PATH=/bin:/usr/bin"], "User": "user"})
    im.add("nouser", layers=layers + [e2b_layer(False)], config={"Env": ["PATH=/bin:/usr/bin"]})
    yield im
    im.finalize()


@pytest.fixture
def server(images):
    s = Server(images)
    yield s
    s.stop()
    assert s.sandboxes() == []


def drive(server, modules, tmp_path, template):
    return run_driver(server, modules, tmp_path, DRIVER, template)


def test_files_written_as_user_are_the_users(server, e2b_modules, tmp_path):
    out = drive(server, e2b_modules, tmp_path, "e2bu")
    assert out["writeUser"] == "ok" and out["writeRoot"] == "ok", out
    assert out["makeDir"] is True, out
    # as-user, as-root, new, new/deeper, new/deeper/f.txt, d1, d1/d2, m1,
    # m1/m2, moved.txt (its owner kept: root's), /tmp/rootdir, and
    # /home/user, which existed: its owner kept.
    assert out["owners"] == ["1000", "0", "1000", "1000", "1000", "1000", "1000", "1000",
                             "1000", "0", "0", out["homeBefore"]], out
    assert out["rewrite"] == "u\nmore\n", out


def test_planted_symlinks_are_not_followed(server, e2b_modules, tmp_path):
    out = drive(server, e2b_modules, tmp_path, "e2bu")
    # At the target: the link itself is replaced by the user's file...
    assert out["atTarget"] == "ok" and out["linkNow"] == "regular file 1000", out
    # ...as a parent: refused, nothing made through it.
    assert out["asParent"] != "ok" and out["mkdirParent"] != "ok", out
    # The victim keeps its owner, bytes and entries.
    assert out["victim"] == ["0", "0", "keep", "file"], out
    # The twin: a real directory in the same place.
    assert out["realParent"] == "ok" and out["realOwner"] == "1000", out


def test_a_user_the_template_lacks_is_the_sdks_error(server, e2b_modules, tmp_path):
    out = drive(server, e2b_modules, tmp_path, "nouser")
    assert out["write"] == "InvalidArgumentError", out
    # The twin: root is there; nothing was written as anyone else.
    assert out["writeRoot"] == "ok", out
    assert out["owners"][0] == "0", out
    assert "No such file" in out["owners"][1], out


class PlainServer:
    """hutch serve (the HTTP API on a unix socket) on @images' store."""

    def __init__(self, images):
        runner = images.runner
        self.proc = subprocess.Popen(
            runner.argv(["serve"], verb=None), env=runner.env(images.env()),
            cwd=str(runner.base_dir), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        line = read_line(self.proc, READY_TIMEOUT)
        if line is None or not line.startswith("listening on unix:"):
            self.stop()
            raise AssertionError(f"hutch serve did not start: {line}")
        self.api = Api(line[len("listening on unix:"):], runner.uid)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


def sh(api, name, script):
    ans = api.exec(name, ["sh", "-c", script], user="root")
    assert ans["outcome"]["exit_code"] == 0, ans
    return ans["stdout"]


def test_api_user_owns_what_it_writes(images):
    srv = PlainServer(images)
    try:
        api = srv.api
        api.ok("POST", "/v1/sandboxes", {"name": "own", "policy": {"image": "e2bu"}}, status=201)
        base = "/v1/sandboxes/own/files"
        api.ok("PUT", f"{base}?path=/home/user/a/b.txt&parents=true&user=user", b"x")
        api.ok("PUT", f"{base}?path=/home/user/r.txt&user=root", b"x")
        api.ok("PUT", f"{base}?path=/home/user/none.txt", b"x")  # no user: root's, as before
        api.ok("POST", f"{base}/mkdir?path=/home/user/m/n&parents=true&user=1000:1000")
        api.ok("POST", f"{base}/move", {"from": "/home/user/r.txt", "to": "/home/user/p/q.txt",
                                        "parents": True, "user": "user"})
        assert sh(api, "own", "cd /home/user; stat -c %u a a/b.txt r.txt none.txt m m/n p "
                  "p/q.txt 2>/dev/null || true") == "1000\n1000\n0\n1000\n1000\n1000\n0\n"
        # A move across file systems (the image's layer to /tmp's tmpfs)
        # keeps the file's owner and mode, as a rename does, also over a
        # file that had others (it used to be root's, with the replaced
        # file's mode).
        api.ok("PUT", f"{base}?path=/home/user/x.txt&user=user", b"x")
        api.ok("PUT", f"{base}?path=/tmp/y.txt&user=root", b"y")
        sh(api, "own", "chmod 640 /home/user/x.txt; chmod 600 /tmp/y.txt")
        api.ok("POST", f"{base}/move", {"from": "/home/user/x.txt", "to": "/tmp/y.txt",
                                        "replace": True})
        assert sh(api, "own", "stat -c '%u %g %a' /tmp/y.txt") == "1000 1000 640\n"
        api.ok("POST", f"{base}/move", {"from": "/tmp/y.txt", "to": "/home/user/z.txt"})
        assert sh(api, "own", "stat -c '%u %g %a' /home/user/z.txt; cat /home/user/z.txt; "
                  "ls /tmp /home/user | grep -c '^[xy].txt$' || true") == "1000 1000 640\nx0\n"
        # An unknown user: 400 naming it, nothing written.
        r = api.call("PUT", f"{base}?path=/home/user/ghost.txt&user=ghost", b"x")
        assert r.status == 400 and "ghost" in r.error["message"], r
        r = api.call("PUT", f"{base}?path=/home/user/bad.txt&user=a:b:c", b"x")
        assert r.status == 400, r
        # A planted symlink as a parent: refused (invalid_path), not followed.
        sh(api, "own", "mkdir -p /srv/v && ln -s /srv/v /home/user/lnk")
        r = api.call("PUT", f"{base}?path=/home/user/lnk/x&user=user", b"x")
        assert r.status == 400, r
        assert sh(api, "own", "ls -A /srv/v; test ! -e /home/user/ghost.txt && echo gone") == \
            "gone\n"
    finally:
        srv.stop()
        r = images.hutch("rm", "--force", "own")
        assert r.returncode == 0 or "no sandbox" in r.stderr, r.stderr


def test_a_move_into_a_bind_that_cannot_hold_the_owner(images):
    """A move across file systems keeps the file's owner (docs/api.md); a
    host folder bound into a sandbox of root is idmapped for its root
    alone and cannot hold the user's file: 403, and the file stays where
    it was, nothing left in the host folder. The twin: a root's file
    moves there; as the test user (whose bind holds the sandbox's ids)
    the user's file moves and stays the user's."""
    runner = images.runner
    host = runner.make_dir(name="movebind")
    srv = PlainServer(images)
    try:
        api = srv.api
        api.ok("POST", "/v1/sandboxes",
               {"name": "mb", "policy": {"image": "e2bu",
                                         "binds": [{"source": str(host), "target": "/data"}]}},
               status=201)
        base = "/v1/sandboxes/mb/files"
        api.ok("PUT", f"{base}?path=/tmp/u.txt&user=user", b"u")
        api.ok("PUT", f"{base}?path=/tmp/r.txt&user=root", b"r")
        r = api.call("POST", f"{base}/move", {"from": "/tmp/u.txt", "to": "/data/u.txt"})
        if runner.mode == "root":
            assert r.status == 403 and r.error["code"] == "permission_denied", r
            assert sh(api, "mb", "stat -c %u /tmp/u.txt; cat /tmp/u.txt") == "1000\nu"
            assert list(host.iterdir()) == []
        else:
            assert r.status == 200, r
            assert sh(api, "mb", "stat -c %u /data/u.txt; test ! -e /tmp/u.txt && echo gone") \
                == "1000\ngone\n"
        api.ok("POST", f"{base}/move", {"from": "/tmp/r.txt", "to": "/data/r.txt"})
        assert (host / "r.txt").read_text() == "r"
        assert sh(api, "mb", "stat -c %u /data/r.txt; test ! -e /tmp/r.txt && echo gone") == \
            "0\ngone\n"
    finally:
        srv.stop()
        r = images.hutch("rm", "--force", "mb")
        assert r.returncode == 0 or "no sandbox" in r.stderr, r.stderr
        subprocess.run(["rm", "-rf", str(host)], check=False)
