# SPDX-License-Identifier: LGPL-2.1-or-later
"""Archives real engines write import (issue 17, docs/images.md): `podman
save` in each of its formats (docker-archive, oci-archive, oci-dir) and
`docker save` of a private dockerd, of an image podman/docker imported from
the tests' busybox image (offline). Root only: the engines run as root.
The negative twin of each is test_image_store.py's bad-input table."""

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

import containerutil as cu
import engines
import imageutil as iu

IS_ROOT = os.geteuid() == 0


@pytest.fixture
def home(tmp_path):
    if not IS_ROOT:
        pytest.skip("needs root: podman and dockerd run as root here")
    h = tmp_path / "home"
    h.mkdir(mode=0o700)
    return h


def hutch_image(hutch_bin, home, *args):
    return subprocess.run([str(hutch_bin), "image", *args], capture_output=True, text=True,
                          env={"HUTCH_HOME": str(home), "PATH": os.environ["PATH"]},
                          stdin=subprocess.DEVNULL, timeout=300)


@pytest.fixture(scope="module")
def hutch_bin():
    from conftest import find_hutch

    return find_hutch()


def check_imported(hutch_bin, home, path, name):
    r = hutch_image(hutch_bin, home, "import", str(path))
    assert r.returncode == 0, r.stderr
    digest = r.stdout.strip()
    info = json.loads(hutch_image(hutch_bin, home, "inspect", digest).stdout)
    assert name in info["names"], info["names"]
    root = Path(info["layers"][-1]["path"])
    # The image's own busybox, as the engine stored it.
    assert (root / "bin" / "busybox").read_bytes() == iu.BUSYBOX.read_bytes()
    assert os.readlink(root / "bin" / "sh") == "busybox"
    return info


@pytest.fixture(scope="module")
def podman_image():
    if not os.path.exists(cu.PODMAN):
        pytest.fail("podman is not installed (tools/deps.sh test)")
    if not IS_ROOT:
        pytest.skip("needs root")
    p = cu.Podman()
    try:
        if p.error:
            pytest.fail(p.error)
        r = p.cli("import", "-", "hutch-image-test:1", input=iu.layer0())
        assert r.returncode == 0, r.stderr
        yield p
    finally:
        p.close()


@pytest.mark.parametrize("fmt", ["docker-archive", "oci-archive", "oci-dir"])
def test_podman_save_archives_import(podman_image, hutch_bin, home, tmp_path, fmt):
    out = tmp_path / f"saved-{fmt}"
    r = podman_image.cli("save", "--format", fmt, "-o", str(out), "localhost/hutch-image-test:1")
    assert r.returncode == 0, r.stderr
    info = check_imported(hutch_bin, home, out, "localhost/hutch-image-test:1")
    assert info["format"] in ("docker-archive", "oci-archive", "oci-layout")


def test_docker_save_archive_imports(hutch_bin, home, tmp_path):
    # containerd's socket path must fit in 108 bytes: a short directory.
    short = Path(tempfile.mkdtemp(prefix="himg-"))
    try:
        with engines.dockerd(short) as d:
            engines.busybox_image(d, "hutch-image-test:2")
            out = tmp_path / "docker-save.tar"
            d.docker("save", "-o", str(out), "hutch-image-test:2")
        info = check_imported(hutch_bin, home, out, "hutch-image-test:2")
        assert info["format"] in ("docker-archive", "oci-archive")
    finally:
        cu.remove_tree(short)
