# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch on hosts whose mount table looks like real machines' (issue 24):
with a network namespace file (`ip netns add`), a mount point whose path
holds spaces, tabs, a newline and a backslash (escaped by the kernel), an
nsfs bind of another namespace type, pseudo filesystems (binfmt_misc,
fusectl), a mount whose source is empty, and a running Docker container
(Debian's dockerd, started here with a data root of its own; its
containers' cgroups sit in the host's hierarchies under docker/).

Each setup is made in a private mount namespace of the test's own
(engines.MountNamespace), and hutch runs inside it: hutch reads the same
/proc/self/mountinfo as on such a host, while the other users of this
machine never see the test's mounts, and every mount goes away with the
namespace whatever happens. Under each setup the core cases run as root
and as the unprivileged user (plain, and in delegated cgroups where limits
need them): hutch run, memory and pids limits really enforced (OOM kill,
fork refused) with their twins, hutch create/exec with a pids limit,
hutch doctor reporting cgroups usable, and runs in parallel while other
managers' cgroups (libpod_parent/, system.slice/) are created and removed
next to them.

The netns, nsfs, empty-source and docker setups make every case fail
before the fix (exit 125, "failed to detect the cgroup layout: Bad
message"); the escaped mount point and the pseudo filesystems guard what
already worked."""

import contextlib
import json
import os
import re
import shutil
import threading
import uuid
from pathlib import Path

import pytest

import cgroupctl
import engines
from conftest import IS_ROOT, Runner
from test_limits import delegated, user_modes  # noqa: F401 (fixture)
from test_persistent import Store

PY = "/usr/bin/python3"
MIB = 1 << 20
BOMB = [PY, "-c", "x = b'x' * (200 << 20); print(len(x))"]
NET = ["--timeout", "20s"]
# Forks 40 sleepers; under --pids 16 a fork fails and sh gives up.
FORKS = "for i in $(seq 40); do sleep 0.2 & done; wait; echo all"

SETUPS = ["netns", "escaped-mount-point", "nsfs-uts", "pseudo-fs", "empty-source", "docker"]


class Host:
    """A private mount namespace set up as one kind of host."""

    def __init__(self, kind, ns, tmp):
        self.kind, self.ns, self.tmp = kind, ns, tmp
        self.undo = []  # argv lists run in the namespace at the end
        self.docker = None
        self.container = None
        # What the setup must have put in mountinfo: a regex on one line.
        self.expect = None

    def mount(self, *argv, target):
        self.ns.run(["mount", *argv, target])
        self.undo.append(["umount", target])

    def setup(self, stack):
        tag = uuid.uuid4().hex[:8]
        if self.kind == "netns":
            name = f"hutchtest-{tag}"
            self.ns.run(["ip", "netns", "add", name])
            self.undo.append(["ip", "netns", "del", name])
            self.expect = rf"^\d+ \d+ \d+:\d+ net:\[\d+\] /run/netns/{name} .* - nsfs "
        elif self.kind == "escaped-mount-point":
            d = self.tmp / "a b\tc\nd\\e"
            d.mkdir()
            self.mount("-t", "tmpfs", "-o", "size=1m", "hutchtest", target=d)
            self.expect = r" /\S*/a\\040b\\011c\\012d\\134e .* - tmpfs hutchtest "
        elif self.kind == "nsfs-uts":
            f = self.tmp / "uts"
            f.touch()
            self.mount("--bind", "/proc/self/ns/uts", target=f)
            self.expect = rf"^\d+ \d+ \d+:\d+ uts:\[\d+\] {re.escape(str(f))} .* - nsfs "
        elif self.kind == "pseudo-fs":
            for fs in ("binfmt_misc", "fusectl"):
                d = self.tmp / fs
                d.mkdir()
                self.mount("-t", fs, fs, target=d)
            self.expect = rf" {re.escape(str(self.tmp))}/fusectl .* - fusectl fusectl "
        elif self.kind == "empty-source":
            d = self.tmp / "empty-source"
            d.mkdir()
            self.mount("-t", "tmpfs", "-o", "size=1m", "", target=d)
            self.expect = rf" {re.escape(str(d))} .* - tmpfs  rw"
        elif self.kind == "docker":
            why = engines.docker_available()
            if why:
                pytest.skip(why)
            self.docker = stack.enter_context(
                engines.dockerd(self.tmp, prefix=self.ns.wrap([])))
            image = engines.busybox_image(self.docker, f"hutchtest-busybox:{tag}")
            self.container = self.docker.run_detached(image, "/bin/sleep", "1000")
            self.expect = (rf"^\d+ \d+ \d+:\d+ net:\[\d+\] "
                           rf"{re.escape(str(self.docker.exec_root))}/netns/\S+ .* - nsfs ")
        else:
            raise AssertionError(self.kind)

    def teardown(self):
        problems = []
        for argv in reversed(self.undo):
            r = self.ns.run(argv, check=False)
            if r.returncode != 0:
                problems.append(f"{argv}: {r.stderr.strip()}")
        return problems


@pytest.fixture(scope="module", params=SETUPS)
def host(request, tmp_path_factory):
    if not IS_ROOT:
        pytest.skip("needs root: mounts, ip netns and dockerd")
    tmp = tmp_path_factory.mktemp(f"host-{request.param}")
    os.chmod(tmp, 0o755)
    problems = []
    with engines.mount_namespace() as ns, contextlib.ExitStack() as stack:
        h = Host(request.param, ns, tmp)
        try:
            h.setup(stack)
            yield h
        finally:
            problems = h.teardown()
    shutil.rmtree(tmp, ignore_errors=True)
    assert not problems, problems


class NsRunner(Runner):
    """@inner (a conftest Runner, or test_limits' DelegatedRunner) with
    every hutch command run inside the host's mount namespace."""

    def __init__(self, inner, host):
        super().__init__(inner.mode, inner.hutch, inner.probe_dir, inner.uid, inner.gid,
                         inner.base_dir)
        self.inner, self.host = inner, host

    def argv(self, args, verb="run"):
        return self.host.ns.wrap(self.inner.argv(args, verb))

    def make_dir(self, *args, **kw):
        return self.inner.make_dir(*args, **kw)


def in_host(host, runner):
    return NsRunner(runner, host)


@pytest.fixture(params=["root", "user"])
def sbx_here(request, host):
    """conftest's sbx (root, the unprivileged user) inside the host."""
    return in_host(host, request.getfixturevalue(f"{request.param}_runner"))


@pytest.fixture(params=["root", *user_modes()])
def lim_here(request, host):
    """Where limits are enforced (root, the user in delegated cgroups),
    inside the host."""
    if request.param == "root":
        return in_host(host, request.getfixturevalue("root_runner"))
    make = request.getfixturevalue("delegated")
    return in_host(host, make(v1=True, v2=request.param == "user-hybrid"))


def run_json(runner, flags, cmd, **kw):
    out = runner.make_dir(name="out") / "outcome.json"
    r = runner.run([*flags, "--json", out, "--", *cmd], **kw)
    assert out.exists(), f"no outcome (exit {r.returncode}): {r.stderr}"
    return r, json.loads(out.read_text())


# ---- the setup is there ----


def test_the_host_has_the_line(host):
    """The setup really put its line in the mountinfo hutch reads."""
    lines = host.ns.mountinfo().splitlines()
    assert any(re.search(host.expect, ln) for ln in lines), (host.expect, lines[-10:])
    if host.docker:
        r = host.docker.docker("inspect", "--format", "{{.State.Running}}", host.container)
        assert r.stdout.strip() == "true"
        # Its cgroups are in the host's hierarchies, next to hutch's.
        assert engines.container_cgroups(host.container), host.container


# ---- hutch run ----


def test_run_works(host, sbx_here):
    r = sbx_here.probe("hostname")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hutch\n"
    assert "cgroup layout" not in r.stderr, r.stderr


def test_memory_limit_is_enforced(host, lim_here):
    r, o = run_json(lim_here, ["--memory", "32m", *NET], BOMB)
    assert r.returncode == 137, (r.returncode, r.stderr)
    assert o["reason"] == "oom", o
    assert r.stdout == ""


def test_memory_limit_twin_fits(host, lim_here):
    r, o = run_json(lim_here, ["--memory", "512m", *NET], BOMB)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{200 * MIB}\n"
    assert o["reason"] == "exited" and o["degraded"] == [], o


def test_pids_limit_is_enforced(host, lim_here):
    r, o = run_json(lim_here, ["--pids", "16", *NET], ["sh", "-c", FORKS])
    assert o["reason"] == "pids", (o, r.stderr[-500:])
    assert r.returncode != 0 and "all" not in r.stdout
    assert "fork" in r.stderr, r.stderr[-500:]


def test_pids_limit_twin_fits(host, lim_here):
    r, o = run_json(lim_here, ["--pids", "64", *NET], ["sh", "-c", FORKS])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "all\n"
    assert o["reason"] == "exited" and o["degraded"] == [], o


# ---- hutch create / exec ----


def test_create_and_exec(host, sbx_here):
    s = Store(sbx_here)
    try:
        s.create("box")
        assert s.sh("box", "echo hi; hostname") == "hi\nhutch\n"
        assert s.state_of("box") == "running"
    finally:
        s.finalize()


def test_create_with_a_pids_limit_is_enforced_on_exec(host, lim_here):
    s = Store(lim_here)
    try:
        s.create("box", "--pids", "16")
        r = s.exec("box", "sh", "-c", FORKS)
        assert r.returncode != 0 and "all" not in r.stdout, (r.returncode, r.stdout)
        assert "fork" in r.stderr, r.stderr[-500:]
        # Twin: a few processes fit.
        assert s.sh("box", "for i in 1 2 3; do sleep 0.1 & done; wait; echo ok") == "ok\n"
    finally:
        s.finalize()


# ---- hutch doctor ----


def cgroups_line(out):
    lines = [ln for ln in out.splitlines() if ln.startswith("cgroups ")]
    assert len(lines) == 1, out
    return lines[0]


def test_doctor_reports_cgroups_usable(host, lim_here):
    r = lim_here.run_raw(["doctor"])
    assert r.returncode == 0, r.stdout + r.stderr
    line = cgroups_line(r.stdout)
    assert re.match(r"cgroups\s+ok\s", line), line
    assert "memory: " in line and "(writable)" in line, line


def test_doctor_as_a_plain_user_is_not_missing(host, user_runner):
    """Without delegated cgroups the user gets "degraded" here, never
    "missing" (which is what the detection failing says)."""
    r = in_host(host, user_runner).run_raw(["doctor"])
    assert r.returncode == 0, r.stdout + r.stderr
    line = cgroups_line(r.stdout)
    assert re.match(r"cgroups\s+(ok|degraded)\s", line), line


# ---- other managers' cgroups, created and removed meanwhile ----


def other_managers_dirs(tag):
    """(parent, group) pairs where Podman and systemd put their groups,
    in every hierarchy."""
    out = []
    for m in cgroupctl.cgroup_mounts():
        top = Path(m["mount_point"])
        out.append((top / "libpod_parent", f"libpod-{tag}"))
        out.append((top / f"hutchtest-{tag}.slice", f"run-u{tag}.scope"))
    return out


def churn(pairs, stop, errors):
    """Creates and removes the groups of @pairs (and the parents that are
    missing) until @stop is set."""
    try:
        while not stop.is_set():
            for parent, name in pairs:
                parent.mkdir(exist_ok=True)
                (parent / name).mkdir()
            for parent, name in pairs:
                (parent / name).rmdir()
            stop.wait(0.005)
    except OSError as e:
        errors.append(e)


def test_runs_while_other_cgroups_come_and_go(host, lim_here):
    """Parallel runs, each with a pids limit (3 that hit it, 3 twins that
    fit), while other managers' groups are created and removed in every
    hierarchy."""
    tag = uuid.uuid4().hex[:8]
    pairs = other_managers_dirs(tag)
    existed = {p for p, _ in pairs if p.exists()}
    stop, errors, results = threading.Event(), [], []
    t = threading.Thread(target=churn, args=(pairs, stop, errors))

    def one(flags):
        results.append(run_json(lim_here, [*flags, *NET], ["sh", "-c", FORKS]))

    runs = [threading.Thread(target=one, args=(["--pids", n],)) for n in ["16", "64"] * 3]
    t.start()
    try:
        for r in runs:
            r.start()
        for r in runs:
            r.join(timeout=120)
    finally:
        stop.set()
        t.join(timeout=30)
        for parent, name in pairs:
            for d in [parent / name] + ([] if parent in existed else [parent]):
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
    assert not errors, errors
    assert len(results) == 6, results
    reasons = sorted(o["reason"] for _, o in results)
    assert reasons == ["exited"] * 3 + ["pids"] * 3, [(r.stderr[-300:], o) for r, o in results]
    assert all(r.stdout == "all\n" for r, o in results if o["reason"] == "exited")
    assert not [p for p, n in pairs if (p / n).exists()]
