# SPDX-License-Identifier: LGPL-2.1-or-later
"""The C API (include/hutch.h, docs/api-c.md) as a program outside this tree
uses it: `meson install --destdir` into a temporary directory, then
examples/run-command.c and tests/integration/capi-probe.c are compiled
with `cc $(pkg-config --cflags --libs hutch)` against that installation
and run, as root and as the unprivileged user `hutchtest` (which has no
home: every test has a store of its own in HUTCH_HOME).

capi-probe makes one API call per invocation (see its header); its
failures are {"error": errno, "message", "field"} on stdout, exit 1."""

import errno
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from conftest import BUILD, REPO, free_vm_templates, live_with_marker
from diskutil import data_of, has_image

# ---- the installation ----


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{cmd}: {r.stdout}{r.stderr}"
    return r.stdout


@pytest.fixture(scope="session")
def installed():
    """{destdir, libdir, run_command, capi_probe}: the tree installed into a
    temporary destdir and the two programs built against it."""
    base = Path(tempfile.mkdtemp(prefix="hutch-capi-"))
    os.chmod(base, 0o755)
    dest = base / "dest"
    sh(["meson", "install", "-C", str(BUILD), "--destdir", str(dest), "--no-rebuild",
        "--quiet"])
    pcs = list(dest.rglob("pkgconfig/hutch.pc"))
    assert len(pcs) == 1, f"hutch.pc installed: {pcs}"
    env = dict(os.environ, PKG_CONFIG_PATH=str(pcs[0].parent),
               PKG_CONFIG_SYSROOT_DIR=str(dest))
    flags = sh(["pkg-config", "--cflags", "--libs", "hutch"], env=env).split()
    libdir = pcs[0].parent.parent
    assert (libdir / "libhutch.so.1").exists()
    assert any(f == f"-L{libdir}" for f in flags), flags
    out = {"destdir": dest, "libdir": libdir, "flags": flags}
    for name, src in (("run_command", REPO / "examples" / "run-command.c"),
                      ("capi_probe", REPO / "tests" / "integration" / "capi-probe.c")):
        exe = base / name
        sh(["cc", "-std=gnu17", "-Wall", "-Wextra", "-Werror", str(src), "-o", str(exe),
            *flags, f"-Wl,-rpath,{libdir}"], env=env)
        out[name] = exe
    # Everything readable by the unprivileged caller.
    for p in [base, *base.rglob("*")]:
        if p.is_dir():
            os.chmod(p, 0o755)
    yield out
    shutil.rmtree(base, ignore_errors=True)


def test_installed_files(installed):
    dest = installed["destdir"]
    names = {p.name for p in dest.rglob("*") if p.is_file()}
    for want in ("hutch", "hutch-proxy", "hutch.h", "hutch.pc", "libhutch.so.1.0.0"):
        assert want in names, f"{want} not installed: {sorted(names)}"
    # hutch-proxy where proxy_binary_find() looks: $libexecdir/hutch next
    # to $bindir/hutch's parent.
    bins = list(dest.rglob("bin/hutch"))
    assert len(bins) == 1
    assert (bins[0].parent.parent / "libexec" / "hutch" / "hutch-proxy").exists()


def test_only_the_api_is_exported(installed):
    syms = sh(["nm", "-D", "--defined-only", str(installed["libdir"] / "libhutch.so.1")])
    names = {line.split()[-1].split("@")[0] for line in syms.splitlines() if line.strip()}
    names.discard("HUTCH_1.0")
    assert names, syms
    assert all(n.startswith("hutch_") for n in names), sorted(n for n in names
                                                             if not n.startswith("hutch_"))
    header = (REPO / "include" / "hutch.h").read_text()
    for n in names:
        assert f"{n}(" in header, f"{n} is exported but not in hutch.h"
    assert "hutch_run" in names and "hutch_file_read" in names


# ---- running the programs as root and as the user ----


