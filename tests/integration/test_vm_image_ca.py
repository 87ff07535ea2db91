# SPDX-License-Identifier: LGPL-2.1-or-later
"""The CA bundle of an image on the microVM backend (issue 17; docs/vm.md
"Images", docs/images-run.md "CA bundle"): with --secret, the image's
own bundle (the first regular file of the namespace backend's table,
rootfs_image_ca_bundles) and the sandbox CA make the combined bundle, bound
read-only over that file and /run/hutch/ca-bundle.pem, as on the namespace
backend: a client reading only its distribution's path trusts the sandbox
CA too.

Driven through the real binary under QEMU with TCG, as root and as the
unprivileged user, with test_images_vm's busybox images in a store of the
module's on tmpfs. Claims, each with its twin:
  - with a secret, the image's /etc/ssl/certs/ca-certificates.crt is the
    combined bundle (its own bytes, then the sandbox CA), read-only, and
    the sandbox cannot unmount it; the namespace backend shows the same;
    without a secret, it is the image's own bytes;
  - an image without a bundle gets the sandbox CA alone (both backends),
    the host base the host's CAs too;
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
    # The image's CAs, then the sandbox CA (the marker is no certificate),
    # at the image's path and at the variables' (SSL_CERT_FILE), as on the
    # namespace backend.
    vm = out(images.run("--image", ca, *SECRET, "--", "sh", "-c", script, env=TOKEN))
    assert vm.splitlines() == ["IMAGE-CA-MARKER", "1", "combined", "read-only", "stays",
                               "still"], vm
    ns = out(images.hutch("run", "--image", ca, *SECRET, "--", "sh", "-c", script, env=TOKEN))
    assert ns == vm, (ns, vm)
    # A persistent VM sandbox of the image: the same.
    name = f"ca-{images.tag}"
    images.store.create(name, *TCG, "--image", ca, *SECRET)
    assert out(images.store.exec(name, "sh", "-c", script, env=TOKEN)) == vm
    # Twin: without a secret the image's bundle is its own bytes, and
    # there is no combined bundle.
    o = out(images.run("--image", ca, "--", "sh", "-c",
                       f"cat {DEBIAN}; test -e {BUNDLE} || echo none"))
    assert o == MARKER.decode() + "none\n", o


def test_an_image_without_a_bundle_gets_the_sandbox_ca_alone(root_images):
    """As on the namespace backend: none of the host's CAs come in."""
    bb = root_images.add("bb", config={"Env": ["PATH=/bin"]}, layers=[imageutil.layer0()])
    script = (f"busybox grep -c 'BEGIN CERTIFICATE' {BUNDLE}; "
              f"test -e {DEBIAN} || echo no-bundle")
    vm = out(root_images.run("--image", bb, *SECRET, "--", "sh", "-c", script, env=TOKEN))
    assert vm == "1\nno-bundle\n", vm
    assert out(root_images.hutch("run", "--image", bb, *SECRET, "--", "sh", "-c", script,
                                 env=TOKEN)) == vm
    # Twin: the host base's bundle has the host's CAs too.
    host = out(root_images.run(*SECRET, "--", "busybox", "grep", "-c", "BEGIN CERTIFICATE",
                               BUNDLE, env=TOKEN))
    assert int(host) > 1, host


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
    assert vm.splitlines() == ["REAL-MARKER", "own", "FEDORA-MARKER", "+ca",
                               "CERTPEM-MARKER", "own", "combined"], vm
    # The namespace backend covers the same file, with the same bytes.
    ns = out(root_images.hutch("run", "--image", evil, *SECRET, "--", "sh", "-c", probe,
                               env=TOKEN))
    assert ns.splitlines() == ["REAL-MARKER", "own", "FEDORA-MARKER", "+ca",
                               "CERTPEM-MARKER", "own"], ns
    # Twin: without a secret, all three are the image's.
    o = out(root_images.run("--image", evil, "--", "sh", "-c", f"cat {files}"))
    assert o == "REAL-MARKER\nFEDORA-MARKER\nCERTPEM-MARKER\n", o


# A client that reads only its distribution's bundle: Debian's python3
# (OpenSSL's default file, /usr/lib/ssl/cert.pem, a link to the bundle),
# with every CA variable hutch sets removed first.
PY_CLIENT = r"""
import os, ssl, sys, urllib.request
for k in list(os.environ):
    if "CERT" in k or "CA_BUNDLE" in k or k in ("PIP_CERT", "GIT_SSL_CAINFO"):
        del os.environ[k]
print(os.path.realpath(ssl.get_default_verify_paths().cafile))
req = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + os.environ["TOKEN"]})
print(urllib.request.urlopen(req, timeout=120).read().decode().count("vm-image-ca") > 0)
"""


@pytest.fixture
def deb_images(root_runner, vm_store_dir):  # noqa: F811 (the fixture)
    """As root: the module's store with the Debian image (debimage's,
    cached between runs) as debian-<tag>."""
    from debimage import debian_rootfs_tar

    im = VmImages(root_runner, vm_store_dir)
    im.deb = f"debian-{im.tag}"
    r = im.hutch("image", "import", debian_rootfs_tar(), im.deb, "-q", timeout=900)
    assert r.returncode == 0, r.stderr
    yield im
    im.finalize()


def test_a_debian_client_without_the_ca_variables_reaches_the_secrets_host(deb_images):
    from test_secrets import API, REAL, TlsUpstream, secret_flags, trustme

    im = deb_images
    ca = trustme.CA()
    up = TlsUpstream(ca)
    try:
        url = f"https://{API}:{up.port}/vm-image-ca"
        r = im.run("--image", im.deb, *secret_flags(im.runner, ca, up), "--",
                   "python3", "-c", PY_CLIENT, url, env={"TOKEN": REAL})
    finally:
        up.close()
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.splitlines() == [DEBIAN, "True"], r.stdout
    # The proxy swapped the placeholder for the real value.
    sent = [q for q in up.requests if q["path"] == "/vm-image-ca"]
    assert sent and ["Authorization", f"Bearer {REAL}"] in sent[0]["headers"], up.requests
