# SPDX-License-Identifier: LGPL-2.1-or-later
"""`hutch exec -t --user USER` on the microVM backend (issue 17; docs/vm.md
"The user" and "Published ports and terminals"): one EXEC frame carries
the user ("u:SPEC") and the terminal ("t:ROWS:COLS", agent protocol 1.4);
the agent's child becomes the user, then opens the guest's pty as that
user. Driven through a real terminal (ptyharness.py, as
test_terminal_vm.py), under QEMU with TCG.

Claims, each with its twin:
  - in a persistent VM image sandbox (test_exec_user's busybox image, user
    `app`, uid 1000), as root hutch and as the test user with sub-ids (a
    range of ids in the guest): `exec -it --user app` runs as 1000 with
    HOME and USER of `app`, on a /dev/pts terminal of the window's size
    that app owns, with job control (busybox sh -i says nothing of it
    being off; Ctrl-C reaches the foreground job, the shell lives on);
    `--user root` has a terminal root owns;
  - an unknown user is 125 naming it, on the terminal, and nothing is left
    running in the sandbox;
  - as root hutch, in a VM sandbox of the host base, bash as `nobody`
    (the host's user) has job control ("no job control" absent)."""

import json
import re

import pytest

from ptyharness import PROMPT, on_terminal, terminals  # noqa: F401 (a fixture)
from test_exec_user import APP, layers, subids  # noqa: F401 (a fixture)
from test_images_vm import VmImages
from test_vm_persist import TCG, VmStore, started_vm, vm_store_dir  # noqa: F401

WAIT = 180
ASH = f"PS1='{PROMPT.decode()}' exec sh -i"
BASH = f"PS1='{PROMPT.decode()}' exec bash --norc --noprofile -i"
# One line of facts; the echo of the command line itself never matches.
FACTS = ('echo "R:$(id -u):$(id -g):$(busybox tty):'
         '$(busybox stat -c %u:%g $(busybox tty)):$HOME:$USER:$(busybox stty size)"\r')
FACTS_RX = rb"R:(\d+):(\d+):(/dev/pts/\d+):(\d+:\d+):([^:\r]*):([^:\r]*):(\d+ \d+)\r\n"


@pytest.fixture(params=["root", "user"])
def images(request, subids, vm_store_dir):  # noqa: F811 (the fixtures)
    """test_images_vm's store, as root and as the test user with sub-ids."""
    im = VmImages(request.getfixturevalue(f"{request.param}_runner"), vm_store_dir)
    yield im
    im.finalize()


def running(store, name):
    r = store.hutch("ps", name, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def shell(terminals, store, name, user, script, prompt_timeout=WAIT):
    """`hutch exec -it --user USER NAME -- sh -c SCRIPT` on a new terminal,
    at its first prompt; (the terminal, what came before the prompt)."""
    t = on_terminal(terminals, store, "exec", "-it", "--user", user, name, "--",
                    "sh", "-c", script)
    first = t.expect(rb"(?s)(.*?)" + re.escape(PROMPT), timeout=prompt_timeout)
    return t, first.group(1)


def facts(t):
    t.send(FACTS.encode())
    return t.expect(FACTS_RX, timeout=WAIT).groups()


def test_exec_t_user_in_a_vm_image_sandbox(terminals, images):
    app = images.add("app", APP, layers())
    st = images.store
    name = f"tty-{images.tag}"
    st.create(name, *TCG, "--image", app)

    t, before = shell(terminals, st, name, "app", ASH)
    assert b"job control" not in before, before
    uid, gid, tty, owner, home, user, size = facts(t)
    assert (uid, gid, owner, home, user, size) == \
        (b"1000", b"1000", b"1000:1000", b"/home/app", b"app", b"24 80"), before
    # Job control: Ctrl-C reaches the foreground job through the guest's
    # pty, not the shell.
    t.send(b"busybox sh -c 'echo job-$((6*7)); exec busybox sleep 100'\r")
    t.expect(rb"job-42\r\n", timeout=WAIT)
    t.send(b"\x03")
    t.expect(re.escape(PROMPT), timeout=WAIT)
    t.send(b"echo alive-$?\r")
    t.expect(rb"alive-130\r\n", timeout=WAIT)
    # Twin: a shell in a session of its own, without the terminal as its
    # controlling one, says so (what the first check looks for).
    t.send(b"busybox setsid busybox sh -i -c 'echo lone-$((6*7))'\r")
    t.expect(rb"job control turned off", timeout=WAIT)
    t.expect(rb"lone-42\r\n", timeout=WAIT)
    t.send(b"exit 7\r")
    assert t.wait(WAIT) == 7
    assert t.modes() == t.before

    # Twin: --user root has a terminal of root's.
    t, _ = shell(terminals, st, name, "root", ASH)
    uid, gid, tty, owner, home, user, size = facts(t)
    assert (uid, owner, home, user) == (b"0", b"0:0", b"/root", b"root")
    t.send(b"exit\r")
    assert t.wait(WAIT) == 0

    # An unknown user: 125 naming it, nothing run, nothing left.
    t = on_terminal(terminals, st, "exec", "-it", "--user", "ghost", name, "--", "sh")
    t.expect(rb"'ghost'", timeout=WAIT)
    assert t.wait(WAIT) == 125
    assert running(st, name) == []


def test_exec_t_user_bash_job_control_on_the_host_base(terminals, root_runner, vm_store_dir):
    store = VmStore(root_runner, vm_store_dir)
    try:
        started_vm(store, "hbox", "true")
        t, before = shell(terminals, store, "hbox", "nobody", BASH)
        assert b"no job control" not in before, before
        uid, gid, tty, owner, home, user, size = facts(t)
        assert (uid, owner, home, user, size) == \
            (b"65534", b"65534:" + gid, b"/nonexistent", b"nobody", b"24 80"), before
        # Twin: without a controlling terminal, bash says it.
        t.send(b"setsid bash --norc --noprofile -i -c 'echo lone-$((6*7))'\r")
        t.expect(rb"no job control", timeout=WAIT)
        t.expect(rb"lone-42\r\n", timeout=WAIT)
        t.send(b"exit 3\r")
        assert t.wait(WAIT) == 3
        # Twin: root's bash on the same sandbox is root's.
        t, before = shell(terminals, store, "hbox", "root", BASH)
        assert b"no job control" not in before, before
        assert facts(t)[0] == b"0"
        t.send(b"exit\r")
        assert t.wait(WAIT) == 0
    finally:
        store.finalize()
