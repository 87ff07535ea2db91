# SPDX-License-Identifier: LGPL-2.1-or-later
"""The microVM template folders of removed stores are freed (docs/vm.md
"Templates"): a store whose runtime folder is not on tmpfs keeps its
templates (guest RAM) in /dev/shm/hutch-vm-UID-XXXXXX, which outlived the
store when the store was removed (15 GiB of them piled up on a CI machine).
The next VM start of any store of the same user, and `hutch gc`, remove a
folder whose store is gone; a live store's folder is never touched.

The stores here are on /tmp (not tmpfs), so the templates go to /dev/shm.
As root and as the unprivileged user (each reclaims only its own
folders); each store's first VM is a cold boot under TCG, so few cases on
purpose.
"""

import shutil
from pathlib import Path

import pytest

from conftest import VM_TEMPLATE_DIR, free_vm_templates

TCG = ["--backend", "vm", "--vm-accel", "tcg"]
VM_TIMEOUT = 240


class ShmStore:
    """A store (HUTCH_HOME, HUTCH_STATE_DIR) of @runner's on /tmp."""

    def __init__(self, runner):
        self.runner = runner
        self.dir = runner.make_dir(mode=0o700, name="tmpl-store")
        self.home = self.dir / "home"
        self.env = {"HUTCH_HOME": str(self.home), "HUTCH_STATE_DIR": str(self.dir / "state")}
        self.folder = None  # its template folder, once a VM ran


    def vm_true(self):
        r = self.runner.run([*TCG, "--", "true"], env=self.env, timeout=VM_TIMEOUT)
        assert r.returncode == 0, r.stderr
        self.folder = self.templates()

    def templates(self):
        """The /dev/shm folder this store records (checked to be one)."""
        p = Path((self.home / "vm-templates.path").read_text())
        assert p.parent == Path("/dev/shm") and VM_TEMPLATE_DIR.fullmatch(p.name), p
        return p

    def remove(self):
        """What a user does: rm -rf of the store (its folders)."""
        shutil.rmtree(self.dir)

    def close(self):
        """Frees its folder even when the store is gone and the test
        failed (the code under test did not free it)."""
        free_vm_templates(self.home)
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def stores(sbx):
    made = []

    def make():
        s = ShmStore(sbx)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def full(folder):
    """@folder exists and holds a template (the guest RAM went there)."""
    return folder.is_dir() and any(folder.iterdir())


def test_next_vm_start_frees_a_removed_stores_templates(stores):
    live, gone = stores(), stores()
    live.vm_true()
    gone.vm_true()
    kept, orphan = live.templates(), gone.templates()
    assert kept != orphan and full(kept) and full(orphan)
    gone.remove()
    nxt = stores()
    nxt.vm_true()
    assert not orphan.exists(), f"{orphan} outlived its store"
    # Each folder names the record that gave it out (docs/vm.md).
    assert (kept / "store").read_text() == str((live.home / "vm-templates.path").resolve())
    # Twin: the live store's folder is left, with its template, and is
    # still the one it records; the new store has its own.
    assert full(kept) and live.templates() == kept
    assert full(nxt.templates()) and nxt.templates() not in (kept, orphan)


def test_gc_frees_a_removed_stores_templates(stores):
    live, gone, other = stores(), stores(), stores()
    live.vm_true()
    gone.vm_true()
    kept, orphan = live.templates(), gone.templates()
    gone.remove()
    # `hutch gc` of any store of the same user, with no VM started.
    r = other.runner.run_raw(["gc"], env=other.env)
    assert r.returncode == 0, r.stderr
    assert not orphan.exists(), f"{orphan} outlived its store"
    n = int(r.stdout.split()[1])
    assert n >= 1, r.stdout
    # Twin: a live store's folder is not a leftover.
    assert full(kept) and live.templates() == kept
    r = other.runner.run_raw(["gc"], env=other.env)
    assert r.returncode == 0, r.stderr
    assert full(kept)