class Api:
    """One store (HUTCH_HOME, HUTCH_STATE_DIR) of one Runner, driven
    through capi-probe; the keepers are the staged hutch (HUTCH_BINARY)."""

    def __init__(self, runner, installed):
        self.runner = runner
        self.installed = installed
        self.dir = runner.make_dir(mode=0o700, name="capi")
        self.home = self.dir / "home"
        self.state = self.dir / "state"
        self.names = []

    def env(self, extra=None):
        e = self.runner.env({
            "HUTCH_HOME": str(self.home),
            "HUTCH_STATE_DIR": str(self.state),
            "HUTCH_BINARY": self.runner.hutch,
        })
        for k, v in (extra or {}).items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
        return e

    def argv(self, exe, args):
        cmd = [str(exe), *[str(a) for a in args]]
        if self.runner.switches_user:
            cmd = ["setpriv", f"--reuid={self.runner.uid}", f"--regid={self.runner.gid}",
                   "--clear-groups", "--", *cmd]
        return cmd

    def run(self, exe, *args, env=None, input=None, text=True, timeout=60):
        return subprocess.run(self.argv(exe, args), env=self.env(env), input=input,
                              capture_output=True, text=text, timeout=timeout,
                              cwd=str(self.runner.base_dir),
                              stdin=None if input is not None else subprocess.DEVNULL)

    def probe(self, *args, **kw):
        return self.run(self.installed["capi_probe"], *args, **kw)

    def ok(self, *args, **kw):
        """The verb's JSON (or text) output; fails the test on an error."""
        r = self.probe(*args, **kw)
        assert r.returncode == 0, f"capi-probe {args}: {r.stdout}{r.stderr}"
        return json.loads(r.stdout)

    def read(self, name, path, *max_bytes):
        """hutch_file_read()'s bytes, as text; fails the test on an error."""
        r = self.probe("read", name, path, *max_bytes)
        assert r.returncode == 0, f"read {path}: {r.stdout}{r.stderr}"
        return r.stdout

    def err(self, *args, **kw):
        """The verb's error object; fails the test if it succeeded."""
        r = self.probe(*args, **kw)
        assert r.returncode == 1, f"capi-probe {args} exited {r.returncode}: {r.stdout}{r.stderr}"
        e = json.loads(r.stdout)
        assert e["ret"] == -e["error"] and e["message"], e
        assert "\n" not in e["message"]
        return e

    def create(self, name, *flags):
        self.names.append(name)
        out = self.ok("create", name, *flags)
        assert len(out["id"]) == 16, out
        return out["id"]

    def exec(self, name, *cmd, flags=(), **kw):
        """(CompletedProcess, outcome): the outcome is the last stderr line."""
        r = self.probe("exec", name, *flags, "--", *cmd, **kw)
        assert r.returncode == 0, f"exec {cmd}: {r.stdout}{r.stderr}"
        return r, json.loads(r.stderr.strip().splitlines()[-1])

    def keepers(self):
        want = f"HUTCH_HOME={self.home}".encode()
        out = []
        for pid in live_with_marker("__keeper"):
            try:
                if want in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                    out.append(pid)
            except OSError:
                continue
        return out

    def cleanup(self):
        for name in self.names:
            self.probe("destroy", name)
        free_vm_templates(self.home)
        assert self.keepers() == [], "a keeper outlived its sandbox's destroy"


@pytest.fixture
def api(sbx, installed):
    a = Api(sbx, installed)
    yield a
    a.cleanup()


def workspace(api, files=None):
    d = api.runner.make_dir(name="ws")
    for name, text in (files or {"a.txt": "hello\n"}).items():
        (d / name).write_text(text)
    api.runner.chown(d)
    return d


# ---- the example ----


def test_example_runs_a_command(api):
    # As the user without delegated cgroups, limits are rlimits (degraded).
    r = api.run(api.installed["run_command"], "--policy", '{"allow_degraded": true}',
                "--memory", "256m", "--timeout", "20s", "--",
                "sh", "-c", "echo from-the-sandbox; id -u; exit 3")
    assert r.returncode == 3, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:2] == ["from-the-sandbox", "0"], r.stdout
    outcome = json.loads(lines[-1])
    assert outcome["exit_code"] == 3 and outcome["reason"] == "exited"
    assert outcome["signal"] is None and isinstance(outcome["wall_ms"], int)


def test_example_names_the_bad_field(api):
    r = api.run(api.installed["run_command"], "--policy", '{"limits": {"memory": "12q"}}',
                "--", "true")
    assert r.returncode == 125
    assert "(policy field /limits/memory)" in r.stderr, r.stderr
    assert r.stdout == ""


