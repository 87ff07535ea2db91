# SPDX-License-Identifier: LGPL-2.1-or-later
"""Terminals (issue 18, docs/terminal.md): `hutch run -t`, `hutch exec -t`
and `-i`, driven through a real terminal: each test opens a pty pair
(Python's `os.openpty`), starts the hutch CLI on its slave as its
controlling terminal, as a shell would, and plays the terminal emulator on
the master (keys in, screen out, resizes). The harness keeps a descriptor
of the slave, "the caller's terminal", to read its modes (`stty -g`'s
termios) before and after, and to see whether anything was typed into it.

As root and as the unprivileged user (conftest's runners); persistent
sandboxes through test_persistent's `store` fixture, which removes them
and checks that no keeper or cgroup is left."""

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time

import pytest

from conftest import kill_quietly, wait_pidfds
from test_persistent import marker, store  # noqa: F401 (fixture)

PROMPT = b"hutch-pty$ "
WAIT = 30


class Terminal:
    """hutch started on the slave of a new pty, as a terminal emulator's
    shell would start it: a session of its own with the slave as its
    controlling terminal (so SIGWINCH reaches it on a resize)."""

    def __init__(self, argv, env, cwd, rows=24, cols=80):
        self.master, self.slave = os.openpty()
        self.resize(rows, cols)
        self.before = termios.tcgetattr(self.slave)
        self.buf = b""
        self.proc = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=self.slave,
            stdout=self.slave,
            stderr=self.slave,
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )

    def resize(self, rows, cols):
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def send(self, data):
        os.write(self.master, data)

    def _read(self, timeout):
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:
            return None
        self.buf += data
        return bool(data)

    def expect(self, pattern, timeout=WAIT):
        """Reads until @pattern (a bytes regex) matches what the screen got
        since the last match; returns the match."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.buf)
            if m:
                self.buf = self.buf[m.end():]
                return m
            left = deadline - time.monotonic()
            if left <= 0 or self._read(left) is None:
                raise AssertionError(f"{pattern!r} never came; the screen got {self.buf!r}")

    def wait(self, timeout=WAIT):
        """hutch's exit status; what it wrote is read meanwhile."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.05)
        if self.proc.poll() is None:
            self.close()
            raise AssertionError(f"hutch did not exit; the screen got {self.buf!r}")
        while self._read(0):
            pass
        return self.proc.returncode

    def modes(self):
        return termios.tcgetattr(self.slave)

    def pending_input(self):
        """Whether something waits to be read on the caller's terminal."""
        r, _, _ = select.select([self.slave], [], [], 0)
        return bool(r)

    def close(self):
        if self.proc.poll() is None:
            kill_quietly(self.proc.pid)
            self.proc.wait()
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


@pytest.fixture
def terminals():
    opened = []

    def start(runner, args, env=None):
        t = Terminal(runner.argv([str(a) for a in args], verb=None),
                     runner.env({"TERM": "xterm", **(env or {})}), str(runner.base_dir))
        opened.append(t)
        return t

    yield start
    for t in opened:
        t.close()


def on_terminal(terminals, store, *args):
    """`hutch ARGS...` on a new terminal, with the store's environment."""
    return terminals(store.runner, args, store.env())


def shell(terminals, store, verb, *flags):
    """An interactive sh (`-it`), run by @verb ("run", or "exec NAME"),
    at its first prompt."""
    t = on_terminal(terminals, store, *verb.split(), "-it", *flags, "--", "sh", "-c",
                    f"PS1='{PROMPT.decode()}' exec bash --norc --noprofile -i")
    t.expect(re.escape(PROMPT))
    return t


def verbs(store):
    """`hutch run` and `hutch exec` on a new sandbox: both give terminals."""
    name = f"pty-{marker()}"
    store.create(name)
    return ["run", f"exec {name}"]


# ---- the terminal is the sandbox's own ----

# Prints the facts of the command's stdin: a terminal of which devpts.
TTY_FACTS = (
    "tty; "
    "if [ \"$(stat -Lc %d /proc/self/fd/0)\" = \"$(stat -c %d /dev/pts/ptmx)\" ]; "
    "then echo own-devpts; else echo other-devpts; fi"
)


