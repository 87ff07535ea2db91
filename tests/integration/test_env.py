# SPDX-License-Identifier: LGPL-2.1-or-later
"""The command's environment is PATH, HOME, TERM, LANG, LC_*, USER, TZ and
HUTCH=1 plus what -e / --env-pass add; nothing else of the caller, and the
sandbox's init does not carry the caller's environment either."""

import re
import uuid

ALLOWED = re.compile(r"^(PATH|HOME|TERM|LANG|LC_[A-Z_]+|USER|TZ|HUTCH)$")


def env_of(text):
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_default_environment(sbx):
    secret = f"caller-secret-{uuid.uuid4().hex}"
    caller = {
        "HUTCH_TEST_SECRET": secret,
        "OPENAI_API_KEY": secret,
        "LD_PRELOAD": "/nonexistent/evil.so",
        "TERM": "xterm-hutch",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
    }
    r = sbx.probe("env", env=caller)
    assert r.returncode == 0, r.stderr
    env = env_of(r.stdout)
    extra = sorted(k for k in env if not ALLOWED.match(k))
    assert not extra, f"unexpected variables: {extra}"
    assert secret not in r.stdout
    assert env["HUTCH"] == "1"
    assert env["HOME"] == "/root"
    assert "PATH" in env and "/usr/bin" in env["PATH"].split(":")
    # The allowed ones are the caller's.
    assert env.get("TERM") == "xterm-hutch"
    assert env.get("LC_ALL") == "C.UTF-8"
    assert env.get("TZ") == "UTC"


def test_env_set(sbx):
    env = env_of(sbx.fact("env", flags=["-e", "FOO=bar baz", "-e", "EMPTY="]))
    assert env["FOO"] == "bar baz"
    assert env["EMPTY"] == ""


def test_env_pass_by_name(sbx):
    caller = {"HUTCH_PASS_A": "value-a", "HUTCH_PASS_B": "value-b", "HUTCH_NOT_PASSED": "no"}
    r = sbx.probe("env", flags=["-e", "HUTCH_PASS_A", "--env-pass", "HUTCH_PASS_B"], env=caller)
    assert r.returncode == 0, r.stderr
    env = env_of(r.stdout)
    assert env["HUTCH_PASS_A"] == "value-a"
    assert env["HUTCH_PASS_B"] == "value-b"
    assert "HUTCH_NOT_PASSED" not in env


def test_env_not_passed_without_flag_twin(sbx):
    r = sbx.probe("env", env={"HUTCH_PASS_A": "value-a"})
    assert r.returncode == 0, r.stderr
    assert "HUTCH_PASS_A" not in env_of(r.stdout)


def test_init_does_not_carry_caller_env(sbx):
    secret = f"caller-secret-{uuid.uuid4().hex}"
    r = sbx.probe("read", "/proc/1/environ", env={"HUTCH_TEST_SECRET": secret})
    # Unreadable is fine (init is not dumpable); readable must be clean.
    assert secret not in r.stdout
    assert "HUTCH_TEST_SECRET" not in r.stdout


def test_init_does_not_carry_supervisor_argv(sbx):
    """None of hutch's own state: an -e value is in the supervisor's argv
    but must not show in the sandbox init's cmdline."""
    secret = f"argv-secret-{uuid.uuid4().hex}"
    r = sbx.probe("read", "/proc/1/cmdline", flags=["-e", f"HUTCH_ARGV={secret}"])
    assert secret not in r.stdout, f"/proc/1/cmdline inside shows the supervisor's argv: {r.stdout!r}"
