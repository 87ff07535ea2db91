/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/registries-conf.h"
#include "registry/registry-internal.h"
#include "registry/registry.h"
#include "strv.h"
#include "test.h"

static void check_ref(const char *s, const char *domain, const char *repo, const char *tag,
                      const char *digest) {
        _cleanup_(image_ref_freep) ImageRef *ref = NULL;

        ASSERT_OK(image_ref_parse(s, &ref, NULL));
        ASSERT_STREQ(ref->domain, domain);
        ASSERT_STREQ(ref->repository, repo);
        if (tag)
                ASSERT_STREQ(ref->tag, tag);
        else
                ASSERT_NULL(ref->tag);
        if (digest)
                ASSERT_STREQ(ref->digest, digest);
        else
                ASSERT_NULL(ref->digest);
}

#define D64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* The registries.conf this process reads (registries_conf_get() reads it
 * once): written before main() so that no test sees the machine's. It
 * names no default registry; the tests that need one set
 * $HUTCH_REGISTRY_DEFAULT. */
static char conf_path[] = "/tmp/test-registry-conf-XXXXXX";

__attribute__((constructor)) static void conf_setup(void) {
        static const char text[] = "# a test's registries.conf\n"
                                   "[[registry]]\n"
                                   "prefix = \"registry.example.test\"\n"
                                   "location = \"api.registry.example.test\"\n"
                                   "[[registry]]\n"
                                   "prefix = \"blocked.example.test\"\n"
                                   "blocked = true\n"
                                   "[[registry]]\n"
                                   "prefix = \"*.wild.example.test\"\n"
                                   "blocked = true\n"
                                   "[[registry]]\n"
                                   "prefix = \"paths.example.test/team\"\n"
                                   "location = \"mirror.example.test/team\"\n";
        int fd = mkstemp(conf_path);

        if (fd < 0 || write(fd, text, sizeof(text) - 1) != (ssize_t)(sizeof(text) - 1))
                abort();
        (void)close(fd);
        (void)setenv("CONTAINERS_REGISTRIES_CONF", conf_path, 1);
        (void)unsetenv("HUTCH_REGISTRY_DEFAULT");
}

__attribute__((destructor)) static void conf_teardown(void) {
        (void)unlink(conf_path);
}

TEST(image_ref_parse_short_names_need_a_default_registry) {
        ImageRef *ref = NULL;
        HutchError err = {};

        ASSERT_OK(unsetenv("HUTCH_REGISTRY_DEFAULT"));
        ASSERT_ERROR(image_ref_parse("python:3.12", &ref, &err), EINVAL);
        ASSERT_NULL(ref);
        ASSERT_NOT_NULL(strstr(err.msg, "'python:3.12' names no registry"));
        ASSERT_NOT_NULL(strstr(err.msg, "unqualified-search-registries"));
        ASSERT_ERROR(image_ref_parse("user/app", &ref, &err), EINVAL);
        check_ref("localhost:5000/x:y", "localhost:5000", "x", "y", NULL);
        ASSERT_OK(setenv("HUTCH_REGISTRY_DEFAULT", "bad value/x", 1));
        ASSERT_ERROR(image_ref_parse("python:3.12", &ref, &err), EINVAL);
        ASSERT_NOT_NULL(strstr(err.msg, "HUTCH_REGISTRY_DEFAULT"));
        ASSERT_OK(unsetenv("HUTCH_REGISTRY_DEFAULT"));
}

