# SPDX-License-Identifier: LGPL-2.1-or-later
"""Bad input is exit 125 with one "hutch: " line naming the bad value,
decided before any namespace is created, and nothing is left behind."""

import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import live_with_marker

# Syscalls that change something of the host or start the sandbox; none may
# happen for bad input.
STRACE_CALLS = (
    "clone,clone3,fork,vfork,unshare,setns,mount,umount2,pivot_root,"
    "fsopen,fsmount,open_tree,move_mount,mount_setattr,mkdir,mkdirat"
)


def policy_file(sbx, text):
    d = sbx.make_dir()
    p = d / "policy.json"
    p.write_text(text)
    sbx.chown(d)
    return p


def bad_cases(sbx):
    """(id, flags, words the message must contain)."""
    d = sbx.make_dir()
    f = d / "plain-file"
    f.write_text("x")
    sbx.chown(d)
    return {
        "unknown-flag": (["--hutch-bogus-flag"], ["--hutch-bogus-flag"]),
        "missing-workspace": (
            ["--workspace", "/nonexistent/hutch-ws"],
            ["/nonexistent/hutch-ws"],
        ),
        "workspace-not-a-dir": (["--workspace", str(f)], [str(f)]),
        "missing-overlay-workspace": (
            ["--workspace", "/nonexistent/hutch-ws:overlay"],
            ["/nonexistent/hutch-ws", "does not exist"],
        ),
        "overlay-workspace-not-a-dir": (
            ["--workspace", f"{f}:overlay"],
            [str(f), "not a directory"],
        ),
        "relative-bind-target": (["-v", f"{d}:relative/target"], ["relative/target"]),
        "missing-bind-source": (["-v", "/nonexistent/hutch-src:/data"], ["/nonexistent/hutch-src"]),
        "bad-bind-mode": (["-v", f"{d}:/data:rx"], ["rx"]),
        "bad-tmpfs-size": (["--tmpfs", "/x:size=12q"], ["12q"]),
        "bind-below-rw-bind": (
            ["-v", f"{d}:/data", "-v", f"{d}:/data/sub"],
            ["/data/sub", "read-write bind"],
        ),
        # 15 binds (+ the workspace) fit one descriptor message to init.
        "too-many-binds": (
            [a for i in range(16) for a in ("-v", f"{d}:/b{i}")],
            ["too many binds", "at most 15"],
        ),
        "relative-tmpfs": (["--tmpfs", "rel/tmp"], ["rel/tmp"]),
        "network-host": (["--network", "host"], ["host"]),
        "bad-hostname": (["--hostname", "bad_name!"], ["bad_name!"]),
        "relative-workdir": (["-w", "rel/dir"], ["rel/dir"]),
        "bad-workspace-mode": (["--workspace", f"{d}:overlayx"], ["overlayx"]),
        "bad-env-name": (["-e", "1BAD=x"], ["1BAD"]),
        "policy-unknown-field": (
            ["--policy", policy_file(sbx, '{\n  "hostname": "x",\n  "hutch_bogus": 1\n}\n')],
            ["/hutch_bogus", "line 3"],
        ),
        "policy-wrong-type": (
            ["--policy", policy_file(sbx, '{\n  "hostname": 5\n}\n')],
            ["/hostname", "line 2"],
        ),
        "policy-nested-wrong-type": (
            [
                "--policy",
                policy_file(
                    sbx,
                    '{\n  "tmpfs": [\n    {"path": "/x", "size": true}\n  ]\n}\n',
                ),
            ],
            ["/tmpfs/0/size", "line 3"],
        ),
        "policy-syntax": (["--policy", policy_file(sbx, '{\n  "hostname": \n')], ["line"]),
        "policy-missing": (
            ["--policy", "/nonexistent/hutch-policy.json"],
            ["/nonexistent/hutch-policy.json"],
        ),
    }


CASE_IDS = [
    "unknown-flag",
    "missing-workspace",
    "workspace-not-a-dir",
    "missing-overlay-workspace",
    "overlay-workspace-not-a-dir",
    "relative-bind-target",
    "missing-bind-source",
    "bad-bind-mode",
    "bad-tmpfs-size",
    "relative-tmpfs",
    "network-host",
    "bad-hostname",
    "relative-workdir",
    "bad-workspace-mode",
    "bad-env-name",
    "policy-unknown-field",
    "policy-wrong-type",
    "policy-nested-wrong-type",
    "policy-syntax",
    "policy-missing",
]


def host_mounts():
    return Path("/proc/self/mountinfo").read_text()


@pytest.mark.parametrize("case", CASE_IDS)
def test_bad_input_is_125_naming_the_value(sbx, case):
    flags, words = bad_cases(sbx)[case]
    marker = f"hutch-bad-{uuid.uuid4().hex}"
    before = host_mounts()
    r = sbx.run([*flags, *sbx.probe_args("sleep-marker", marker)], timeout=10)
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == "", "the command must not have run"
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, f"want one line, got: {r.stderr!r}"
    assert lines[0].startswith("hutch: "), lines[0]
    for w in words:
        assert w in lines[0], f"{w!r} not named in {lines[0]!r}"
    assert host_mounts() == before, "a failed run changed the host's mounts"
    assert not live_with_marker(marker), "a failed run left a process behind"


def test_good_input_twin(sbx):
    """Negative twin: the same kinds of flags, valid, run the command."""
    d = sbx.make_dir()
    r = sbx.run(
        [
            "--workspace",
            f"{d}:mount",
            "-v",
            f"{d}:/data:ro",
            "--tmpfs",
            "/x:size=12m",
            "--network",
            "none",
            "--hostname",
            "good-name",
            "-w",
            "/tmp",
            "-e",
            "GOOD=1",
            "--",
            "sh",
            "-c",
            "echo ran",
        ]
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ran\n"


def test_missing_command_is_125(sbx):
    r = sbx.run([])
    assert r.returncode == 125
    assert r.stderr.startswith("hutch: ")


@pytest.mark.parametrize(
    "case",
    [
        "unknown-flag",
        "missing-workspace",
        "relative-bind-target",
        "bad-tmpfs-size",
        "network-host",
        "policy-unknown-field",
    ],
)
def test_bad_input_creates_no_namespace_and_no_dirs(sbx, case, tmp_path):
    """strace: no clone/unshare/mount/mkdir at all for bad input, so no
    namespace was created and no temp dir was made."""
    if not shutil.which("strace"):
        pytest.skip("needs strace (tools/deps.sh test installs it)")
    flags, _ = bad_cases(sbx)[case]
    trace = tmp_path / "trace"
    tmpdir = sbx.make_dir(name="tmpdir")
    argv = ["strace", "-f", "-qq", "-o", str(trace), "-e", f"trace={STRACE_CALLS}"]
    argv += sbx.argv([*flags, "--", "true"])
    r = subprocess.run(
        argv,
        env=sbx.env({"TMPDIR": str(tmpdir)}),
        cwd=str(sbx.base_dir),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 125, r.stderr
    pattern = re.compile(r"\b(%s)\(" % STRACE_CALLS.replace(",", "|"))
    calls = [line for line in trace.read_text().splitlines() if pattern.search(line)]
    # setpriv (user mode) execs hutch; it makes none of these calls either.
    assert calls == [], "bad input reached the sandbox setup:\n" + "\n".join(calls)
    assert os.listdir(tmpdir) == [], "a failed run left files in TMPDIR"
