# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch-oci's systemd cgroups (issue 21, docs/oci.md "systemd cgroups"):
`--systemd-cgroup` and a cgroupsPath `slice:prefix:name` make the
container's cgroup a transient scope that systemd creates over D-Bus.

Against a REAL systemd: user-mode Linux (Debian's user-mode-linux, as in
test_cgroup_v2.py) boots systemd as PID 1 with cgroup v2 on a Debian root
filesystem made by mmdebstrap with systemd and dbus (debimage.py: the
host's own apt mirror, cached by package list). A unit in the guest runs a
script that drives the real hutch-oci (the build dir mounted through
hostfs) and writes one CHECK line per check to a file this test reads
back. The negative twins run here, on a host where systemd is not init:
the form is refused naming systemd, and a bad path is refused naming it,
with nothing left behind."""

import json
import os
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest

import debimage
import engines
from conftest import BUILD, IS_ROOT

pytestmark = pytest.mark.skipif(not IS_ROOT, reason="hutch-oci create and UML with hostfs run as root")

OCI = BUILD / "src" / "oci" / "hutch-oci"
UML = shutil.which("linux.uml")
BOOT_TIMEOUT = 600
# The guest's packages; the tar is cached under this list (debimage.py).
GUEST_PKGS = ("dbus", "systemd", "systemd-sysv")


def make_bundle(path, args, cgroups_path, resources=None):
    """A busybox bundle at @path running @args."""
    root = path / "rootfs"
    for d in ("bin", "proc", "dev", "tmp"):
        (root / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2(engines.BUSYBOX, root / "bin" / "busybox")
    for link in ("sh", "sleep", "tail", "echo"):
        if not (root / "bin" / link).exists():
            os.symlink("busybox", root / "bin" / link)
    config = {
        "ociVersion": "1.0.2",
        "process": {"args": args, "env": ["PATH=/bin"], "cwd": "/", "user": {"uid": 0, "gid": 0}},
        "root": {"path": "rootfs"},
        "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                   {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
                    "options": ["nosuid", "mode=755"]}],
        "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "ipc"},
                                 {"type": "uts"}]},
    }
    if cgroups_path is not None:
        config["linux"]["cgroupsPath"] = cgroups_path
    if resources:
        config["linux"]["resources"] = resources
    (path / "config.json").write_text(json.dumps(config))
    return path


def oci(tmp_path, *args, check=True):
    errf = tmp_path / "stderr"
    glob = [a for a in args if a == "--systemd-cgroup"]
    rest = [str(a) for a in args if a != "--systemd-cgroup"]
    with open(errf, "w") as err:
        r = subprocess.run([str(OCI), "--root", str(tmp_path / "state"), *glob, *rest],
                           stdout=subprocess.PIPE if rest[0] != "create" else subprocess.DEVNULL,
                           stderr=err, text=True, timeout=60, stdin=subprocess.DEVNULL)
    r.stderr = errf.read_text()
    if check:
        assert r.returncode == 0, r.stderr
    return r


@pytest.fixture
def host_bundle(tmp_path):
    if not OCI.exists():
        pytest.skip(f"{OCI} is not built")
    try:
        yield tmp_path
    finally:
        state = tmp_path / "state"
        for c in (state.iterdir() if state.exists() else ()):
            oci(tmp_path, "delete", "--force", c.name, check=False)
        for d in Path("/sys/fs/cgroup").glob("*/hutch-oci-sd-test"):
            subprocess.run(["rmdir", str(d / tmp_path.name), str(d)], capture_output=True)


def leftovers(name):
    """Cgroup directories named @name anywhere under /sys/fs/cgroup."""
    out = subprocess.run(["find", "/sys/fs/cgroup", "-maxdepth", "5", "-name", name],
                         capture_output=True, text=True).stdout
    return out.split()


def test_features_says_systemd():
    if not OCI.exists():
        pytest.skip(f"{OCI} is not built")
    f = json.loads(subprocess.run([str(OCI), "features"], capture_output=True, text=True,
                                  check=True).stdout)
    assert f["linux"]["cgroup"]["systemd"] is True, "hutch-oci was built without libsystemd"


def test_systemd_cgroup_without_systemd_fails_naming_it(host_bundle):
    """This host does not run systemd as init: --systemd-cgroup is an
    error naming systemd (no silent cgroupfs fallback), and nothing is
    left: no state, no cgroup, no process. Twin: the same bundle with a
    cgroupfs path and no flag is created."""
    tmp_path = host_bundle
    if os.path.exists("/run/systemd/system"):
        pytest.fail("this test needs a host where systemd is not init (it is here)")
    b = make_bundle(tmp_path / "b", ["sleep", "300"], "system.slice:hutch-sd-test:c1",
                    {"memory": {"limit": 64 << 20}})
    for args in (["--systemd-cgroup"], []):
        r = oci(tmp_path, *args, "create", "--bundle", b, "c1", check=False)
        assert r.returncode != 0
        assert "systemd is not running" in r.stderr, r.stderr
        assert not (tmp_path / "state" / "c1").exists()
        assert leftovers("hutch-sd-test-c1.scope") == []
        assert leftovers("system.slice") == [] or all(
            not Path(d, "hutch-sd-test-c1.scope").exists() for d in leftovers("system.slice"))
    procs = subprocess.run(["pgrep", "-f", "hutch-oci.*c1"], capture_output=True, text=True)
    assert procs.stdout.strip() == ""
    # Twin: a cgroupfs path, no flag.
    b = make_bundle(tmp_path / "b", ["sleep", "300"], f"/hutch-oci-sd-test/{tmp_path.name}")
    oci(tmp_path, "create", "--bundle", b, "c1")
    st = json.loads(oci(tmp_path, "state", "c1").stdout)
    assert st["status"] == "created"
    oci(tmp_path, "delete", "--force", "c1")


@pytest.mark.parametrize("path,flag,named", [
    ("a:b", False, "'a:b'"),
    ("a:b:c:d", False, "'a:b:c:d'"),
    ("system.slice:pre:..", False, "'..'"),
    ("system.slice:../x:name", False, "'../x'"),
    ("system.slice:pre:a/b", False, "'a/b'"),
    ("notaslice:pre:name", False, "'notaslice'"),
    ("-bad.slice:pre:name", False, "'-bad.slice'"),
    ("system.slice:pre:inner.slice", False, "slice"),
    ("/hutch-oci-sd-test/x", True, "'/hutch-oci-sd-test/x'"),
])
def test_bad_systemd_cgroups_path_is_refused_by_name(host_bundle, path, flag, named):
    """A cgroupsPath of bad form is refused, naming the field and the bad
    part, before anything is created (and before systemd is asked)."""
    tmp_path = host_bundle
    b = make_bundle(tmp_path / "b", ["sleep", "300"], path)
    r = oci(tmp_path, *(["--systemd-cgroup"] if flag else []), "create", "--bundle", b, "bad",
            check=False)
    assert r.returncode != 0
    assert "/linux/cgroupsPath" in r.stderr and named in r.stderr, r.stderr
    assert "systemd is not running" not in r.stderr
    assert not (tmp_path / "state" / "bad").exists()


# ---- a real systemd under user-mode Linux ----

UNIT = textwrap.dedent(
    """\
    [Unit]
    Description=hutch-oci systemd cgroups test
    Wants=dbus.service
    After=dbus.service basic.target

    [Service]
    Type=oneshot
    ExecStart=/bin/sh /hutch-test/run.sh
    StandardOutput=journal+console
    StandardError=journal+console
    """
)

# Runs in the guest, as root, with systemd as PID 1. One CHECK line per
# check in /hutch-test/results.
SCRIPT = textwrap.dedent(
    """\
    #!/bin/sh
    T=/hutch-test
    R=$T/results
    ST=/run/hutch-oci-test
    O=/build/src/oci/hutch-oci
    check() { echo "CHECK $*" >> $R; }
    finish() { check end; sync; systemctl poweroff --force --force; }
    trap finish EXIT
    exec > $T/log 2>&1
    set -x
    mkdir -p /build && mount -t hostfs -o {build} none /build || check mount-failed
    check v2 "$(stat -fc %T /sys/fs/cgroup)"
    check pid1 "$(cat /proc/1/comm)"
    for i in $(seq 300); do busctl status org.freedesktop.systemd1 >/dev/null 2>&1 && break; sleep 0.2; done
    state() { $O --root $ST state $1 | tr -d ' \\n' | sed -n "s/.*\\"$2\\":\\"*\\([^,\\"]*\\).*/\\1/p"; }
    create() {
        id=$1; shift
        $O --root $ST "$@" create --bundle $T/$id $id </dev/null >/dev/null 2>$T/$id.err
        rc=$?; check ${id}_create $rc "$(tr '\\n' ' ' < $T/$id.err)"
    }

    # c1: a sleeping container in a nested slice, with limits.
    create c1 --systemd-cgroup
    U=hutch-c1.scope
    PID=$(state c1 pid)
    CG=$(systemctl show -p ControlGroup --value $U)
    check c1_cgroup "$CG"
    check c1_props $(systemctl show -p ActiveState -p Delegate -p MemoryMax -p TasksMax -p CPUQuotaPerSecUSec -p CPUWeight -p Slice $U)
    check c1_in_scope "$(grep -cx "$PID" /sys/fs/cgroup$CG/cgroup.procs)"
    check c1_files "$(cat /sys/fs/cgroup$CG/memory.max)" "$(cat /sys/fs/cgroup$CG/pids.max)" "$(cat /sys/fs/cgroup$CG/cpu.max)" "$(cat /sys/fs/cgroup$CG/cpu.weight)"
    # The same unit again: refused, c1 untouched.
    create c1dup --systemd-cgroup
    check c1_after_dup "$(systemctl show -p ActiveState --value $U)" "$(grep -cx "$PID" /sys/fs/cgroup$CG/cgroup.procs)"
    $O --root $ST start c1; check c1_start $?
    check c1_status "$(state c1 status)"
    check c1_ps "$($O --root $ST ps --format json c1)" "$PID"
    check c1_exec "$($O --root $ST exec c1 sh -c 'read l < /proc/self/cgroup; echo $l')"
    echo '{"pids":{"limit":7}}' > $T/res.json
    $O --root $ST update --resources $T/res.json c1; rc=$?
    check c1_update $rc "$(systemctl show -p TasksMax --value $U)" "$(cat /sys/fs/cgroup$CG/pids.max)"
    $O --root $ST pause c1; rc=$?
    check c1_pause $rc "$(state c1 status)" "$(grep frozen /sys/fs/cgroup$CG/cgroup.events)"
    $O --root $ST resume c1; check c1_resume $? "$(state c1 status)"
    $O --root $ST kill --all c1 KILL; check c1_kill $?
    for i in $(seq 100); do [ "$(state c1 status)" = stopped ] && break; sleep 0.1; done
    $O --root $ST delete c1; check c1_delete $?
    check c1_units "$(systemctl list-units --all --no-legend 'hutch-c1*' | wc -l)"
    check c1_dir "$(test -e /sys/fs/cgroup$CG && echo left || echo gone)"

    # c2: an OOM inside (the shell stays, its child is the victim).
    create c2
    U=c2.scope
    CG=$(systemctl show -p ControlGroup --value $U)
    check c2_props $(systemctl show -p ActiveState -p MemoryMax -p MemorySwapMax -p Slice $U)
    $O --root $ST start c2
    for i in $(seq 600); do [ -e $T/c2/rootfs/tmp/done ] && break; sleep 0.1; done
    check c2_out "$(cat $T/c2/rootfs/tmp/done)"
    check c2_events "$(grep -E '^oom_kill ' /sys/fs/cgroup$CG/memory.events)"
    check c2_state "$(systemctl show -p ActiveState --value $U)"
    $O --root $ST delete --force c2; check c2_delete $?
    check c2_units "$(systemctl list-units --all --no-legend 'c2*' | wc -l)"
    check c2_dir "$(test -e /sys/fs/cgroup$CG && echo left || echo gone)"

    # c3: the default path (--systemd-cgroup, no cgroupsPath).
    create c3 --systemd-cgroup
    check c3_props $(systemctl show -p ActiveState -p Slice hutch-oci-c3.scope)
    $O --root $ST delete --force c3; check c3_delete $?
    check c3_units "$(systemctl list-units --all --no-legend 'hutch-oci-c3*' | wc -l)"

    # c5: a host that is not pure v2, as hutch-oci sees it: /sys/fs/cgroup
    # a tmpfs (the hybrid layout's top) in a mount namespace of its own.
    unshare -m sh -c "mount -t tmpfs none /sys/fs/cgroup && \
        $O --root $ST --systemd-cgroup create --bundle $T/c5 c5" </dev/null >/dev/null 2>$T/c5.err
    check c5_create $? "$(tr '\n' ' ' < $T/c5.err)"
    check c5_units "$(systemctl list-units --all --no-legend 'hutch-oci-c5*' | wc -l)" "$(ls $ST | grep -c c5)"

    # c4: no D-Bus daemon: systemd's own socket (root).
    systemctl stop dbus.socket dbus.service
    check c4_dbus "$(systemctl is-active dbus.service)"
    create c4 --systemd-cgroup
    check c4_props $(systemctl show -p ActiveState -p Slice hutch-oci-c4.scope)
    $O --root $ST delete --force c4; check c4_delete $?
    check c4_units "$(systemctl list-units --all --no-legend 'hutch-oci-c4*' | wc -l)"
    """
)


def extract_rootfs(tar, dest):
    dest.mkdir()
    subprocess.run(["tar", "-xpf", str(tar), "-C", str(dest), "--numeric-owner"], check=True)


@pytest.fixture(scope="module")
def guest():
    if not UML:
        pytest.skip("user-mode Linux is not installed (apt-get install user-mode-linux)")
    if not OCI.exists():
        pytest.skip(f"{OCI} is not built")
    tar = debimage.debian_rootfs_tar(include=GUEST_PKGS)
    work = Path(tempfile.mkdtemp(prefix="hutch-uml-sd-"))
    try:
        root = work / "root"
        extract_rootfs(tar, root)
        t = root / "hutch-test"
        t.mkdir()
        unit = root / "etc" / "systemd" / "system" / "hutch-test.service"
        unit.write_text(UNIT)
        (t / "run.sh").write_text(SCRIPT.replace("{build}", str(BUILD)))
        # The guest has no network and no terminal: leave out what waits
        # for them.
        for masked in ("systemd-networkd-wait-online.service", "getty@tty1.service",
                       "serial-getty@ttyS0.service", "systemd-timesyncd.service",
                       "apt-daily.timer", "apt-daily-upgrade.timer"):
            link = root / "etc" / "systemd" / "system" / masked
            if not link.exists():
                os.symlink("/dev/null", link)
        make_bundle(t / "c1", ["sleep", "300"], "hutch-test.slice:hutch:c1",
                    {"memory": {"limit": 64 << 20}, "pids": {"limit": 50},
                     "cpu": {"quota": 50000, "period": 100000, "shares": 1024}})
        make_bundle(t / "c1dup", ["sleep", "300"], "hutch-test.slice:hutch:c1")
        make_bundle(t / "c2", ["sh", "-c", "tail /dev/zero; echo victim=$? > /tmp/done; sleep 300"],
                    "hutch-test.slice::c2", {"memory": {"limit": 32 << 20, "swap": 32 << 20}})
        make_bundle(t / "c3", ["sleep", "300"], None)
        make_bundle(t / "c4", ["sleep", "300"], None)
        make_bundle(t / "c5", ["sleep", "300"], None)
        r = subprocess.run(
            [UML, "mem=768M", "root=/dev/root", "rootfstype=hostfs", f"rootflags={root}", "rw",
             "init=/lib/systemd/systemd", "systemd.unified_cgroup_hierarchy=1",
             "systemd.unit=hutch-test.service", "con=null", "con0=null,fd:1"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
            timeout=BOOT_TIMEOUT)
        results = (t / "results").read_text() if (t / "results").exists() else ""
        log = (t / "log").read_text() if (t / "log").exists() else ""
    finally:
        shutil.rmtree(work, ignore_errors=True)
    checks = {}
    for line in results.splitlines():
        parts = line.split(" ", 2)
        if len(parts) >= 2 and parts[0] == "CHECK":
            checks[parts[1]] = parts[2] if len(parts) > 2 else ""
    assert "end" in checks, (f"the guest did not finish (exit {r.returncode}):\n"
                             f"{r.stdout[-3000:]}\nscript log:\n{log[-3000:]}")
    return {"checks": checks, "log": log[-4000:]}


def check(guest, name):
    v = guest["checks"].get(name)
    assert v is not None, f"check {name} did not run:\n{guest['log']}"
    return v


def props(text):
    return dict(kv.split("=", 1) for kv in text.split())


def test_guest_runs_systemd_on_cgroup_v2(guest):
    assert check(guest, "pid1") == "systemd"
    assert check(guest, "v2") == "cgroup2fs"


def test_scope_holds_the_container_with_its_limits(guest):
    assert check(guest, "c1_create").startswith("0"), check(guest, "c1_create")
    # hutch-test.slice nests below hutch.slice ("-" in a slice name).
    assert check(guest, "c1_cgroup") == "/hutch.slice/hutch-test.slice/hutch-c1.scope"
    p = props(check(guest, "c1_props"))
    assert p["ActiveState"] == "active" and p["Delegate"] == "yes", p
    assert p["MemoryMax"] == str(64 << 20) and p["TasksMax"] == "50", p
    assert p["CPUQuotaPerSecUSec"] == "500ms" and p["Slice"] == "hutch-test.slice", p
    # shares 1024 is weight 39 (the runtime-spec's conversion, as runc).
    assert p["CPUWeight"] == "39", p
    assert check(guest, "c1_in_scope") == "1"
    assert check(guest, "c1_files").split() == [str(64 << 20), "50", "50000", "100000", "39"]


def test_existing_scope_is_refused(guest):
    dup = check(guest, "c1dup_create")
    assert not dup.startswith("0") and "hutch-c1.scope" in dup and "already exists" in dup, dup
    assert check(guest, "c1_after_dup").split() == ["active", "1"]


def test_lifecycle_commands_find_the_scope(guest):
    assert check(guest, "c1_start") == "0"
    assert check(guest, "c1_status") == "running"
    ps, pid = check(guest, "c1_ps").rsplit(" ", 1)
    assert json.loads(ps) == [int(pid)]
    # exec joins the scope (no cgroup namespace in this bundle).
    assert check(guest, "c1_exec") == "0::/hutch.slice/hutch-test.slice/hutch-c1.scope"
    assert check(guest, "c1_update").split() == ["0", "7", "7"]
    assert check(guest, "c1_pause").split() == ["0", "paused", "frozen", "1"]
    assert check(guest, "c1_resume").split() == ["0", "running"]
    assert check(guest, "c1_kill") == "0"


def test_delete_removes_the_scope(guest):
    assert check(guest, "c1_delete") == "0"
    assert check(guest, "c1_units") == "0"
    assert check(guest, "c1_dir") == "gone"


def test_oom_inside_the_scope_is_reported(guest):
    """The memory limit holds in the scope: the shell's child is the OOM
    killer's victim (137), memory.events of the scope counts it; the
    delete after it leaves no (failed) unit."""
    assert check(guest, "c2_create").startswith("0"), check(guest, "c2_create")
    p = props(check(guest, "c2_props"))
    assert p["MemoryMax"] == str(32 << 20) and p["Slice"] == "hutch-test.slice", p
    assert p["MemorySwapMax"] == "0", p
    assert check(guest, "c2_out") == "victim=137"
    assert int(check(guest, "c2_events").split()[1]) >= 1, check(guest, "c2_events")
    assert check(guest, "c2_delete") == "0"
    assert check(guest, "c2_units") == "0"
    assert check(guest, "c2_dir") == "gone"


def test_default_systemd_path_is_a_scope_in_system_slice(guest):
    assert check(guest, "c3_create").startswith("0"), check(guest, "c3_create")
    p = props(check(guest, "c3_props"))
    assert p == {"ActiveState": "active", "Slice": "system.slice"}, p
    assert check(guest, "c3_delete") == "0"
    assert check(guest, "c3_units") == "0"


def test_without_a_dbus_daemon_systemds_own_socket_serves(guest):
    """Nodes without dbus-daemon: hutch-oci (root) talks to systemd on
    its private socket; the scope is made and removed the same way."""
    assert check(guest, "c4_dbus") == "inactive"
    assert check(guest, "c4_create").startswith("0"), check(guest, "c4_create")
    p = props(check(guest, "c4_props"))
    assert p == {"ActiveState": "active", "Slice": "system.slice"}, p
    assert check(guest, "c4_delete") == "0"
    assert check(guest, "c4_units") == "0"


def test_not_pure_v2_is_refused_naming_it(guest):
    """systemd runs, but /sys/fs/cgroup is not cgroup2 (the top of a
    hybrid layout): refused naming why, no unit, no state."""
    c = check(guest, "c5_create")
    assert not c.startswith("0") and "cgroup v2" in c and "hybrid" in c, c
    assert check(guest, "c5_units").split() == ["0", "0"]
