# SPDX-License-Identifier: LGPL-2.1-or-later
"""Packages in a persistent sandbox made from a Debian image (issue 17
"Packages work"): the image (debimage.py: mmdebstrap from the host's
mirror) goes into the store with `hutch image import ROOTFS.tar
debian:test` and into a sandbox with `hutch create NAME --image
debian:test --allow-host MIRROR`; as the sandbox's root `apt-get update`
and `apt-get install` work (apt drops to _apt: the id range of
docs/persistent.md "Id range"), the package is there after `stop` and in
a snapshot's fork, and `pip install` into the system's paths works the
same way. As root and as the test user with sub-ids. Negative twin:
without the mirror allowed, apt fails with hutch's refusal."""

import ipaddress
import json
import socket
import uuid

import pytest

from debimage import debian_rootfs_tar, host_mirror
from subids import SubIds
from test_persistent import Store

APT_ENV = ("env", "DEBIAN_FRONTEND=noninteractive")
PKG = "hello"
SETUP_PY = """from setuptools import setup
setup(name="hutchdemo", version="1.0", py_modules=["hutchdemo"])
"""


@pytest.fixture(scope="module")
def deb_tar():
    return debian_rootfs_tar()


@pytest.fixture(scope="module")
def subids(user_runner):
    s = SubIds("hutchtest", user_runner.uid)
    yield s
    s.close()


@pytest.fixture(params=["root", "user"])
def dstore(request, subids, deb_tar):
    """A store of its own holding the Debian image as debian:test."""
    st = Store(request.getfixturevalue(f"{request.param}_runner"))
    r = st.hutch("image", "import", deb_tar, "debian:test", "-q", timeout=600)
    assert r.returncode == 0, r.stderr
    yield st
    st.finalize()


def mirror_flags(host):
    """--allow-host of the mirror, and --allow-private for each of its
    addresses that is not global: hutch-proxy refuses private and
    reserved addresses unless allowed, and a test machine's mirror (a
    local cache or proxy) may sit on one."""
    flags = ["--allow-host", host]
    addrs = {i[4][0] for i in socket.getaddrinfo(host, 80, proto=socket.IPPROTO_TCP)}
    for a in sorted(addrs):
        ip = ipaddress.ip_address(a)
        if not ip.is_global:
            flags += ["--allow-private", f"{a}/{ip.max_prefixlen}"]
    return flags


def run(st, name, *cmd, timeout=600, ok=True):
    r = st.exec(name, *APT_ENV, *cmd, timeout=timeout)
    if ok:
        assert r.returncode == 0, f"{cmd}: exit {r.returncode}: {r.stdout[-2000:]} {r.stderr[-3000:]}"
    return r


def test_apt_install_in_an_image_sandbox_persists(dstore):
    st = dstore
    host = host_mirror().host
    ws = st.runner.make_dir(name="pkg")
    (ws / "setup.py").write_text(SETUP_PY)
    (ws / "hutchdemo.py").write_text("WORD = 'installed by pip'\n")
    st.runner.chown(ws)
    st.create("deb", "--image", "debian:test", *mirror_flags(host), "--workspace", ws)

    run(st, "deb", "apt-get", "update")
    run(st, "deb", "apt-get", "install", "-y", "--no-install-recommends", PKG)
    assert run(st, "deb", PKG).stdout.strip() == "Hello, world!"
    # apt's download helper ran as _apt (42 in Debian), a sub-id.
    owner = run(st, "deb", "stat", "-c", "%U %u", "/var/cache/apt/archives/partial")
    assert owner.stdout.split()[0] == "_apt", owner.stdout

    # pip into the system's site-packages (a local project: no index).
    run(st, "deb", "python3", "-m", "pip", "install", "--no-index", "--no-build-isolation",
        "--break-system-packages", "--root-user-action=ignore", "/workspace")
    # From / (the workspace, the default working directory, has the
    # source itself).
    where = run(st, "deb", "sh", "-c",
                "cd / && python3 -c 'import hutchdemo; print(hutchdemo.WORD, hutchdemo.__file__)'")
    word, path = where.stdout.strip().rsplit(" ", 1)
    assert word == "installed by pip"
    assert path.startswith("/usr/local/lib/python3"), path

    assert st.hutch("stop", "deb").returncode == 0
    assert run(st, "deb", PKG).stdout.strip() == "Hello, world!"
    again = run(st, "deb", "sh", "-c", "cd / && python3 -c 'import hutchdemo; print(hutchdemo.__file__)'")
    assert again.stdout.strip() == path

    # Stopped: a running sandbox's snapshot needs a cgroup to freeze it,
    # which the test user has not.
    assert st.hutch("stop", "deb").returncode == 0
    snap = st.hutch("snapshot", "deb", "deb.1")
    assert snap.returncode == 0, snap.stderr
    st.create("fork", "--from", "deb.1")
    assert run(st, "fork", PKG).stdout.strip() == "Hello, world!"
    # dpkg's own record came along too.
    status = run(st, "fork", "dpkg-query", "-W", "-f=${Status}", PKG)
    assert status.stdout == "install ok installed"


def test_apt_without_the_mirror_allowed_is_refused(dstore):
    st = dstore
    host = host_mirror().host
    # Everything but the mirror's name: its addresses are allowed, so
    # the refusal is the allowlist's.
    flags = mirror_flags(host)[2:]
    st.create("deb", "--image", "debian:test", "--allow-host", "unrelated.example.test", *flags)
    out = st.dir / f"outcome-{uuid.uuid4().hex[:8]}.json"
    r = st.exec("deb", *APT_ENV, "apt-get", "update", flags=["--json", out], timeout=300)
    # apt-get update exits 0 with only warnings on some versions: the
    # lists must be missing, and hutch must have refused the mirror.
    outcome = json.loads(out.read_text())
    assert any(host in str(d) for d in outcome.get("denied", [])), (outcome, r.stderr)
    i = run(st, "deb", "apt-get", "install", "-y", "--no-install-recommends", PKG, ok=False)
    assert i.returncode != 0
    assert PKG not in run(st, "deb", "sh", "-c", "ls /usr/bin").stdout.split()