def test_example_timeout(api):
    r = api.run(api.installed["run_command"], "--timeout", "1s", "--", "sleep", "30")
    outcome = json.loads(r.stdout.splitlines()[-1])
    assert outcome["reason"] == "timeout", r.stdout
    assert r.returncode == outcome["exit_code"] != 0


# ---- policies ----


@pytest.mark.parametrize("args, field", [
    (["--json", '{"limits": {"memory": "12q"}}'], "/limits/memory"),
    (["--json", '{"bogus": 1}'], "/bogus"),
    (["--json", '{"workspace": {"mode": "copy"}}'], "/workspace"),
    (["--limit", "memory=1k"], "/limits/memory"),
    (["--limit", "memory-swap=zz"], "/limits/memory_swap"),
    (["--limit", "walltime=1s"], "/limits"),
    (["--network", "sometimes"], "/network"),
    (["--env", "1BAD=x"], "/env"),
    (["--workdir", "relative"], "/workdir"),
    (["--allow-host", "exa mple.com"], "/allow_hosts"),
    (["--bind", "/tmp:relative"], "/binds"),
])
def test_policy_error_names_the_field(api, args, field):
    e = api.err("policy", *args)
    assert e["error"] == errno.EINVAL
    assert e["field"] == field, e


def test_policy_json_syntax_error_has_line(api):
    e = api.err("policy", "--json", '{\n"limits": ')
    assert e["error"] == errno.EINVAL
    assert "line 2" in e["message"], e


def test_policy_round_trip(api):
    p = api.ok("policy", "--json", '{"limits": {"memory": "512m"}, "env": {"A": "1"}}',
               "--limit", "pids=64", "--env", "B=2")
    assert p["limits"]["memory"] in ("512m", 512 << 20, "536870912")
    assert p["env"] == {"A": "1", "B": "2"}
    assert "pids" in p["limits"]


def test_bad_json_leaves_the_policy_unchanged(api):
    r = api.probe("policy", "--limit", "memory=512m",
                  "--json-try", '{"env": {"X": "1"}, "limits": {"pids": "x"}}')
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr.startswith("22 /limits/pids "), r.stderr
    p = json.loads(r.stdout)
    assert "env" not in p, p  # the document's first field was not kept either
    assert "memory" in p["limits"]


def test_validate_checks_the_host(api):
    e = api.err("policy", "--workspace", "/nonexistent-capi-ws")
    assert e["error"] == errno.ENOENT and "/nonexistent-capi-ws" in e["message"]


# ---- one-shot ----


def test_run_outcomes(api):
    r = api.probe("run", "--", "sh", "-c", "echo out; exit 7")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == "out\n"
    o = json.loads(r.stderr.splitlines()[-1])
    assert (o["exit_code"], o["reason"], o["signal"]) == (7, "exited", None)
    r = api.probe("run", "--", "sh", "-c", "kill -9 $$")
    o = json.loads(r.stderr.splitlines()[-1])
    assert (o["exit_code"], o["reason"], o["signal"]) == (137, "signaled", 9)
    r = api.probe("run", "--", "no-such-command-capi")
    o = json.loads(r.stderr.splitlines()[-1])
    assert o["exit_code"] == 127


def test_run_setup_failure_is_an_error(api):
    e = api.err("run", "--workspace", "/nonexistent-capi-ws", "--", "true")
    assert e["error"] == errno.ENOENT


# ---- persistent sandboxes ----


def test_lifecycle(api):
    ws = workspace(api)
    sid = api.create("life", "--workspace", f"{ws}:overlay")
    info = api.ok("get", "life")
    assert (info["name"], info["id"], info["running"], info["parent"]) == ("life", sid, False, "")
    assert api.ok("get", sid)["name"] == "life"  # the id is a name too
    r, o = api.exec("life", "sh", "-c", "cat a.txt; pwd; echo err >&2; exit 4")
    assert r.stdout == "hello\n/workspace\n"
    assert r.stderr.startswith("err\n")
    assert (o["exit_code"], o["reason"]) == (4, "exited")
    assert api.ok("get", "life")["running"] is True
    assert [s["name"] for s in api.ok("list-sandboxes")] == ["life"]
    assert api.ok("stop", "life") == {}
    assert api.ok("get", "life")["running"] is False
    assert api.keepers() == []
    assert api.ok("stop", "life") == {}  # not running: fine
    # Started again on demand.
    r, o = api.exec("life", "true")
    assert o["exit_code"] == 0
    e = api.err("create", "life")
    assert e["error"] == errno.EEXIST
    assert api.ok("destroy", "life") == {}
    assert api.err("get", "life")["error"] == errno.ENOENT
    assert api.keepers() == []
    assert api.ok("list-sandboxes") == []


