# SPDX-License-Identifier: LGPL-2.1-or-later
"""A snapshot is data, never authority (issue 26 item 1,
docs/persistent.md, docs/threat-model.md "snapshot archives").

A snapshot archive can come from anyone, and its checksums protect
nothing against whoever wrote it: they are recomputed here as an attacker
would. The test exports a real snapshot, rebuilds the archive with a
manifest whose policy asks for a read-write bind of a host folder, the
caller's SOME_TOKEN (env_pass) and a proxy audit log at a host path of its
choosing, recompresses it with the zstd command and appends a fresh
checksum frame (src/lib/store/archive.h). Imported, it must grant nothing:
`create --from` it without policy flags, through the CLI and through
serve's `from_snapshot`, runs under the defaults (no bind, no variable, no
file created), and `hutch snapshot inspect` shows what it suggested. With
explicit flags the caller's policy applies (the twin that shows the checks
see a bind, a variable and an audit file when they are there), and a
snapshot made locally still carries its sandbox's policy. As root and as
the unprivileged user, each with its own store."""

import hashlib
import io
import json
import os
import struct
import subprocess
import tarfile

import pytest

from test_serve import Api, read_line
from test_snapshots import hx, new_sandbox, zstd  # noqa: F401 (hx: the fixture)

SUM_FRAME_MAGIC = 0x184D2A50
SUM_FRAME_TAG = b"HUTCHSUM"
TOKEN = "tok-3b1f9e-never-inside"


def craft(h, evil_policy, dest, extra=None):
    """A real snapshot "base" exported, then rebuilt with the manifest's
    policy replaced by @evil_policy (and its other fields by @extra) and
    named "evil", recompressed and with its checksum frame recomputed,
    written to @dest."""
    new_sandbox(h, "src")
    h.ok("stop", "src")
    h.ok("snapshot", "src", "base")
    real = dest.parent / "base.tar.zst"
    h.ok("snapshot", "export", "base", "-o", real)
    # zstd skips the trailing skippable frame (the checksum) by itself.
    tar_bytes = subprocess.run(
        [zstd(), "-q", "-d", "-c", str(real)], check=True, capture_output=True
    ).stdout
    src = tarfile.open(fileobj=io.BytesIO(tar_bytes))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as out:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None
            if m.name == "manifest.json":
                j = json.loads(data)
                assert "policy" in j, j
                j["policy"] = evil_policy
                j["name"] = "evil"
                # What a forger would claim to pass for a local snapshot.
                j["imported"] = False
                j.update(extra or {})
                data = json.dumps(j).encode()
                m.size = len(data)
            out.addfile(m, io.BytesIO(data) if data is not None else None)
    body = subprocess.run(
        [zstd(), "-q", "-c"], input=buf.getvalue(), check=True, capture_output=True
    ).stdout
    frame = (
        struct.pack("<II", SUM_FRAME_MAGIC, len(SUM_FRAME_TAG) + 32)
        + SUM_FRAME_TAG
        + hashlib.sha256(body).digest()
    )
    dest.write_bytes(body + frame)


@pytest.fixture
def attack(hx):
    """(h, host secret folder, audit path, archive) with the crafted
    archive imported as snapshot "evil"."""
    h = hx
    secret = h.runner.make_dir(mode=0o755, name="secret")
    (secret / "key").write_text("host private key\n")
    h.chown(secret)
    loot = h.runner.make_dir(mode=0o755, name="auditdir")
    h.chown(loot)
    audit = loot / "planted.jsonl"
    evil = {
        "binds": [{"source": str(secret), "target": "/loot"}],
        "env_pass": ["SOME_TOKEN"],
        "allow_hosts": ["example.test"],
        "audit_log": str(audit),
    }
    out = h.workspace()
    archive = out / "evil.tar.zst"
    craft(h, evil, archive)
    assert h.ok("snapshot", "import", archive) == "evil\n"
    return h, secret, audit, archive, evil


def granted(h, name, secret, audit):
    """What sandbox @name got of the archive's policy: (bind visible,
    SOME_TOKEN's value inside, audit file on the host)."""
    r = h.run(
        "exec", name, "--", "sh", "-c",
        "cat /loot/key 2>/dev/null; echo \"token=${SOME_TOKEN:-}\"",
        env={"SOME_TOKEN": TOKEN},
    )
    assert r.returncode == 0, r.stderr
    return ("host private key" in r.stdout, TOKEN in r.stdout, audit.exists())


