# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch-oci's createContainer/startContainer hooks and io.hutch.timeout
(issue 21, docs/oci.md).

The hooks are shell scripts that write what they saw (the state JSON on
their stdin, their mount and pid namespaces, their seccomp mode and user)
to files the test reads: createContainer must run inside the container's
namespaces before pivot_root (host paths still resolve), startContainer
inside the container's root under the process's own wall, before the
process. A failing hook fails its step and leaves nothing. The timeout
kills a container that runs past it, through hutch-oci itself and under
Podman (exit 137); its twins (no annotation, a command that ends first)
are left alone, and the watcher is gone with the container."""

import json
import os
from pathlib import Path

import pytest

import containerutil as cu
from test_oci import IMAGE, bundle, hutch_oci_processes, oci, podman, prun  # noqa: F401 (fixtures)


def sh_hook(script, timeout=None):
    h = {"path": "/bin/sh", "args": ["sh", "-c", script]}
    if timeout:
        h["timeout"] = timeout
    return h


def write_config(tmp_path, config):
    (tmp_path / "bundle" / "config.json").write_text(json.dumps(config))
    return tmp_path / "bundle"


def watchers_of(cid):
    """hutch-oci processes left for container @cid (the timeout watcher is
    a fork of `hutch-oci ... start CID`)."""
    found = []
    for pid in hutch_oci_processes():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cid.encode() in argv:
            found.append(pid)
    return found


def test_hooks_run_in_the_namespaces_and_order_the_spec_says(bundle):
    tmp_path, config = bundle
    out = tmp_path / "out"
    out.mkdir()
    rootfs = tmp_path / "bundle" / "rootfs"
    config["hooks"] = {
        "createRuntime": [sh_hook(f"cat > {out}/cr.json; readlink /proc/self/ns/mnt > {out}/cr.mnt")],
        "createContainer": [sh_hook(
            f"cat > {out}/cc.json; readlink /proc/self/ns/mnt > {out}/cc.mnt; "
            f"readlink /proc/self/ns/pid > {out}/cc.pid; test -d {rootfs} && echo host > {out}/cc.where")],
        # Runs from the container's root (its busybox sh), under the wall.
        "startContainer": [sh_hook(
            "cat > /tmp/sc.json; grep -E '^(Seccomp|CapEff|NoNewPrivs):' /proc/self/status > /tmp/sc.status")],
    }
    config["process"]["args"] = ["sh", "-c", "test -f /tmp/sc.status && echo after > /tmp/order; sleep 300"]
    b = write_config(tmp_path, config)
    cid = "hk1"
    try:
        oci(tmp_path, "create", "--bundle", b, "--pid-file", tmp_path / "pid", cid)
        pid = int((tmp_path / "pid").read_text())
        host_mnt = os.readlink("/proc/self/ns/mnt")
        ctr_mnt = os.readlink(f"/proc/{pid}/ns/mnt")
        # createRuntime: the runtime's namespace; createContainer: the container's.
        assert (out / "cr.mnt").read_text().strip() == host_mnt
        assert (out / "cc.mnt").read_text().strip() == ctr_mnt != host_mnt
        assert (out / "cc.pid").read_text().strip() == os.readlink(f"/proc/{pid}/ns/pid")
        assert (out / "cc.where").read_text().strip() == "host"  # before pivot_root
        for f in ("cr.json", "cc.json"):
            st = json.loads((out / f).read_text())
            assert st["id"] == cid and st["pid"] == pid and st["status"] == "creating"
            assert st["bundle"] == str(b)
        assert not (rootfs / "tmp" / "sc.json").exists()  # not before start
        oci(tmp_path, "start", cid)
        assert cu.wait_for(lambda: (rootfs / "tmp" / "order").exists(), 30)
        st = json.loads((rootfs / "tmp" / "sc.json").read_text())
        assert st["id"] == cid and st["status"] == "created"
        status = dict(ln.split(":\t") for ln in (rootfs / "tmp" / "sc.status").read_text().splitlines())
        # The process's own wall: hutch's seccomp filter, no_new_privs, and
        # podman-like default capabilities only (the config grants none).
        assert status["Seccomp"] == "2" and status["NoNewPrivs"] == "1"
        assert int(status["CapEff"], 16) == 0
        assert (rootfs / "tmp" / "order").read_text().strip() == "after"
    finally:
        oci(tmp_path, "delete", "--force", cid, check=False)


@pytest.mark.parametrize("stage", ["createRuntime", "createContainer"])
def test_a_failing_create_hook_fails_create_and_leaves_nothing(bundle, stage):
    tmp_path, config = bundle
    config["hooks"] = {stage: [{"path": "/bin/false"}]}
    b = write_config(tmp_path, config)
    r = oci(tmp_path, "create", "--bundle", b, "--pid-file", tmp_path / "pid", "hk2", check=False)
    assert r.returncode != 0
    assert f"{stage} hook 0 ('/bin/false') failed" in r.stderr
    assert not (tmp_path / "state" / "hk2").exists()
    assert not watchers_of("hk2")
    # Twin: a hook that succeeds lets the same container be created.
    config["hooks"] = {stage: [{"path": "/bin/true"}]}
    b = write_config(tmp_path, config)
    try:
        oci(tmp_path, "create", "--bundle", b, "hk2")
        assert json.loads(oci(tmp_path, "state", "hk2").stdout)["status"] == "created"
    finally:
        oci(tmp_path, "delete", "--force", "hk2", check=False)


def test_a_failing_start_container_hook_keeps_the_process_from_running(bundle):
    tmp_path, config = bundle
    rootfs = tmp_path / "bundle" / "rootfs"
    config["hooks"] = {"startContainer": [sh_hook("exit 3")]}
    config["process"]["args"] = ["sh", "-c", "echo ran > /tmp/ran; sleep 300"]
    b = write_config(tmp_path, config)
    cid = "hk3"
    try:
        oci(tmp_path, "create", "--bundle", b, "--pid-file", tmp_path / "pid", cid)
        pid = int((tmp_path / "pid").read_text())
        oci(tmp_path, "start", cid)
        assert cu.wait_gone(pid, 30)
        assert not (rootfs / "tmp" / "ran").exists()
        assert json.loads(oci(tmp_path, "state", cid).stdout)["status"] == "stopped"
    finally:
        oci(tmp_path, "delete", "--force", cid, check=False)


def test_timeout_kills_a_container_past_it_and_the_watcher_goes_with_it(bundle):
    tmp_path, config = bundle
    config["annotations"] = {"io.hutch.timeout": "1s"}
    b = write_config(tmp_path, config)
    cid = "to1"
    try:
        oci(tmp_path, "create", "--bundle", b, "--pid-file", tmp_path / "pid", cid)
        pid = int((tmp_path / "pid").read_text())
        oci(tmp_path, "start", cid)
        assert cu.wait_gone(pid, 60), "sleep 300 outlived io.hutch.timeout=1s"
        assert cu.wait_for(lambda: not watchers_of(cid), 30)
        log = (tmp_path / "log.json").read_text()
        assert "ran past io.hutch.timeout (1000 ms): killed" in log
        assert json.loads(oci(tmp_path, "state", cid).stdout)["status"] == "stopped"
    finally:
        oci(tmp_path, "delete", "--force", cid, check=False)


def test_without_the_timeout_or_within_it_the_container_is_left_alone(bundle):
    tmp_path, config = bundle
    b = write_config(tmp_path, config)
    # Twin 1: no annotation: sleep 300 is still there well after 1 s.
    try:
        oci(tmp_path, "create", "--bundle", b, "--pid-file", tmp_path / "pid", "to2")
        pid = int((tmp_path / "pid").read_text())
        oci(tmp_path, "start", "to2")
        assert not cu.wait_gone(pid, 3)
        assert not watchers_of("to2")
    finally:
        oci(tmp_path, "delete", "--force", "to2", check=False)
    # Twin 2: a long timeout and a command that ends first: the watcher
    # ends with it and kills nothing.
    config["annotations"] = {"io.hutch.timeout": "10m"}
    config["process"]["args"] = ["sh", "-c", "sleep 1"]
    b = write_config(tmp_path, config)
    try:
        oci(tmp_path, "create", "--bundle", b, "--pid-file", tmp_path / "pid", "to3")
        pid = int((tmp_path / "pid").read_text())
        oci(tmp_path, "start", "to3")
        assert watchers_of("to3")
        assert cu.wait_gone(pid, 60)
        assert cu.wait_for(lambda: not watchers_of("to3"), 30)
        assert "io.hutch.timeout" not in (tmp_path / "log.json").read_text()
    finally:
        oci(tmp_path, "delete", "--force", "to3", check=False)


@pytest.mark.parametrize("value", ["soon", "-1s", "5 parsecs", ""])
def test_a_bad_timeout_is_refused_by_name(bundle, value):
    tmp_path, config = bundle
    config["annotations"] = {"io.hutch.timeout": value}
    b = write_config(tmp_path, config)
    r = oci(tmp_path, "create", "--bundle", b, "bad", check=False)
    assert r.returncode != 0 and "io.hutch.timeout" in r.stderr
    assert not (tmp_path / "state" / "bad").exists()


def test_podman_run_past_the_timeout_exits_137(podman):
    code, out, err = prun(podman, "--annotation", "io.hutch.timeout=1s", IMAGE, "sleep", "300")
    assert code == 137, (code, err)
    # Twin: within it, the command's own exit code.
    code, out, err = prun(podman, "--annotation", "io.hutch.timeout=5m", IMAGE, "sh", "-c", "exit 7")
    assert code == 7, (code, err)


def test_features_lists_the_hooks_and_annotations_it_applies(bundle):
    tmp_path, _ = bundle
    f = json.loads(oci(tmp_path, "features").stdout)
    assert set(f["hooks"]) == {"prestart", "createRuntime", "createContainer", "startContainer",
                               "poststart", "poststop"}
    assert {"io.hutch.timeout", "io.hutch.secret"} <= set(f["annotations"])