def test_exec_options(api):
    api.create("opts")
    r, o = api.exec("opts", "sh", "-c", 'echo "$CAPI_X $(pwd)"',
                    flags=["--env", "CAPI_X=yes", "--cwd", "/tmp"])
    assert r.stdout == "yes /tmp\n"
    r, o = api.exec("opts", "sleep", "30", flags=["--timeout", "500"])
    assert o["reason"] == "timeout"
    r, o = api.exec("opts", "sh", "-c", "echo lost; exit 5", flags=["--no-stdio"])
    assert r.stdout == "" and o["exit_code"] == 5
    r = api.probe("exec", "opts", "--detach", "--", "sleep", "1")
    assert r.returncode == 0 and r.stderr.strip() == '{"detached":true}', r.stderr
    e = api.err("exec", "opts", "--cwd", "relative", "--", "true")
    assert e["error"] == errno.EINVAL


@pytest.mark.parametrize("verb", [["get"], ["stop"], ["destroy"], ["exec", "--", "true"],
                                  ["read", "/etc/hostname"], ["list", "/"],
                                  ["snapshot", "snap"], ["restore", "snap"], ["diff"]])
def test_unknown_sandbox(api, verb):
    e = api.err(verb[0], "no-such-sbx", *verb[1:])
    assert e["error"] == errno.ENOENT
    assert "no-such-sbx" in e["message"]


def test_invalid_names(api):
    assert api.err("create", "Bad_Name")["error"] == errno.EINVAL
    api.create("named")
    assert api.err("snapshot", "named", "Bad Snap")["error"] == errno.EINVAL
    assert api.err("restore", "named", "none-such")["error"] == errno.ENOENT


def test_missing_binary_is_named(api):
    api.create("nobin")
    e = api.err("exec", "nobin", "--", "true", env={"HUTCH_BINARY": "/nonexistent/hutch"})
    assert e["error"] == errno.ENOENT and "$HUTCH_BINARY" in e["message"], e
    installed = Path("/usr/local/bin/hutch")
    r = api.probe("exec", "nobin", "--", "true", env={"HUTCH_BINARY": None})
    if installed.exists():
        assert r.returncode == 0, r.stdout
    else:
        e = json.loads(r.stdout)
        assert e["error"] == errno.ENOENT and "HUTCH_BINARY" in e["message"], e


# ---- files inside a sandbox ----


def test_file_round_trip(api):
    ws = workspace(api)
    api.create("files", "--workspace", f"{ws}:overlay")
    check_file_round_trip(api, "files", ws)


def check_file_round_trip(api, name, ws):
    """Write, read, stat, list and remove in sandbox @name, whose
    workspace is the host folder @ws (overlay) with workspace()'s a.txt;
    test_vm_persist.py runs it on a VM sandbox."""
    assert api.read(name, "a.txt") == "hello\n"  # relative: the workspace
    assert api.read(name, "/workspace/a.txt") == "hello\n"
    api.ok("write", name, "new.txt", "640", input="written\n")
    st = api.ok("stat", name, "new.txt")
    assert (st["name"], st["type"], st["size"], st["mode"]) == ("new.txt", "file", 8, 0o640)
    r, _ = api.exec(name, "sh", "-c", "cat new.txt; stat -c '%u %a' new.txt")
    assert r.stdout == "written\n0 640\n"  # the sandbox's root owns it
    # An existing file keeps its mode.
    api.ok("write", name, "new.txt", "600", input="again")
    st = api.ok("stat", name, "new.txt")
    assert (st["size"], st["mode"]) == (5, 0o640)
    # What a command writes, the API reads, binary-safe.
    api.exec(name, "sh", "-c", "printf 'a\\000b\\377' > /root/bin.dat")
    r = api.probe("read", name, "/root/bin.dat", text=False)
    assert r.returncode == 0 and r.stdout == b"a\x00b\xff"
    names = [e["name"] for e in api.ok("list", name, "/workspace")]
    assert names == sorted(names) and {"a.txt", "new.txt"} <= set(names)
    home = {e["name"]: e for e in api.ok("list", name, "/root")}
    assert home["bin.dat"]["type"] == "file" and home["bin.dat"]["size"] == 4
    assert api.ok("stat", name, "/")["type"] == "dir"
    assert api.ok("remove", name, "new.txt") == {}
    assert api.err("stat", name, "new.txt")["error"] == errno.ENOENT
    # The host folder was never written (overlay).
    assert sorted(os.listdir(ws)) == ["a.txt"]


