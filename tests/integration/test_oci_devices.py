# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch-oci's linux.resources.devices on cgroup v2 (issue 21,
docs/oci.md): the rules become an eBPF device program attached to the
container's v2 cgroup. This hybrid host also has the v1 devices
controller, which would enforce the same rules; a test build's
HUTCH_OCI_TEST_NO_V1_DEVICES=1 leaves it out, so the program is the only
wall. The container (CAP_MKNOD granted) makes device nodes and opens them:
the rule's device works, another is refused, the default devices stay
usable. Twin: without rules the other device can be made."""

import json
import os
from pathlib import Path

import pytest

import containerutil as cu
from test_oci import bundle, oci  # noqa: F401 (fixtures)

SCRIPT = (
    "busybox mknod /tmp/kmsg c 1 11 && echo kmsg-made; "
    "busybox mknod /tmp/mem c 1 1 && echo mem-made || echo mem-refused; "
    "busybox head -c1 /dev/zero > /dev/null && echo zero-read; "
    "echo x > /dev/null && echo null-written"
)
CAPS = ["CAP_MKNOD"]
MARKERS = {"kmsg-made", "mem-made", "mem-refused", "zero-read", "null-written"}


def run(tmp_path, config, cid, devices):
    config["process"]["args"] = ["sh", "-c", "{ " + SCRIPT + "; } > /tmp/out 2>&1"]
    config["process"]["capabilities"] = {k: CAPS for k in ("bounding", "effective", "permitted")}
    if devices is not None:
        config["linux"]["resources"] = {"devices": devices}
    (tmp_path / "bundle" / "config.json").write_text(json.dumps(config))
    oci(tmp_path, "create", "--bundle", tmp_path / "bundle", "--pid-file", tmp_path / "pid", cid)
    pid = int((tmp_path / "pid").read_text())
    # Where the test knob is on, the container has no v1 devices cgroup:
    # the program alone holds the rules.
    v1_dir = Path(f"/sys/fs/cgroup/devices/hutch-oci-test/{tmp_path.name}")
    assert v1_dir.is_dir() == (os.environ.get("HUTCH_OCI_TEST_NO_V1_DEVICES") is None)
    oci(tmp_path, "start", cid)
    assert cu.wait_gone(pid, 60)
    text = (tmp_path / "bundle" / "rootfs" / "tmp" / "out").read_text()
    # The markers; the refusals' own messages say EPERM.
    out = [ln for ln in text.splitlines() if ln in MARKERS]
    if "mem-refused" in out:
        assert "/tmp/mem: Operation not permitted" in text, text
    oci(tmp_path, "delete", "--force", cid, check=False)
    return out


@pytest.mark.parametrize("v1", [False, True], ids=["program-alone", "with-v1"])
def test_device_rules_are_enforced_on_cgroup_v2(bundle, monkeypatch, v1):
    tmp_path, config = bundle
    if not Path("/sys/fs/cgroup/unified").is_dir() and not Path("/sys/fs/cgroup/cgroup.controllers").exists():
        pytest.fail("no cgroup v2 hierarchy on this host")
    if not v1:
        monkeypatch.setenv("HUTCH_OCI_TEST_NO_V1_DEVICES", "1")
    rules = [{"allow": False, "access": "rwm"},
             {"allow": True, "type": "c", "major": 1, "minor": 11, "access": "rwm"}]
    out = run(tmp_path, config, "dev1", rules)
    assert out == ["kmsg-made", "mem-refused", "zero-read", "null-written"], out


def test_a_later_deny_wins_and_access_is_per_letter(bundle, monkeypatch):
    tmp_path, config = bundle
    monkeypatch.setenv("HUTCH_OCI_TEST_NO_V1_DEVICES", "1")
    # Everything allowed, then mknod of char devices of major 1 taken away
    # (reading them stays): the last matching rule decides.
    rules = [{"allow": True, "access": "rwm"},
             {"allow": False, "type": "c", "major": 1, "access": "m"}]
    out = run(tmp_path, config, "dev2", rules)
    assert "kmsg-made" not in out and "mem-refused" in out
    assert "zero-read" in out and "null-written" in out


def test_without_rules_the_device_can_be_made(bundle, monkeypatch):
    tmp_path, config = bundle
    monkeypatch.setenv("HUTCH_OCI_TEST_NO_V1_DEVICES", "1")
    out = run(tmp_path, config, "dev3", None)
    assert out == ["kmsg-made", "mem-made", "zero-read", "null-written"], out


def test_update_of_device_rules_is_refused_under_cgroup_v2(bundle, monkeypatch):
    tmp_path, config = bundle
    monkeypatch.setenv("HUTCH_OCI_TEST_NO_V1_DEVICES", "1")
    config["linux"]["resources"] = {"devices": [{"allow": False, "access": "rwm"}]}
    (tmp_path / "bundle" / "config.json").write_text(json.dumps(config))
    try:
        oci(tmp_path, "create", "--bundle", tmp_path / "bundle", "dev4")
        res = tmp_path / "res.json"
        res.write_text(json.dumps({"devices": [{"allow": True, "access": "rwm"}]}))
        r = oci(tmp_path, "update", "--resources", res, "dev4", check=False)
        assert r.returncode != 0 and "/linux/resources/devices cannot change" in r.stderr
        # Twin: an update without device rules still works.
        res.write_text(json.dumps({"pids": {"limit": 9}}))
        oci(tmp_path, "update", "--resources", res, "dev4")
    finally:
        oci(tmp_path, "delete", "--force", "dev4", check=False)
