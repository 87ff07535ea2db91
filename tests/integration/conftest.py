# SPDX-License-Identifier: LGPL-2.1-or-later
"""Fixtures for the integration suite: the real hutch binary, driven as a
user would, with tests/integration/probe/probe inside the sandbox.

Environment:
  HUTCH_BUILD_DIR       meson build dir (default: <repo>/build)
  HUTCH_TEST_MUST_WORK  "1": a skipped test counts as a failure (CI)

Privilege modes: the `sbx` fixture is parametrized over "root" (hutch run
by root, sandbox ids from /etc/subuid or the default base) and "user"
(hutch run by the unprivileged user `hutchtest`, single-id map). As a
non-root caller, "root" skips and "user" runs as the caller itself.
"""

import os
import pwd
import re
import shutil
import select
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("HUTCH_BUILD_DIR", REPO / "build")).resolve()
TEST_USER = "hutchtest"
DEFAULT_TIMEOUT = 30
# The documented default sub-id base when /etc/subuid has no range for root.
DEFAULT_SUBID_BASE = 0x70000000
SUBID_COUNT = 65536
# As root, a one-shot run maps onto a range of the machine's id pool
# (issue 15; src/lib/store/id-pool.h): 2^31 up, SUBID_COUNT ids a range.
ID_POOL_BASE = 1 << 31

# ---- microVM template folders (docs/vm.md "Templates") ----
# A store whose runtime folder is not on tmpfs keeps its VM templates (guest
# RAM) in /dev/shm/hutch-vm-UID-XXXXXX, recorded in its vm-templates.path:
# removing the store does not free them. Every fixture that removes a store
# in which a VM may have run calls free_vm_templates() first, and the
# session fails if a folder of a store it made is left (pytest_sessionfinish).
VM_TEMPLATE_DIR = re.compile(r"hutch-vm-[0-9]+-[A-Za-z0-9]{6}")
# Every folder made through tempfile.mkdtemp() in this session (stores live
# in them): a leftover template folder is this session's when the record
# its `store` file names is in one. Other suites may run on the machine at
# the same time; their folders are theirs.
SESSION_DIRS = []
_mkdtemp = tempfile.mkdtemp


def _recording_mkdtemp(*args, **kw):
    d = _mkdtemp(*args, **kw)
    SESSION_DIRS.append(os.path.realpath(d))
    return d


tempfile.mkdtemp = _recording_mkdtemp


def vm_template_dirs():
    """The microVM template folders in /dev/shm, of any user."""
    return {p for p in Path("/dev/shm").iterdir() if VM_TEMPLATE_DIR.fullmatch(p.name)}


def free_vm_templates(home):
    """Removes the /dev/shm folder of VM templates that the store @home
    records (if any): the guest RAM in it outlives the store otherwise."""
    try:
        text = (Path(home) / "vm-templates.path").read_text()
    except OSError:
        return
    p = Path(text)
    if p.parent == Path("/dev/shm") and VM_TEMPLATE_DIR.fullmatch(p.name):
        shutil.rmtree(p, ignore_errors=True)


def free_vm_templates_under(top, depth=4):
    """free_vm_templates() of every store up to @depth levels below @top (a
    runner's folder: its default store, servers' and tests' stores)."""
    for root, dirs, files in os.walk(top):
        if "vm-templates.path" in files:
            free_vm_templates(root)
        if len(Path(root).relative_to(top).parts) >= depth - 1:
            dirs.clear()


def vm_template_owner(folder):
    """The record (a store's vm-templates.path) that gave @folder out, from
    its `store` file, or None."""
    try:
        return (folder / "store").read_text()
    except OSError:
        return None


_VM_TEMPLATES_AT_START = set()


def pytest_sessionstart(session):
    _VM_TEMPLATES_AT_START.update(vm_template_dirs())


def pytest_sessionfinish(session, exitstatus):
    """Fails the run, naming them, if template folders of stores this
    session made are left in /dev/shm (a CI run was OOM-killed next to
    15 GiB of them)."""
    ours = list(SESSION_DIRS)
    # tmp_path's folders: this session's numbered base (pytest keeps no
    # public name for it once the session ends).
    factory = getattr(session.config, "_tmp_path_factory", None)
    if getattr(factory, "_basetemp", None):
        ours.append(os.path.realpath(factory._basetemp))
    left = []
    for d in sorted(vm_template_dirs() - _VM_TEMPLATES_AT_START):
        owner = vm_template_owner(d)
        if owner and any(owner.startswith(t + "/") for t in ours):
            left.append(f"{d} (of {owner})")
    if left:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        msg = "VM template folders left in /dev/shm by this session: " + ", ".join(left)
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr:
            tr.write_line(msg, red=True, bold=True)
        else:
            print(msg)