def test_relative_paths_without_workspace_are_home(api):
    api.create("homes")
    api.ok("write", "homes", "notes.txt", "644", input="x")
    r, _ = api.exec("homes", "cat", "/root/notes.txt")
    assert r.stdout == "x"


def test_file_errors(api):
    api.create("ferr")
    check_file_errors(api, "ferr")


def check_file_errors(api, name):
    """The errors of the file operations in sandbox @name: each its errno;
    test_vm_persist.py runs it on a VM sandbox."""
    api.exec(name, "sh", "-c", "mkdir -p /root/d/e && echo 123456 > /root/six")
    cases = [
        (["read", name, "/root/six", "3"], errno.EFBIG),
        (["read", name, "/root/d"], errno.EISDIR),
        (["read", name, "/dev/null"], errno.EINVAL),
        (["read", name, "/root/none"], errno.ENOENT),
        (["list", name, "/root/six"], errno.ENOTDIR),
        (["remove", name, "/root/d"], errno.ENOTEMPTY),
        (["remove", name, "/"], errno.EBUSY),
        (["read", name, ""], errno.EINVAL),
    ]
    for args, want in cases:
        e = api.err(*args)
        assert e["error"] == want, (args, e)
    assert api.read(name, "/root/six", "7") == "123456\n"
    e = api.err("write", name, "/usr/capi-nope", "644", input="x")
    assert e["error"] in (errno.EROFS, errno.EACCES, errno.EPERM), e
    e = api.err("write", name, "/root/d", "644", input="x")
    assert e["error"] == errno.EISDIR
    e = api.err("write", name, "/root/x", "4755", input="x")
    assert e["error"] == errno.EINVAL
    assert api.ok("remove", name, "/root/d/e") == {}


@pytest.fixture
def host_secret():
    """(path, secret): a file on the host, outside every sandbox, that the
    caller can read: if a path ever resolved on the host, it would be
    read."""
    d = Path(tempfile.mkdtemp(prefix="hutch-capi-secret-"))
    os.chmod(d, 0o755)
    secret = f"capi-secret-{uuid.uuid4().hex}"
    f = d / "secret"
    f.write_text(secret + "\n")
    os.chmod(f, 0o644)
    yield f, secret
    shutil.rmtree(d, ignore_errors=True)


def test_paths_never_reach_the_host(api, host_secret):
    ws = workspace(api)
    api.create("esc", "--workspace", f"{ws}:overlay")
    check_paths_never_reach_the_host(api, "esc", *host_secret)


