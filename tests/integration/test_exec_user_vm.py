# SPDX-License-Identifier: LGPL-2.1-or-later
"""`--user` and an image's non-root User on the microVM backend (issue 17;
docs/vm.md "Images", docs/images-run.md "The user"): test_exec_user.py's
main claims under QEMU with TCG, through the real binary. The guest's
agent resolves the user in the command's root (the image's /etc/passwd and
/etc/group) and becomes it before the exec, with the namespace backend's
parser (src/shared/image-user.c).

The image is test_exec_user's: imageutil's busybox with a root-owned
/usr, a root-only file, and a user `app` (uid 1000) who is also in the
group `staff` (50); its config's User is `app`. Claims, each with its twin:
  - as root: an exec of a persistent VM sandbox runs as the image's User
    by default, `--user` takes docker's forms with HOME and USER
    following, root always works; a file the user writes is the user's;
    the user cannot read root's files or write /usr, root can;
  - an unknown user or group is refused (125, named), a malformed spec
    too, and nothing is left running;
  - a one-shot `hutch run --backend vm --image` runs as the image's User,
    `--user` over it;
  - as a user, whose VM sandbox has one id (the guest's 100000 alone): the
    image's User is refused naming it and the way out (`--user root`),
    which works;
  - the API's exec `user` field on a VM sandbox (400 for a malformed one)."""

import json

import pytest

import imageutil
from test_exec_user import APP, NO_USER, layers
from test_images_vm import VmImages
from test_vm_persist import TCG, vm_store_dir  # noqa: F401 (a fixture)


@pytest.fixture
def root_images(root_runner, vm_store_dir):  # noqa: F811 (the fixture)
    im = VmImages(root_runner, vm_store_dir)
    yield im
    im.finalize()


@pytest.fixture
def user_images(user_runner, vm_store_dir):  # noqa: F811 (the fixture)
    im = VmImages(user_runner, vm_store_dir)
    yield im
    im.finalize()


def out(r):
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r.stdout


def refused(r, *words):
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    for w in words:
        assert w in r.stderr, (w, r.stderr)


WHO = 'echo "$(id -u) $(id -g) $(id -G) $HOME $USER"'


def who(st, name, *flags):
    return out(st.exec(name, "sh", "-c", WHO, flags=flags)).split()


