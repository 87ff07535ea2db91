# SPDX-License-Identifier: LGPL-2.1-or-later
"""The clients' calls for a tree as tar (issue 19): the Python client's
download_tree/upload_tree and the TypeScript client's downloadTree/
uploadTree, against the real `hutch serve`, as root and as the
unprivileged user, through the harnesses of test_client_python.py and
test_client_typescript.py (their environments, with this file's own check
script and test file). The route's own claims: test_file_archive.py."""

import shutil
import subprocess
from pathlib import Path

import pytest

from test_client_python import CHECK_TIMEOUT, PyEnv, ok
from test_client_typescript import NODE_TIMEOUT, TsEnv, node, passed

HERE = Path(__file__).resolve().parent
PY_CHECK = HERE / "client_archive_check.py"
TS_TESTS = HERE / "client-archive.test.mjs"


class PyArchiveEnv(PyEnv):
    def run(self, check, pythonpath=None):
        shutil.copy2(PY_CHECK, self.lib / PY_CHECK.name)
        (self.lib / PY_CHECK.name).chmod(0o644)
        env = self.r.env({"HUTCH_HOME": str(self.home), "HUTCH_STATE_DIR": str(self.state),
                          "PYTHONPATH": str(self.lib / "src"), "PYTHONDONTWRITEBYTECODE": "1"})
        argv = self.r.argv([str(self.lib / PY_CHECK.name), check, self.r.hutch,
                            str(self.state / "api.sock"), str(self.ws), str(self.canary)],
                           verb=None)
        i = argv.index(self.r.hutch)
        argv[i:i + 1] = ["/usr/bin/python3"]
        return subprocess.run(argv, env=env, capture_output=True, text=True,
                              timeout=CHECK_TIMEOUT, cwd=str(self.r.base_dir))


class TsArchiveEnv(TsEnv):
    def run(self, client):
        shutil.copy2(TS_TESTS, self.lib / TS_TESTS.name)
        self.readable()
        env = self.r.env({**self.extra(), "HUTCH_CLIENT": str(client), "HUTCH_BIN": self.r.hutch,
                          "HUTCH_SOCK": str(self.state / "api.sock"), "HUTCH_WS": str(self.ws)})
        argv = self.r.argv(["--test", "--test-reporter=tap", str(self.lib / TS_TESTS.name)],
                           verb=None)
        argv[argv.index(self.r.hutch)] = node()
        return subprocess.run(argv, env=env, capture_output=True, text=True,
                              timeout=NODE_TIMEOUT, cwd=str(self.r.base_dir))


@pytest.fixture
def py(sbx):
    e = PyArchiveEnv(sbx)
    yield e
    e.cleanup()


@pytest.fixture
def ts(sbx):
    e = TsArchiveEnv(sbx)
    yield e
    e.cleanup()


def test_python_client_tree(py):
    ok(py.run("tree"), "tree")
    assert py.sandboxes() == []


def test_python_client_terminal_and_ports(py):
    """The Python client's exec WebSocket and ports (client_archive_check.py
    check_terminal)."""
    ok(py.run("terminal"), "terminal")
    assert py.sandboxes() == []


def test_typescript_client_tree(ts):
    passed(ts.run(ts.lib / "hutch-client" / "index.js"), 1)
    assert ts.sandboxes() == []