def is_pool_map(line):
    """Is @line ("0 OUTSIDE COUNT") a map onto one range of the id pool?"""
    parts = line.split()
    return (len(parts) == 3 and parts[0] == "0" and parts[2] == str(SUBID_COUNT)
            and int(parts[1]) >= ID_POOL_BASE
            and (int(parts[1]) - ID_POOL_BASE) % SUBID_COUNT == 0)
IS_ROOT = os.geteuid() == 0


def must_work():
    return os.environ.get("HUTCH_TEST_MUST_WORK") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With HUTCH_TEST_MUST_WORK=1 a skip is a failure (bwrap's rule)."""
    outcome = yield
    rep = outcome.get_result()
    if must_work() and rep.skipped and not hasattr(rep, "wasxfail"):
        reason = rep.longrepr
        if isinstance(reason, tuple) and len(reason) == 3:
            reason = reason[2]
        rep.outcome = "failed"
        rep.longrepr = f"skipped, but HUTCH_TEST_MUST_WORK=1 makes skips failures: {reason}"


def find_hutch():
    for cand in (BUILD / "hutch", BUILD / "src" / "cli" / "hutch"):
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    return None


def find_probe():
    cand = BUILD / "tests" / "integration" / "probe"
    if cand.is_file() and os.access(cand, os.X_OK):
        return cand
    return None


def subid_base(path, name="root", uid=0):
    """First range of @name (or @uid) in /etc/subuid-style @path with at
    least SUBID_COUNT ids, else the default base."""
    try:
        text = Path(path).read_text()
    except OSError:
        return DEFAULT_SUBID_BASE
    for line in text.splitlines():
        parts = line.strip().split(":")
        if len(parts) != 3 or parts[0] not in (name, str(uid)):
            continue
        try:
            start, count = int(parts[1]), int(parts[2])
        except ValueError:
            continue
        if count >= SUBID_COUNT:
            return start
    return DEFAULT_SUBID_BASE


class Runner:
    """Runs hutch as one privilege mode. `run()` returns a
    CompletedProcess with text stdout/stderr; `probe()` runs the probe
    inside a sandbox with its directory bound at /probe."""

    def __init__(self, mode, hutch, probe_dir, uid, gid, base_dir):
        self.mode = mode
        self.hutch = str(hutch)
        self.probe_dir = str(probe_dir)
        self.uid = uid
        self.gid = gid
        self.base_dir = Path(base_dir)
        self._n = 0

    @property
    def switches_user(self):
        return self.uid != os.geteuid()

    def argv(self, args, verb="run"):
        """The command line of `hutch VERB ARGS...` as this mode's caller;
        verb=None runs `hutch ARGS...`."""
        cmd = [self.hutch, *([verb] if verb else []), *[str(a) for a in args]]
        if self.switches_user:
            cmd = [
                "setpriv",
                f"--reuid={self.uid}",
                f"--regid={self.gid}",
                "--clear-groups",
                "--",
                *cmd,
            ]
        return cmd

    def env(self, extra=None):
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C.UTF-8",
        }
        if self.switches_user:
            env["HOME"] = str(self.base_dir)
            env["USER"] = TEST_USER
        else:
            env["HOME"] = os.environ.get("HOME", "/root")
            env["USER"] = pwd.getpwuid(os.geteuid()).pw_name
        env.update(extra or {})
        return env

    def popen(self, args, env=None, **kw):
        """`hutch run ARGS...` started with Popen (text mode by default)."""
        kw.setdefault("cwd", str(self.base_dir))
        kw.setdefault("text", True)
        kw.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.Popen(self.argv(args), env=self.env(env), **kw)

    def run(self, args, env=None, timeout=DEFAULT_TIMEOUT, input=None, verb="run", **kw):
        """`hutch run ARGS...` to completion, output captured."""
        kw.setdefault("cwd", str(self.base_dir))
        kw.setdefault("text", True)
        if input is None:
            kw.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run(
            self.argv(args, verb),
            env=self.env(env),
            input=input,
            capture_output=True,
            timeout=timeout,
            **kw,
        )

    def run_raw(self, args, **kw):
        """`hutch ARGS...` (no implicit "run")."""
        return self.run(args, verb=None, **kw)

    def probe_args(self, *verb, flags=()):
        return [*flags, "-v", f"{self.probe_dir}:/probe:ro", "--", "/probe/probe", *verb]

    def probe(self, *verb, flags=(), **kw):
        return self.run(self.probe_args(*verb, flags=flags), **kw)

    def fact(self, *verb, flags=(), **kw):
        """The probe's stdout, stripped; fails the test on any other exit."""
        r = self.probe(*verb, flags=flags, **kw)
        assert r.returncode == 0, f"probe {verb} exited {r.returncode}: {r.stderr}"
        return r.stdout.strip()

    def make_dir(self, mode=0o755, name="dir"):
        """A fresh directory that this mode's caller owns."""
        self._n += 1
        d = self.base_dir / f"{name}-{self._n}"
        d.mkdir(mode=mode)
        os.chmod(d, mode)
        if self.switches_user:
            os.chown(d, self.uid, self.gid)
        return d

    def chown(self, path):
        if self.switches_user:
            for p in [path, *Path(path).rglob("*")]:
                os.lchown(p, self.uid, self.gid)

    def expected_uid_map(self):
        if self.mode == "root":
            return f"0 {subid_base('/etc/subuid')} {SUBID_COUNT}"
        return f"0 {self.uid} 1"

    def expected_gid_map(self):
        if self.mode == "root":
            return f"0 {subid_base('/etc/subgid')} {SUBID_COUNT}"
        return f"0 {self.gid} 1"

    def run_map_ok(self, line, gid=False):
        """Is @line the uid (@gid: gid) map of this mode's one-shot run: as
        root a range of the id pool of its own, else expected_*_map()?"""
        if self.mode == "root":
            return is_pool_map(line)
        return line == (self.expected_gid_map() if gid else self.expected_uid_map())