def check_paths_never_reach_the_host(api, name, f, secret):
    """SECURITY: no path of a file operation in sandbox @name (with a
    workspace) reaches the host file @f (holding @secret): "..", symlinks
    and magic links are refused, never followed; test_vm_persist.py runs
    it on a VM sandbox."""
    api.exec(name, "sh", "-c",
             f"ln -s / /workspace/root-link; ln -s /proc/self/root /workspace/self-root;"
             f" ln -s {f} /workspace/direct; ln -s /proc/1/root /workspace/init-root;"
             f" mkdir -p /workspace/d")
    rel = "../" * 12 + str(f).lstrip("/")
    attempts = [
        (["read", name, rel], (errno.EXDEV,)),
        (["read", name, "d/" + rel], (errno.EXDEV,)),
        (["read", name, str(f)], (errno.ENOENT,)),
        (["read", name, f"/proc/1/root{f}"], (errno.ELOOP,)),
        (["read", name, f"/proc/self/root{f}"], (errno.ELOOP,)),
        (["read", name, f"/proc/self/cwd/{rel}"], (errno.ELOOP, errno.EXDEV)),
        (["read", name, f"root-link{f}"], (errno.ELOOP,)),
        (["read", name, f"self-root{f}"], (errno.ELOOP,)),
        (["read", name, f"init-root{f}"], (errno.ELOOP,)),
        (["read", name, "direct"], (errno.ELOOP,)),
        (["read", name, "/proc/1/root/etc/passwd"], (errno.ELOOP,)),
        (["list", name, "root-link"], (errno.ELOOP,)),
        (["list", name, "/proc/1/root"], (errno.ELOOP,)),
        (["stat", name, f"root-link{f}"], (errno.ELOOP,)),
        (["remove", name, f"root-link{f}"], (errno.ELOOP,)),
    ]
    for args, want in attempts:
        r = api.probe(*args)
        assert secret not in r.stdout and secret not in r.stderr, args
        assert r.returncode == 1, (args, r.stdout)
        assert json.loads(r.stdout)["error"] in want, (args, r.stdout)
    for args in (["write", name, f"root-link{f}", "644"], ["write", name, rel, "644"],
                 ["write", name, "direct", "644"]):
        r = api.probe(*args, input="overwritten\n")
        assert r.returncode == 1 or args[2] == "direct", (args, r.stdout)
    # "direct" itself was a symlink in the sandbox: replaced there, never
    # followed; the host file is as it was.
    assert f.read_text() == secret + "\n"
    assert api.read(name, "direct") == "overwritten\n"
    # A symlink is stat'ed and removed itself, not its target.
    st = api.ok("stat", name, "root-link")
    assert st["type"] == "symlink"
    assert api.ok("remove", name, "root-link") == {}
    assert Path("/").exists() and f.exists()


def test_masked_files_stay_masked(api):
    api.create("mask")
    host = Path("/etc/shadow").read_bytes()
    assert host  # the comparison means something
    r = api.probe("read", "mask", "/etc/shadow", text=False)
    assert r.returncode == 0 and r.stdout == b"", r.stdout[:200]


# ---- snapshots ----


def snapshot_running(api, name, snap):
    """Snapshots the running sandbox @name: a copy while it is frozen. The
    user without delegated cgroups cannot freeze it (as `hutch snapshot`):
    then it is stopped first, and the sandbox started again."""
    r = api.probe("snapshot", name, snap)
    if r.returncode != 0:
        e = json.loads(r.stdout)
        assert api.runner.mode == "user" and "cannot be frozen" in e["message"], e
        api.ok("stop", name)
        api.ok("snapshot", name, snap)
        api.exec(name, "true")


def test_snapshot_and_restore(api):
    ws = workspace(api)
    api.create("snp", "--workspace", f"{ws}:overlay")
    api.ok("write", "snp", "/root/v", "644", input="v1")
    api.ok("write", "snp", "a.txt", "644", input="ws-v1")
    snapshot_running(api, "snp", "snp-a")
    assert api.ok("get", "snp")["running"] is True
    api.ok("write", "snp", "/root/v", "644", input="v2")
    api.ok("write", "snp", "/root/extra", "644", input="x")
    assert api.ok("snapshots") == ["snp-a"]
    # An unknown snapshot changes nothing, not even the running state.
    assert api.err("restore", "snp", "snp-none")["error"] == errno.ENOENT
    assert api.ok("get", "snp")["running"] is True
    assert api.ok("restore", "snp", "snp-a") == {}
    info = api.ok("get", "snp")
    assert (info["running"], info["parent"]) == (False, "snp-a")
    assert api.keepers() == []
    with data_of(api.home, api.state, "snp") as data:
        uppers = list(data.glob("upper-*"))
    assert len(uppers) == 1, uppers  # the old layer is gone
    assert api.read("snp", "/root/v") == "v1"
    assert api.err("stat", "snp", "/root/extra")["error"] == errno.ENOENT
    assert api.read("snp", "a.txt") == "ws-v1"
    # A stopped sandbox: its layer becomes the snapshot's.
    api.ok("write", "snp", "/root/v", "644", input="v3")
    api.ok("stop", "snp")
    api.ok("snapshot", "snp", "snp-b")
    assert api.ok("get", "snp")["parent"] == "snp-b"
    api.ok("write", "snp", "/root/v", "644", input="v4")
    api.ok("restore", "snp", "snp-a")
    assert api.read("snp", "/root/v") == "v1"
    api.ok("restore", "snp", "snp-b")
    assert api.read("snp", "/root/v") == "v3"
    # In use: refused; once the sandbox is gone, removed.
    assert api.err("snapshot-rm", "snp-b")["error"] == errno.EBUSY
    assert api.err("snapshot-rm", "snp-a")["error"] == errno.EBUSY  # below snp-b
    api.ok("destroy", "snp")
    api.ok("snapshot-rm", "snp-b")
    api.ok("snapshot-rm", "snp-a")
    assert api.ok("snapshots") == []


