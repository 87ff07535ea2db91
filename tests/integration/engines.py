# SPDX-License-Identifier: LGPL-2.1-or-later
"""Other container engines on the test host, started and removed by the
tests themselves, so that hutch can be tested next to them as it runs on
real machines (issue 24):

 - dockerd(tmp_path, prefix=()): a context manager that starts dockerd
   (Debian's dockerd package) with its own data root, exec root, socket,
   pid file and containerd namespace: no systemd, no iptables, no bridge,
   no network access. It yields a Dockerd with .docker(*args) (Debian's
   /usr/bin/docker client, `-H unix://SOCK`) and .sock. On the way out,
   even after a failure, it removes every container it saw, stops the
   daemon and the containerd it started (by pid), kills what is left of
   either (container processes, shims) by pid, and removes its
   directories. @prefix runs the daemon under a wrapper, such as nsenter
   into a mount namespace.
 - busybox_image(d, name): imports an image NAME made offline from Debian's
   busybox-static (/bin/busybox plus symlinks sh, sleep, ...) and returns
   its name.
 - MountNamespace: a private mount namespace held open by a process of
   its own, to add mounts that only the test's processes see; its mounts
   go away with it, whatever happens.

Every wait is a bounded poll on the daemon's socket or a pidfd, never a
fixed sleep."""

import contextlib
import io
import json
import os
import signal
import subprocess
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

from conftest import wait_pidfds

DOCKER = "/usr/bin/docker"
DOCKERD_CANDIDATES = ("/usr/bin/dockerd", "/usr/sbin/dockerd")
BUSYBOX = "/bin/busybox"
BUSYBOX_LINKS = ("sh", "sleep", "cat", "echo", "ls", "true")
START_TIMEOUT = 60
STOP_TIMEOUT = 30


def dockerd_path():
    """Debian's dockerd, or None."""
    for p in DOCKERD_CANDIDATES:
        if os.access(p, os.X_OK):
            return p
    return None


def docker_available():
    """None when dockerd can be started here, else why not."""
    if os.geteuid() != 0:
        return "dockerd needs root"
    if not dockerd_path() or not os.access(DOCKER, os.X_OK):
        return "Debian's Docker package (dockerd, /usr/bin/docker) is not installed (tools/deps.sh test)"
    if not os.access(BUSYBOX, os.X_OK):
        return "busybox-static (/bin/busybox) is not installed"
    return None


def _cmdline(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace"
        )
    except OSError:
        return ""


def _kill_if(pid, marker):
    """SIGKILLs @pid if its command line still holds @marker (so a pid
    reused by someone else is never touched). Returns whether it did."""
    if pid and marker in _cmdline(pid):
        try:
            os.kill(pid, signal.SIGKILL)
            return True
        except ProcessLookupError:
            pass
    return False


def _pids_with(marker):
    """The pids whose command line holds @marker."""
    out = []
    for e in os.listdir("/proc"):
        if e.isdigit() and int(e) != os.getpid() and marker in _cmdline(int(e)):
            out.append(int(e))
    return out