def ensure_test_user():
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        pass
    r = subprocess.run(
        ["useradd", "-M", "-s", "/usr/sbin/nologin", TEST_USER],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        return None
    return pwd.getpwnam(TEST_USER)


def stage_binaries(base, hutch, probe):
    """Copies hutch and the probe into @base (mode 0755), so they run from
    a world-readable place whoever the caller is."""
    os.chmod(base, 0o755)
    shutil.copy2(hutch, base / "hutch")
    pdir = base / "probe-bin"
    pdir.mkdir(mode=0o755)
    os.chmod(pdir, 0o755)
    shutil.copy2(probe, pdir / "probe")
    os.chmod(base / "hutch", 0o755)
    os.chmod(pdir / "probe", 0o755)
    # hutch finds the programs it ships next to itself: hutch-proxy
    # (network mode allow), hutch-serve, hutch-archive (snapshot
    # export/import) and hutch-agent (the microVM's init, --backend vm).
    for helper in (BUILD / "src" / "proxy" / "hutch-proxy",
                   BUILD / "src" / "cli" / "hutch-serve",
                   BUILD / "src" / "cli" / "hutch-archive",
                   BUILD / "src" / "cli" / "hutch-image",
                   BUILD / "src" / "cli" / "hutch-pull",
                   BUILD / "src" / "guest" / "hutch-agent"):
        if helper.is_file():
            shutil.copy2(helper, base / helper.name)
            os.chmod(base / helper.name, 0o755)
    return base / "hutch", pdir


@pytest.fixture(scope="session")
def binaries():
    hutch, probe = find_hutch(), find_probe()
    if not hutch or not probe:
        pytest.fail(
            f"hutch or the probe is not built in {BUILD} (set HUTCH_BUILD_DIR or run ninja -C build)"
        )
    return hutch, probe


@pytest.fixture(scope="session")
def root_runner(binaries):
    if not IS_ROOT:
        pytest.skip("needs root: runs hutch as host root")
    base = Path(tempfile.mkdtemp(prefix="hutch-root-"))
    hutch, pdir = stage_binaries(base, *binaries)
    yield Runner("root", hutch, pdir, 0, 0, base)
    free_vm_templates_under(base)
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def user_runner(binaries):
    if IS_ROOT:
        if not shutil.which("setpriv"):
            pytest.skip("needs setpriv (util-linux) to run as an unprivileged user")
        pw = ensure_test_user()
        if pw is None:
            pytest.skip(f"cannot create the unprivileged user '{TEST_USER}' with useradd")
        uid, gid = pw.pw_uid, pw.pw_gid
    else:
        uid, gid = os.getuid(), os.getgid()
    base = Path(tempfile.mkdtemp(prefix="hutch-user-"))
    hutch, pdir = stage_binaries(base, *binaries)
    yield Runner("user", hutch, pdir, uid, gid, base)
    free_vm_templates_under(base)
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=["root", "user"])
def sbx(request):
    """The main containment cases run in both privilege modes."""
    return request.getfixturevalue(f"{request.param}_runner")


