#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks which folder of src/ includes which (docs/style.md §1,
docs/architecture.md §6) and which sources a folder's meson.build compiles
from elsewhere. Prints one line per violation and exits 1 if there is one.

The rules:
  src/basic          includes nothing of ours but src/basic
  src/lib/<subsys>   src/basic, include/, src/lib/*; another subsystem's
                     *-internal.h never
  src/cli            src/basic, include/hutch.h and the front ends' private
                     extension of it, src/lib/api/hutch-ext.h, and its own
                     folder: the API is the only door into the core
  src/proxy, src/oci src/basic, include/, src/lib/* (no *-internal.h), their own folder
  src/shared         src/basic and its own folder only: what the host and
                     the microVM guest both run (agent protocol, file
                     operations, tree copy), one library both link
  src/guest          src/basic, src/shared and its own folder only
and a meson.build compiles only sources below its own folder (or
basic_sources, which is how every binary gets src/basic), and only the
guest's own meson.build puts src/guest on an include path.

KNOWN lists what the tree still does against these rules, each with the
reason; the backend-seam work (issue 16) empties it. A known entry that no
longer occurs is an error too, so the list only shrinks.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

KNOWN = {
    # The guest agent embeds the seccomp program that src/lib/seccomp
    # generates at build time, as data (docs/vm.md "The guest's own wall");
    # the generator is the core's (libseccomp at build time), so the guest
    # reads the generated header from src/lib/seccomp's build folder.
    ("src/guest/agent.c", "src/lib/seccomp/seccomp-bpf.h"),
}

# src/cli includes nothing of the core beyond include/hutch.h and
# src/lib/api/hutch-ext.h (issue 16): a new file of src/cli adds nothing
# to KNOWN (it asks hutch-ext.h for what it needs).

# Subsystem edges (A uses B) that close a cycle between src/lib folders.
KNOWN_CYCLE_EDGES = set()

# The private extension of include/hutch.h for hutch's own front ends.
CLI_DOOR = "src/lib/api/hutch-ext.h"

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
MESON_SRC_RE = re.compile(r"'(\.\./[^']+\.c)'")
MESON_INC_RE = re.compile(r"include_directories\('([^']+)'\)")


def resolve(src_file, name):
    """The file that #include "name" in src_file means, relative to ROOT,
    or None when it is not ours (a system header)."""
    here = src_file.parent
    candidates = [here / name, SRC / "basic" / name, SRC / "shared" / name,
                  SRC / "lib" / name, ROOT / "include" / name, SRC / "guest" / name]
    for c in candidates:
        if c.is_file():
            return c.resolve().relative_to(ROOT)
    # A header generated at build time ("seccomp/seccomp-bpf.h") belongs to
    # the src/lib folder it is named after.
    first = pathlib.PurePath(name).parts[0]
    if first != name and (SRC / "lib" / first).is_dir():
        return (SRC / "lib" / name).relative_to(ROOT)
    return None


def folder_of(rel):
    parts = rel.parts
    if parts[0] == "include":
        return "include"
    if parts[:2] == ("src", "lib") and len(parts) > 3:
        return "src/lib/" + parts[2]
    return "/".join(parts[:2])


def allowed(src_folder, target_rel):
    target = folder_of(target_rel)
    internal = target_rel.name.endswith("-internal.h")
    if target == src_folder:
        return True
    if src_folder == "src/basic":
        return False
    if src_folder == "src/shared":
        return target == "src/basic"
    if src_folder == "src/guest":
        return target in ("src/basic", "src/shared")
    if internal:
        return False
    if src_folder == "src/cli":
        return target in ("src/basic", "include") or str(target_rel) == CLI_DOOR
    if src_folder.startswith("src/lib/") or src_folder in ("src/proxy", "src/oci"):
        return target in ("src/basic", "src/shared", "include") or target.startswith("src/lib/")
    return False


def reaches(graph, a, b):
    todo, seen = [a], set()
    while todo:
        n = todo.pop()
        if n == b:
            return True
        if n in seen:
            continue
        seen.add(n)
        todo.extend(graph.get(n, ()))
    return False


def cycle_edges(graph):
    """The edges A -> B of @graph where B leads back to A."""
    return {(a, b) for a, bs in graph.items() for b in bs if reaches(graph, b, a)}


def main():
    bad, seen_known = [], set()
    graph = {}
    for f in sorted(SRC.rglob("*")):
        rel = f.relative_to(ROOT)
        if f.suffix in (".c", ".h"):
            src_folder = folder_of(rel)
            for name in INCLUDE_RE.findall(f.read_text(errors="replace")):
                target = resolve(f, name)
                if target is None:
                    continue
                tf = folder_of(target)
                if src_folder.startswith("src/lib/") and tf.startswith("src/lib/") and tf != src_folder:
                    graph.setdefault(src_folder[8:], set()).add(tf[8:])
                if allowed(src_folder, target):
                    continue
                key = (str(rel), str(target))
                if key in KNOWN:
                    seen_known.add(key)
                    continue
                bad.append(f"{rel}: includes {target} ({src_folder} may not use {folder_of(target)})")
        elif f.name == "meson.build":
            for name in MESON_SRC_RE.findall(f.read_text()):
                target = (f.parent / name).resolve().relative_to(ROOT)
                key = (str(rel), str(target))
                if key in KNOWN:
                    seen_known.add(key)
                    continue
                bad.append(f"{rel}: compiles {target}, outside its folder")
            for name in MESON_INC_RE.findall(f.read_text()):
                target = (f.parent / name).resolve()
                guest = SRC / "guest"
                if (target == guest or guest in target.parents) and f.parent != guest:
                    bad.append(f"{rel}: puts {target.relative_to(ROOT)} on an include path")
    cycles = cycle_edges(graph)
    for a, b in sorted(cycles - KNOWN_CYCLE_EDGES):
        bad.append(f"src/lib/{a} uses src/lib/{b}, which uses src/lib/{a} (directly or not): a cycle")
    for a, b in sorted(KNOWN_CYCLE_EDGES - cycles):
        bad.append(f"tools/check-layering.py: known cycle edge {a} -> {b} no longer occurs: remove it")
    for key in sorted(KNOWN - seen_known):
        bad.append(f"tools/check-layering.py: known violation {key} no longer occurs: remove it from KNOWN")
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
