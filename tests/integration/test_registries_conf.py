# SPDX-License-Identifier: LGPL-2.1-or-later
"""registries.conf beyond the default registry (issue 17,
docs/images-pull.md "Which registry"): [aliases], short-name-mode, every
unqualified-search-registries entry tried in order, [[registry]]
insecure, and a file that does not parse named by file and line in
`hutch image` and `hutch run --image` too. The registry is Debian's
docker-registry on 127.0.0.1 (plain HTTP); the other names are .test names
or closed loopback ports. Each test writes its own registries.conf
($CONTAINERS_REGISTRIES_CONF)."""

import imageutil
import registryutil
from test_image_registries import EXIT_FAILURE, Caller, registry  # noqa: F401 (fixture)


def pulled(r, registry):
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.strip() == registry.amd["digest"]


# ---- [aliases] ----


def test_alias_names_the_image_of_a_short_name(sbx, registry):
    conf = ('unqualified-search-registries = ["nowhere.example.test"]\n'
            "[aliases]\n"
            f'"myapp" = "{registry.host}/team/app"\n')
    c = Caller(sbx, conf)
    r = c("pull", "--tls-verify=false", "myapp:2")
    pulled(r, registry)
    # The alias is shown, with where it was set.
    assert f"'myapp:2' is {registry.host}/team/app:2 (the alias in {c.conf}:3)" in r.stderr
    # The store finds the image by the short name too, as the pull named it.
    assert f"{registry.host}/team/app:2" in c.names()
    r = c("inspect", "myapp:2")
    assert r.returncode == 0, r.stderr
    # Twin: without the alias the short name is the search registry's,
    # which has no such image.
    c2 = Caller(sbx, 'unqualified-search-registries = ["nowhere.example.test"]\n')
    c2.extra = {"HUTCH_REGISTRY_DEFAULT": f"127.0.0.1:{registryutil.free_port()}"}
    r = c2("pull", "--tls-verify=false", "myapp:2")
    assert r.returncode == EXIT_FAILURE, r
    assert "team/app" not in c2.names()


# ---- short-name-mode and the search registries ----


def closed():
    return f"127.0.0.1:{registryutil.free_port()}"


def test_enforcing_refuses_an_ambiguous_short_name(sbx, registry):
    other = closed()
    for mode_line in ("", 'short-name-mode = "enforcing"\n'):
        c = Caller(sbx, f'unqualified-search-registries = ["{other}", "{registry.host}"]\n'
                        + mode_line)
        r = c("pull", "--tls-verify=false", "short:1")
        assert r.returncode == EXIT_FAILURE, r
        assert "short-name-mode is enforcing" in r.stderr, r.stderr
        # The candidates are named, in order.
        assert f"{other}/library/short:1, {registry.host}/library/short:1" in r.stderr
        if mode_line:
            assert f"{c.conf}:2" in r.stderr
        assert "short" not in c.names()
    # Twins: a qualified name, or an alias, is not ambiguous.
    r = c("pull", "--tls-verify=false", f"{registry.host}/library/short:1")
    pulled(r, registry)
    c = Caller(sbx, f'unqualified-search-registries = ["{other}", "{registry.host}"]\n'
                    f'[aliases]\n"short" = "{registry.host}/library/short"\n')
    pulled(c("pull", "--tls-verify=false", "short:1"), registry)


def test_permissive_tries_each_search_registry_in_order(sbx, registry):
    first = closed()
    for mode in ("permissive", "disabled"):
        c = Caller(sbx, f'unqualified-search-registries = ["{first}", "{registry.host}"]\n'
                        f'short-name-mode = "{mode}"\n')
        r = c("pull", "--tls-verify=false", "short:1")
        pulled(r, registry)
        # The first failed, said so; the second had it.
        assert f"cannot pull '{first}/library/short:1'" in r.stderr, r.stderr
        assert f"trying {registry.host}/library/short:1" in r.stderr, r.stderr
        assert f"{registry.host}/library/short:1" in c.names()
    # Twin: none has it: each failure said, nothing stored.
    c = Caller(sbx, f'unqualified-search-registries = ["{first}", "{registry.host}"]\n'
                    'short-name-mode = "permissive"\n')
    r = c("pull", "--tls-verify=false", "absent:1")
    assert r.returncode == EXIT_FAILURE, r
    assert f"cannot pull '{first}/library/absent:1'" in r.stderr
    assert f"cannot pull '{registry.host}/library/absent:1'" in r.stderr
    assert "from any of its registries and mirrors" in r.stderr
    assert "absent" not in c.names()


