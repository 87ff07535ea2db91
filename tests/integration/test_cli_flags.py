# SPDX-License-Identifier: LGPL-2.1-or-later
"""Docker's flags and meanings (issue 22): --rm, --cap-drop, --cap-add,
--read-only as docker's, fractional sizes, sizes without a unit, URLs in
--allow-host, the nearest flag for a typo, hints for a command not found,
-t/-i not supported yet, --image naming a missing image, and -w checked before anything is
created. Every claim has its twin."""

import re
import uuid
from pathlib import Path

import pytest

from conftest import live_with_marker
from test_snapshots import make_hutch


def host_mounts():
    return Path("/proc/self/mountinfo").read_text()


def refused(r, *words):
    """@r exited 125 with one "hutch: " line containing every word, and the
    command did not run."""
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == "", "the command must not have run"
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, f"want one line, got {r.stderr!r}"
    assert lines[0].startswith("hutch: "), lines[0]
    for w in words:
        assert w in lines[0], f"{w!r} not in {lines[0]!r}"
    return lines[0]


def test_rm_and_cap_drop_are_accepted(sbx):
    r = sbx.run(["--rm", "--cap-drop", "ALL", "--cap-drop=NET_RAW", "--", "sh", "-c", "echo ran"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ran\n"
    # The sandbox has no capability whatever --cap-drop says.
    caps = sbx.run(["--cap-drop", "ALL", "--", "sh", "-c", "grep CapEff /proc/self/status"])
    assert caps.returncode == 0, caps.stderr
    assert caps.stdout.split()[-1] == "0000000000000000"


def test_cap_add_is_refused_with_the_reason(sbx):
    r = sbx.run(["--cap-add", "NET_ADMIN", "--", "sh", "-c", "echo ran"])
    refused(r, "--cap-add NET_ADMIN", "refused", "no capability")


def test_rm_is_not_a_create_flag(request):
    hroot = make_hutch(request, "root")
    hroot.fails("create", "rmbox", "--rm", msg=r"--rm is for 'hutch run'")
    assert "rmbox" not in hroot.ok("ls", "-q").split()


def test_read_only_has_dockers_meaning(sbx):
    """The reference command: --read-only with a -v workspace can write its
    workspace, and nothing else but tmpfs mounts."""
    d = sbx.make_dir(mode=0o777)
    flags = ["--read-only", "--tmpfs", "/tmp", "-v", f"{d}:/workspace", "-w", "/workspace"]
    r = sbx.run([*flags, "--", "sh", "-c", "echo out > result && echo t > /tmp/t && pwd"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "/workspace\n"
    assert (d / "result").read_text() == "out\n"
    # Its twin: $HOME is read-only, and a :ro bind stays read-only.
    r = sbx.run([*flags, "--", "sh", "-c", "echo x > /root/x"])
    assert r.returncode != 0
    ro = sbx.make_dir(mode=0o777)
    r = sbx.run(["--read-only", "-v", f"{ro}:/data:ro", "--", "sh", "-c", "echo x > /data/x"])
    assert r.returncode != 0
    assert not (ro / "x").exists()


def test_fractional_sizes(sbx):
    # The user has no cgroup of its own here: rlimits are enough to show
    # that the size was taken.
    r = sbx.run(
        ["--allow-degraded", "--memory", "1.5g", "--memory-swap", "1.5g", "--disk", "0.5g",
         "--", "true"]
    )
    assert r.returncode == 0, r.stderr
    refused(sbx.run(["--memory", "1.5x", "--", "true"]), "1.5x")
    # A fraction of a byte is no size.
    refused(sbx.run(["--memory", "7000000.5", "--", "true"]), "7000000.5")


def test_a_size_without_unit_is_bytes(sbx):
    line = refused(sbx.run(["--memory", "512", "--", "true"]), "'512'", "bytes", "6m")
    assert "512m" in line
    # Its twin: with the unit it runs.
    assert sbx.run(["--allow-degraded", "--memory", "512m", "--", "true"]).returncode == 0


def test_allow_host_takes_a_url(sbx):
    d = sbx.make_dir(mode=0o777)
    out = d / "outcome.json"
    r = sbx.run(["--allow-host", "https://api.example.com/v1/x?y=1", "--json", out, "--", "true"])
    assert r.returncode == 0, r.stderr
    r = sbx.run(["--allow-host", "http://api.example.com:8080/", "--", "true"])
    assert r.returncode == 0, r.stderr
    refused(
        sbx.run(["--allow-host", "ftp://files.example.com/", "--", "true"]),
        "give a host name",
        "ftp",
    )
    # A pattern with a path but no scheme stays an error of the pattern.
    refused(sbx.run(["--allow-host", "api.example.com:https", "--", "true"]), "port")


@pytest.mark.parametrize(
    "typo,flag",
    [("--memroy", "--memory"), ("--alow-host", "--allow-host"), ("--workspce", "--workspace")],
)
def test_unknown_flag_suggests_the_nearest(sbx, typo, flag):
    line = refused(sbx.run([typo, "1g", "--", "true"]), typo)
    assert f"did you mean '{flag}'?" in line


def test_unknown_flag_far_from_all_has_no_suggestion(sbx):
    line = refused(sbx.run(["--zzqqxxyy", "--", "true"]), "--zzqqxxyy")
    assert "did you mean" not in line


def test_unknown_verb_suggests_the_nearest(sbx):
    r = sbx.run_raw(["lss"])
    assert r.returncode == 125
    assert "did you mean 'ls'?" in r.stderr
    r = sbx.run_raw(["zzqqxxyy"])
    assert r.returncode == 125
    assert "did you mean" not in r.stderr


def test_tty_flags_are_named(sbx):
    refused(sbx.run(["-it", "sh"]), "-i/--interactive", "not supported yet")
    refused(sbx.run(["-t", "sh"]), "-t/--tty", "not supported yet")
    refused(sbx.run(["--tty", "sh"]), "-t/--tty", "not supported yet")


def test_image_flag_names_a_missing_image(sbx):
    # The image store has no such image: exit 125 naming it and the fix
    # (tests/integration/test_image_run.py runs real images).
    home = sbx.make_dir(name="hutch-home")
    refused(sbx.run(["--image", "hutch-no-such-image:1", "--", "true"],
                    env={"HUTCH_HOME": str(home)}),
            "hutch-no-such-image:1", "hutch image")


def test_command_with_a_space_hints_sh_c(sbx):
    r = sbx.run(["--", "ls -la"])
    assert r.returncode == 127
    assert "sh -c 'ls -la'" in r.stderr
    # Its twin: a plain missing command gets no hint.
    r = sbx.run(["--", "hutch-no-such-command"])
    assert r.returncode == 127
    assert "hint" not in r.stderr


def test_image_like_first_word_hints_image(sbx):
    r = sbx.run(["python:3.12", "python", "x.py"])
    assert r.returncode == 127
    assert "looks like an image" in r.stderr and "--image" in r.stderr
    r = sbx.run(["library/debian", "true"])
    assert r.returncode == 127
    assert "looks like an image" in r.stderr


@pytest.mark.parametrize(
    "workdir,words",
    [
        ("/nonexistent-hutch", ["'/nonexistent-hutch'", "no such directory"]),
        ("/tmp/sub", ["'/tmp/sub'", "starts empty"]),
        ("/etc/passwd", ["'/etc/passwd'", "not a directory"]),
        ("/data/missing", ["'/data/missing'", "no such directory"]),
    ],
)
def test_workdir_is_checked_up_front(sbx, workdir, words):
    d = sbx.make_dir()
    marker = f"hutch-wd-{uuid.uuid4().hex}"
    before = host_mounts()
    r = sbx.run(["-v", f"{d}:/data", "-w", workdir, *sbx.probe_args("sleep-marker", marker)])
    refused(r, *words)
    assert host_mounts() == before
    assert not live_with_marker(marker)


@pytest.mark.parametrize("workdir", ["/tmp", "/usr/bin", "/data", "/data/sub", "/srv", "/proc"])
def test_workdir_that_exists_runs(sbx, workdir):
    d = sbx.make_dir()
    (d / "sub").mkdir()
    sbx.chown(d / "sub")
    r = sbx.run(["-v", f"{d}:/srv/x", "-v", f"{d}:/data", "-w", workdir, "--", "sh", "-c", "pwd"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{workdir}\n"


@pytest.fixture
def box(request):
    h = make_hutch(request, "root")
    h.ok("create", "flagbox")
    return h


def test_exec_hints_and_names_the_wrong_word(box):
    r = box.run("exec", "flagbox", "ls -la")
    assert r.returncode == 127
    assert "sh -c 'ls -la'" in r.stderr
    r = box.run("exec", "flagbox", "hutch-no-such-command")
    assert r.returncode == 127 and "hint" not in r.stderr
    err = box.fails("exec", "-it", "flagbox", "sh", msg=r"-i/--interactive is not supported yet")
    assert "'exec'" not in err
    box.fails("exec", "flagbox", "-x", "sh", msg=r"unknown option '-x'")
    box.fails("exec", "flagbox", "--detahc", "sh", msg=r"did you mean '--detach'\?")
    assert box.ok("exec", "flagbox", "-d", "true").strip().isdigit()
    assert re.fullmatch(r"\S+\n", box.ok("ls", "-q")) and "flagbox" in box.ok("ls", "-q")
