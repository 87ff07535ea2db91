# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch inside containers (issue 25, docs/containers.md).

Part 1 runs on the host under a seccomp filter installed by the test (what
a container's profile does): clone3 answered with ENOSYS or EPERM, and
pivot_root answered with EPERM. hutch must fall back to clone() and to
move-mount + chroot, keep every wall, and report the second in the
outcome's `degraded` list.

Part 2 starts Debian's dockerd and podman with their own state
directories (containerutil.py) and runs hutch and the probe inside
containers: with the documented flags (as root and as a user), with the
default flags (the error names the missing flag), and with
`--cap-add SYS_ADMIN` under the default seccomp profile (the clone and
pivot fallbacks; the container's /proc only with --allow-degraded). The
hidden-path and escape probes run inside the nested sandbox each time,
with negative twins run in the same container outside hutch."""

import ctypes
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import containerutil as cu
from conftest import IS_ROOT

SYS_CLONE3 = 435
SYS_PIVOT_ROOT = 155
ENOSYS = 38
EPERM = 1
AUDIT_ARCH_X86_64 = 0xC000003E


def seccomp_preexec(rules):
    """A preexec_fn that sets no_new_privs and installs a filter answering
    each syscall number of @rules with its errno (x86_64 only; every other
    call and architecture is allowed)."""
    ins = [(0x20, 0, 0, 4),  # ld arch
           (0x15, 0, 2 * len(rules) + 1, AUDIT_ARCH_X86_64),
           (0x20, 0, 0, 0)]  # ld nr
    for nr, err in rules.items():
        ins.append((0x15, 0, 1, nr))
        ins.append((0x06, 0, 0, 0x00050000 | err))  # SECCOMP_RET_ERRNO
    ins.append((0x06, 0, 0, 0x7FFF0000))  # SECCOMP_RET_ALLOW
    filt = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in ins))

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Prog(len(ins), ctypes.addressof(filt))
    libc = ctypes.CDLL(None, use_errno=True)

    def fn():
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            os._exit(120)
        if libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
            os._exit(121)

    fn.keep = (filt, prog)
    return fn


CLONE3_ENOSYS = {SYS_CLONE3: ENOSYS}
CLONE3_EPERM = {SYS_CLONE3: EPERM}
NO_PIVOT = {SYS_CLONE3: ENOSYS, SYS_PIVOT_ROOT: EPERM}


def test_the_filter_answers_clone3_and_pivot_root():
    """Twin of the fallbacks below: the test's filter really refuses the
    two calls (and leaves getpid alone)."""
    code = ("import ctypes; l = ctypes.CDLL(None, use_errno=True); "
            "r = [l.syscall(435, None, 0), ctypes.get_errno(), "
            "l.syscall(155, None, None), ctypes.get_errno(), l.syscall(39) > 0]; print(r)")
    r = subprocess.run([sys.executable, "-c", code], preexec_fn=seccomp_preexec(NO_PIVOT),
                       capture_output=True, text=True)
    assert r.stdout.strip() == "[-1, 38, -1, 1, True]", r


def outcome_of(sbx, flags, verb, rules):
    d = sbx.make_dir()
    out = d / "outcome.json"
    r = sbx.probe(*verb, flags=["--json", str(out), *flags], preexec_fn=seccomp_preexec(rules))
    return r, (json.loads(out.read_text()) if out.exists() else None)


@pytest.mark.parametrize("rules", [CLONE3_ENOSYS, CLONE3_EPERM], ids=["enosys", "eperm"])
def test_clone3_refused_falls_back_to_clone_with_every_namespace(sbx, rules):
    r, o = outcome_of(sbx, [], ["ns", "user"], rules)
    assert r.returncode == 0, r.stderr
    assert "pivot_root" not in o["degraded"]
    # Every namespace is new: the probe's pid is 1's child, its ids mapped.
    assert sbx.run_map_ok(sbx.fact("uid-map", preexec_fn=seccomp_preexec(rules)))
    pids = [line.split()[0] for line in sbx.fact("ps", preexec_fn=seccomp_preexec(rules))
            .splitlines()]
    assert sorted(pids) == ["1", "2"]
    for ns in ("net", "ipc", "uts", "cgroup", "mnt"):
        inside = sbx.fact("ns", ns, preexec_fn=seccomp_preexec(rules))
        assert inside != os.readlink(f"/proc/self/ns/{ns}"), ns


def test_clone3_refused_without_fallback_fails_twin(sbx, tmp_path):
    """The unfixed hutch fails here; the fixed one only fails when clone()
    is refused too (then the error says so)."""
    rules = {SYS_CLONE3: ENOSYS, 56: EPERM}  # clone
    r = sbx.probe("pid", preexec_fn=seccomp_preexec(rules))
    assert r.returncode == 125
    assert "failed to create the sandbox namespaces" in r.stderr


def test_pivot_root_refused_falls_back_to_chroot_and_says_so(sbx):
    r, o = outcome_of(sbx, [], ["pid"], NO_PIVOT)
    assert r.returncode == 0, r.stderr
    assert "pivot_root" in o["degraded"]
    assert "procfs" not in o["degraded"]


def test_pivot_root_allowed_is_not_degraded_twin(sbx):
    r, o = outcome_of(sbx, [], ["pid"], CLONE3_ENOSYS)
    assert r.returncode == 0, r.stderr
    assert "pivot_root" not in o["degraded"]


def test_persistent_sandbox_reports_the_pivot_fallback(store):
    """A persistent sandbox made where pivot_root is refused says so in
    every exec's outcome; its twin, made without the filter, does not."""
    for name, rules in (("nopivot", NO_PIVOT), ("pivot", CLONE3_ENOSYS)):
        store.names.append(name)
        r = store.hutch("create", name, preexec_fn=seccomp_preexec(rules))
        assert r.returncode == 0, r.stderr
        # The keeper (and with it the sandbox) starts with the first exec.
        r, o = store.exec_json(name, "true", preexec_fn=seccomp_preexec(rules))
        assert r.returncode == 0, r.stderr
        assert ("pivot_root" in o["degraded"]) == (name == "nopivot"), (name, o)


ROOT_ALLOWED = {"bin", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "proc", "probe",
                "root", "run", "sbin", "tmp", "usr"}


def test_chroot_fallback_keeps_the_walls(sbx, tmp_path):
    """Under the move + chroot root: the host's root, /oldroot and the
    host's secrets stay out of reach, the root is a read-only tmpfs, and
    the classic chroot escape fails (no CAP_SYS_CHROOT, chroot denied)."""
    pre = seccomp_preexec(NO_PIVOT)
    marker = sbx.make_dir(name="marker")
    names = set(sbx.fact("ls", "/", preexec_fn=pre).split())
    assert names <= ROOT_ALLOWED, names - ROOT_ALLOWED
    assert sbx.fact("lstat", "/oldroot", preexec_fn=pre) == "ENOENT"
    assert sbx.fact("lstat", str(marker), preexec_fn=pre) == "ENOENT"
    r = sbx.probe("read", "/etc/shadow", preexec_fn=pre)
    assert (r.returncode == 0 and r.stdout == "") or r.stdout.startswith("E"), r.stdout
    assert "ro" in sbx.fact("statfs", "/", preexec_fn=pre)
    assert sbx.fact("chroot-escape", "/tmp", str(marker), preexec_fn=pre) == "EPERM"
    assert sbx.fact("syscall", "chroot", preexec_fn=pre) == "EPERM"
    assert sbx.fact("syscall", "unshare", preexec_fn=pre) == "EPERM"
    assert sbx.fact("caps", preexec_fn=pre).count("0000000000000000") == 5


def test_chroot_escape_probe_escapes_where_allowed_twin(tmp_path, binaries):
    """Negative twin of the escape probe: run by host root outside hutch,
    the same steps reach the real root and find the marker."""
    if not IS_ROOT:
        pytest.skip("needs root: chroot needs CAP_SYS_CHROOT")
    _, probe = binaries
    marker = tmp_path / "marker"
    marker.write_text("x")
    (tmp_path / "jail").mkdir()
    r = subprocess.run([str(probe), "chroot-escape", str(tmp_path / "jail"), str(marker)],
                       capture_output=True, text=True)
    assert r.stdout.strip() == "escaped found-marker", r


# ---- part 2: real containers ----

@pytest.fixture(scope="module")
def bindir(binaries, tmp_path_factory):
    d = tmp_path_factory.mktemp("hutch-in-container")
    cu.stage(d, *binaries)
    return d


def engine_fixture(cls):
    if not IS_ROOT:
        pytest.skip("needs root: starts a container engine")
    eng = cls()
    try:
        if eng.error:
            pytest.fail(eng.error)
        image = eng.import_image()
        yield eng, image
    finally:
        eng.close()


@pytest.fixture(scope="module")
def docker():
    yield from engine_fixture(cu.Dockerd)


@pytest.fixture(scope="module")
def podman():
    yield from engine_fixture(cu.Podman)


H = "/h/hutch"
DOCUMENTED = ["--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
              "--security-opt", "systempaths=unconfined"]
SYS_ADMIN = ["--cap-add", "SYS_ADMIN", "--security-opt", "apparmor=unconfined"]
PODMAN_RUN = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
SANDBOX_ROOT = {"bin", "dev", "etc", "h", "lib", "lib64", "proc", "root", "sbin", "tmp", "usr"}


def probe(*verb, flags=()):
    return [H, "run", "--json", "@OUTCOME@", *flags, "-v", "/h:/h:ro", "--", "/h/probe", *verb]


def containment_cases(flags=()):
    return [
        ["ps", probe("ps", flags=flags)],
        ["ls_root", probe("ls", "/", flags=flags)],
        ["oldroot", probe("lstat", "/oldroot", flags=flags)],
        ["marker", probe("lstat", cu.MARKER, flags=flags)],
        ["shadow", probe("read", "/etc/shadow", flags=flags)],
        ["escape", probe("chroot-escape", "/tmp", cu.MARKER, flags=flags)],
        ["unshare", probe("syscall", "unshare", flags=flags)],
        ["root_fs", probe("statfs", "/", flags=flags)],
        ["proc_fs", probe("mountinfo", "/proc", flags=flags)],
        ["proc1_root", probe("readlink", "/proc/1/root", flags=flags)],
        # Twins, outside hutch in the same container.
        ["twin_marker", ["/h/probe", "lstat", cu.MARKER]],
        ["twin_shadow", ["/h/probe", "read", "/etc/shadow"]],
        ["twin_escape", ["/h/probe", "chroot-escape", "/tmp", cu.MARKER]],
        ["twin_proc1_root", ["/h/probe", "readlink", "/proc/1/root"]],
    ]


def assert_contained(res, fallbacks, as_root):
    for name in ("ps", "ls_root", "oldroot", "marker", "shadow", "escape", "unshare", "root_fs",
                 "proc_fs", "proc1_root"):
        assert res[name]["rc"] == 0, (name, res[name])
    degraded = set(res["ps"]["outcome"]["degraded"]) & {"pivot_root", "procfs"}
    assert degraded == set(fallbacks), res["ps"]
    pids = [line.split()[0] for line in res["ps"]["out"].splitlines()]
    if "procfs" in fallbacks:
        # The container's pid namespace shows through, read-only.
        assert len(pids) > 2
        assert res["proc_fs"]["out"].startswith("opts=ro"), res["proc_fs"]
    else:
        assert sorted(pids) == ["1", "2"], res["ps"]
        assert "opts=rw" in res["proc_fs"]["out"], res["proc_fs"]
    # /proc/1 is hutch's non-dumpable init, or a container process that
    # landlock keeps the sandbox from (its root would be the container's).
    assert res["proc1_root"]["out"].strip() in ("EACCES", "EPERM"), res["proc1_root"]
    assert set(res["ls_root"]["out"].split()) <= SANDBOX_ROOT, res["ls_root"]
    assert res["oldroot"]["out"].strip() == "ENOENT"
    assert res["marker"]["out"].strip() == "ENOENT"
    assert cu.SHADOW_SECRET not in res["shadow"]["out"]
    assert res["escape"]["out"].strip() == "EPERM", res["escape"]
    assert res["unshare"]["out"].strip() == "EPERM"
    assert res["root_fs"]["out"].split()[1].startswith("flags=ro"), res["root_fs"]
    # The twins: the same probes see what the sandbox hides.
    assert res["twin_marker"]["out"].startswith("type=reg"), res["twin_marker"]
    assert res["twin_proc1_root"]["out"].strip() == "/", res["twin_proc1_root"]
    if as_root:
        assert cu.SHADOW_SECRET in res["twin_shadow"]["out"]
        assert res["twin_escape"]["out"].strip() == "escaped found-marker", res["twin_escape"]


LIMIT_CASES = [
    ["mem", [H, "run", "--memory", "64M", "--", "/bin/true"]],
    ["mem_degraded", [H, "run", "--json", "@OUTCOME@", "--allow-degraded", "--memory", "64M",
                      "--", "/bin/true"]],
]


def assert_limits(res, engine):
    """Limits are enforced where the container's cgroup is writable; where
    it is not, an explicit one is refused naming the fix, and runs as an
    rlimit with --allow-degraded."""
    if res["mem"]["rc"] == 0:
        assert "memory" not in res["mem_degraded"]["outcome"]["degraded"]
        return
    assert res["mem"]["rc"] == 125, res["mem"]
    assert "--allow-degraded" in res["mem"]["err"]
    assert f"{engine} run --privileged" in res["mem"]["err"], res["mem"]["err"]
    assert res["mem_degraded"]["rc"] == 0, res["mem_degraded"]
    assert "memory" in res["mem_degraded"]["outcome"]["degraded"]


@pytest.mark.parametrize("user", [None, "1000:1000"], ids=["root", "user"])
def test_docker_documented_flags_full_walls(docker, bindir, user):
    eng, image = docker
    res, _ = cu.run_case(eng, image, bindir, DOCUMENTED, containment_cases() + LIMIT_CASES,
                         user=user)
    assert_contained(res, [], as_root=user is None)
    assert_limits(res, "docker")


def test_docker_default_flags_name_the_missing_flag(docker, bindir):
    eng, image = docker
    res, _ = cu.run_case(eng, image, bindir, [], [
        ["run", [H, "run", "--", "/bin/true"]],
        ["doctor", [H, "doctor"]],
    ])
    assert res["run"]["rc"] == 125, res["run"]
    assert "failed to create the sandbox namespaces" in res["run"]["err"]
    assert "docker run --security-opt seccomp=unconfined" in res["run"]["err"], res["run"]
    assert res["doctor"]["rc"] == 1, res["doctor"]
    assert "docker run --security-opt seccomp=unconfined" in res["doctor"]["out"]


@pytest.mark.parametrize("user", [None, "1000:1000"], ids=["root", "user"])
def test_docker_sys_admin_default_seccomp_falls_back(docker, bindir, user):
    """--cap-add SYS_ADMIN with Docker's default seccomp profile: clone3
    is ENOSYS and pivot_root EPERM; hutch falls back and keeps its walls."""
    eng, image = docker
    flags = SYS_ADMIN + ["--security-opt", "systempaths=unconfined"]
    res, _ = cu.run_case(eng, image, bindir, flags, containment_cases() + [
        ["doctor", [H, "doctor"]],
    ], user=user)
    assert_contained(res, ["pivot_root"], as_root=user is None)
    assert res["doctor"]["rc"] == 0, res["doctor"]
    assert "pivot_root" in res["doctor"]["out"]


@pytest.mark.parametrize("user", [None, "1000:1000"], ids=["root", "user"])
def test_docker_masked_proc_refused_unless_allowed_degraded(docker, bindir, user):
    """Without systempaths=unconfined a fresh procfs is refused: the error
    names the flag; --allow-degraded binds the container's /proc
    read-only and says so, and the walls hold."""
    eng, image = docker
    res, _ = cu.run_case(eng, image, bindir, SYS_ADMIN, [
        ["run", [H, "run", "--", "/bin/true"]],
        ["doctor", [H, "doctor"]],
    ] + containment_cases(flags=["--allow-degraded"]), user=user)
    assert res["run"]["rc"] == 125, res["run"]
    assert "docker run --security-opt systempaths=unconfined" in res["run"]["err"], res["run"]
    assert "systempaths=unconfined" in res["doctor"]["out"], res["doctor"]
    assert_contained(res, ["pivot_root", "procfs"], as_root=user is None)


def test_podman_documented_flags_full_walls(podman, bindir):
    eng, image = podman
    res, _ = cu.run_case(eng, image, bindir, DOCUMENTED, containment_cases() + LIMIT_CASES,
                         extra_run=PODMAN_RUN)
    assert_contained(res, [], as_root=True)
    assert_limits(res, "podman")


def test_podman_default_flags_name_the_missing_flag(podman, bindir):
    eng, image = podman
    res, _ = cu.run_case(eng, image, bindir, [], [["run", [H, "run", "--", "/bin/true"]]],
                         extra_run=PODMAN_RUN)
    assert res["run"]["rc"] == 125, res["run"]
    assert "podman run --security-opt" in res["run"]["err"], res["run"]


def test_podman_sys_admin_default_seccomp(podman, bindir):
    eng, image = podman
    flags = SYS_ADMIN + ["--security-opt", "systempaths=unconfined"]
    res, _ = cu.run_case(eng, image, bindir, flags, containment_cases(), user="1000:1000",
                         extra_run=PODMAN_RUN)
    # Podman's default profile allows clone3 and pivot_root with SYS_ADMIN.
    assert_contained(res, [], as_root=False)


# ---- hutch's own containment tests, run inside a container ----

NESTED_TESTS = ["test_filesystem.py", "test_hardening.py", "test_identity.py"]


def run_nested_pytest(engine, image, flags, extra_run=()):
    """Runs NESTED_TESTS with Debian's python3 and pytest (the host's /usr)
    inside one container, as the container's root; the conftest there
    makes its own unprivileged user for the "user" mode."""
    repo = Path(__file__).resolve().parents[2]
    build = Path(os.environ.get("HUTCH_BUILD_DIR", repo / "build")).resolve()
    argv = ["run", "--rm", "--network", "none", *extra_run, "-v", "/usr:/usr:ro",
            "-v", f"{repo}/tests:/src/tests:ro", "-v", f"{build}:/build:ro",
            "-e", "HUTCH_BUILD_DIR=/build", "-e", "HUTCH_TEST_MUST_WORK=1",
            "-e", "PYTHONDONTWRITEBYTECODE=1", "-w", "/src/tests/integration", *flags, image,
            "/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", *NESTED_TESTS]
    return engine.cli(*argv, timeout=600)


def assert_nested_passed(r):
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0, out[-6000:] + r.stderr.decode(errors="replace")[-2000:]
    assert " passed" in out and "failed" not in out and "skipped" not in out, out[-2000:]


def test_docker_documented_flags_pass_hutchs_own_tests(docker):
    eng, image = docker
    # As root hutch idmaps the workspace and -v binds; the container's
    # overlayfs root does not support that, a tmpfs does.
    r = run_nested_pytest(eng, image, DOCUMENTED + ["--cap-add", "SYS_ADMIN"],
                          extra_run=["--tmpfs", "/tmp:rw,exec,mode=1777"])
    assert_nested_passed(r)


def test_docker_sys_admin_default_seccomp_pass_hutchs_own_tests(docker):
    """The same under Docker's default seccomp profile: through the clone
    and pivot_root fallbacks."""
    eng, image = docker
    flags = SYS_ADMIN + ["--security-opt", "systempaths=unconfined"]
    r = run_nested_pytest(eng, image, flags, extra_run=["--tmpfs", "/tmp:rw,exec,mode=1777"])
    assert_nested_passed(r)


def test_podman_documented_flags_pass_hutchs_own_tests(podman):
    eng, image = podman
    r = run_nested_pytest(eng, image, DOCUMENTED + ["--cap-add", "SYS_ADMIN"],
                          extra_run=PODMAN_RUN + ["--tmpfs", "/tmp:rw,exec,mode=1777"])
    assert_nested_passed(r)
