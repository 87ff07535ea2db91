# SPDX-License-Identifier: LGPL-2.1-or-later
"""Images of more than 64 layers (issue 17; docs/images-run.md "Limits"):
up to the image store's own cap, 127 (Docker's), on both backends. The
layers' descriptors cross to the sandbox's init (the namespace backend)
or to the VM's layers helper in batches of FD_MESSAGE_MAX (64), hutch's
cap per message (send_fds_batched()).

The images are imageutil's busybox (layer 0) with one layer more per file
/l<i>, written as an OCI layout by the test itself and imported with
`hutch image import`. Claims, each with its twin:
  - a one-shot run and a persistent sandbox of a 127-layer image see the
    files of its first and last layers (as root and as a user);
  - a 128-layer image is refused at import (the store's cap), exit 125,
    and is not in the store;
  - the microVM backend runs the 127-layer image too (as root)."""

import pytest

import imageutil
from test_image_run import NO_USER, Images, out
from test_images_vm import VmImages
from test_vm_persist import TCG, vm_store_dir  # noqa: F401 (a fixture)

MAX = 127


def layers(n):
    """Layer 0 (busybox: the command) and n - 1 more, layer i adding /l<i>."""
    return [imageutil.layer0()] + [imageutil.layer_with([("file", f"l{i}", b"%d\n" % i)])
                                   for i in range(1, n)]


@pytest.fixture(params=["root", "user"])
def images(request):
    im = Images(request.getfixturevalue(f"{request.param}_runner"))
    yield im
    im.finalize()


def test_an_image_of_127_layers_runs_and_128_is_refused(images):
    rec = images.add("many", layers=layers(MAX), compression=("none",), config=NO_USER)
    assert len(rec["layers"]) == MAX, rec
    # The first layer's program reads the second's and the last's files.
    assert out(images.run("--image", "many", "--", "cat", "/l1", f"/l{MAX - 1}")) == \
        f"1\n{MAX - 1}\n"
    images.store.create("manybox", "--image", "many")
    r = images.store.exec("manybox", "sh", "-c", f"cat /l1 /l{MAX - 1}; echo k > /l1; cat /l1")
    assert out(r) == f"1\n{MAX - 1}\nk\n"
    # Twin: one layer more is past the store's cap: refused, not stored.
    layout = images.work / "layout-128"
    imageutil.write_oci_layout(layout, imageutil.make_image(layers=layers(MAX + 1),
                                                            compression=("none",),
                                                            config=NO_USER), ref=None)
    images.runner.chown(layout)
    r = images.hutch("image", "import", layout, "toomany")
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    assert "127" in r.stderr, r.stderr
    assert images.hutch("image", "inspect", "toomany").returncode != 0


def test_the_vm_backend_runs_an_image_of_127_layers(root_runner, vm_store_dir):  # noqa: F811
    im = VmImages(root_runner, vm_store_dir)
    try:
        many = im.add("many", NO_USER, layers(MAX))
        assert out(im.run("--image", many, "--", "cat", "/l1", f"/l{MAX - 1}")) == \
            f"1\n{MAX - 1}\n"
        # Twin: the namespace backend reads the same from the same store.
        assert out(im.hutch("run", "--image", many, "--", "cat", "/l1", f"/l{MAX - 1}")) == \
            f"1\n{MAX - 1}\n"
    finally:
        im.finalize()
