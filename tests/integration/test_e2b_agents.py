# SPDX-License-Identifier: LGPL-2.1-or-later
"""The OpenAI Agents SDK's E2B sandbox client (`E2BSandboxClient` of
@openai/agents-extensions) against `hutch serve --e2b` (docs/e2b.md,
issue 20), with only E2B's own environment variables pointing it at the
local server. Runs e2b-agents.test.mjs with `node --test`:

1. the session interface driven directly: create with manifest entries
   and environment, exec (exit code, working directory), files (read,
   write, exists, the editor), an exposed port resolved by getHost and
   reached by Host (and a port where nothing listens: 502), a host canary
   the sandbox cannot read, pause (pauseOnExit) and resume from serialised
   state with the files kept, delete;
2. a SandboxAgent run through the SDK's Runner with its ScriptedModel (no
   network, no LLM, tracing off), which creates and deletes its sandbox.

The extensions 0.18.0 pin @openai/agents-core 0.18.0 while the hutch
TypeScript client's tests use 0.20 (test_client_agents.py), and their peer
dependencies name other providers' SDKs: so they get an npm prefix of
their own in the tests' cache (~/.cache/hutch-tests/node-e2b-agents),
with exactly the packages below (no optional peers). As the current
caller only: the npm cache lives in the caller's home."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from test_e2b_control import E2bServer

HERE = Path(__file__).resolve().parent
TESTS = HERE / "e2b-agents.test.mjs"
SPECS = ("@openai/agents-extensions@0.18.0", "@openai/agents-core@0.18.0", "@openai/agents@0.18.0",
         "e2b@2.51.0")
PROBES = ("@openai/agents-extensions/dist/sandbox/e2b/index.mjs", "@openai/agents/dist/sandbox/index.mjs",
          "@openai/agents-core/dist/testing/index.mjs", "e2b/dist/index.mjs")


@pytest.fixture(scope="session")
def agents_e2b_modules():
    """node_modules of the prefix, installed with npm on first use."""
    if os.environ.get("HUTCH_TEST_E2B_AGENTS_MODULES"):
        return Path(os.environ["HUTCH_TEST_E2B_AGENTS_MODULES"])
    prefix = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hutch-tests" / "node-e2b-agents"
    mods = prefix / "node_modules"
    if not all((mods / p).is_file() for p in PROBES):
        if not shutil.which("npm"):
            pytest.fail("needs npm to install the Agents SDK's E2B client")
        prefix.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", "--save-exact", "--prefix", str(prefix),
                            *SPECS], capture_output=True, text=True, timeout=600)
        if r.returncode != 0 or not all((mods / p).is_file() for p in PROBES):
            pytest.fail(f"cannot install {' '.join(SPECS)} with npm (needs the npm registry once): "
                        f"{r.stderr[-2000:]}")
    return mods


def test_agents_e2b_client(caller, agents_e2b_modules, tmp_path):
    node = shutil.which("node")
    assert node, "needs node"
    lib = tmp_path / "lib"
    lib.mkdir()
    shutil.copy2(TESTS, lib / TESTS.name)
    (lib / "node_modules").symlink_to(agents_e2b_modules)
    canary = tmp_path / "canary.txt"
    canary.write_text("canary: the host's secret\n")
    srv = E2bServer(caller, agents_e2b_modules / "e2b" / "dist" / "index.mjs")
    try:
        env = {**srv.sdk_env(), "HUTCH_CANARY": str(canary)}
        r = subprocess.run([node, "--test", "--test-reporter=tap", str(lib / TESTS.name)],
                           env=env, capture_output=True, text=True, timeout=600, cwd=str(lib))
        out = r.stdout + r.stderr
        assert r.returncode == 0, out
        assert "# pass 2" in out and "# fail 0" in out, out
        # Nothing left: every sandbox the client made was deleted.
        assert srv.sandboxes() == {}, srv.sandboxes()
        srv.stop()
    finally:
        srv.cleanup()
