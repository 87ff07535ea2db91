# SPDX-License-Identifier: LGPL-2.1-or-later
"""An image's platform is checked when it runs (issue 17;
docs/images-run.md "Limits"): a single-manifest image whose config says
another architecture imports (as podman does) but `hutch run` and
`hutch create` with it fail with exit 125 naming the image's platform and
the host's, on both backends, before anything starts. The images are
imageutil's busybox written as OCI layouts by the test (config
"architecture" set by hand). Claims, each with its twin:
  - a foreign-architecture image imports and `image inspect` shows its
    architecture; `run` (namespace and vm backends) and `create` refuse
    it, and no sandbox is left;
  - the same image with the host's architecture runs and creates."""

import json
import platform

import pytest

import imageutil
from test_image_run import NO_USER, Images, out

# uname(2)'s machine to the name image configs use (GOARCH).
GOARCH = {"x86_64": "amd64", "aarch64": "arm64", "i686": "386", "armv7l": "arm",
          "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64"}
HOST = GOARCH.get(platform.machine(), platform.machine())
FOREIGN = "arm64" if HOST != "arm64" else "amd64"


@pytest.fixture(params=["root", "user"])
def images(request):
    im = Images(request.getfixturevalue(f"{request.param}_runner"))
    yield im
    im.finalize()


def refused(r, *words):
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    for w in words:
        assert w in r.stderr, (w, r.stderr)


def test_a_foreign_architecture_imports_but_does_not_run(images):
    rec = images.add("foreign", config=NO_USER, arch=FOREIGN)
    assert rec["config"]["architecture"] == FOREIGN, rec
    why = (f"linux/{FOREIGN}", f"linux/{HOST}", "'foreign'")
    refused(images.run("--image", "foreign", "--", "true"), *why)
    refused(images.run("--backend", "vm", "--vm-accel", "tcg", "--image", "foreign", "--",
                       "true"), *why)
    r = images.hutch("create", "fbox", "--image", "foreign")
    images.store.names.append("fbox")
    refused(r, *why)
    r = images.hutch("ls", "--json")
    assert r.returncode == 0, r.stderr
    assert [e["name"] for e in json.loads(r.stdout)] == []
    # Twin: the same image built for the host runs, and makes a sandbox.
    images.add("native", config=NO_USER, arch=HOST)
    assert out(images.run("--image", "native", "--", "echo", "ran")) == "ran\n"
    images.store.create("nbox", "--image", "native")
    assert out(images.store.exec("nbox", "echo", "here")) == "here\n"