@pytest.fixture(scope="module")
def upstream():
    """A plain HTTP server on the host's 127.0.0.1 (proxyutil.Upstream: it
    answers what it was asked), one per test module."""
    from proxyutil import Upstream

    u = Upstream("127.0.0.1")
    yield u
    u.close()


@pytest.fixture(params=["root", "user"])
def store(request):
    """A persistent-sandbox store of its own (test_persistent.Store), as
    root and as the unprivileged user; finalize() removes its sandboxes and
    checks nothing was left. A module may name a subclass as STORE_CLASS."""
    from test_persistent import Store

    s = getattr(request.module, "STORE_CLASS", Store)(
        request.getfixturevalue(f"{request.param}_runner"))
    yield s
    s.finalize()


@pytest.fixture
def caller(request):
    """The Runner of the current caller: root in CI, else the user."""
    return request.getfixturevalue("root_runner" if IS_ROOT else "user_runner")


@pytest.fixture
def probe_dir(caller):
    """A world-readable directory holding only the probe, to bind at
    /probe (`-v DIR:/probe:ro`)."""
    return Path(caller.probe_dir)


@pytest.fixture
def hutch(caller):
    """hutch(args, **kw): runs the real binary (`hutch ARGS...`) as the
    current caller and returns the CompletedProcess (text stdout/stderr,
    timeout per call)."""
    return caller.run_raw


def node_package(name, spec, probe):
    """The directory of node package @name from HUTCH_TEST_NODE_MODULES, else
    from the tests' own per-user cache (~/.cache/hutch-tests/node), installed
    there with `npm install @spec` on first use; None when that fails. A
    package counts as there when its file @probe (relative) exists."""
    dirs = []
    if os.environ.get("HUTCH_TEST_NODE_MODULES"):
        dirs.append(Path(os.environ["HUTCH_TEST_NODE_MODULES"]))
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hutch-tests" / "node"
    dirs.append(cache / "node_modules")
    for d in dirs:
        if (d / name / probe).is_file():
            return d / name
    if not shutil.which("npm"):
        return None
    cache.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--silent", "--prefix", str(cache), spec],
        capture_output=True, text=True, timeout=300,
    )
    if r.returncode == 0 and (cache / "node_modules" / name / probe).is_file():
        return cache / "node_modules" / name
    return None


def wait_pidfds(pids, timeout):
    """Waits until every pid in @pids has exited (pidfd readable), at most
    @timeout seconds. Returns the pids still alive."""
    fds = {}
    for pid in pids:
        try:
            fds[os.pidfd_open(pid)] = pid
        except ProcessLookupError:
            continue
    alive = set(fds.values())
    try:
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        deadline = time.monotonic() + timeout
        while alive:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for fd, _ in poller.poll(int(left * 1000) + 1):
                alive.discard(fds[fd])
                poller.unregister(fd)
    finally:
        for fd in fds:
            os.close(fd)
    return alive


def proc_table():
    """{pid: (ppid, state, uid, cmdline)} of the host's processes."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = dict(
            line.split(":", 1) for line in status.splitlines() if ":" in line
        )
        table[int(entry)] = (
            int(fields["PPid"].strip()),
            fields["State"].strip()[:1],
            int(fields["Uid"].split()[0]),
            cmdline.replace(b"\0", b" ").decode(errors="replace"),
        )
    return table


def descendants(pid, table=None):
    table = table if table is not None else proc_table()
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for child, (ppid, *_rest) in table.items():
            if ppid == p and child not in out:
                out.add(child)
                todo.append(child)
    return out


def live_with_marker(marker):
    return {
        pid: info
        for pid, info in proc_table().items()
        if marker in info[3] and info[1] != "Z"
    }


def kill_quietly(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def parse_kv(line):
    """"a=1 b=2" -> {"a": "1", "b": "2"}."""
    return dict(tok.split("=", 1) for tok in line.split() if "=" in tok)