def test_tty_is_a_pts_of_the_sandbox_own_devpts(terminals, store):
    for verb in verbs(store):
        t = on_terminal(terminals, store, *verb.split(), "-t", "--", "sh", "-c", TTY_FACTS)
        t.expect(rb"/dev/pts/\d+\r?\r\n")
        t.expect(rb"own-devpts")
        assert t.wait() == 0


def test_without_t_the_command_gets_no_terminal_of_its_own(terminals, store):
    # Twin: without -t the caller's stdio is passed as it is (a pty of the
    # host's devpts), which the command cannot make its controlling
    # terminal (a session of its own).
    for verb in verbs(store):
        t = on_terminal(terminals, store, *verb.split(), "--", "sh", "-c",
                        TTY_FACTS + "; (exec 3</dev/tty) 2>/dev/null || echo no-ctty")
        t.expect(rb"other-devpts")
        t.expect(rb"no-ctty")
        assert t.wait() == 0


# SECURITY: TIOCSTI types into a terminal's input queue; with the caller's
# terminal inside the sandbox, that is the caller's shell (bubblewrap's
# CVE-2017-5226). Prints "refused ERRNO" or "injected".
TIOCSTI = (
    "import fcntl, os, sys, termios\n"
    "a = sys.argv[1]\n"
    "fd = int(a) if a.isdigit() else os.open(a, os.O_RDWR | os.O_NOCTTY)\n"
    "try:\n"
    "    fcntl.ioctl(fd, termios.TIOCSTI, b'X')\n"
    "    print('injected')\n"
    "except OSError as e:\n"
    "    print('refused', e.errno)\n"
)


def test_tiocsti_never_reaches_the_callers_terminal(terminals, store):
    for verb in verbs(store):
        # With -t: /dev/tty is the sandbox's own pty, and TIOCSTI is denied.
        t = on_terminal(terminals, store, *verb.split(), "-t", "--", "python3", "-c", TIOCSTI,
                        "/dev/tty")
        t.expect(rb"refused 1\r")
        assert t.wait() == 0
        assert not t.pending_input(), "something was typed into the caller's terminal"
        # Without -t, on the caller's terminal itself (its stdin).
        t = on_terminal(terminals, store, *verb.split(), "--", "python3", "-c", TIOCSTI, "0")
        t.expect(rb"refused 1\r")
        assert t.wait() == 0
        assert not t.pending_input(), "something was typed into the caller's terminal"


# ---- an interactive shell ----

def test_stty_size_follows_a_resize(terminals, store):
    for verb in verbs(store):
        t = shell(terminals, store, verb)
        t.send(b"stty size\r")
        t.expect(rb"\r24 80\r\n")
        t.resize(40, 132)
        t.send(b"stty size\r")
        t.expect(rb"\r40 132\r\n")
        t.send(b"exit\r")
        assert t.wait() == 0


def test_ctrl_c_interrupts_the_foreground_job_and_the_shell_lives(terminals, store):
    for verb in verbs(store):
        t = shell(terminals, store, verb)
        # The job runs (its own process group is the terminal's
        # foreground) once it says so.
        t.send(b"sh -c 'echo job-$((6*7)); exec sleep 100'\r")
        t.expect(rb"job-42\r\n")
        t.send(b"\x03")
        t.expect(re.escape(PROMPT))
        t.send(b"echo alive-$?\r")
        t.expect(rb"alive-130\r\n")
        t.send(b"exit 7\r")
        assert t.wait() == 7


def test_bash_has_job_control(terminals, store):
    for verb in verbs(store):
        t = shell(terminals, store, verb)
        t.send(b"set -o | grep -w monitor; sleep 50 &\r")
        t.expect(rb"monitor\s+on")
        t.expect(rb"\[1\] \d+")
        t.send(b"jobs; kill %1; wait; exit\r")
        t.expect(rb"\[1\]\+\s+Running\s+sleep 50")
        assert t.wait() == 0
        assert b"no job control" not in t.buf


def test_without_a_terminal_bash_has_no_job_control(store):
    # Twin: the same shell without -t warns, as the issue found it.
    name = f"pty-{marker()}"
    store.create(name)
    r = store.exec(name, "bash", "--norc", "-i", input="exit\n")
    assert "no job control" in r.stderr, r.stderr