def container_cgroups(cid, top="/sys/fs/cgroup", depth=4):
    """The cgroup directories of container @cid, in every hierarchy:
    docker/<cid> with the cgroupfs driver, docker-<cid>.scope with
    systemd's."""
    out, todo = [], [(Path(top), 0)]
    while todo:
        d, n = todo.pop()
        try:
            entries = [e for e in os.scandir(d) if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        for e in entries:
            if cid in e.name:
                out.append(Path(e.path))
            elif n < depth:
                todo.append((Path(e.path), n + 1))
    return out


class Dockerd:
    """One running dockerd; see dockerd()."""

    def __init__(self, tmp_path, prefix=(), config=None):
        self.daemon_config = config or {}
        self.dir = Path(tmp_path) / f"dockerd-{uuid.uuid4().hex[:8]}"
        self.dir.mkdir(parents=True)
        self.data = self.dir / "data"
        self.exec_root = self.dir / "exec"
        self.pidfile = self.dir / "dockerd.pid"
        self.config = self.dir / "daemon.json"
        self.log = self.dir / "dockerd.log"
        # A unix socket path must fit in 108 bytes: keep it short.
        self.sockdir = Path(tempfile.mkdtemp(prefix="hutch-dkr-"))
        self.sock = self.sockdir / "docker.sock"
        self.ns = f"hutchtest-{uuid.uuid4().hex[:10]}"
        self.prefix = list(prefix)
        self.proc = None
        self.containerd_pid = None
        self.containers = set()

    # ---- using it ----

    def docker(self, *args, timeout=120, check=True, input=None):
        """Runs `docker -H unix://SOCK ARGS...`; returns the
        CompletedProcess (text), failing the test on a non-zero exit
        unless check=False."""
        r = subprocess.run(
            [DOCKER, "-H", f"unix://{self.sock}", *[str(a) for a in args]],
            capture_output=True,
            text=input is None or isinstance(input, str),
            input=input,
            timeout=timeout,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(self.dir),
                 "DOCKER_CONFIG": str(self.dir / "client")},
        )
        if check and r.returncode != 0:
            raise AssertionError(f"docker {' '.join(map(str, args))}: exit {r.returncode}: "
                                 f"{r.stderr}\n--- dockerd log ---\n{self.log_tail()}")
        return r

    def run_detached(self, image, *cmd):
        """`docker run -d --network none IMAGE CMD...`: the container id."""
        r = self.docker("run", "-d", "--network", "none", image, *cmd)
        cid = r.stdout.strip()
        self.containers.add(cid)
        return cid

    def container_pid(self, cid):
        r = self.docker("inspect", "--format", "{{.State.Pid}}", cid)
        return int(r.stdout.strip())

    def log_tail(self, n=4000):
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    # ---- starting and stopping ----

    def start(self):
        self.config.write_text(json.dumps(self.daemon_config) + "\n")
        argv = [
            *self.prefix,
            dockerd_path(),
            "--config-file", str(self.config),
            "--data-root", str(self.data),
            "--exec-root", str(self.exec_root),
            "-H", f"unix://{self.sock}",
            "--pidfile", str(self.pidfile),
            "--iptables=false",
            "--ip6tables=false",
            "--ip-forward=false",
            "--ip-masq=false",
            "--bridge=none",
            "--userland-proxy=false",
            "--containerd-namespace", self.ns,
            "--containerd-plugins-namespace", self.ns + "p",
        ]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"dockerd exited {self.proc.returncode}:\n{self.log_tail()}")
            if self.sock.exists() and self.docker("version", check=False,
                                                  timeout=30).returncode == 0:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"dockerd not ready after {START_TIMEOUT} s:\n"
                                     f"{self.log_tail()}")
            wait_pidfds([self.proc.pid], 0.1)  # returns early if it dies
        self.containerd_pid = self._containerd_pid()

    def _containerd_pid(self):
        """The containerd this dockerd started: its pid file in the exec
        root, else the child of dockerd running containerd."""
        pidfile = self.exec_root / "containerd" / "containerd.pid"
        try:
            return int(pidfile.read_text().strip())
        except (OSError, ValueError):
            pass
        for pid in _pids_with(str(self.exec_root / "containerd")):
            if "containerd" in _cmdline(pid).split(" ")[0]:
                return pid
        return None

    def stop(self):
        """Removes the containers, stops dockerd and its containerd, kills
        what is left of them, removes the directories. Never raises;
        returns a list of problems (empty when everything went as it
        should)."""
        problems = []
        if self.proc is not None and self.proc.poll() is None:
            r = self.docker("ps", "-aq", "--no-trunc", check=False, timeout=60)
            self.containers.update(r.stdout.split())
            for cid in sorted(self.containers):
                r = self.docker("rm", "-f", cid, check=False, timeout=60)
                if r.returncode != 0 and "No such container" not in r.stderr:
                    problems.append(f"docker rm -f {cid}: {r.stderr.strip()}")
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                problems.append("dockerd did not stop on SIGTERM")
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT)
        if self.containerd_pid and wait_pidfds([self.containerd_pid], STOP_TIMEOUT):
            problems.append("containerd outlived dockerd")
            _kill_if(self.containerd_pid, str(self.exec_root))
            wait_pidfds([self.containerd_pid], STOP_TIMEOUT)
        # Shims and container processes of this daemon only: they name our
        # exec root or containerd namespace, or sit in our containers'
        # cgroups.
        for pid in _pids_with(str(self.exec_root)) + _pids_with(f"-namespace {self.ns}"):
            problems.append(f"left running: {pid} {_cmdline(pid)[:200]}")
            if not _kill_if(pid, str(self.exec_root)):
                _kill_if(pid, self.ns)
        for cid in self.containers:
            for cg in container_cgroups(cid):
                try:
                    for pid in (cg / "cgroup.procs").read_text().split():
                        problems.append(f"container process {pid} left running")
                        os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
        subprocess.run(["rm", "-rf", "--one-file-system", str(self.dir), str(self.sockdir)],
                       capture_output=True, check=False)
        return problems


