# SPDX-License-Identifier: LGPL-2.1-or-later
"""Signals: SIGINT/SIGTERM/SIGHUP to hutch reach the command; SIGKILL to
hutch takes the whole sandbox down with it, double-forked daemons too."""

import signal
import uuid
from subprocess import PIPE

import pytest

from conftest import descendants, kill_quietly, live_with_marker, proc_table, wait_pidfds

TRAP = 'trap "exit 42" {sig}; echo ready; sleep 1000 & wait $!; exit 7'


@pytest.mark.parametrize("sig", ["TERM", "INT", "HUP"])
def test_signal_is_forwarded(sbx, sig):
    p = sbx.popen(["--", "sh", "-c", TRAP.format(sig=sig)], stdout=PIPE, stderr=PIPE)
    try:
        assert p.stdout.readline() == "ready\n"
        p.send_signal(getattr(signal, f"SIG{sig}"))
        _, err = p.communicate(timeout=30)
    finally:
        kill_quietly(p.pid)
        p.wait(timeout=30)
    assert p.returncode == 42, f"exit {p.returncode}: {err}"


def test_untrapped_sigterm_kills_command_twin(sbx):
    p = sbx.popen(["--", "sh", "-c", "echo ready; sleep 1000 & wait $!"], stdout=PIPE, stderr=PIPE)
    try:
        assert p.stdout.readline() == "ready\n"
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    finally:
        kill_quietly(p.pid)
        p.wait(timeout=30)
    assert p.returncode == 128 + signal.SIGTERM, err


def test_sigkill_leaves_nothing_behind(sbx):
    marker = f"hutch-kill-{uuid.uuid4().hex}"
    probe = "/probe/probe"
    script = f"({probe} sleep-marker {marker}-daemon &); exec {probe} sleep-marker {marker}"
    p = sbx.popen(
        ["-v", f"{sbx.probe_dir}:/probe:ro", "--", "sh", "-c", script], stdout=PIPE, stderr=PIPE
    )
    try:
        lines = [p.stdout.readline(), p.stdout.readline()]
        assert all(line.startswith("ready") for line in lines), lines
        table = proc_table()
        inside = descendants(p.pid, table)
        inside |= {pid for pid, info in table.items() if marker in info[3] and pid != p.pid}
        assert len(inside) >= 2, inside
        p.kill()
        p.wait(timeout=30)
        alive = wait_pidfds(inside, 10)
        assert not alive, f"still running after hutch was killed: {alive}"
        assert not live_with_marker(marker)
    finally:
        kill_quietly(p.pid)
        p.wait(timeout=30)
        for pid in live_with_marker(marker):
            kill_quietly(pid)
