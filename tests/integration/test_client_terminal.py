# SPDX-License-Identifier: LGPL-2.1-or-later
"""The TypeScript client's exec WebSocket (clients/typescript/terminal.js:
stdin, a terminal of a given size, resize, Ctrl-C, the typed errors),
its ports calls, and HutchSandboxClient's tty sessions, writeStdin and
resolveExposedPort with the real @openai/agents (issue 19), against the
real `hutch serve`: client-terminal.test.mjs with `node --test`, through
test_client_agents.py's pinned SDK. As the current caller (the npm cache
lives in its home)."""

import json
import re
import shutil
import subprocess

from conftest import REPO
from test_client_agents import agents_modules  # noqa: F401 (fixture)
from test_client_typescript import HERE, node

TESTS = HERE / "client-terminal.test.mjs"


def test_terminal_and_agents_pty(caller, agents_modules, tmp_path):  # noqa: F811
    home, state = caller.make_dir(0o700, "tt-home"), caller.make_dir(0o700, "tt-state")
    lib = tmp_path / "lib"
    lib.mkdir()
    shutil.copytree(REPO / "clients" / "typescript", lib / "hutch-client")
    shutil.copy2(TESTS, lib / TESTS.name)
    (lib / "node_modules").symlink_to(agents_modules)
    store = {"HUTCH_HOME": str(home), "HUTCH_STATE_DIR": str(state)}
    env = caller.env({**store, "HUTCH_AGENTS": str(lib / "hutch-client" / "agents.js"),
                      "HUTCH_BIN": caller.hutch, "HUTCH_SOCK": str(state / "api.sock")})
    try:
        r = subprocess.run([node(), "--test", "--test-reporter=tap", str(lib / TESTS.name)],
                           env=env, capture_output=True, text=True, timeout=600, cwd=str(lib))
        out = r.stdout + r.stderr
        assert r.returncode == 0, out
        assert re.search(r"^# pass 2$", r.stdout, re.M) and re.search(r"^# fail 0$", r.stdout,
                                                                        re.M), out
        ls = caller.run_raw(["ls", "--json"], env=store)
        assert ls.returncode == 0 and ls.stdout.strip() == "[]", ls
    finally:
        ls = caller.run_raw(["ls", "--json"], env=store)
        for sb in (json.loads(ls.stdout) if ls.returncode == 0 else []):
            caller.run_raw(["rm", "--force", sb["name"]], env=store)
        for d in (home, state):
            shutil.rmtree(d, ignore_errors=True)
