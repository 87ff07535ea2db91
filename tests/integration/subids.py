# SPDX-License-Identifier: LGPL-2.1-or-later
"""Sub-id ranges for the tests (issue 17, docs/persistent.md "Id range"):
reading /etc/subuid-style files, and giving the test user a range for the
time of a test when it has none (usermod), taken back afterwards."""

import subprocess
from pathlib import Path

COUNT = 65536


def ranges(path):
    """[(name, start, count)] of the well-formed lines of @path."""
    out = []
    try:
        text = Path(path).read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.strip().split(":")
        if len(parts) != 3:
            continue
        try:
            out.append((parts[0], int(parts[1]), int(parts[2])))
        except ValueError:
            continue
    return out


def range_of(name, uid, path):
    """The start of the first range of at least COUNT ids of @name (or
    @uid) in @path, else None: what hutch picks."""
    for n, start, count in ranges(path):
        if n in (name, str(uid)) and count >= COUNT:
            return start
    return None


def free_start():
    """A start past every range of /etc/subuid and /etc/subgid."""
    end = 100000
    for path in ("/etc/subuid", "/etc/subgid"):
        for _n, start, count in ranges(path):
            end = max(end, start + count)
    return end


class SubIds:
    """Makes sure @name has a range of COUNT ids in both files; one it
    added is removed by close()."""

    def __init__(self, name, uid):
        self.name = name
        self.added = None
        if range_of(name, uid, "/etc/subuid") is None or range_of(name, uid, "/etc/subgid") is None:
            start = free_start()
            spec = f"{start}-{start + COUNT - 1}"
            subprocess.run(
                ["usermod", "--add-subuids", spec, "--add-subgids", spec, name],
                check=True, capture_output=True, text=True,
            )
            self.added = spec
        self.uid_base = range_of(name, uid, "/etc/subuid")
        self.gid_base = range_of(name, uid, "/etc/subgid")

    def owns(self, host_id):
        """Is @host_id one of the range's (uid or gid)?"""
        return any(b <= host_id < b + COUNT for b in (self.uid_base, self.gid_base))

    def close(self):
        if self.added:
            subprocess.run(
                ["usermod", "--del-subuids", self.added, "--del-subgids", self.added, self.name],
                check=False, capture_output=True,
            )
            self.added = None
