# SPDX-License-Identifier: LGPL-2.1-or-later
"""The TypeScript client, clients/typescript (docs/clients.md), against the
real `hutch serve`, as root and as the unprivileged test user: runs
client-typescript.test.mjs with Node's test runner (`node --test`) as the
Runner's user, with its own HUTCH_HOME and HUTCH_STATE_DIR, and checks
that every test of it passed. The package is used from a copy of the
source tree, and once as installed by `npm install ./clients/typescript`."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

HERE = Path(__file__).resolve().parent
TESTS = HERE / "client-typescript.test.mjs"
NODE_TIMEOUT = 600


def node():
    n = shutil.which("node")
    if not n:
        pytest.fail("needs node (Node 18+): tools/deps.sh installs nodejs")
    return n


class TsEnv:
    def __init__(self, runner):
        self.r = runner
        self.home = runner.make_dir(0o700, "ts-home")
        self.state = runner.make_dir(0o700, "ts-state")
        self.ws = runner.make_dir(0o755, "ts-ws")
        (self.ws / "host.txt").write_text("from the host\n")
        runner.chown(self.ws / "host.txt")
        self.lib = runner.make_dir(0o755, "ts-lib")
        shutil.copytree(REPO / "clients" / "typescript", self.lib / "hutch-client")
        shutil.copy2(TESTS, self.lib / TESTS.name)
        self.canary_dir = Path("/tmp") / f"hutch-ts-canary-{os.getpid()}"
        self.canary_dir.mkdir(mode=0o755, exist_ok=True)
        self.canary = self.canary_dir / "canary.txt"
        self.canary.write_text("canary: the host's secret\n")
        self.readable()

    def readable(self):
        subprocess.run(["chmod", "-R", "a+rX", str(self.lib), str(self.canary_dir)], check=True)

    def extra(self):
        return {"HUTCH_HOME": str(self.home), "HUTCH_STATE_DIR": str(self.state)}

    def run(self, client):
        env = self.r.env({**self.extra(), "HUTCH_CLIENT": str(client), "HUTCH_BIN": self.r.hutch,
                          "HUTCH_SOCK": str(self.state / "api.sock"), "HUTCH_WS": str(self.ws),
                          "HUTCH_CANARY": str(self.canary)})
        argv = self.r.argv(["--test", "--test-reporter=tap", str(self.lib / TESTS.name)],
                           verb=None)
        argv[argv.index(self.r.hutch)] = node()
        return subprocess.run(argv, env=env, capture_output=True, text=True,
                              timeout=NODE_TIMEOUT, cwd=str(self.r.base_dir))

    def sandboxes(self):
        import json

        r = self.r.run_raw(["ls", "--json"], env=self.extra())
        return [s["name"] for s in json.loads(r.stdout)] if r.returncode == 0 else []

    def cleanup(self):
        for sb in self.sandboxes():
            self.r.run_raw(["rm", "--force", sb], env=self.extra())
        for d in (self.home, self.state, self.ws, self.lib, self.canary_dir):
            shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def ts(sbx):
    e = TsEnv(sbx)
    yield e
    e.cleanup()


def passed(r, n):
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert re.search(rf"^# pass {n}$", r.stdout, re.M) and re.search(r"^# fail 0$", r.stdout,
                                                                     re.M), out


def test_typescript_client(ts):
    passed(ts.run(ts.lib / "hutch-client" / "index.js"), 2)
    assert ts.sandboxes() == []


def test_npm_install(ts, tmp_path):
    """`npm install ./clients/typescript` (offline: no dependencies) gives a
    package whose import is the client."""
    proj = ts.lib / "proj"
    proj.mkdir()
    (proj / "package.json").write_text('{"name": "proj", "version": "0.0.0", "private": true}\n')
    r = subprocess.run(["npm", "install", "--offline", "--no-audit", "--no-fund", "--install-links",
                        str(REPO / "clients" / "typescript")], cwd=str(proj), capture_output=True,
                       text=True, timeout=300,
                       env={**os.environ, "npm_config_cache": str(tmp_path / "npm-cache")})
    assert r.returncode == 0, r.stderr
    pkg = proj / "node_modules" / "hutch-client"
    assert (pkg / "index.d.ts").is_file() and not pkg.is_symlink()
    ts.readable()
    passed(ts.run(pkg / "index.js"), 2)
