# SPDX-License-Identifier: LGPL-2.1-or-later
"""Attacks on the work merged for issue 20 (wave 12 review): each test is
a defect found by trying to break it, and fails on the code before its fix.

Disk-image templates (docs/persistent.md "Disk limit"): a template is used
only when it is what its name says, a regular file of the store's owner of
exactly the size asked for; anything else in its place (a file of another
size, a symlink) is removed and made again. Trusted by name, a template of
the wrong size gave a sandbox a disk of that size, not of its --disk (the
limit silently not the one asked for), and a symlink there made every
create of that size fail."""

import os

from test_persistent import root_store  # noqa: F401 (fixture)
from test_persistent_disk import ENOSPC_TEXT, MIB, fill, image_of

FORTY = ("dd", "if=/dev/zero", "of=/root/forty", "bs=1M", "count=40")


def template_of(store, size):
    (t,) = [p for p in (store.home / "disk-templates").iterdir()
            if p.name.startswith(f"ext4-v1-{size}-")]
    return t


def test_a_template_of_another_size_is_not_trusted_by_its_name(root_store):
    s = root_store
    s.create("a", "--disk", "32m")
    s.create("b", "--disk", "64m")
    t32, t64 = template_of(s, 32 * MIB), template_of(s, 64 * MIB)
    # A whole, valid ext4 image of 64 MiB under the 32 MiB name.
    os.replace(t64, t32)
    s.create("c", "--disk", "32m")
    assert image_of(s, "c").stat().st_size == 32 * MIB
    r = s.exec("c", *FORTY)
    assert r.returncode != 0 and ENOSPC_TEXT in r.stderr, (r.returncode, r.stderr)
    assert template_of(s, 32 * MIB).stat().st_size == 32 * MIB
    # The twin: b's own 64 MiB image (not the template's) holds the 40 MiB.
    assert s.sh("b", " ".join(FORTY) + " status=none && echo ok") == "ok\n"


def test_a_symlink_in_a_templates_place_is_not_followed(root_store):
    s = root_store
    s.create("a", "--disk", "32m")
    t = template_of(s, 32 * MIB)
    aside = s.home / "aside.img"
    os.replace(t, aside)
    t.symlink_to(aside)
    s.create("b", "--disk", "32m")
    t = template_of(s, 32 * MIB)
    assert not t.is_symlink() and t.stat().st_size == 32 * MIB
    assert aside.stat().st_size == 32 * MIB  # what the link named is left alone
    s.sh("b", "echo fine > /root/f")
    assert s.sh("b", "cat /root/f") == "fine\n"
    fill(s, "b", "/root/big")
