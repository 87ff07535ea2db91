# SPDX-License-Identifier: LGPL-2.1-or-later
"""Images on the microVM backend (issue 17; docs/vm.md "Images",
docs/images-run.md): `hutch run --image NAME --backend vm` and
`hutch create NAME --image IMG --backend vm`, under QEMU with TCG, driven
through the real binary as root and as the unprivileged user.

The images are imageutil's busybox images with a small userland layer
(an /etc/os-release of their own), imported into the module's store on
tmpfs (test_vm_persist's VmStore: the VM templates live there, built once
per shape). TCG is slow, so the claims are few, each with its twin:
  - the guest's root is the image's files, not the host's, with the
    image's Env and WorkingDir (and -e/-w over them), Entrypoint/Cmd;
  - a persistent VM sandbox's write under /usr stays after stop, in its own
    layer only: a second sandbox of the image does not see it, nor does
    the store's layer change; the image's files keep the image's owners;
  - as root, apt-get installs a package (a local .deb: no mirror) in a
    persistent sandbox of a Debian image, which keeps it after stop: its
    root keeps the package capabilities over its own ids only (not an id
    outside them, not the sandbox's init), a one-shot run none;
  - `hutch image rm` is refused while a VM sandbox uses the image;
  - bad input answers as on the namespace backend (an unknown image), and
    an image User the image lacks is refused, never run as root; a mount
    point the image made a symlink is refused, not followed by the guest's
    agent."""

import os
import subprocess
import uuid

import pytest

import imageutil
from debimage import debian_rootfs_tar
from test_vm_persist import TCG, VmStore, vm_store_dir  # noqa: F401 (a fixture)

OS_RELEASE = b'PRETTY_NAME="hutch test image"\nID=hutchtest\n'
CONFIG = {"Env": ["PATH=/bin", "GREETING=hello"], "WorkingDir": "/home/app",
          "Cmd": ["/bin/sh", "-c", "echo hello from the image"]}


def userland_layer(marker):
    """/usr/lib/os-release, and /etc/os-release a relative link to it (as
    Debian has them); /etc/marker makes each image one of its own (a name
    of an image that has other names is only untagged by `image rm`)."""
    return imageutil.layer_with([
        ("dir", "usr", None), ("dir", "usr/lib", None),
        ("file", "usr/lib/os-release", OS_RELEASE),
        ("dir", "etc", None), ("symlink", "etc/os-release", "../usr/lib/os-release"),
        ("file", "etc/marker", marker.encode()),
    ])


class VmImages:
    """The module's VM store for one Runner, with images imported into it
    under names of this test's own."""

    def __init__(self, runner, top):
        self.runner = runner
        self.store = VmStore(runner, top)
        self.work = runner.make_dir(name="images")
        self.tag = uuid.uuid4().hex[:8]

    def hutch(self, *args, **kw):
        return self.store.hutch(*args, **kw)

    def run(self, *args, **kw):
        return self.hutch("run", *TCG, *args, **kw)

    def add(self, name, config=None, layers=None):
        """Imports an imageutil image as NAME-<tag>; returns that name."""
        full = f"{name}-{self.tag}"
        layout = self.work / f"layout-{uuid.uuid4().hex[:8]}"
        image = imageutil.make_image(
            config=config,
            layers=layers if layers is not None else [imageutil.layer0(), imageutil.layer1(),
                                                      userland_layer(full)])
        imageutil.write_oci_layout(layout, image, ref=None)
        self.runner.chown(layout)
        r = self.hutch("image", "import", layout, full)
        assert r.returncode == 0, r.stderr
        return full

    def finalize(self):
        self.store.finalize()


@pytest.fixture(params=["root_runner", "user_runner"])
def images(request, vm_store_dir):  # noqa: F811 (the fixture)
    im = VmImages(request.getfixturevalue(request.param), vm_store_dir)
    yield im
    im.finalize()


def out(r):
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r.stdout


def refused(r, *words):
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    for w in words:
        assert w in r.stderr, (w, r.stderr)