@contextlib.contextmanager
def dockerd(tmp_path, prefix=(), config=None):
    """A dockerd of the test's own; see the module's docstring. Fails the
    test (after cleaning up) if the daemon left anything behind."""
    d = Dockerd(tmp_path, prefix, config)
    problems = []
    try:
        d.start()
        yield d
    finally:
        problems = d.stop()
    assert not problems, "dockerd cleanup: " + "; ".join(problems)


def busybox_image(d, name):
    """Imports the image @name into dockerd @d from a tar made here of
    Debian's static busybox (no registry, no network). Returns @name."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for dname in ("bin", "tmp", "proc", "sys", "dev", "etc"):
            info = tarfile.TarInfo(dname)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        tar.add(BUSYBOX, arcname="bin/busybox")
        for link in BUSYBOX_LINKS:
            info = tarfile.TarInfo(f"bin/{link}")
            info.type, info.linkname, info.mode = tarfile.SYMTYPE, "busybox", 0o777
            tar.addfile(info)
    d.docker("import", "-", name, input=buf.getvalue())
    return name


class MountNamespace:
    """A private mount namespace (unshare --mount --propagation private),
    held open by a `cat` reading a pipe: closing the pipe (close(), or the
    test process dying) ends it, and with it every mount made in it.
    wrap(argv) runs @argv inside it (nsenter); run(argv) runs it to
    completion and fails the test on a non-zero exit."""

    def __init__(self):
        self.holder = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--", "cat"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
        )
        # The namespace exists once the holder runs cat, not unshare.
        deadline = time.monotonic() + 10
        own = os.readlink("/proc/self/ns/mnt")
        while True:
            try:
                theirs = os.readlink(f"/proc/{self.holder.pid}/ns/mnt")
                exe = os.readlink(f"/proc/{self.holder.pid}/exe")
            except OSError:
                theirs, exe = own, ""
            if theirs != own and exe.endswith("/cat"):
                break
            if self.holder.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("unshare --mount failed")
            wait_pidfds([self.holder.pid], 0.01)

    def wrap(self, argv):
        return ["nsenter", f"--mount=/proc/{self.holder.pid}/ns/mnt", "--", *map(str, argv)]

    def run(self, argv, check=True, **kw):
        r = subprocess.run(self.wrap(argv), capture_output=True, text=True, **kw)
        if check and r.returncode != 0:
            raise AssertionError(f"{argv}: exit {r.returncode}: {r.stderr}")
        return r

    def mountinfo(self):
        return Path(f"/proc/{self.holder.pid}/mountinfo").read_text()

    def close(self):
        if self.holder.poll() is None:
            self.holder.stdin.close()
            try:
                self.holder.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.holder.kill()
                self.holder.wait(timeout=10)


@contextlib.contextmanager
def mount_namespace():
    ns = MountNamespace()
    try:
        yield ns
    finally:
        ns.close()