TEST(image_ref_parse_follows_registries_conf) {
        ImageRef *ref = NULL;
        HutchError err = {};

        ASSERT_OK(setenv("HUTCH_REGISTRY_DEFAULT", "registry.example.test", 1));
        {
                _cleanup_(image_ref_freep) ImageRef *a = NULL;

                ASSERT_OK(image_ref_parse("x.example.test/a", &a, NULL));
                ASSERT_STREQ(image_ref_endpoint(a), "x.example.test");
        }
        ASSERT_ERROR(image_ref_parse("blocked.example.test/a", &ref, &err), EACCES);
        ASSERT_NOT_NULL(strstr(err.msg, "blocked"));
        ASSERT_NOT_NULL(strstr(err.msg, conf_path));
        /* Entries hutch does not apply are errors when they concern the
         * registry, never skipped. */
        ASSERT_ERROR(image_ref_parse("a.wild.example.test/a", &ref, &err), EOPNOTSUPP);
        ASSERT_ERROR(image_ref_parse("paths.example.test/team/a", &ref, &err), EOPNOTSUPP);
        ASSERT_NULL(ref);
        ASSERT_OK(unsetenv("HUTCH_REGISTRY_DEFAULT"));
}

TEST(image_ref_parse_as_docker_writes_them) {
        ASSERT_OK(setenv("HUTCH_REGISTRY_DEFAULT", "registry.example.test", 1));
        check_ref("python:3.12", "registry.example.test", "library/python", "3.12", NULL);
        check_ref("python", "registry.example.test", "library/python", "latest", NULL);
        check_ref("user/app", "registry.example.test", "user/app", "latest", NULL);
        check_ref("registry.example.test/python", "registry.example.test", "library/python",
                  "latest", NULL);
        check_ref("other.example.test/x/y:1", "other.example.test", "x/y", "1", NULL);
        check_ref("other.example.test/y:1", "other.example.test", "y", "1", NULL);
        check_ref("localhost/x", "localhost", "x", "latest", NULL);
        check_ref("localhost:5000/x:y", "localhost:5000", "x", "y", NULL);
        check_ref("127.0.0.1:5000/a/b/c:v1.2-3_4", "127.0.0.1:5000", "a/b/c", "v1.2-3_4", NULL);
        check_ref("[::1]:5000/x", "[::1]:5000", "x", "latest", NULL);
        check_ref("Registry/x", "Registry", "x", "latest", NULL);
        check_ref("a__b/c-d--e.f", "registry.example.test", "a__b/c-d--e.f", "latest", NULL);
        check_ref("busybox@sha256:" D64, "registry.example.test", "library/busybox", NULL,
                  "sha256:" D64);
        check_ref("busybox:1@sha256:" D64, "registry.example.test", "library/busybox", "1",
                  "sha256:" D64);
        ASSERT_OK(unsetenv("HUTCH_REGISTRY_DEFAULT"));
}

TEST(image_ref_parse_refuses) {
        ASSERT_OK(setenv("HUTCH_REGISTRY_DEFAULT", "registry.example.test", 1));
        static const char *const bad[] = {
                "",
                "UPPER",
                "a/UPPER",
                "a//b",
                "-a",
                "a-",
                "a..b",
                "a___b",
                "x:",
                "x:-tag",
                "x:.tag",
                "x:t@g",
                "example.test:99999/x",
                "example.test:/x",
                "example.test:12ab/x",
                "[]/x",
                "x@sha256:"
                "0123",
                "x@sha256:"
                "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
                "x@",
                "a b",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                ImageRef *ref = NULL;
                HutchError err = {};
                int r = image_ref_parse(bad[i], &ref, &err);
                if (r != -EINVAL)
                        fprintf(stderr, "'%s': %d\n", bad[i], r);
                ASSERT_ERROR(r, EINVAL);
                ASSERT_NULL(ref);
                ASSERT_TRUE(err.msg[0] != '\0');
        }
        {
                ImageRef *ref = NULL;
                char long_tag[200];
                memset(long_tag, 'a', sizeof(long_tag));
                memcpy(long_tag, "x:", 2);
                long_tag[2 + 129] = '\0';
                ASSERT_ERROR(image_ref_parse(long_tag, &ref, NULL), EINVAL);
        }
        {
                ImageRef *ref = NULL;
                char name[300];
                memset(name, 'a', sizeof(name));
                name[299] = '\0';
                ASSERT_ERROR(image_ref_parse(name, &ref, NULL), EINVAL);
        }
        ASSERT_OK(unsetenv("HUTCH_REGISTRY_DEFAULT"));
}

