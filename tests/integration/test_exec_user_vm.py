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
  - as a user with sub-ids, a persistent VM image sandbox has the ranged
    map: the image's User runs, and a file it writes is its sub-id on the
    host; a caller without sub-ids (nobody) has one id: the image's User
    is refused naming it and the way out (`--user root`), which works;
  - the API's exec `user` field on a VM sandbox (400 for a malformed one)."""

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

import imageutil
from conftest import IS_ROOT, Runner, stage_binaries
from test_exec_user import APP, NO_USER, layers, subids  # noqa: F401 (a fixture)
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
    # SECURITY: a FIFO as /etc/passwd (a link to one on the sandbox's
    # /tmp: 9p makes none) does not hold the agent, which waits for the
    # command's start: it is as good as none, so app is unknown (125) and
    # root still works.
    out(st.exec(name, "sh", "-c", "mkfifo /tmp/p && rm /etc/passwd && ln -s /tmp/p /etc/passwd",
                flags=["-u", "root"]))
    refused(st.exec(name, "true", flags=["-u", "app"], timeout=120), "'app'", "/etc/passwd")
    # (A command that reads the FIFO itself, as id does, would wait.)
    assert out(st.exec(name, "echo", "ran", flags=["-u", "root"], timeout=120)) == "ran\n"


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


def test_a_users_vm_image_sandbox_has_its_sub_ids(user_images, subids):
    """As a user with sub-ids, a persistent VM image sandbox has the ranged
    map (65536 ids in the guest, the sub-ids on the host): the image's User
    runs, and its files are its sub-id on the host."""
    app = user_images.add("app", APP, layers())
    st = user_images.store
    name = f"urange-{user_images.tag}"
    st.create(name, *TCG, "--image", app)
    assert who(st, name) == ["1000", "1000", "1000", "50", "/home/app", "app"]
    assert out(st.exec(name, "cat", "/proc/self/uid_map")).split()[2] == "65536"
    # The image's files are the sandbox root's (the user's files): root
    # (the package set over the range) hands a folder to app.
    out(st.exec(name, "sh", "-c", "mkdir -p /srv/d /srv/r && chown app:app /srv/d",
                flags=["-u", "root"]))
    script = "echo x > /srv/d/f && stat -c '%u %g' /srv/d/f"
    assert out(st.exec(name, "sh", "-c", script)) == "1000 1000\n"

    def on_host(path):
        found = [p for p in (Path(st.home) / "sandboxes").rglob(path.rsplit("/", 1)[1])
                 if str(p).endswith(path)]
        assert found, f"the sandbox's layer has no {path}"
        return found[0].lstat()

    host = on_host("srv/d/f")
    assert host.st_uid == subids.uid_base + 999, (host.st_uid, subids.uid_base)
    assert host.st_gid == subids.gid_base + 999, (host.st_gid, subids.gid_base)
    # Twin: root's file is the user's own.
    out(st.exec(name, "sh", "-c", "echo y > /srv/r/g", flags=["-u", "root"]))
    assert on_host("srv/r/g").st_uid == user_images.runner.uid


@pytest.fixture
def nobody_images(binaries):
    """Images of `nobody`, who has no sub-ids: its VM sandbox has one id."""
    if not IS_ROOT:
        pytest.skip("needs root: runs hutch as nobody")
    base = Path(tempfile.mkdtemp(prefix="hutch-nobody-"))
    top = Path(tempfile.mkdtemp(prefix="hutch-vmn-test-", dir="/dev/shm"))
    os.chmod(base, 0o755)
    os.chmod(top, 0o755)
    hutch, pdir = stage_binaries(base, *binaries)
    im = VmImages(Runner("user", hutch, pdir, 65534, 65534, base), top)
    try:
        yield im
    finally:
        im.finalize()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(top, ignore_errors=True)


def test_a_vm_sandbox_without_sub_ids_names_the_user_and_the_way_out(nobody_images):
    app = nobody_images.add("app", APP, layers())
    st = nobody_images.store
    name = f"uone-{nobody_images.tag}"
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


def test_apt_installs_a_package_in_a_users_vm_image_sandbox(user_runner, vm_store_dir,  # noqa: F811
                                                            subids):
    """As a user with sub-ids, apt-get (which drops to _apt, an id of the
    range) installs a local .deb in a persistent VM sandbox of a Debian
    image, as test_images_vm's root case does; its files are the sub-ids'
    on the host where the package's owner is not root."""
    from debimage import debian_rootfs_tar
    from test_images_vm import build_deb

    im = VmImages(user_runner, vm_store_dir)
    try:
        deb = f"debian-{im.tag}"
        tar = debian_rootfs_tar()
        r = im.hutch("image", "import", "-", deb, "-q", stdin=open(tar, "rb"), timeout=900)
        assert r.returncode == 0, r.stderr
        s = im.store
        ws = user_runner.make_dir(name="debws")
        build_deb(ws)
        user_runner.chown(ws)
        name = f"udeb-{im.tag}"
        s.create(name, *TCG, "--image", deb, "--workspace", ws)
        r = s.exec(name, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y",
                   "/workspace/hello.deb")
        assert r.returncode == 0, r.stderr
        # apt dropped to _apt for its download step (no seteuid/setgroups error).
        assert "E:" not in r.stderr and "unsandboxed" not in r.stderr, r.stderr
        assert s.hutch("stop", name).returncode == 0
        assert s.sh(name, "cat /usr/share/hutch-vm-hello/hi; "
                          "dpkg-query -W -f='${Status}' hutch-vm-hello") == \
            "hi\ninstall ok installed"
        # _apt is an id of the range: its folder is its sub-id on the host.
        apt = int(s.sh(name, "stat -c %u /var/cache/apt/archives/partial"))
        assert apt == int(s.sh(name, "id -u _apt")) and apt > 0
        found = [p for p in (Path(s.home) / "sandboxes").rglob("partial")
                 if str(p).endswith("var/cache/apt/archives/partial")]
        assert found and found[0].lstat().st_uid == subids.uid_base + apt - 1, found
        # Twin: an id outside the range is not the sandbox's.
        r = s.exec(name, "sh", "-c", "touch /tmp/f && chown 70000 /tmp/f")
        assert r.returncode != 0, "an id outside the sandbox's namespace"
    finally:
        im.finalize()
