# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch doctor: exit 0 when `hutch run` can work here, one line per
feature with its status (ok, missing, or degraded) and what it means."""

import re

FEATURES = ("user namespace", "seccomp", "landlock", "cgroup", "kvm", "microvm")


def test_doctor_reports_features(caller):
    r = caller.run_raw(["doctor"])
    assert r.returncode == 0, r.stdout + r.stderr
    status = [
        line.lower().replace("_", " ")
        for line in r.stdout.splitlines()
        if re.search(r"\b(ok|missing|degraded)\b", line)
    ]
    assert len(status) >= len(FEATURES), r.stdout
    for feature in FEATURES:
        assert any(feature in line for line in status), f"no status line about {feature}: {r.stdout}"


def test_doctor_twin_run_works(hutch, probe_dir):
    """doctor's exit 0 means run works: check that it does."""
    r = hutch(["run", "-v", f"{probe_dir}:/probe:ro", "--", "/probe/probe", "hostname"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hutch\n"