def test_imported_policy_grants_nothing(attack):
    h, secret, audit, _, evil = attack
    h.ok("create", "victim", "--from", "evil")
    assert granted(h, "victim", secret, audit) == (False, False, False)
    # It runs under the defaults: no network at all, no proxy.
    pol = h.record("victim")["policy"]
    assert not pol.get("binds") and not pol.get("env_pass") and not pol.get("audit_log"), pol
    assert pol.get("network", "none") == "none", pol
    # The record says where it came from; inspect shows the suggestion
    # without applying it.
    snap = json.loads((h.snapshot_dir("evil") / "snapshot.json").read_text())
    assert snap["imported"] is True and snap["suggested_policy"] == evil
    ins = json.loads(h.ok("snapshot", "inspect", "evil"))
    assert ins["imported"] is True and ins["policy"] is None
    assert ins["suggested_policy"] == evil


def test_explicit_flags_are_the_callers_policy(attack):
    """The twin: the same checks see a bind, a variable and an audit file
    when the caller asks for them."""
    h, secret, audit, _, _ = attack
    h.ok(
        "create", "mine", "--from", "evil", "-v", f"{secret}:/loot:ro",
        "--env-pass", "SOME_TOKEN", "--allow-host", "example.test", "--audit-log", audit,
    )
    assert granted(h, "mine", secret, audit) == (True, True, True)
    # Flags are the whole policy: one flag alone grants only itself.
    h.ok("create", "half", "--from", "evil", "--env-pass", "SOME_TOKEN")
    audit.unlink()
    assert granted(h, "half", secret, audit) == (False, True, False)


def test_serve_from_snapshot_takes_no_policy_from_the_archive(attack):
    h, secret, audit, _, _ = attack
    sock = h.state / "api.sock"
    proc = h.popen("serve", "--socket", sock)
    try:
        line = read_line(proc, 30)
        assert line == f"listening on unix:{sock}", (line, proc.stderr.read1(4096))
        api = Api(str(sock), h.runner.uid)
        api.ok("POST", "/v1/sandboxes", {"name": "viaapi", "from_snapshot": "evil"}, status=201)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert granted(h, "viaapi", secret, audit) == (False, False, False)


def test_local_snapshot_keeps_its_policy(hx):
    """Snapshots made here are not imported: `create --from` without flags
    still runs under the sandbox's policy (negative twin of the above)."""
    h = hx
    h.ok("create", "orig", "--env-pass", "SOME_TOKEN", "--hostname", "kept-host")
    h.ok("stop", "orig")
    h.ok("snapshot", "orig", "loc")
    h.ok("create", "fork", "--from", "loc")
    out = h.ok("exec", "fork", "--", "sh", "-c", 'echo "$SOME_TOKEN"; hostname',
               env={"SOME_TOKEN": TOKEN})
    assert out == f"{TOKEN}\nkept-host\n"
    ins = json.loads(h.ok("snapshot", "inspect", "loc"))
    assert ins["imported"] is False and ins["suggested_policy"] is None
    assert ins["policy"]["env_pass"] == ["SOME_TOKEN"]
    # An imported snapshot exported again passes its suggestion on, still
    # as a suggestion.
    out_dir = h.workspace()
    h.ok("snapshot", "export", "loc", "-o", out_dir / "loc.tar.zst")
    h.ok("snapshot", "import", out_dir / "loc.tar.zst", "--name", "loc2")
    ins = json.loads(h.ok("snapshot", "inspect", "loc2"))
    assert ins["imported"] is True and ins["policy"] is None
    assert ins["suggested_policy"]["env_pass"] == ["SOME_TOKEN"]
    h.ok("create", "fork2", "--from", "loc2")
    out = h.ok("exec", "fork2", "--", "sh", "-c", 'echo "${SOME_TOKEN:-unset}"',
               env={"SOME_TOKEN": TOKEN})
    assert out == "unset\n"
    h.ok("snapshot", "export", "loc2", "-o", out_dir / "loc2.tar.zst")
    h.ok("snapshot", "import", out_dir / "loc2.tar.zst", "--name", "loc3")
    ins = json.loads(h.ok("snapshot", "inspect", "loc3"))
    assert ins["suggested_policy"]["env_pass"] == ["SOME_TOKEN"]


def test_an_archives_origin_reaches_no_terminal(hx):
    """The origin an archive names is its author's text: `hutch snapshot
    ls` prints no control byte of it (an escape sequence would drive the
    user's terminal); --json carries it as JSON escapes."""
    h = hx
    archive = h.workspace() / "evil.tar.zst"
    craft(h, {}, archive, extra={"origin": "x\x1b]0;owned\x07\x1b[2Jy"})
    assert h.ok("snapshot", "import", archive) == "evil\n"
    text = h.ok("snapshot", "ls")
    line = [ln for ln in text.splitlines() if ln.startswith("evil ")]
    assert line and "x?]0;owned??[2Jy" in line[0], text
    assert "\x1b" not in text and "\x07" not in text, repr(text)
    listed = {e["name"]: e for e in json.loads(h.ok("snapshot", "ls", "--json"))}
    assert listed["evil"]["origin"] == "x\x1b]0;owned\x07\x1b[2Jy"