def test_create_from_snapshot(api):
    api.create("base")
    api.ok("write", "base", "/root/f", "644", input="from-base")
    snapshot_running(api, "base", "base-1")
    api.create("fork", "--from", "base-1")
    assert api.read("fork", "/root/f") == "from-base"
    assert api.ok("get", "fork")["parent"] == "base-1"


# ---- the workspace ----


def test_diff_and_apply(api):
    ws = workspace(api)
    api.create("wsp", "--workspace", f"{ws}:overlay")
    api.ok("write", "wsp", "a.txt", "644", input="changed\n")
    api.ok("write", "wsp", "b.txt", "644", input="added\n")
    diff = api.ok("diff", "wsp")
    assert {(c["path"], c["kind"]) for c in diff} == {("a.txt", "modified"), ("b.txt", "added")}
    assert api.ok("apply", "wsp", "b.txt") == {"applied": 1}
    assert (ws / "b.txt").read_text() == "added\n" and (ws / "a.txt").read_text() == "hello\n"
    (ws / "a.txt").write_text("host edit\n")
    e = api.err("apply", "wsp")
    assert e["error"] == errno.EEXIST and "a.txt" in e["message"]
    assert (ws / "a.txt").read_text() == "host edit\n"
    assert api.ok("apply", "wsp", "--force") == {"applied": 1}
    assert (ws / "a.txt").read_text() == "changed\n"
    assert api.err("apply", "wsp", "../x")["error"] == errno.EINVAL
    api.create("nows")
    assert api.err("diff", "nows")["error"] == errno.EINVAL


@pytest.mark.parametrize("point, restored", [("reset-1", False), ("reset-2", True)])
def test_restore_is_crash_safe(api, point, restored):
    """Killed between the steps of store_sandbox_reset(): before the record
    (reset-1) the sandbox is as it was, after it (reset-2) it is restored;
    either way it works, and `hutch gc` removes the layer left behind."""
    api.create("crash")
    api.ok("write", "crash", "/root/v", "644", input="v1")
    api.ok("stop", "crash")
    api.ok("snapshot", "crash", "crash-1")
    api.ok("write", "crash", "/root/v", "644", input="v2")
    r = api.probe("restore", "crash", "crash-1", env={"HUTCH_TEST_CRASH_POINT": point})
    assert r.returncode == -9, (r.returncode, r.stdout)
    info = api.ok("get", "crash")
    assert info["running"] is False  # stopped before the reset began
    assert api.read("crash", "/root/v") == ("v1" if restored else "v2")
    api.ok("stop", "crash")
    image = has_image(api.home, "crash")
    with data_of(api.home, api.state, "crash") as data:
        # In a disk image the keeper that started for the read removed
        # the leftover (docs/persistent.md "Disk limit"); else gc does.
        assert len(list(data.glob("upper-*"))) == (1 if image else 2)
    gc = api.runner.run_raw(["gc"], env={"HUTCH_HOME": str(api.home),
                                         "HUTCH_STATE_DIR": str(api.state)})
    assert gc.returncode == 0, gc.stderr
    with data_of(api.home, api.state, "crash") as data:
        assert len(list(data.glob("upper-*"))) == 1
    assert api.read("crash", "/root/v") == ("v1" if restored else "v2")
    api.ok("restore", "crash", "crash-1")
    assert api.read("crash", "/root/v") == "v1"


def test_builtin_name_is_not_a_command(api):
    """argv[0] 0x01... names the file builtin inside init (sync.h): the
    keeper refuses it in a client's exec request."""
    api.create("builtin")
    e = api.err("exec", "builtin", "--", "\x01hutch-file", "stat", "/", "0", "0")
    assert "malformed exec request" in e["message"], e
    r, o = api.exec("builtin", "true")
    assert o["exit_code"] == 0
