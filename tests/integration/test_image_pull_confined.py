# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch-pull's download is confined (issue 17, docs/images-pull.md
"Confinement"): the process that parses a registry's answers runs under the
sandbox's seccomp filter and Landlock, reading only what a TLS client needs
and writing only the layout folder. The probe (a test hook,
HUTCH_TEST_PULL_PROBE=PATH) makes the confined process try to read PATH and
create PATH.probe, as a parser taken over by a hostile answer would; the
twins show the same probe succeeding where the download may write."""

import shutil

import pytest

import registryutil

pytestmark = pytest.mark.skipif(
    not shutil.which("docker-registry") or not shutil.which("skopeo"),
    reason="needs docker-registry and skopeo (tools/deps.sh test)")


@pytest.fixture(scope="module")
def registry():
    with registryutil.running_registry(
            "hutch-confined-", lambda reg, layout: reg.push(layout, "amd", "busybox:1")) as reg:
        yield reg


def probe_line(stderr):
    lines = [l for l in stderr.splitlines() if l.startswith("pull probe: ")]
    assert len(lines) == 1, stderr
    return dict(kv.split("=") for kv in lines[0][len("pull probe: "):].split())


def pull(runner, probe, *args):
    home = runner.make_dir(name="home") / "hutch"
    return runner.run_raw(["image", "pull", "--tls-verify=false", *args],
                          env={"HUTCH_HOME": str(home), "HUTCH_TEST_PULL_PROBE": str(probe)},
                          timeout=120)


def test_download_cannot_read_or_write_the_callers_files(sbx, registry):
    d = sbx.make_dir(name="secrets")
    secret = d / "key"
    secret.write_text("s3cret\n")
    sbx.chown(secret)
    r = pull(sbx, secret, f"{registry.host}/busybox:1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == registry.amd["digest"]
    p = probe_line(r.stderr)
    assert p == {"seccomp": "2", "read": "EACCES", "write": "EACCES"}, p
    assert not (d / "key.probe").exists()


def test_download_writes_only_its_layout(sbx, registry):
    out = sbx.make_dir(name="layout")
    # Beneath the layout folder the same probe may look and create.
    r = pull(sbx, out / "blobs", "--layout", out, f"{registry.host}/busybox:1")
    assert r.returncode == 0, r.stderr
    assert probe_line(r.stderr) == {"seccomp": "2", "read": "ENOENT", "write": "ok"}
    # Next to it, not.
    (out.parent / "elsewhere").write_text("x\n")
    sbx.chown(out.parent / "elsewhere")
    r = pull(sbx, out.parent / "elsewhere", "--layout", out, f"{registry.host}/busybox:1")
    assert r.returncode == 0, r.stderr
    assert probe_line(r.stderr) == {"seccomp": "2", "read": "EACCES", "write": "EACCES"}
    assert not (out.parent / "elsewhere.probe").exists()
