# SPDX-License-Identifier: LGPL-2.1-or-later
"""A file call without a user makes what it creates the sandbox's default
user's, the user a command without a user runs as (issue 20;
docs/e2b-envd.md "Users"), with the real `e2b` SDK
(e2b-default-owner.mjs).

The images are test_e2b_user.py's busybox with E2B's layout (an account
`user`, uid 1000, home /home/user owned by it), one with `User: user` and
one without a User. Claims, each with its twin:
  - with `User: user`: `files.write` with no user makes a file owned by
    uid 1000 (the parents it makes too), as `makeDir` and `rename` (the
    parents it makes; the moved file keeps its owner) do, and a command
    with no user runs as 1000; the twin: `{user: 'root'}` makes one owned
    by 0;
  - without a User: the same calls make files owned by 0, and a command
    with no user runs as 0.
Run as root and as the test user with sub-ids (the sandbox then has a
range of ids, so uid 1000 exists inside)."""

import os

import pytest

import imageutil
from test_e2b_envd import e2b_modules, run_driver  # noqa: F401 (fixture)
from test_e2b_user import Server, e2b_layer, subids  # noqa: F401 (fixture)
from test_image_run import Images

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(HERE, "e2b-default-owner.mjs")


@pytest.fixture(params=["root", "user"])
def images(request, subids):  # noqa: F811
    im = Images(request.getfixturevalue(f"{request.param}_runner"))
    layers = [imageutil.layer0(), imageutil.layer1()]
    im.add("e2bu", layers=layers + [e2b_layer(True)],
           config={"Env": ["PATH=/bin:/usr/bin"], "User": "user"})
    im.add("e2bnouser", layers=layers + [e2b_layer(True)], config={"Env": ["PATH=/bin:/usr/bin"]})
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


def test_no_user_writes_as_the_images_user(server, e2b_modules, tmp_path):
    out = drive(server, e2b_modules, tmp_path, "e2bu")
    assert out["commandUid"] == "1000", out
    assert out["makeDir"] is True, out
    # plain, new, new/deeper, new/deeper/f.txt, d1, d1/d2, m1 (made by
    # rename), m1/moved.txt (root's, kept), and the twin as-root.txt.
    assert out["owners"] == ["1000"] * 7 + ["0", "0"], out


def test_no_user_writes_as_root_without_an_image_user(server, e2b_modules, tmp_path):
    out = drive(server, e2b_modules, tmp_path, "e2bnouser")
    assert out["commandUid"] == "0", out
    assert out["makeDir"] is True, out
    assert out["owners"] == ["0"] * 9, out