TEST(image_ref_other_digest_algorithms_are_unsupported) {
        ImageRef *ref = NULL;

        ASSERT_ERROR(image_ref_parse("x@sha512:" D64 D64, &ref, NULL), EOPNOTSUPP);
        ASSERT_NULL(ref);
}

TEST(image_ref_to_string_round_trips) {
        ASSERT_OK(setenv("HUTCH_REGISTRY_DEFAULT", "registry.example.test", 1));
        static const char *const refs[] = {"python:3.12", "localhost:5000/x:y",
                                           "busybox:1@sha256:" D64, "Registry/x"};
        for (size_t i = 0; i < ELEMENTSOF(refs); i++) {
                _cleanup_(image_ref_freep) ImageRef *a = NULL, *b = NULL;
                _cleanup_free_ char *s = NULL;

                ASSERT_OK(image_ref_parse(refs[i], &a, NULL));
                s = image_ref_to_string(a);
                ASSERT_NOT_NULL(s);
                ASSERT_OK(image_ref_parse(s, &b, NULL));
                ASSERT_STREQ(a->domain, b->domain);
                ASSERT_STREQ(a->repository, b->repository);
        }
        {
                _cleanup_(image_ref_freep) ImageRef *a = NULL;
                _cleanup_free_ char *s = NULL;
                ASSERT_OK(image_ref_parse("python:3.12", &a, NULL));
                s = image_ref_to_string(a);
                ASSERT_STREQ(s, "registry.example.test/library/python:3.12");
                /* its [[registry]] location */
                ASSERT_STREQ(image_ref_endpoint(a), "api.registry.example.test");
                ASSERT_STREQ(a->domain, "registry.example.test");
        }
        ASSERT_OK(unsetenv("HUTCH_REGISTRY_DEFAULT"));
}

TEST(auth_challenge_parse_bearer) {
        AuthChallenge c = {};

        ASSERT_OK(auth_challenge_parse("Bearer realm=\"https://auth.example.test/token\","
                                       "service=\"registry.example.test\",scope=\"repository:a/"
                                       "b:pull\",error=\"insufficient_scope\"",
                                       &c));
        ASSERT_STREQ(c.scheme, "Bearer");
        ASSERT_STREQ(c.realm, "https://auth.example.test/token");
        ASSERT_STREQ(c.service, "registry.example.test");
        ASSERT_STREQ(c.scope, "repository:a/b:pull");
        auth_challenge_done(&c);

        /* Tokens, spaces around '=' and ',', escapes in a quoted string. */
        ASSERT_OK(
                auth_challenge_parse("  bearer realm = https://x.test/t , service=\"a\\\"b\"", &c));
        ASSERT_STREQ(c.scheme, "bearer");
        ASSERT_STREQ(c.realm, "https://x.test/t");
        ASSERT_STREQ(c.service, "a\"b");
        ASSERT_NULL(c.scope);
        auth_challenge_done(&c);

        /* Only the first of two challenges is read. */
        ASSERT_OK(auth_challenge_parse("Basic realm=\"r\", Bearer realm=\"s\"", &c));
        ASSERT_STREQ(c.scheme, "Basic");
        ASSERT_STREQ(c.realm, "r");
        auth_challenge_done(&c);

        ASSERT_OK(auth_challenge_parse("Basic", &c));
        ASSERT_STREQ(c.scheme, "Basic");
        ASSERT_NULL(c.realm);
        auth_challenge_done(&c);
}

