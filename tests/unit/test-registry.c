/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "registry/registry-internal.h"
#include "registry/registry.h"
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

TEST(image_ref_parse_as_docker_writes_them) {
        check_ref("python:3.12", "docker.io", "library/python", "3.12", NULL);
        check_ref("python", "docker.io", "library/python", "latest", NULL);
        check_ref("user/app", "docker.io", "user/app", "latest", NULL);
        check_ref("docker.io/python", "docker.io", "library/python", "latest", NULL);
        check_ref("index.docker.io/x/y:1", "docker.io", "x/y", "1", NULL);
        check_ref("localhost/x", "localhost", "x", "latest", NULL);
        check_ref("localhost:5000/x:y", "localhost:5000", "x", "y", NULL);
        check_ref("127.0.0.1:5000/a/b/c:v1.2-3_4", "127.0.0.1:5000", "a/b/c", "v1.2-3_4", NULL);
        check_ref("[::1]:5000/x", "[::1]:5000", "x", "latest", NULL);
        check_ref("Registry/x", "Registry", "x", "latest", NULL);
        check_ref("a__b/c-d--e.f", "docker.io", "a__b/c-d--e.f", "latest", NULL);
        check_ref("busybox@sha256:" D64, "docker.io", "library/busybox", NULL, "sha256:" D64);
        check_ref("busybox:1@sha256:" D64, "docker.io", "library/busybox", "1", "sha256:" D64);
}

TEST(image_ref_parse_refuses) {
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
}

TEST(image_ref_other_digest_algorithms_are_unsupported) {
        ImageRef *ref = NULL;

        ASSERT_ERROR(image_ref_parse("x@sha512:" D64 D64, &ref, NULL), EOPNOTSUPP);
        ASSERT_NULL(ref);
}

TEST(image_ref_to_string_round_trips) {
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
                ASSERT_STREQ(s, "docker.io/library/python:3.12");
                ASSERT_STREQ(image_ref_endpoint(a), "registry-1.docker.io");
        }
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
        _cleanup_free_ char *path = write_auth_file(
                "{\"auths\": {\"https://index.docker.io/v1/\": {\"auth\": \"YWdlbnQ6czNjcmV0\"},"
                "\"reg.example.test:5000/team\": {\"auth\": \"dTpw\"},"
                "\"bad.example.test\": {\"auth\": \"bm9jb2xvbg==\"}}}");
        char *up = NULL;

        ASSERT_EQ(auth_file_lookup(path, "docker.io", &up), 1);
        ASSERT_STREQ(up, "agent:s3cret");
        free(up);
        up = NULL;
        ASSERT_EQ(auth_file_lookup(path, "reg.example.test:5000", &up), 1);
        ASSERT_STREQ(up, "u:p");
        free(up);
        up = NULL;
        ASSERT_EQ(auth_file_lookup(path, "other.example.test", &up), 0);
        ASSERT_NULL(up);
        /* "nocolon": not user:password */
        ASSERT_ERROR(auth_file_lookup(path, "bad.example.test", &up), EINVAL);
        ASSERT_EQ(auth_file_lookup("/nonexistent/auth.json", "docker.io", &up), 0);
        (void)unlink(path);
}

TEST(auth_file_lookup_refuses_garbage) {
        _cleanup_free_ char *path = write_auth_file("{\"auths\": [1, 2]");
        char *up = NULL;

        ASSERT_ERROR(auth_file_lookup(path, "docker.io", &up), EINVAL);
        (void)unlink(path);
}

DEFINE_TEST_MAIN