def test_vi_opens_and_quits(terminals, store):
    for verb in verbs(store):
        t = on_terminal(terminals, store, *verb.split(), "-it", "--", "sh", "-c",
                        "busybox vi /tmp/note && cat /tmp/note")
        t.expect(rb"/tmp/note")
        t.send(b"ihello from vi")
        t.expect(rb"hello from vi")
        # Escape alone (vi waits to see whether a sequence follows): the
        # status line says command mode.
        t.send(b"\x1b")
        t.expect(rb"- /tmp/note \[Modified\]")
        t.send(b":wq\r")
        t.expect(rb"'/tmp/note' 1L, 14C")
        t.expect(rb"hello from vi\r\n")
        assert t.wait() == 0


# ---- the caller's terminal is restored ----

def test_modes_are_raw_meanwhile_and_restored_after_a_normal_exit(terminals, store):
    for verb in verbs(store):
        t = shell(terminals, store, verb)
        raw = t.modes()
        assert not raw[3] & termios.ECHO and not raw[3] & termios.ICANON
        assert raw != t.before
        t.send(b"exit\r")
        assert t.wait() == 0
        assert t.modes() == t.before


def test_modes_are_restored_when_the_sandbox_is_stopped(terminals, store):
    name = f"pty-{marker()}"
    store.create(name)
    t = shell(terminals, store, f"exec {name}")
    t.send(b"sleep 100\r")
    t.expect(rb"sleep 100\r\n")
    r = store.hutch("stop", name)
    assert r.returncode == 0, r.stderr
    assert t.wait() != 0
    assert t.modes() == t.before


def test_modes_are_restored_when_hutch_is_killed(terminals, store):
    for verb in verbs(store):
        t = shell(terminals, store, verb)
        assert t.modes() != t.before
        # SIGKILL: hutch cannot restore them; its relay (PR_SET_PDEATHSIG)
        # does, and ends.
        os.kill(t.proc.pid, signal.SIGKILL)
        t.proc.wait()
        deadline = time.monotonic() + WAIT
        while t.modes() != t.before and time.monotonic() < deadline:
            select.select([], [], [], 0.02)
        assert t.modes() == t.before


# ---- bad input ----

def test_t_without_a_terminal_is_refused(store):
    name = f"pty-{marker()}"
    store.create(name)
    for args in (["run", "-t", "--", "true"], ["run", "-it", "--", "true"],
                 ["exec", name, "-t", "--", "true"], ["exec", "-it", name, "--", "true"]):
        r = store.hutch(*args)
        assert r.returncode == 125, (args, r.stderr)
        assert r.stderr.strip() == ("hutch: the input device is not a TTY "
                                    "(-t needs a terminal on stdin)"), r.stderr
        assert r.stdout == ""
    # Nothing ran: the sandbox's history is empty.
    assert store.history(name) == []


def test_t_with_detach_or_the_vm_backend_is_refused(terminals, store):
    name = f"pty-{marker()}"
    store.create(name)
    t = on_terminal(terminals, store, "exec", name, "-t", "-d", "--", "true")
    t.expect(rb"hutch: -t and -d do not go together")
    assert t.wait() == 125
    t = on_terminal(terminals, store, "run", "-t", "--backend", "vm", "--", "true")
    t.expect(rb"hutch: a terminal \(-t\) is not supported with the vm backend")
    assert t.wait() == 125
    t = on_terminal(terminals, store, "run", "-t", "--output-limit", "1m", "--", "true")
    t.expect(rb"hutch: -t and --output-limit do not go together")
    assert t.wait() == 125
    assert store.history(name) == []


def test_no_relay_outlives_its_exec(terminals, store):
    name = f"pty-{marker()}"
    store.create(name)
    t = on_terminal(terminals, store, "exec", name, "-it", "--", "sh", "-c", "echo up; exec cat")
    t.expect(rb"up\r\n")
    relays = [int(p) for p in
              open(f"/proc/{t.proc.pid}/task/{t.proc.pid}/children").read().split()]
    assert relays, "hutch exec -t has its relay process"
    t.send(b"\x04")
    assert t.wait() == 0
    assert not wait_pidfds(relays, WAIT)