# ---- [[registry]] insecure ----


def test_insecure_allows_plain_http_for_that_registry_only(sbx, registry):
    c = Caller(sbx, f'[[registry]]\nprefix = "{registry.host}"\ninsecure = true\n')
    r = c("pull", f"{registry.host}/team/app:2")
    pulled(r, registry)
    assert "insecure in registries.conf" in r.stderr
    # Twins: without it (or with another registry insecure) the plain-HTTP
    # registry is refused.
    for conf in ("# nothing\n", '[[registry]]\nprefix = "other.example.test"\ninsecure = true\n'):
        c = Caller(sbx, conf)
        r = c("pull", f"{registry.host}/team/app:2")
        assert r.returncode == EXIT_FAILURE, r
        assert "team/app" not in c.names()


# ---- a file that does not parse ----


def test_bad_registries_conf_is_named_in_image_and_run(sbx, registry):
    c = Caller(sbx, '# fine\n[aliases]\n"x" = "x"\n')
    where = f"{c.conf}:3:"
    for args in (("inspect", "short:1"), ("rm", "short:1")):
        r = c(*args)
        assert r.returncode == EXIT_FAILURE, (args, r)
        assert where in r.stderr, (args, r.stderr)
    layout = c.dir / "layout"
    imageutil.write_oci_layout(layout, imageutil.make_image(), ref=None)
    sbx.chown(layout)
    r = c("import", layout, "mine:1")
    assert r.returncode == EXIT_FAILURE and where in r.stderr, r
    env = {"HUTCH_HOME": str(c.home), "CONTAINERS_REGISTRIES_CONF": str(c.conf)}
    r = sbx.run_raw(["run", "--image", "short:1", "--", "true"], env=env, timeout=120)
    assert r.returncode == EXIT_FAILURE and where in r.stderr, r
    # Twin: the same file mended, the same commands say what they say
    # without it (no such image; the import works).
    c.conf.write_text('# fine\n[aliases]\n"x" = "example.test/x"\n')
    r = c("inspect", "short:1")
    assert r.returncode == EXIT_FAILURE and "no image" in r.stderr and where not in r.stderr
    r = c("import", layout, "mine:1")
    assert r.returncode == 0, r.stderr


# ---- [[registry.mirror]] ----


def mirror_conf(location, mirror, extra="", mirror_extra=""):
    return ('[[registry]]\n'
            'prefix = "registry.example.test"\n'
            f'location = "{location}"\n{extra}'
            '[[registry.mirror]]\n'
            f'location = "{mirror}"\n{mirror_extra}')


def test_mirror_is_tried_before_the_location(sbx, registry):
    c = Caller(sbx, mirror_conf(closed(), registry.host))
    r = c("pull", "--tls-verify=false", "registry.example.test/team/app:2")
    pulled(r, registry)
    assert f"trying registry.example.test/team/app:2 at the mirror {registry.host}" in r.stderr
    # The image keeps its name, not the mirror's.
    assert "registry.example.test/team/app:2" in c.names()
    # A mirror that fails falls through to the location, said.
    bad = closed()
    c = Caller(sbx, mirror_conf(registry.host, bad))
    r = c("pull", "--tls-verify=false", "registry.example.test/team/app:2")
    pulled(r, registry)
    assert f"cannot pull 'registry.example.test/team/app:2 at the mirror {bad}'" in r.stderr
    # Twin: neither has it: refused, each failure said, nothing stored.
    c = Caller(sbx, mirror_conf(closed(), closed()))
    r = c("pull", "--tls-verify=false", "registry.example.test/team/app:2")
    assert r.returncode == EXIT_FAILURE, r
    assert "at the mirror" in r.stderr and "any of its registries and mirrors" in r.stderr
    assert "team/app" not in c.names()


def test_mirror_by_digest_only_and_a_mirrors_insecure(sbx, registry):
    conf = mirror_conf(closed(), registry.host, extra="mirror-by-digest-only = true\n",
                       mirror_extra="insecure = true\n")
    c = Caller(sbx, conf)
    # By tag: the mirror is not used, the location is closed.
    r = c("pull", "registry.example.test/team/app:2")
    assert r.returncode == EXIT_FAILURE, r
    assert "at the mirror" not in r.stderr
    # By digest: the mirror, in plain HTTP by its own insecure = true.
    r = c("pull", f"registry.example.test/team/app@{registry.amd['digest']}")
    pulled(r, registry)
    assert "insecure in registries.conf" in r.stderr