TEST(auth_challenge_parse_refuses) {
        static const char *const bad[] = {
                "",
                "   ",
                "Bearer realm",
                "Bearer realm=",
                "Bearer realm=\"unterminated",
                "Bearer realm=\"a\" service=\"b\"",
                "Bearer realm=\"a\",realm=\"b\"",
                "Bearer realm=\"a\r\nX-Injected: 1\"",
                "Bearer realm=\"a\\",
                "Be(arer realm=a",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                AuthChallenge c = {};
                int r = auth_challenge_parse(bad[i], &c);
                if (r != -EINVAL)
                        fprintf(stderr, "'%s': %d\n", bad[i], r);
                ASSERT_ERROR(r, EINVAL);
                ASSERT_NULL(c.scheme);
        }
        {
                AuthChallenge c = {};
                char *big = malloc(9000);
                ASSERT_NOT_NULL(big);
                memset(big, 'a', 8999);
                big[8999] = '\0';
                ASSERT_ERROR(auth_challenge_parse(big, &c), E2BIG);
                free(big);
        }
}

TEST(url_parse_and_resolve) {
        Url u = {}, v = {};

        ASSERT_OK(url_parse("https://Reg.example.test/v2/?x=1#frag", &u));
        ASSERT_TRUE(u.https);
        ASSERT_STREQ(u.host, "Reg.example.test");
        ASSERT_EQ(u.port, 443);
        ASSERT_STREQ(u.path, "/v2/?x=1");
        ASSERT_OK(url_resolve(&u, "/blobs/a", &v));
        ASSERT_TRUE(url_same_origin(&u, &v));
        ASSERT_STREQ(v.path, "/blobs/a");
        url_done(&v);
        ASSERT_OK(url_resolve(&u, "http://reg.example.test/x", &v));
        ASSERT_FALSE(url_same_origin(&u, &v));
        ASSERT_EQ(v.port, 80);
        url_done(&v);
        ASSERT_OK(url_resolve(&u, "https://reg.example.test:443/x", &v));
        ASSERT_TRUE(url_same_origin(&u, &v));
        url_done(&v);
        url_done(&u);

        ASSERT_OK(url_parse("http://[::1]:5000?q", &u));
        ASSERT_STREQ(u.host, "::1");
        ASSERT_EQ(u.port, 5000);
        ASSERT_STREQ(u.path, "/?q");
        ASSERT_TRUE(host_is_loopback(u.host));
        url_done(&u);

        ASSERT_ERROR(url_parse("ftp://x/", &u), EPROTONOSUPPORT);
        ASSERT_ERROR(url_parse("x/y", &u), EINVAL);
        ASSERT_ERROR(url_parse("https://user:pw@x/", &u), EINVAL);
        ASSERT_ERROR(url_parse("https://x:0/", &u), EINVAL);
        ASSERT_ERROR(url_parse("https://x:65536/", &u), EINVAL);
        ASSERT_ERROR(url_parse("https://x/a\r\nb", &u), EINVAL);
        ASSERT_ERROR(url_parse("https:///a", &u), EINVAL);
        ASSERT_ERROR(url_parse("https://[]/a", &u), EINVAL);
        ASSERT_OK(url_parse("https://x/", &u));
        ASSERT_ERROR(url_resolve(&u, "//other/x", &v), EINVAL);
        ASSERT_ERROR(url_resolve(&u, "relative", &v), EINVAL);
        ASSERT_ERROR(url_resolve(&u, "/a b", &v), EINVAL);
        url_done(&u);

        ASSERT_TRUE(host_is_loopback("localhost"));
        ASSERT_TRUE(host_is_loopback("127.1.2.3"));
        ASSERT_FALSE(host_is_loopback("128.0.0.1"));
        ASSERT_FALSE(host_is_loopback("localhost.example.test"));
        ASSERT_FALSE(http_value_is_safe("a\nb"));
        ASSERT_TRUE(http_value_is_safe("Bearer abc.def"));
}

