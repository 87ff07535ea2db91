# SPDX-License-Identifier: LGPL-2.1-or-later
"""The CA bundle of an image on the microVM backend (issue 17; docs/vm.md
"Images", docs/images-run.md "CA bundle"): with --secret, the combined
bundle (/run/hutch/ca-bundle.pem: the host's CAs and the sandbox CA) is
bound read-only over the image's own bundle, the first regular file of the
namespace backend's table (rootfs_image_ca_bundles), so that a client
reading only its distribution's path trusts the sandbox CA too.

Driven through the real binary under QEMU with TCG, as root and as the
unprivileged user, with test_images_vm's busybox images in a store of the
module's on tmpfs. Claims, each with its twin:
  - with a secret, the image's /etc/ssl/certs/ca-certificates.crt is the
    combined bundle, read-only, and the sandbox cannot unmount it; without
    one, it is the image's own bytes;
  - SECURITY: the image is untrusted and the guest's agent is not
    chrooted: a bundle path that is a symlink is skipped, not followed (its
    target keeps its bytes), and a symlink above it resolves inside the
    image's root; the namespace backend chooses the same file in the same
    image (one rule for both)."""

import pytest

import imageutil
from test_images_vm import VmImages, out
from test_vm_persist import TCG, vm_store_dir  # noqa: F401 (a fixture)

SECRET = ["--secret", "TOKEN@api.example"]
TOKEN = {"TOKEN": "hutch-test-token-0123"}
BUNDLE = "/run/hutch/ca-bundle.pem"
DEBIAN = "/etc/ssl/certs/ca-certificates.crt"
MARKER = b"IMAGE-CA-MARKER\n"


@pytest.fixture(params=["root_runner", "user_runner"])
def images(request, vm_store_dir):  # noqa: F811 (the fixture)
    im = VmImages(request.getfixturevalue(request.param), vm_store_dir)
    yield im
    im.finalize()


@pytest.fixture
def root_images(root_runner, vm_store_dir):  # noqa: F811 (the fixture)
    im = VmImages(root_runner, vm_store_dir)
    yield im
    im.finalize()


def parents(path):
    parts = path.strip("/").split("/")
    return [("dir", "/".join(parts[:i]), None) for i in range(1, len(parts))]


def with_bundle(path, data=MARKER):
    return [imageutil.layer0(), imageutil.layer_with([*parents(path),
                                                      ("file", path.strip("/"), data)])]


# Each line: a file's first line, then whether it holds a certificate
# (the markers are none).
PROBE = ("for f in {files}; do busybox head -n 1 $f; "
         "if busybox grep -q 'BEGIN CERTIFICATE' $f; then echo +ca; else echo own; fi; done")


def test_the_images_bundle_is_the_combined_bundle_with_a_secret(images):
    ca = images.add("ca", config={"Env": ["PATH=/bin"]}, layers=with_bundle(DEBIAN))
    script = (f"busybox head -n 1 {DEBIAN}; busybox grep -c 'BEGIN CERTIFICATE' {DEBIAN}; "
              f"busybox cmp {DEBIAN} {BUNDLE} && echo combined; "
              f"echo x >> {DEBIAN} 2>/dev/null || echo read-only; "
              f"busybox umount {DEBIAN} 2>/dev/null || echo stays; "
              f"busybox cmp {DEBIAN} {BUNDLE} && echo still")
    lines = out(images.run("--image", ca, *SECRET, "--", "sh", "-c", script,
                           env=TOKEN)).splitlines()
    assert lines[0] == "-----BEGIN CERTIFICATE-----", lines
    assert int(lines[1]) >= 1 and lines[2:] == ["combined", "read-only", "stays", "still"], lines
    # Twin: without a secret the image's bundle is its own bytes, and
    # there is no combined bundle.
    o = out(images.run("--image", ca, "--", "sh", "-c",
                       f"cat {DEBIAN}; test -e {BUNDLE} || echo none"))
    assert o == MARKER.decode() + "none\n", o


def test_a_bundle_symlink_is_skipped_and_the_rule_is_the_namespace_backends(root_images):
    """SECURITY: the table's first path is a symlink (skipped: its target,
    a file of the image's, keeps its bytes); the second's directory is an
    absolute symlink, resolved inside the image's root (not the agent's),
    where it is a regular file: that one is covered, the third is not.
    The namespace backend chooses the same."""
    layer = imageutil.layer_with([
        ("dir", "etc", None), ("file", "etc/real.crt", b"REAL-MARKER\n"),
        *parents(DEBIAN)[1:], ("symlink", DEBIAN.strip("/"), "/etc/real.crt"),
        ("dir", "inroot", None), ("dir", "inroot/pki", None), ("dir", "inroot/pki/tls", None),
        ("dir", "inroot/pki/tls/certs", None),
        ("file", "inroot/pki/tls/certs/ca-bundle.crt", b"FEDORA-MARKER\n"),
        ("symlink", "etc/pki", "/inroot/pki"),
        ("file", "etc/ssl/cert.pem", b"CERTPEM-MARKER\n"),
    ])
    evil = root_images.add("evil", config={"Env": ["PATH=/bin"]},
                           layers=[imageutil.layer0(), layer])
    files = "/etc/real.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem"
    probe = PROBE.format(files=files)
    vm = out(root_images.run("--image", evil, *SECRET, "--", "sh", "-c",
                             f"{probe}; busybox cmp /etc/pki/tls/certs/ca-bundle.crt {BUNDLE} "
                             "&& echo combined", env=TOKEN))
    assert vm.splitlines() == ["REAL-MARKER", "own", "-----BEGIN CERTIFICATE-----", "+ca",
                               "CERTPEM-MARKER", "own", "combined"], vm
    # The namespace backend covers the same file (with the image's own CAs
    # first: docs/images-run.md "CA bundle").
    ns = out(root_images.hutch("run", "--image", evil, *SECRET, "--", "sh", "-c", probe,
                               env=TOKEN))
    assert ns.splitlines() == ["REAL-MARKER", "own", "FEDORA-MARKER", "+ca",
                               "CERTPEM-MARKER", "own"], ns
    # Twin: without a secret, all three are the image's.
    o = out(root_images.run("--image", evil, "--", "sh", "-c", f"cat {files}"))
    assert o == "REAL-MARKER\nFEDORA-MARKER\nCERTPEM-MARKER\n", o
