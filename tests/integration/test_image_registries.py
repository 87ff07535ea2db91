# SPDX-License-Identifier: LGPL-2.1-or-later
"""Which registry an image name means, read at run time (issue 17,
docs/images-pull.md "Which registry"): hutch names no registry in its code.
A short name ("short:1") needs a default registry from
containers-registries.conf(5) or $HUTCH_REGISTRY_DEFAULT; a [[registry]]
location says where a registry's API is (here: a name under .test reached
at the local docker-registry), and blocked = true refuses it. Each test
writes its own registries.conf and points $CONTAINERS_REGISTRIES_CONF at it,
so the machine's configuration plays no part."""

import shutil

import pytest

import registryutil

EXIT_FAILURE = 125

pytestmark = pytest.mark.skipif(
    not shutil.which("docker-registry") or not shutil.which("skopeo"),
    reason="needs docker-registry and skopeo (tools/deps.sh test)")


@pytest.fixture(scope="module")
def registry():
    def fill(reg, layout):
        # A one-component name of the default registry is in its library/.
        reg.push(layout, "amd", "library/short:1")
        reg.push(layout, "amd", "team/app:2")

    with registryutil.running_registry("hutch-registries-", fill) as reg:
        yield reg


class Caller:
    """`hutch image ...` as @runner's caller with a store and a
    registries.conf of its own."""

    def __init__(self, runner, conf_text):
        self.runner = runner
        self.dir = runner.make_dir(name="registries")
        self.home = self.dir / "hutch"
        self.conf = self.dir / "registries.conf"
        self.conf.write_text(conf_text)
        runner.chown(self.conf)
        self.extra = {}

    def __call__(self, *args):
        env = {"HUTCH_HOME": str(self.home), "CONTAINERS_REGISTRIES_CONF": str(self.conf),
               **self.extra}
        return self.runner.run_raw(["image", *args], env=env, timeout=120)

    def names(self):
        r = self("ls", "-q")
        assert r.returncode == 0, r.stderr
        r = self("ls")
        assert r.returncode == 0, r.stderr
        return r.stdout


def test_short_name_without_a_default_registry_is_an_error(sbx, registry):
    c = Caller(sbx, "# no unqualified-search-registries\n")
    r = c("pull", "--tls-verify=false", "short:1")
    assert r.returncode == EXIT_FAILURE, r
    assert "'short:1' names no registry" in r.stderr
    assert "unqualified-search-registries" in r.stderr
    # The negative twin: the same image named with its registry is pulled.
    r = c("pull", "--tls-verify=false", f"{registry.host}/library/short:1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == registry.amd["digest"]


def test_default_registry_from_registries_conf(sbx, registry):
    c = Caller(sbx, f'unqualified-search-registries = ["{registry.host}"]\n')
    r = c("pull", "--tls-verify=false", "short:1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == registry.amd["digest"]
    r = c("pull", "--tls-verify=false", "team/app:2")
    assert r.returncode == 0, r.stderr
    # Shown short, found by the short name and by the full one.
    ls = c.names()
    assert "short:1" in ls and "team/app:2" in ls and registry.host not in ls
    for name in ("short:1", f"{registry.host}/library/short:1", f"{registry.host}/short:1"):
        r = c("inspect", name)
        assert r.returncode == 0, (name, r.stderr)


def test_hutch_registry_default_overrides_the_file(sbx, registry):
    c = Caller(sbx, 'unqualified-search-registries = ["nowhere.example.test"]\n')
    c.extra = {"HUTCH_REGISTRY_DEFAULT": registry.host}
    r = c("pull", "--tls-verify=false", "short:1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == registry.amd["digest"]


def test_registry_location_is_where_its_api_is(sbx, registry):
    conf = ('[[registry]]\n'
            'prefix = "registry.example.test"\n'
            f'location = "{registry.host}"\n')
    c = Caller(sbx, conf)
    r = c("pull", "--tls-verify=false", "registry.example.test/team/app:2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == registry.amd["digest"]
    assert "registry.example.test/team/app:2" in c.names()
    # The negative twin: with the location a closed port on loopback, the
    # same name fails there.
    c2 = Caller(sbx, conf.replace(registry.host, f"127.0.0.1:{registryutil.free_port()}"))
    r = c2("pull", "--tls-verify=false", "registry.example.test/team/app:2")
    assert r.returncode == EXIT_FAILURE, r
    assert "team/app" not in c2.names()


def test_blocked_registry_is_refused(sbx, registry):
    conf = ('[[registry]]\n'
            f'prefix = "{registry.host}"\n'
            'blocked = true\n')
    c = Caller(sbx, conf)
    r = c("pull", "--tls-verify=false", f"{registry.host}/team/app:2")
    assert r.returncode == EXIT_FAILURE, r
    assert "blocked" in r.stderr and f"{c.conf}:1" in r.stderr
    assert "team/app" not in c.names()


def test_bad_registries_conf_names_file_and_line(sbx, registry):
    c = Caller(sbx, '# fine\nunqualified-search-registries = "not an array"\n')
    r = c("pull", "--tls-verify=false", "short:1")
    assert r.returncode == EXIT_FAILURE, r
    assert f"{c.conf}:2:" in r.stderr