static char *write_auth_file(const char *json) {
        char *path = strdup("/tmp/test-registry-auth-XXXXXX");
        int fd;

        ASSERT_NOT_NULL(path);
        fd = mkstemp(path);
        ASSERT_TRUE(fd >= 0);
        ASSERT_EQ(write(fd, json, strlen(json)), (ssize_t)strlen(json));
        close(fd);
        return path;
}

TEST(auth_file_lookup_finds_the_entry) {
        /* base64("agent:s3cret") */
        _cleanup_free_ char *path =
                write_auth_file("{\"auths\": {\"https://registry.example.test/v1/\": {\"auth\": "
                                "\"YWdlbnQ6czNjcmV0\"},"
                                "\"api.other.example.test\": {\"auth\": \"YTpi\"},"
                                "\"reg.example.test:5000/team\": {\"auth\": \"dTpw\"},"
                                "\"bad.example.test\": {\"auth\": \"bm9jb2xvbg==\"}}}");
        char *up = NULL;

        ASSERT_EQ(auth_file_lookup(path, "registry.example.test", NULL, &up), 1);
        ASSERT_STREQ(up, "agent:s3cret");
        free(up);
        up = NULL;
        /* a key naming the registry's API host (its [[registry]] location) */
        ASSERT_EQ(auth_file_lookup(path, "other.example.test", "api.other.example.test", &up), 1);
        ASSERT_STREQ(up, "a:b");
        free(up);
        up = NULL;
        ASSERT_EQ(auth_file_lookup(path, "other.example.test", NULL, &up), 0);
        ASSERT_NULL(up);
        ASSERT_EQ(auth_file_lookup(path, "reg.example.test:5000", NULL, &up), 1);
        ASSERT_STREQ(up, "u:p");
        free(up);
        up = NULL;
        ASSERT_EQ(auth_file_lookup(path, "third.example.test", NULL, &up), 0);
        ASSERT_NULL(up);
        /* "nocolon": not user:password */
        ASSERT_ERROR(auth_file_lookup(path, "bad.example.test", NULL, &up), EINVAL);
        ASSERT_EQ(auth_file_lookup("/nonexistent/auth.json", "registry.example.test", NULL, &up),
                  0);
        (void)unlink(path);
}

TEST(auth_file_lookup_refuses_garbage) {
        _cleanup_free_ char *path = write_auth_file("{\"auths\": [1, 2]");
        char *up = NULL;

        ASSERT_ERROR(auth_file_lookup(path, "registry.example.test", NULL, &up), EINVAL);
        (void)unlink(path);
}

