# SPDX-License-Identifier: LGPL-2.1-or-later
"""Exit codes follow the shell (CMD's own, 126, 127, 128+N) and hutch's own
failures are 125; the typed outcome goes to --json / --json-fd, never to
CMD's stdout."""

import json
import os
import shutil
import subprocess

import pytest

OUTCOME_KEYS = {
    "exit_code",
    "signal",
    "reason",
    "wall_ms",
    "cpu_ms",
    "mem_peak_bytes",
    "stdout_truncated",
    "denied",
}


@pytest.mark.parametrize("status", [0, 1, 7, 124, 255])
def test_exit_status_is_the_commands(sbx, status):
    r = sbx.run(["--", "sh", "-c", f"exit {status}"])
    assert r.returncode == status, r.stderr


def test_stdout_and_stderr_pass_through(sbx):
    r = sbx.run(["--", "sh", "-c", "echo out; echo err >&2"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "out\n"
    assert r.stderr.endswith("err\n")


def test_stdin_passes_through(sbx):
    r = sbx.run(["--", "cat"], input="from stdin\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "from stdin\n"


def test_command_not_found_is_127(sbx):
    r = sbx.run(["--", "hutch-no-such-command"])
    assert r.returncode == 127
    assert "command not found" in r.stderr
    assert "hutch-no-such-command" in r.stderr


def test_missing_absolute_path_is_127(sbx):
    r = sbx.run(["--", "/nonexistent/hutch-cmd"])
    assert r.returncode == 127
    assert "/nonexistent/hutch-cmd" in r.stderr


def test_not_executable_is_126(sbx):
    d = sbx.make_dir()
    script = d / "not-exec.sh"
    script.write_text("#!/bin/sh\necho should-not-run\n")
    os.chmod(script, 0o644)
    sbx.chown(d)
    r = sbx.run(["-v", f"{d}:/data:ro", "--", "/data/not-exec.sh"])
    assert r.returncode == 126, (r.stdout, r.stderr)
    assert "should-not-run" not in r.stdout
    assert "/data/not-exec.sh" in r.stderr


def test_executable_twin_runs(sbx):
    """Negative twin of the 126 case: the same script with +x runs."""
    d = sbx.make_dir()
    script = d / "exec.sh"
    script.write_text("#!/bin/sh\necho did-run\nexit 3\n")
    os.chmod(script, 0o755)
    sbx.chown(d)
    r = sbx.run(["-v", f"{d}:/data:ro", "--", "/data/exec.sh"])
    assert r.returncode == 3, r.stderr
    assert r.stdout == "did-run\n"


def test_directory_is_not_executable(sbx):
    r = sbx.run(["--", "/usr"])
    assert r.returncode == 126, r.stderr


@pytest.mark.parametrize("sig", [9, 15, 10])
def test_killed_by_signal_is_128_plus_n(sbx, sig):
    r = sbx.run(["--", "sh", "-c", f"kill -{sig} $$"])
    assert r.returncode == 128 + sig, r.stderr


def test_hutch_failure_is_125_with_one_line(sbx):
    r = sbx.run(["--hutch-bogus-flag", "--", "true"])
    assert r.returncode == 125
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("hutch: ")


def test_json_file_outcome(sbx):
    d = sbx.make_dir()
    out = d / "outcome.json"
    r = sbx.run(["--json", out, "--", "sh", "-c", "echo hello; exit 3"])
    assert r.returncode == 3, r.stderr
    assert r.stdout == "hello\n", "the outcome must never be mixed into CMD's stdout"
    doc = json.loads(out.read_text())
    assert OUTCOME_KEYS <= set(doc), doc
    assert doc["exit_code"] == 3
    assert doc["signal"] in (0, None), "no signal: 0 or null"
    assert doc["reason"] == "exited"
    assert doc["stdout_truncated"] is False
    assert isinstance(doc["denied"], list)
    for k in ("wall_ms", "cpu_ms", "mem_peak_bytes"):
        assert isinstance(doc[k], int) and doc[k] >= 0, (k, doc)


def test_json_fd_outcome_for_a_signal(sbx):
    rfd, wfd = os.pipe()
    try:
        p = sbx.popen(
            ["--json-fd", str(wfd), "--", "sh", "-c", "kill -TERM $$"],
            pass_fds=(wfd,),
            stdout=-1,
            stderr=-1,
        )
        os.close(wfd)
        wfd = -1
        with os.fdopen(rfd, "r") as f:
            rfd = -1
            text = f.read()
        stdout, stderr = p.communicate(timeout=30)
    finally:
        for fd in (rfd, wfd):
            if fd >= 0:
                os.close(fd)
    assert p.returncode == 128 + 15, stderr
    assert stdout == ""
    doc = json.loads(text)
    assert doc["exit_code"] == 143
    assert doc["signal"] == 15
    assert doc["reason"] == "signaled"


def test_json_not_written_without_flag(sbx):
    """Negative twin: without --json, stdout is exactly CMD's output."""
    r = sbx.run(["--", "sh", "-c", "echo only"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "only\n"


def test_missing_kernel_feature_is_125(sbx):
    """Without user namespaces (bwrap --disable-userns around hutch), hutch
    fails itself: 125 with one "hutch: " line, and the command never ran."""
    if not shutil.which("bwrap"):
        pytest.skip("needs bwrap (tools/deps.sh bench installs bubblewrap)")
    argv = sbx.argv(["--", "sh", "-c", "echo SHOULD-NOT-RUN"])
    at = argv.index(sbx.hutch)
    argv[at:at] = ["bwrap", "--unshare-user", "--disable-userns", "--ro-bind", "/", "/"]
    r = subprocess.run(
        argv,
        env=sbx.env(),
        cwd=str(sbx.base_dir),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    assert "SHOULD-NOT-RUN" not in r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hutch: "), r.stderr
