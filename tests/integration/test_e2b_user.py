# SPDX-License-Identifier: LGPL-2.1-or-later
"""envd's `user` (E2B's `commands.run(cmd, {user})`) mapped to hutch's
exec `--user` (docs/e2b-envd.md "Users"), with the real `e2b` SDK
(e2b-user.mjs) against `hutch serve --e2b` on an image template.

The image is imageutil's busybox with E2B's layout: an account `user`
(uid 1000, home /home/user) that is its config's User, and a /bin/bash
(the SDK runs every command as `/bin/bash -l -c CMD`). Claims, each with
its twin:
  - a command without a user runs as the template's default user (1000),
    `user` as the account `user`, `root` as uid 0 (and a background
    command too);
  - a template without an account `user`: `user` is refused (exit 125,
    naming it), never run as someone else; `root` still works;
  - the host base (no image) has no account `user`: `user` is the
    sandbox's own user, as a call without one.
Run as root and as the test user with sub-ids (a sandbox then has a range
of ids, so uid 1000 exists inside)."""

import json
import os
import shutil
import signal
import subprocess

import pytest

import imageutil
from conftest import IS_ROOT
from subids import SubIds
from test_e2b_envd import (API_KEY, READY_TIMEOUT, e2b_modules,  # noqa: F401 (fixture)
                           kills_done, run_driver)
from test_image_run import Images
from test_serve import read_line

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(HERE, "e2b-user.mjs")
BASH = b'#!/bin/sh\nexec /bin/sh "$@"\n'


def e2b_layer(with_user):
    t = imageutil.TarBuilder()
    for d in ("bin", "etc", "home"):
        t.dir(d)
    if with_user:
        t.file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"
               b"user:x:1000:1000:user:/home/user:/bin/sh\n")
        t.file("etc/group", b"root:x:0:\nuser:x:1000:\n")
        t.dir("home/user", 0o755, 1000, 1000)
    t.file("bin/bash", BASH, 0o755)
    return t.bytes()


@pytest.fixture(scope="module")
def subids(user_runner):
    if not IS_ROOT:
        pytest.skip("needs root: gives the test user a range of sub-ids")
    if not (shutil.which("newuidmap") and shutil.which("newgidmap")):
        pytest.fail("newuidmap/newgidmap missing: apt-get install uidmap (tools/deps.sh)")
    s = SubIds("hutchtest", user_runner.uid)
    yield s
    s.close()


class Server:
    """hutch serve --e2b on @images' store, on loopback ports the kernel
    picks."""

    def __init__(self, images):
        self.images = images
        runner = images.runner
        home = images.store.home
        key = images.work / "api-key"
        key.write_text(API_KEY + "\n")
        os.chmod(key, 0o600)
        runner.chown(key)
        self.proc = subprocess.Popen(
            runner.argv(["serve", "--e2b", "--api-key-file", str(key),
                         "--e2b-listen", "127.0.0.1:0", "--e2b-envd-listen", "127.0.0.1:0"],
                        verb=None),
            env=runner.env(images.env()), cwd=str(runner.base_dir), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        lines = [read_line(self.proc, READY_TIMEOUT), read_line(self.proc, READY_TIMEOUT)]
        if None in lines:
            self.stop()
            raise AssertionError(f"hutch serve --e2b did not start: {lines} ({home})")
        self.api = lines[0].split("on ", 1)[1]
        self.envd = lines[1].split("on ", 1)[1]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()

    def sandboxes(self):
        kills_done(self.images.store.home)
        r = self.images.hutch("ls", "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)


@pytest.fixture(params=["root", "user"])
def server(request, subids):
    im = Images(request.getfixturevalue(f"{request.param}_runner"))
    layers = [imageutil.layer0(), imageutil.layer1()]
    im.add("e2bu", layers=layers + [e2b_layer(True)],
           config={"Env": ["PATH=/bin:/usr/bin"], "User": "user"})
    im.add("nouser", layers=layers + [e2b_layer(False)], config={"Env": ["PATH=/bin:/usr/bin"]})
    s = Server(im)
    yield s
    s.stop()
    assert s.sandboxes() == []
    im.finalize()


def drive(server, modules, tmp_path, template):
    return run_driver(server, modules, tmp_path, DRIVER, template)


def test_user_and_root_on_an_e2b_template(server, e2b_modules, tmp_path):
    out = drive(server, e2b_modules, tmp_path, "e2bu")
    assert out["default"] == ["1000", "user"], out
    assert out["user"] == ["1000", "user"], out
    assert out["root"] == ["0", "root"], out
    assert out["background"] == "0", out


def test_user_without_the_account_is_refused(server, e2b_modules, tmp_path):
    out = drive(server, e2b_modules, tmp_path, "nouser")
    # The image has no User: root by default; `user` names an account it
    # lacks, so the command is refused, not run as anyone else.
    assert out["default"] == ["0", "root"], out
    assert out["user"]["exitCode"] == 125, out
    assert "user" in out["user"]["stderr"], out
    assert out["root"] == ["0", "root"], out


def test_user_on_the_host_base_is_the_sandboxs_own(server, e2b_modules, tmp_path):
    out = drive(server, e2b_modules, tmp_path, "base")
    # No image, no account `user`: the sandbox's own user (its root)
    # plays E2B's `user`, as a call without a user.
    assert out["default"][0] == "0", out
    assert out["user"][0] == "0", out
    assert out["root"][0] == "0", out