static int conf_parse(const char *text, RegistriesConf **ret, HutchError *err) {
        _cleanup_(registries_conf_freep) RegistriesConf *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return -ENOMEM;
        r = registries_conf_parse(c, text, "t.conf", err);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

TEST(registries_conf_parse_the_subset) {
        _cleanup_(registries_conf_freep) RegistriesConf *c = NULL;
        const RegistryEntry *e;
        HutchError err = {};

        ASSERT_OK(conf_parse("# comment\n"
                             "unqualified-search-registries = [\"registry.example.test\", # one\n"
                             "   'two.example.test:5000',\n"
                             "]\n"
                             "short-name-mode = \"enforcing\"\r\n"
                             "credential-helpers = []\n"
                             "[[registry]]\n"
                             "prefix = \"a.example.test\"\n"
                             "location = \"b.example.test\"  # the API\n"
                             "insecure = false\n"
                             "[[registry.mirror]]\n"
                             "location = \"m.example.test\"\n"
                             "[[registry]]\n"
                             "location = \"c.example.test\"\n"
                             "blocked = true\n"
                             "[[registry]]\n"
                             "prefix = \"a.example.test\"\n"
                             "location = \"d.example.test\"\n"
                             "insecure = true\n"
                             "[aliases]\n"
                             "  \"x\" = \"a.example.test/library/x\"\n"
                             "\"team/y\" = \"localhost:5000/y\"\n"
                             "\"x\" = \"a.example.test/x2\"\n",
                             &c, &err));
        ASSERT_EQ(strv_length(c->search), 2);
        ASSERT_STREQ(c->search[0], "registry.example.test");
        ASSERT_STREQ(c->search[1], "two.example.test:5000");
        /* the later [[registry]] with the same prefix replaces the earlier */
        ASSERT_EQ(c->n_entries, 2);
        ASSERT_EQ(registries_conf_lookup(c, "a.example.test", &e, &err), 1);
        ASSERT_STREQ(e->location, "d.example.test");
        ASSERT_STREQ(e->where, "t.conf:16");
        ASSERT_TRUE(e->insecure);
        ASSERT_EQ(registries_conf_lookup(c, "c.example.test", &e, &err), 1);
        ASSERT_TRUE(e->blocked);
        ASSERT_FALSE(e->insecure);
        ASSERT_STREQ(c->short_name_mode, "enforcing");
        ASSERT_STREQ(c->short_name_mode_where, "t.conf:5");
        {
                const char *value, *where;

                /* A later alias of the same name replaces the earlier. */
                ASSERT_EQ(registries_conf_alias(c, "x", &value, &where), 1);
                ASSERT_STREQ(value, "a.example.test/x2");
                ASSERT_STREQ(where, "t.conf:23");
                ASSERT_EQ(registries_conf_alias(c, "team/y", &value, &where), 1);
                ASSERT_STREQ(value, "localhost:5000/y");
                ASSERT_EQ(registries_conf_alias(c, "y", &value, &where), 0);
        }
        ASSERT_EQ(registries_conf_lookup(c, "e.example.test", &e, &err), 0);
        ASSERT_NULL(e);
}

TEST(registries_conf_mirrors) {
        _cleanup_(registries_conf_freep) RegistriesConf *c = NULL;
        const RegistryEntry *e;
        HutchError err = {};

        ASSERT_OK(conf_parse("[[registry]]\n"
                             "prefix = \"a.example.test\"\n"
                             "mirror-by-digest-only = true\n"
                             "[[registry.mirror]]\n"
                             "location = \"m1.example.test\"\n"
                             "insecure = true\n"
                             "[[registry.mirror]]\n"
                             "location = \"m2.example.test:5000\"\n",
                             &c, &err));
        ASSERT_EQ(registries_conf_lookup(c, "a.example.test", &e, &err), 1);
        ASSERT_EQ(strv_length(e->mirrors), 2);
        ASSERT_STREQ(e->mirrors[0], "m1.example.test");
        ASSERT_STREQ(e->mirrors[1], "m2.example.test:5000");
        ASSERT_TRUE(e->mirror_insecure[0]);
        ASSERT_FALSE(e->mirror_insecure[1]);
        ASSERT_TRUE(e->mirror_by_digest_only);
        ASSERT_FALSE(e->insecure);
}

TEST(registries_conf_parse_errors_name_file_and_line) {
        static const struct {
                const char *text, *where;
        } bad[] = {
                {"a = 1\nb = \"open\n", "t.conf:2:"},
                {"\n\nunqualified-search-registries = \"x\"\n", "t.conf:3:"},
                {"unqualified-search-registries = [\"a b\"]\n", "t.conf:1:"},
                {"unqualified-search-registries = [\"a/b\"]\n", "t.conf:1:"},
                {"[registry]\n", "t.conf:1:"},
                {"a = { b = 1 }\n", "t.conf:1:"},
                {"a = 1 2\n", "t.conf:1:"},
                {"[[registry]]\nblocked = \"yes\"\n", "t.conf:2:"},
                {"[[registry]]\ninsecure = true\n", "t.conf:1"},
                {"a = \"\"\"x\"\"\"\n", "t.conf:1:"},
                {"= 1\n", "t.conf:1:"},
                {"a = [1]\n", "t.conf:1:"},
                {"short-name-mode = \"prompt\"\n", "t.conf:1:"},
                {"\nshort-name-mode = true\n", "t.conf:2:"},
                {"[aliases]\n\"x\" = 5\n", "t.conf:2:"},
                {"[aliases]\n\"x\" = \"x\"\n", "t.conf:2:"},
                {"[aliases]\n\"x\" = \"a.test/x:1\"\n", "t.conf:2:"},
                {"[aliases]\n\"x\" = \"a.test/x@sha256:00\"\n", "t.conf:2:"},
                {"[aliases]\n\"a.test/x\" = \"a.test/x\"\n", "t.conf:2:"},
                {"[aliases]\n\"x:1\" = \"a.test/x\"\n", "t.conf:2:"},
                {"[[registry]]\nprefix = \"a.test\"\ninsecure = \"yes\"\n", "t.conf:3:"},
                {"[[registry.mirror]]\nlocation = \"m.test\"\n", "t.conf:1:"},
                {"[[registry]]\nprefix = \"a.test\"\n[[registry.mirror]]\n", "t.conf:1"},
                {"[[registry]]\nprefix = \"a.test\"\n[[registry.mirror]]\nlocation = \"m/x\"\n",
                 "t.conf:4:"},
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                RegistriesConf *c = NULL;
                HutchError err = {};

                ASSERT_ERROR(conf_parse(bad[i].text, &c, &err), EINVAL);
                ASSERT_NULL(c);
                if (strncmp(err.msg, bad[i].where, strlen(bad[i].where)) != 0)
                        fail_msg("'%s': message '%s'", bad[i].text, err.msg);
        }
}

static int put_file(const char *path, const char *text) {
        FILE *f = fopen(path, "we");

        if (!f)
                return -errno;
        (void)fputs(text, f);
        return fclose(f) == 0 ? 0 : -errno;
}

TEST(registries_conf_load_merges_dropins) {
        char dir[] = "/tmp/test-registries-d-XXXXXX";
        _cleanup_free_ char *main_path = NULL, *d = NULL, *f1 = NULL, *f2 = NULL, *f3 = NULL;
        _cleanup_(registries_conf_freep) RegistriesConf *c = NULL;
        HutchError err = {};
        char *dirs[2] = {};

        ASSERT_NOT_NULL(mkdtemp(dir));
        ASSERT_TRUE(asprintf(&main_path, "%s/main.conf", dir) > 0);
        ASSERT_TRUE(asprintf(&d, "%s/d", dir) > 0);
        ASSERT_TRUE(asprintf(&f1, "%s/d/20-b.conf", dir) > 0);
        ASSERT_TRUE(asprintf(&f2, "%s/d/10-a.conf", dir) > 0);
        ASSERT_TRUE(asprintf(&f3, "%s/d/30-c.txt", dir) > 0);
        ASSERT_OK(mkdir(d, 0700));
        ASSERT_OK(put_file(main_path, "unqualified-search-registries = [\"m.example.test\"]\n"));
        ASSERT_OK(put_file(f2, "unqualified-search-registries = [\"a.example.test\"]\n"));
        ASSERT_OK(put_file(f1, "unqualified-search-registries = [\"b.example.test\"]\n"));
        ASSERT_OK(put_file(f3, "not toml at all ["));
        dirs[0] = d;
        ASSERT_OK(registries_conf_load_from(main_path, dirs, &c, &err));
        ASSERT_STREQ(c->search[0], "b.example.test");
        c = registries_conf_free(c);
        ASSERT_OK(put_file(f1, "x = [\n"));
        ASSERT_ERROR(registries_conf_load_from(main_path, dirs, &c, &err), EINVAL);
        ASSERT_NOT_NULL(strstr(err.msg, "20-b.conf:"));
        (void)unlink(f1);
        (void)unlink(f2);
        (void)unlink(f3);
        (void)rmdir(d);
        (void)unlink(main_path);
        (void)rmdir(dir);
}

DEFINE_TEST_MAIN