def running(st, name):
    r = st.hutch("ps", name, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_exec_user_forms_in_a_vm_sandbox(root_images):
    app = root_images.add("app", APP, layers())
    st = root_images.store
    name = f"ubox-{root_images.tag}"
    st.create(name, *TCG, "--image", app)
    # The image's User by default: its gid and the groups that list it.
    assert who(st, name) == ["1000", "1000", "1000", "50", "/home/app", "app"]
    assert who(st, name, "--user", "root") == ["0", "0", "0", "/root", "root"]
    assert who(st, name, "-u", "0")[:3] == ["0", "0", "0"]
    # An explicit group is the only one (docker's rule).
    assert who(st, name, "-u", "app:staff") == ["1000", "50", "50", "/home/app", "app"]
    assert who(st, name, "-u", "1000:1000") == ["1000", "1000", "1000", "/home/app", "app"]
    # A uid the image lacks: gid 0, HOME / (docker's rule).
    assert who(st, name, "-u", "4321")[:4] == ["4321", "0", "0", "/"]
    # A file the user writes is the user's, inside; root's stays root's.
    script = "echo x > /tmp/f && stat -c '%u %g' /tmp/f"
    assert out(st.exec(name, "sh", "-c", script)) == "1000 1000\n"
    assert out(st.exec(name, "sh", "-c", script.replace("/tmp/f", "/tmp/g"),
                       flags=["-u", "root"])) == "0 0\n"
    # The user cannot read root's files or write /usr; root (the sandbox's
    # package set) can.
    r = st.exec(name, "cat", "/root/secret")
    assert r.returncode != 0 and "root only" not in r.stdout, (r.stdout, r.stderr)
    assert "denied" in r.stderr.lower(), r.stderr
    r = st.exec(name, "sh", "-c", "echo x > /usr/bin/other")
    assert r.returncode != 0 and "denied" in r.stderr.lower(), (r.returncode, r.stderr)
    assert out(st.exec(name, "cat", "/root/secret", flags=["-u", "root"])) == "root only\n"
    out(st.exec(name, "sh", "-c", "echo tool > /usr/bin/newtool", flags=["-u", "root"]))
    assert out(st.exec(name, "cat", "/usr/bin/newtool")) == "tool\n"


def test_unknown_or_malformed_user_is_refused_in_a_vm_sandbox(root_images):
    app = root_images.add("app", APP, layers())
    st = root_images.store
    name = f"ubad-{root_images.tag}"
    st.create(name, *TCG, "--image", app)
    refused(st.exec(name, "true", flags=["-u", "ghost"]), "'ghost'", "/etc/passwd")
    refused(st.exec(name, "true", flags=["-u", "app:nogroup"]), "'nogroup'", "/etc/group")
    assert running(st, name) == []
    for bad in ("a b", ":1", "1:", "a:b:c"):
        r = st.exec(name, "true", flags=["--user", bad])
        assert r.returncode == 125 and "user" in r.stderr, (bad, r.returncode, r.stderr)
    # Twin: a known one runs.
    assert out(st.exec(name, "id", "-un", flags=["-u", "app"])) == "app\n"


def test_one_shot_vm_run_takes_the_images_user_and_user_flag(root_images):
    app = root_images.add("app", APP, layers())
    plain = root_images.add("plain", NO_USER, layers())
    o = out(root_images.run("--image", app, "--", "sh", "-c", WHO)).split()
    assert o == ["1000", "1000", "1000", "50", "/home/app", "app"]
    assert out(root_images.run("--image", app, "--user", "root", "--", "id", "-u")) == "0\n"
    assert out(root_images.run("--image", plain, "-u", "app:staff", "--", "id", "-g")) == "50\n"
    refused(root_images.run("--image", plain, "-u", "ghost", "--", "true"), "'ghost'")
    # Twin: an image without User, without --user: root.
    assert out(root_images.run("--image", plain, "--", "id", "-u")) == "0\n"


def test_a_users_vm_sandbox_names_the_user_and_the_way_out(user_images):
    app = user_images.add("app", APP, layers())
    st = user_images.store
    name = f"uone-{user_images.tag}"
    st.create(name, *TCG, "--image", app)
    refused(st.exec(name, "true"), "'app'", "uid 1000", "--user root")
    assert running(st, name) == []
    # The way out: root, the sandbox's one id.
    assert out(st.exec(name, "id", "-u", flags=["-u", "root"])) == "0\n"


def test_api_exec_user_on_a_vm_sandbox(root_runner):
    from test_serve import Api, Server

    srv = Server(root_runner)
    try:
        layout = root_runner.make_dir(name="layout") / "oci"
        imageutil.write_oci_layout(layout, imageutil.make_image(layers=layers(), config=APP),
                                   ref=None)
        r = srv.hutch("image", "import", layout, "app")
        assert r.returncode == 0, r.stderr
        proc, path, _ = srv.start()
        api = Api(path, srv.uid)
        api.ok("POST", "/v1/sandboxes",
               {"name": "vbox", "policy": {"image": "app", "backend": "vm", "vm_accel": "tcg"}},
               status=201)
        a = api.exec("vbox", ["id", "-u"])
        assert a["stdout"] == "1000\n", a
        a = api.exec("vbox", ["id", "-u"], user="root")
        assert a["outcome"]["exit_code"] == 0 and a["stdout"] == "0\n", a
        r = api.call("POST", "/v1/sandboxes/vbox/exec", {"argv": ["true"], "user": "a b"})
        assert r.status == 400 and r.error["field"] == "/user", r
        a = api.exec("vbox", ["true"], user="ghost")
        assert a["outcome"]["exit_code"] == 125 and "'ghost'" in a["stderr"], a
        srv.hutch("rm", "--force", "vbox")
    finally:
        srv.cleanup()
