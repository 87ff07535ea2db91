# SPDX-License-Identifier: LGPL-2.1-or-later
"""HutchSandboxClient (clients/typescript/agents.js): hutch as a sandbox of
the OpenAI Agents SDK, with the real @openai/agents (pinned below,
installed with npm into the tests' cache as test_mcp.py does for the MCP
SDK). Runs client-agents.test.mjs with `node --test`:

1. the SDK's session interface driven directly: create with manifest
   entries, exec/execCommand, files, the editor, persist/hydrate, resume
   from serialised state, delete; supportsPty() is true (tty sessions,
   writeStdin and ports: test_client_terminal.py);
2. a whole SandboxAgent run through the SDK's Runner with its
   ScriptedModel (no network, no LLM, tracing off): apply_patch creates and
   fixes a file, exec_command runs its test, the final output is checked,
   and the agent's exec cannot read a host canary file the caller can.

As the current caller only: the npm cache lives in the caller's home."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, node_package

HERE = Path(__file__).resolve().parent
TESTS = HERE / "client-agents.test.mjs"
AGENTS_SPEC = "@openai/agents@0.20.0"


@pytest.fixture(scope="session")
def agents_modules():
    pkg = node_package("@openai/agents", AGENTS_SPEC, "dist/sandbox/index.d.ts")
    if pkg is None:
        pytest.fail(f"cannot install {AGENTS_SPEC} with npm (needs the npm registry once)")
    return pkg.parent.parent  # node_modules


def test_agents_sdk(caller, agents_modules, tmp_path):
    node = shutil.which("node")
    assert node, "needs node"
    home, state = caller.make_dir(0o700, "ag-home"), caller.make_dir(0o700, "ag-state")
    lib = tmp_path / "lib"
    lib.mkdir()
    shutil.copytree(REPO / "clients" / "typescript", lib / "hutch-client")
    shutil.copy2(TESTS, lib / TESTS.name)
    (lib / "node_modules").symlink_to(agents_modules)
    canary = tmp_path / "canary.txt"
    canary.write_text("canary: the host's secret\n")
    env = caller.env({"HUTCH_HOME": str(home), "HUTCH_STATE_DIR": str(state),
                      "HUTCH_AGENTS": str(lib / "hutch-client" / "agents.js"),
                      "HUTCH_BIN": caller.hutch, "HUTCH_SOCK": str(state / "api.sock"),
                      "HUTCH_CANARY": str(canary)})
    try:
        r = subprocess.run([node, "--test", "--test-reporter=tap", str(lib / TESTS.name)],
                           env=env, capture_output=True, text=True, timeout=600, cwd=str(lib))
        out = r.stdout + r.stderr
        assert r.returncode == 0, out
        assert re.search(r"^# pass 2$", r.stdout, re.M) and re.search(r"^# fail 0$", r.stdout,
                                                                        re.M), out
        ls = caller.run_raw(["ls", "--json"], env={"HUTCH_HOME": str(home),
                                                    "HUTCH_STATE_DIR": str(state)})
        assert ls.returncode == 0 and ls.stdout.strip() == "[]", ls
    finally:
        ls = caller.run_raw(["ls", "--json"], env={"HUTCH_HOME": str(home),
                                                    "HUTCH_STATE_DIR": str(state)})
        for sb in (json.loads(ls.stdout) if ls.returncode == 0 else []):
            caller.run_raw(["rm", "--force", sb["name"]],
                           env={"HUTCH_HOME": str(home), "HUTCH_STATE_DIR": str(state)})
        for d in (home, state):
            shutil.rmtree(d, ignore_errors=True)