def test_a_run_sees_the_images_userland_and_config(images):
    bb = images.add("bb", CONFIG)
    script = "cat /etc/os-release; cat /etc/motd; echo $GREETING; pwd; " \
             "test -e /usr/bin/python3 && echo host-usr; ls /opq"
    lines = out(images.run("--image", bb, "--", "sh", "-c", script)).splitlines()
    assert lines == ['PRETTY_NAME="hutch test image"', "ID=hutchtest", "layer1", "hello",
                     "/home/app", "new"], lines
    # -e and -w win over the image's Env and WorkingDir.
    assert out(images.run("--image", bb, "-e", "GREETING=bye", "-w", "/tmp", "--",
                          "sh", "-c", "echo $GREETING; pwd")) == "bye\n/tmp\n"
    # No command: the image's Cmd.
    assert out(images.run("--image", bb)) == "hello from the image\n"
    # The run's writes go to its own upper (a tmpfs), the whole root is writable.
    assert out(images.run("--image", bb, "--", "sh", "-c",
                          "echo x > /usr/lib/new && cat /usr/lib/new")) == "x\n"
    assert out(images.run("--image", bb, "--", "sh", "-c",
                          "test -e /usr/lib/new || echo gone")) == "gone\n"
    # --read-only: so is the root; the workspace's mount point, which the
    # image lacks, was made on the host before (docs/vm.md "Images").
    ws = images.runner.make_dir(name="rows")
    (ws / "a").write_text("in the workspace\n")
    images.runner.chown(ws)
    r = images.run("--image", bb, "--read-only", "--workspace", ws, "--", "sh", "-c",
                   "cat /workspace/a; touch /etc/x")
    assert r.returncode == 1 and r.stdout == "in the workspace\n", (r.returncode, r.stderr)
    assert "Read-only file system" in r.stderr
    # Twin: without --image the vm backend's root is the host base.
    host = out(images.run("--", "sh", "-c", "cat /etc/os-release; test -e /opq || echo no-opq"))
    assert "hutch test image" not in host and "no-opq" in host
    with open("/etc/os-release") as f:
        assert f.readline() in host


def test_a_persistent_vm_sandbox_keeps_its_writes_to_the_image(images):
    bb = images.add("bb", CONFIG)
    s = images.store
    name, other = f"box-{images.tag}", f"other-{images.tag}"
    s.create(name, *TCG, "--image", bb)
    assert s.sh(name, "pwd; echo $GREETING") == "/home/app\nhello\n"
    s.sh(name, "mkdir -p /usr/share/pkg && echo installed > /usr/share/pkg/file && "
               "echo changed > /etc/motd")
    r = s.hutch("stop", name)
    assert r.returncode == 0, r.stderr
    # After stop (a new VM): the sandbox's own layer is there.
    assert s.sh(name, "cat /usr/share/pkg/file /etc/motd") == "installed\nchanged\n"
    # The image's files keep the image's owners (layer1's home/app/owned is
    # 1000's as root; as the user, one id: every file is the sandbox root's).
    owner = s.sh(name, "stat -c '%u %g' /home/app/owned /bin/busybox").split("\n")
    assert owner[1] == "0 0"
    assert owner[0] == ("1000 1000" if images.runner.mode == "root" else "0 0")
    # Twin: a second sandbox of the same image has the image as it was.
    s.create(other, *TCG, "--image", bb)
    assert s.sh(other, "test -e /usr/share/pkg/file || echo absent; cat /etc/motd") == \
        "absent\nlayer1\n"
    # ... and the store's layers are unchanged.
    info = images.hutch("image", "inspect", bb)
    assert info.returncode == 0, info.stderr
    for layer in __import__("json").loads(info.stdout)["layers"]:
        assert not os.path.exists(os.path.join(layer["path"], "usr/share/pkg"))
        motd = os.path.join(layer["path"], "etc/motd")
        if os.path.exists(motd):
            with open(motd) as f:
                assert f.read() in ("layer0\n", "layer1\n")


def test_image_rm_is_refused_while_a_vm_sandbox_uses_it(images):
    bb = images.add("bb", CONFIG)
    s = images.store
    name = f"user-{images.tag}"
    s.create(name, *TCG, "--image", bb)
    refused(images.hutch("image", "rm", bb), name)
    # Twin: once the sandbox is gone, the image can go.
    r = s.hutch("rm", "--force", name)
    assert r.returncode == 0, r.stderr
    r = images.hutch("image", "rm", bb)
    assert r.returncode == 0, r.stderr


