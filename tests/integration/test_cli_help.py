# SPDX-License-Identifier: LGPL-2.1-or-later
"""Help, man pages, completion and progress (issue 22): every verb of
`hutch --help` answers --help, -h and `hutch help VERB` on stdout with exit
0; each has a man page that `man -l` renders; the bash completion completes
verbs, flags and the store's sandbox and snapshot names; snapshot
export/import show progress on a terminal and nothing on a pipe."""

import os
import pty
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import find_hutch
from test_snapshots import make_hutch

ROOT = Path(__file__).resolve().parents[2]
BASH_COMPLETION = ROOT / "tools" / "completion" / "hutch.bash"
ZSH_COMPLETION = ROOT / "tools" / "completion" / "_hutch"


def hutch_bin():
    return str(find_hutch())


def verbs():
    """The verbs `hutch --help` lists (so a new verb is covered)."""
    out = subprocess.run([hutch_bin(), "--help"], capture_output=True, text=True, check=True)
    found = [m.group(1) for m in re.finditer(r"^  ([a-z][a-z-]*) ", out.stdout, re.M)]
    assert "run" in found and "exec" in found, out.stdout
    return found


VERBS = verbs()


def run(*args, **kw):
    return subprocess.run([hutch_bin(), *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60, **kw)


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_answers_help(verb):
    outs = []
    for args in ([verb, "--help"], [verb, "-h"], ["help", verb]):
        r = run(*args)
        assert r.returncode == 0, (args, r.returncode, r.stderr)
        assert r.stderr == "", (args, r.stderr)
        assert r.stdout.startswith(f"usage: hutch {verb}"), (args, r.stdout[:200])
        outs.append(r.stdout)
    assert outs[0] == outs[1] == outs[2]


@pytest.mark.parametrize("verb", ["ls", "rm", "logs", "diff", "apply", "gc", "stop"])
def test_help_after_other_arguments(verb):
    """A verb without a command takes --help anywhere ("stop box --help")."""
    r = run(verb, "somebox", "--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: hutch {verb}")


def test_help_twins():
    # --help after a run's command is the command's own.
    r = run("run", "--", "printf", "%s\\n", "--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "--help\n"
    r = run("help", "hutch-no-such-verb")
    assert r.returncode == 125
    assert "unknown command" in r.stderr and r.stdout == ""
    r = run("ls", "--hutch-bogus")
    assert r.returncode == 125
    r = run("help")
    assert r.returncode == 0 and r.stdout.startswith("usage: hutch COMMAND")


# ---- man pages ----


def man_dir():
    d = find_hutch().parents[2] / "docs" / "man"
    if not shutil.which("pandoc"):
        pytest.fail("pandoc is missing: the man pages were not built (tools/deps.sh build)")
    return d


def render(page):
    env = dict(os.environ, MANPAGER="cat", MANWIDTH="100", LANG="C.UTF-8")
    return subprocess.run(["man", "-l", str(page)], capture_output=True, text=True, env=env,
                          timeout=60)


@pytest.mark.parametrize("verb", ["hutch", *VERBS])
def test_man_page_renders(verb):
    name = "hutch" if verb == "hutch" else f"hutch-{verb}"
    page = man_dir() / f"{name}.1"
    assert page.exists(), f"{page} was not built (docs/man/meson.build lists the verbs)"
    r = render(page)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert text.startswith(name.upper() + "(1)"), text[:100]
    assert "NAME" in text and "SYNOPSIS" in text and "SEE ALSO" in text
    assert f"{name} - " in text
    if verb == "run":
        # The flag table is in it, from the same source as --help.
        for flag in ("--memory SIZE", "--read-only", "--allow-host"):
            assert flag in text, flag
    if verb == "hutch":
        for v in VERBS:
            assert re.search(rf"^\s+{v}\b", text, re.M), v


def test_policy_man_page_renders():
    page = man_dir() / "hutch.json.5"
    assert page.exists()
    r = render(page)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("HUTCH.JSON(5)")
    assert "read_only" in r.stdout and "allow_hosts" in r.stdout


# ---- completion ----


def bash_complete(words, cword, env):
    """COMPREPLY of _hutch for COMP_WORDS=@words, COMP_CWORD=@cword."""
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    script = (
        f"source '{BASH_COMPLETION}'\n"
        f"COMP_WORDS=({quoted})\nCOMP_CWORD={cword}\n"
        "_hutch\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return [line for line in r.stdout.splitlines() if line]


def test_bash_completion_registers():
    r = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", f"source '{BASH_COMPLETION}'; complete -p hutch"],
        capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "-F _hutch" in r.stdout and r.stdout.strip().endswith("hutch")


@pytest.fixture
def store(request):
    h = make_hutch(request, "root")
    return h


def test_bash_completion_of_verbs_flags_and_names(store):
    env = store.env()
    hb = hutch_bin()
    assert bash_complete([hb, "ru"], 1, env) == ["run"]
    assert set(VERBS) <= set(bash_complete([hb, ""], 1, env))
    assert set(bash_complete([hb, "run", "--mem"], 2, env)) == {"--memory", "--memory-swap"}
    assert "--detach" in bash_complete([hb, "exec", "--de"], 2, env)
    # Twin: before the sandbox exists, no name is offered.
    assert "complbox" not in bash_complete([hb, "exec", ""], 2, env)
    store.ok("create", "complbox")
    store.ok("snapshot", "complbox", "complsnap")
    assert bash_complete([hb, "exec", "comp"], 2, env) == ["complbox"]
    assert bash_complete([hb, "rm", ""], 2, env) == ["complbox"]
    assert "complsnap" in bash_complete([hb, "create", "x", "--from", ""], 4, env)
    assert bash_complete([hb, "snapshot", "rm", "compl"], 3, env) == ["complsnap"]
    # The command of exec is not a sandbox name.
    assert bash_complete([hb, "exec", "complbox", "comp"], 3, env) == []
    assert bash_complete([hb, "run", "--network", ""], 3, env) == ["none", "allow"]


def test_zsh_completion_parses():
    if not shutil.which("zsh"):
        pytest.fail("zsh is missing (tools/deps.sh test)")
    r = subprocess.run(["zsh", "-n", str(ZSH_COMPLETION)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_completion_is_installed(tmp_path):
    build = find_hutch().parents[2]
    r = subprocess.run(["meson", "install", "-C", str(build), "--no-rebuild", "--destdir",
                        str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    names = {p.name for p in tmp_path.rglob("*")}
    assert {"hutch.1", "hutch-run.1", "hutch.json.5", "_hutch"} <= names, sorted(names)
    assert any(p.match("*/bash-completion/completions/hutch") for p in tmp_path.rglob("hutch"))


# ---- progress ----


def run_on_pty(h, *args):
    """`hutch ARGS...` with stderr on a pseudo-terminal: (status, stdout,
    what the terminal got)."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(h.argv(args), env=h.env(), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=slave,
                             cwd=str(h.runner.base_dir))
    finally:
        os.close(slave)
    got = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not data:
            break
        got += data
    os.close(master)
    out = p.stdout.read()
    p.stdout.close()
    return p.wait(timeout=120), out, got.decode(errors="replace")


def test_snapshot_progress_on_a_terminal_not_on_a_pipe(store):
    store.ok("create", "pbox")
    store.sh("pbox", "head -c 4000000 /dev/urandom > /root/data")
    store.ok("stop", "pbox")
    store.ok("snapshot", "pbox", "psnap")
    out = store.runner.make_dir(mode=0o755, name="out")
    archive = out / "p.tar.zst"

    rc, _, tty = run_on_pty(store, "snapshot", "export", "psnap", "-o", archive)
    assert rc == 0, tty
    assert re.search(r"exported psnap: [0-9.]+ MiB in [0-9.]+ s \([0-9.]+ MiB/s\)", tty), tty
    rc, stdout, tty = run_on_pty(store, "snapshot", "import", archive, "--name", "pimp")
    assert rc == 0, tty
    assert stdout == b"pimp\n"
    assert re.search(r"imported: 3\.\d MiB in [0-9.]+ s", tty), tty

    # Twins: --quiet on a terminal, and a pipe, show nothing.
    rc, _, tty = run_on_pty(store, "snapshot", "export", "psnap", "-o", out / "q.tar.zst", "-q")
    assert rc == 0 and tty == "", tty
    r = store.run("snapshot", "export", "psnap", "-o", out / "r.tar.zst")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    r = store.run("snapshot", "import", out / "r.tar.zst", "--name", "pimp2")
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_vm_template_build_said_on_a_terminal_not_on_a_pipe(caller, tmp_path):
    """The first microVM start of a shape builds its template (seconds):
    on a terminal hutch says so and how long it took; the next start (a
    restore) and a start on a pipe say nothing."""
    root = Path(tempfile.mkdtemp(prefix="hutch-cli-vm-", dir="/dev/shm"))
    try:
        os.chmod(root, 0o755)
        env = {"HUTCH_HOME": str(root / "home"), "HUTCH_STATE_DIR": str(root / "state")}
        # The same shape as test_vm's: TCG works on every machine.
        args = ["--backend", "vm", "--vm-accel", "tcg", "--", "true"]

        class H:
            runner = caller

            @staticmethod
            def argv(a):
                return caller.argv(list(a))

            @staticmethod
            def env():
                return caller.env(env)

        rc, _, tty = run_on_pty(H, *args)
        assert rc == 0, tty
        assert "building the microVM template" in tty, tty
        assert re.search(r"built the microVM template in [0-9.]+ s", tty), tty
        rc, _, tty = run_on_pty(H, *args)
        assert rc == 0, tty
        assert "template" not in tty, tty
        shutil.rmtree(root / "state" / "vm-templates", ignore_errors=True)
        r = caller.run(args, env=env, timeout=300)
        assert r.returncode == 0, r.stderr
        assert "template" not in r.stderr, r.stderr
    finally:
        shutil.rmtree(root, ignore_errors=True)
