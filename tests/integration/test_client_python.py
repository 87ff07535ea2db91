# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Python client, clients/python (docs/clients.md), against the real
`hutch serve`, as root and as the unprivileged test user.

Each check of client_python_check.py runs in its own process as the
Runner's user, with its own HUTCH_HOME and HUTCH_STATE_DIR, importing the
client from a copy of the source tree (and once from a `pip install`):
every call of the API, the typed outcome, the typed errors (an API error,
no server, a stale socket, a wrong token), the server the client starts
and stops, and the one-liner hutch.run(). The host canary is out of the
sandbox's reach through the client's exec and file calls."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

HERE = Path(__file__).resolve().parent
CHECK = HERE / "client_python_check.py"
CHECK_TIMEOUT = 600


class PyEnv:
    def __init__(self, runner):
        self.r = runner
        self.home = runner.make_dir(0o700, "py-home")
        self.state = runner.make_dir(0o700, "py-state")
        self.ws = runner.make_dir(0o755, "py-ws")
        (self.ws / "host.txt").write_text("from the host\n")
        runner.chown(self.ws / "host.txt")
        self.lib = runner.make_dir(0o755, "py-lib")
        shutil.copytree(REPO / "clients" / "python", self.lib / "src")
        shutil.copy2(CHECK, self.lib / CHECK.name)
        for root, dirs, files in os.walk(self.lib):
            for n in dirs:
                os.chmod(Path(root) / n, 0o755)
            for n in files:
                os.chmod(Path(root) / n, 0o644)
        self.canary_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"hutch-canary-{os.getpid()}"
        self.canary_dir.mkdir(mode=0o755, exist_ok=True)
        self.canary = self.canary_dir / "canary.txt"
        self.canary.write_text("canary: the host's secret\n")
        os.chmod(self.canary, 0o644)  # readable by the user: only the sandbox stops it

    def run(self, check, pythonpath=None):
        env = self.r.env({"HUTCH_HOME": str(self.home), "HUTCH_STATE_DIR": str(self.state),
                          "PYTHONPATH": str(pythonpath or self.lib / "src"),
                          "PYTHONDONTWRITEBYTECODE": "1"})
        argv = self.r.argv([str(self.lib / CHECK.name), check, self.r.hutch,
                            str(self.state / "api.sock"), str(self.ws), str(self.canary)],
                           verb=None)
        # The runner's argv runs hutch; run Debian's python3 in its place.
        i = argv.index(self.r.hutch)
        argv[i:i + 1] = [sys.executable if sys.executable == "/usr/bin/python3"
                         else "/usr/bin/python3"]
        return subprocess.run(argv, env=env, capture_output=True, text=True,
                              timeout=CHECK_TIMEOUT, cwd=str(self.r.base_dir))

    def cleanup(self):
        for sb in self.sandboxes():
            self.r.run_raw(["rm", "--force", sb], env=self.extra())
        for d in (self.home, self.state, self.ws, self.lib, self.canary_dir):
            shutil.rmtree(d, ignore_errors=True)

    def extra(self):
        return {"HUTCH_HOME": str(self.home), "HUTCH_STATE_DIR": str(self.state)}

    def sandboxes(self):
        import json

        r = self.r.run_raw(["ls", "--json"], env=self.extra())
        return [s["name"] for s in json.loads(r.stdout)] if r.returncode == 0 else []


@pytest.fixture
def py(sbx):
    e = PyEnv(sbx)
    yield e
    e.cleanup()


def ok(r, check):
    assert r.returncode == 0 and r.stdout.strip() == f"ok {check}", \
        f"rc {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"


@pytest.mark.parametrize("check", ["surface", "errors", "run"])
def test_client(py, check):
    ok(py.run(check), check)
    assert py.sandboxes() == []


def test_pip_install(py, tmp_path):
    """`pip install ./clients/python` works offline, and the installed
    package is the client (not the source tree)."""
    target = py.lib / "site"
    r = subprocess.run(["/usr/bin/python3", "-m", "pip", "install", "--no-index",
                        "--no-build-isolation", "--no-cache-dir", "--target", str(target),
                        str(py.lib / "src")], capture_output=True, text=True, timeout=300,
                       cwd=str(tmp_path), env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert r.returncode == 0, r.stderr
    assert (target / "hutch" / "client.py").is_file()
    shutil.rmtree(py.lib / "src")  # the installed copy only
    subprocess.run(["chmod", "-R", "a+rX", str(target)], check=True)
    ok(py.run("errors", pythonpath=target), "errors")