def test_bad_input_answers_as_the_namespace_backend(images):
    missing = f"nosuch-{images.tag}:1"
    vm = images.run("--image", missing, "--", "true")
    ns = images.hutch("run", "--image", missing, "--", "true")
    refused(vm, f"'{missing}'", "hutch image")
    assert vm.stderr == ns.stderr
    r = images.hutch("create", f"nosuch-{images.tag}", *TCG, "--image", missing)
    refused(r, f"'{missing}'")
    # An image User its /etc/passwd lacks: refused, naming it, never run
    # as root (test_exec_user_vm.py has the users the image has).
    ghost = images.add("ghost", {**CONFIG, "User": "ghost"})
    refused(images.run("--image", ghost, "--", "id", "-u"), "'ghost'", "/etc/passwd")
    # Twin: the same image with User root runs.
    root = images.add("root", {**CONFIG, "User": "root"})
    assert out(images.run("--image", root, "--", "id", "-u")) == "0\n"


def test_a_mount_point_the_image_has_as_a_symlink_is_refused(images):
    """SECURITY: the guest's agent, which is not chrooted, mounts the
    sandbox's /tmp, /dev, /proc... on the image's directories; one the
    image made a symlink (to the agent's own /run) is refused, not
    followed."""
    sym = images.add("sym", {"Env": ["PATH=/bin"]}, layers=[
        imageutil.layer0(), imageutil.layer_with([("symlink", "tmp", "/run")])])
    refused(images.run("--image", sym, "--", "true"), "/tmp", "Not a directory")
    # Twin: the image without the symlink runs.
    bb = images.add("bb", CONFIG)
    assert out(images.run("--image", bb, "--", "sh", "-c", "test -d /tmp && echo dir")) == "dir\n"


DEB_CONTROL = """Package: hutch-vm-hello
Version: 1.0
Architecture: all
Maintainer: hutch tests <tests@example.test>
Description: a package of one file, for test_images_vm.py
"""


def build_deb(ws):
    """A .deb of one file (/usr/share/hutch-vm-hello/hi) in @ws."""
    root = ws / "pkg"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(DEB_CONTROL)
    (root / "usr/share/hutch-vm-hello").mkdir(parents=True)
    (root / "usr/share/hutch-vm-hello/hi").write_text("hi\n")
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root),
                    str(ws / "hello.deb")], check=True, capture_output=True)


@pytest.fixture
def deb_images(root_runner, vm_store_dir):  # noqa: F811 (the fixture)
    """As root: the module's store with the Debian image (debimage's,
    cached between runs) as debian-<tag>."""
    im = VmImages(root_runner, vm_store_dir)
    im.deb = f"debian-{im.tag}"
    r = im.hutch("image", "import", debian_rootfs_tar(), im.deb, "-q", timeout=900)
    assert r.returncode == 0, r.stderr
    yield im
    im.finalize()


def test_apt_installs_a_package_in_a_persistent_vm_sandbox(deb_images):
    im, s = deb_images, deb_images.store
    ws = im.runner.make_dir(name="debws")
    build_deb(ws)
    im.runner.chown(ws)
    name = f"deb-{im.tag}"
    s.create(name, *TCG, "--image", im.deb, "--workspace", ws)
    r = s.exec(name, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y",
               "/workspace/hello.deb")
    assert r.returncode == 0, r.stderr
    # apt dropped to _apt for its download step (no seteuid/setgroups error).
    assert "E:" not in r.stderr and "unsandboxed" not in r.stderr, r.stderr
    assert s.hutch("stop", name).returncode == 0
    assert s.sh(name, "cat /usr/share/hutch-vm-hello/hi; "
                      "dpkg-query -W -f='${Status}' hutch-vm-hello") == "hi\ninstall ok installed"
    # The wall: the package capabilities act on the sandbox's own ids only.
    r = s.exec(name, "sh", "-c", "touch /tmp/f && chown 70000 /tmp/f")
    assert r.returncode != 0, "an id outside the sandbox's namespace"
    r = s.exec(name, "sh", "-c", "kill -0 1")
    assert r.returncode != 0, "the sandbox's init is not the command's"
    # Twin: the same commands on the sandbox's own ids work.
    assert s.sh(name, "touch /tmp/f && chown 42:42 /tmp/f && stat -c %u /tmp/f") == "42\n"
    # A one-shot run of the image keeps no capability.
    eff = out(im.run("--image", im.deb, "--", "grep", "CapEff", "/proc/self/status"))
    assert eff.split() == ["CapEff:", "0000000000000000"], eff
