/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdlib.h>

#include "serve-preview.h"
#include "serve-util.h"
#include "strv.h"
#include "test.h"

TEST(path_match) {
        const char *p = NULL;
        size_t len = 99;

        ASSERT_TRUE(serve_path_match("/v1/sandboxes", "/v1/sandboxes", &p, &len));
        ASSERT_NULL(p);
        ASSERT_EQ(len, 0);
        ASSERT_TRUE(
                serve_path_match("/v1/sandboxes/{name}/exec", "/v1/sandboxes/ab-1/exec", &p, &len));
        ASSERT_EQ(len, 4);
        ASSERT_TRUE(strncmp(p, "ab-1", 4) == 0);
        ASSERT_TRUE(serve_path_match("/v1/snapshots/{snapshot}", "/v1/snapshots/s", &p, &len));
        ASSERT_EQ(len, 1);

        /* Trailing slashes, empty or extra segments, prefixes. */
        ASSERT_FALSE(serve_path_match("/v1/sandboxes", "/v1/sandboxes/", NULL, NULL));
        ASSERT_FALSE(serve_path_match("/v1/sandboxes/{name}", "/v1/sandboxes/", NULL, NULL));
        ASSERT_FALSE(serve_path_match("/v1/sandboxes/{name}", "/v1/sandboxes//", NULL, NULL));
        ASSERT_FALSE(serve_path_match("/v1/sandboxes/{name}", "/v1/sandboxes/a/b", NULL, NULL));
        ASSERT_FALSE(serve_path_match("/v1/sandboxes/{name}/exec", "/v1/sandboxes/a", NULL, NULL));
        ASSERT_FALSE(serve_path_match("/v1/sandboxes", "/v1/sandboxesx", NULL, NULL));
        ASSERT_FALSE(serve_path_match("/v1/sandboxes", "/v1/sandbo", NULL, NULL));
        ASSERT_FALSE(serve_path_match("/v1/sandboxes", "v1/sandboxes", NULL, NULL));
        ASSERT_FALSE(serve_path_match("/v1/sandboxes", "", NULL, NULL));
        ASSERT_FALSE(serve_path_match("/v1/version", "/v1/version/..", NULL, NULL));
}

typedef struct Args {
        const char *s;
        char **l;
        bool b;
        uint64_t u;
        json_t *o;
        char **e;
} Args;

static const ServeField fields[] = {
        {"s", SERVE_FIELD_STRING, offsetof(Args, s), true},
        {"l", SERVE_FIELD_STRV, offsetof(Args, l), false},
        {"b", SERVE_FIELD_BOOL, offsetof(Args, b), false},
        {"u", SERVE_FIELD_U64, offsetof(Args, u), false},
        {"o", SERVE_FIELD_OBJECT, offsetof(Args, o), false},
        {"e", SERVE_FIELD_ENV, offsetof(Args, e), false},
};

/* Decodes @text; on failure checks the pointer is @pointer. */
static int decode(const char *text, Args *a, const char *pointer) {
        json_t *j = json_loads(text, JSON_ALLOW_NUL, NULL);
        HutchError err = {};
        int r;

        ASSERT_NOT_NULL(j);
        *a = (Args){.u = 7};
        r = serve_decode_object(j, fields, ELEMENTSOF(fields), a, &err);
        if (r < 0) {
                ASSERT_EQ(err.errnum, EINVAL);
                ASSERT_STREQ(err.pointer, pointer);
                ASSERT_NULL(a->l);
                ASSERT_NULL(a->e);
        } else
                a->s = a->s ? strdup(a->s) : NULL; /* outlive the object */
        json_decref(j);
        return r;
}

TEST(decode_object) {
        Args a;

        ASSERT_OK(decode("{\"s\":\"x\",\"l\":[\"a\",\"b\"],\"b\":true,\"u\":5,\"o\":{}}", &a, ""));
        ASSERT_STREQ(a.s, "x");
        ASSERT_EQ(strv_length(a.l), 2);
        ASSERT_STREQ(a.l[1], "b");
        ASSERT_TRUE(a.b);
        ASSERT_EQ(a.u, 5);
        free((char *)a.s);
        strv_free(a.l);

        /* null is absent: the default stays. */
        ASSERT_OK(decode("{\"s\":\"x\",\"u\":null,\"l\":null}", &a, ""));
        ASSERT_EQ(a.u, 7);
        ASSERT_NULL(a.l);
        free((char *)a.s);

        ASSERT_ERROR(decode("{}", &a, "/s"), EINVAL);
        ASSERT_ERROR(decode("{\"s\":null}", &a, "/s"), EINVAL);
        ASSERT_ERROR(decode("{\"s\":\"x\",\"zz\":1}", &a, "/zz"), EINVAL);
        ASSERT_ERROR(decode("{\"s\":\"x\",\"a/b~c\":1}", &a, "/a~1b~0c"), EINVAL);
        ASSERT_ERROR(decode("{\"s\":1}", &a, "/s"), EINVAL);
        ASSERT_ERROR(decode("{\"s\":\"a\\u0000b\"}", &a, "/s"), EINVAL);
        ASSERT_ERROR(decode("{\"s\":\"x\",\"l\":\"a\"}", &a, "/l"), EINVAL);
        ASSERT_ERROR(decode("{\"s\":\"x\",\"l\":[\"a\",2]}", &a, "/l/1"), EINVAL);
        ASSERT_ERROR(decode("{\"s\":\"x\",\"b\":1}", &a, "/b"), EINVAL);
        ASSERT_ERROR(decode("{\"s\":\"x\",\"u\":-1}", &a, "/u"), EINVAL);
        ASSERT_ERROR(decode("{\"s\":\"x\",\"u\":1.5}", &a, "/u"), EINVAL);
        ASSERT_ERROR(decode("{\"s\":\"x\",\"o\":[]}", &a, "/o"), EINVAL);
        /* Checked before anything is stored: no STRV is left behind. */
        ASSERT_ERROR(decode("{\"l\":[\"a\"],\"s\":\"x\",\"b\":\"no\"}", &a, "/b"), EINVAL);
        ASSERT_ERROR(decode("[]", &a, ""), EINVAL);
}

/* env: an object of strings (API 1.1) or the 1.0 array, both as KEY=VALUE. */
TEST(decode_env) {
        Args a;

        ASSERT_OK(decode("{\"s\":\"x\",\"e\":{\"A\":\"1\",\"EMPTY\":\"\"}}", &a, ""));
        ASSERT_EQ(strv_length(a.e), 2);
        ASSERT_STREQ(a.e[0], "A=1");
        ASSERT_STREQ(a.e[1], "EMPTY=");
        free((char *)a.s);
        strv_free(a.e);

        ASSERT_OK(decode("{\"s\":\"x\",\"e\":[\"A=1\"]}", &a, ""));
        ASSERT_EQ(strv_length(a.e), 1);
        ASSERT_STREQ(a.e[0], "A=1");
        free((char *)a.s);
        strv_free(a.e);

        ASSERT_OK(decode("{\"s\":\"x\",\"e\":{}}", &a, ""));
        ASSERT_EQ(strv_length(a.e), 0);
        free((char *)a.s);
        strv_free(a.e);

        ASSERT_ERROR(decode("{\"s\":\"x\",\"e\":{\"A\":1}}", &a, "/e"), EINVAL);
        ASSERT_ERROR(decode("{\"s\":\"x\",\"e\":{\"A\":\"a\\u0000b\"}}", &a, "/e"), EINVAL);
        ASSERT_ERROR(decode("{\"s\":\"x\",\"e\":\"A=1\"}", &a, "/e"), EINVAL);
        ASSERT_ERROR(decode("{\"s\":\"x\",\"e\":[\"A=1\",2]}", &a, "/e/1"), EINVAL);
        /* Nothing stored when a later member is wrong. */
        ASSERT_ERROR(decode("{\"e\":{\"A\":\"1\"},\"s\":\"x\",\"b\":\"no\"}", &a, "/b"), EINVAL);
}

TEST(errno_to_status) {
        const char *code;
        int status;

        serve_errno_to_status(ENOENT, &status, &code);
        ASSERT_EQ(status, 404);
        ASSERT_STREQ(code, "not_found");
        serve_errno_to_status(EINVAL, &status, &code);
        ASSERT_EQ(status, 400);
        serve_errno_to_status(EEXIST, &status, &code);
        ASSERT_EQ(status, 409);
        serve_errno_to_status(EFBIG, &status, &code);
        ASSERT_EQ(status, 413);
        serve_errno_to_status(EACCES, &status, &code);
        ASSERT_EQ(status, 403);
        serve_errno_to_status(EIO, &status, &code);
        ASSERT_EQ(status, 500);
        ASSERT_STREQ(code, "internal");
}

TEST(utf8_incomplete_tail) {
        ASSERT_EQ(serve_utf8_incomplete_tail("", 0), 0);
        ASSERT_EQ(serve_utf8_incomplete_tail("abc", 3), 0);
        /* é is c3 a9; € is e2 82 ac; 😀 is f0 9f 98 80. */
        ASSERT_EQ(serve_utf8_incomplete_tail("a\xc3", 2), 1);
        ASSERT_EQ(serve_utf8_incomplete_tail("a\xc3\xa9", 3), 0);
        ASSERT_EQ(serve_utf8_incomplete_tail("\xe2\x82", 2), 2);
        ASSERT_EQ(serve_utf8_incomplete_tail("\xe2", 1), 1);
        ASSERT_EQ(serve_utf8_incomplete_tail("\xe2\x82\xac", 3), 0);
        ASSERT_EQ(serve_utf8_incomplete_tail("x\xf0\x9f\x98", 4), 3);
        ASSERT_EQ(serve_utf8_incomplete_tail("\xf0\x9f\x98\x80", 4), 0);
        /* Not UTF-8 at all: nothing to hold back. */
        ASSERT_EQ(serve_utf8_incomplete_tail("a\xff", 2), 0);
        ASSERT_EQ(serve_utf8_incomplete_tail("\x80\x80\x80", 3), 0);
        ASSERT_EQ(serve_utf8_incomplete_tail("a\xc0", 2), 0);
}

TEST(output_string) {
        const char *enc = NULL;
        json_t *s;

        s = serve_output_string("h\xc3\xa9llo\n", 7, &enc);
        ASSERT_STREQ(enc, "utf-8");
        ASSERT_STREQ(json_string_value(s), "h\xc3\xa9llo\n");
        json_decref(s);
        s = serve_output_string("a\xff", 2, &enc);
        ASSERT_STREQ(enc, "base64");
        ASSERT_STREQ(json_string_value(s), "Yf8=");
        json_decref(s);
        /* A surrogate encoded in UTF-8 is not UTF-8. */
        s = serve_output_string("\xed\xa0\x80", 3, &enc);
        ASSERT_STREQ(enc, "base64");
        json_decref(s);
        s = serve_output_string(NULL, 0, &enc);
        ASSERT_STREQ(enc, "utf-8");
        ASSERT_STREQ(json_string_value(s), "");
        json_decref(s);
}

TEST(parse_listen) {
        struct sockaddr_storage ss;
        socklen_t len;
        const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;

        ASSERT_OK(serve_parse_listen("127.0.0.1:8080", &ss, &len));
        ASSERT_EQ(ss.ss_family, AF_INET);
        ASSERT_EQ(ntohs(in->sin_port), 8080);
        ASSERT_EQ(ntohl(in->sin_addr.s_addr), 0x7f000001);
        ASSERT_EQ(len, sizeof(struct sockaddr_in));
        ASSERT_OK(serve_parse_listen("[::1]:0", &ss, &len));
        ASSERT_EQ(ss.ss_family, AF_INET6);
        ASSERT_EQ(ntohs(in6->sin6_port), 0);
        ASSERT_TRUE(IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr));

        ASSERT_ERROR(serve_parse_listen("localhost:80", &ss, &len), EINVAL);
        ASSERT_ERROR(serve_parse_listen("127.0.0.1", &ss, &len), EINVAL);
        ASSERT_ERROR(serve_parse_listen("127.0.0.1:", &ss, &len), EINVAL);
        ASSERT_ERROR(serve_parse_listen("127.0.0.1:65536", &ss, &len), EINVAL);
        ASSERT_ERROR(serve_parse_listen("127.0.0.1:-1", &ss, &len), EINVAL);
        ASSERT_ERROR(serve_parse_listen("127.0.0.1:80x", &ss, &len), EINVAL);
        ASSERT_ERROR(serve_parse_listen(":80", &ss, &len), EINVAL);
        ASSERT_ERROR(serve_parse_listen("::1:80", &ss, &len), EINVAL);
        ASSERT_ERROR(serve_parse_listen("[::1]80", &ss, &len), EINVAL);
        ASSERT_ERROR(serve_parse_listen("[127.0.0.1]:80", &ss, &len), EINVAL);
        ASSERT_ERROR(serve_parse_listen("", &ss, &len), EINVAL);
}

TEST(token) {
        uint8_t sha[SERVE_SHA256_LEN], other[SERVE_SHA256_LEN];

        ASSERT_OK(serve_token_load("0123456789abcdef-secret\n", sha));
        ASSERT_OK(serve_token_load("0123456789abcdef-secret\r\n", other));
        ASSERT_TRUE(memcmp(sha, other, sizeof(sha)) == 0);
        ASSERT_ERROR(serve_token_load("short\n", sha), EINVAL);
        ASSERT_ERROR(serve_token_load("", sha), EINVAL);
        ASSERT_ERROR(serve_token_load("0123456789abcdef secret", sha), EINVAL);
        ASSERT_ERROR(serve_token_load("0123456789abcdef-secret\n\n", sha), EINVAL);

        ASSERT_OK(serve_token_load("0123456789abcdef-secret", sha));
        ASSERT_TRUE(serve_token_check("Bearer 0123456789abcdef-secret", sha));
        ASSERT_TRUE(serve_token_check("bearer 0123456789abcdef-secret", sha));
        ASSERT_FALSE(serve_token_check(NULL, sha));
        ASSERT_FALSE(serve_token_check("", sha));
        ASSERT_FALSE(serve_token_check("Bearer ", sha));
        ASSERT_FALSE(serve_token_check("0123456789abcdef-secret", sha));
        ASSERT_FALSE(serve_token_check("Basic 0123456789abcdef-secret", sha));
        ASSERT_FALSE(serve_token_check("Bearer 0123456789abcdef-secreT", sha));
        ASSERT_FALSE(serve_token_check("Bearer 0123456789abcdef-secret ", sha));
        ASSERT_FALSE(serve_token_check("Bearer 0123456789abcdef-secretx", sha));
        ASSERT_FALSE(serve_token_check("Bearer 0123456789abcdef-secre", sha));
}

DEFINE_TEST_MAIN

TEST(head_verdict_names) {
        for (int v = 0; v < _SERVE_HEAD_VERDICT_MAX; v++) {
                const char *s = serve_head_verdict_to_string((ServeHeadVerdict)v);

                ASSERT_NOT_NULL(s);
                ASSERT_EQ(serve_head_verdict_from_string(s), v);
        }
        ASSERT_NULL(serve_head_verdict_to_string(_SERVE_HEAD_VERDICT_MAX));
        ASSERT_EQ(serve_head_verdict_from_string("nope"), _SERVE_HEAD_VERDICT_INVALID);
        ASSERT_EQ(serve_head_verdict_from_string(NULL), _SERVE_HEAD_VERDICT_INVALID);
}

TEST(head_end) {
        ASSERT_EQ(serve_head_end("GET / HTTP/1.1\r\n\r\nbody", 22), 18);
        ASSERT_EQ(serve_head_end("GET / HTTP/1.1\n\nbody", 20), 16);
        ASSERT_EQ(serve_head_end("GET / HTTP/1.1\r\nA: b\r\n", 22), 0);
        ASSERT_EQ(serve_head_end("GET / HTTP/1.1\r\n\r", 17), 0);
        ASSERT_EQ(serve_head_end("", 0), 0);
}

/* Each head with its verdict (the token "0123456789abcdef-secret"), and
 * the body length of the good ones. */
TEST(head_check) {
        static const struct {
                const char *head;
                bool token;
                ServeHeadVerdict want;
                uint64_t body;
        } cases[] = {
                {"GET /v1/version HTTP/1.1\r\n\r\n", false, SERVE_HEAD_OK, 0},
                {"GET /v1/version HTTP/1.0\n\n", false, SERVE_HEAD_OK, 0},
                {"POST /v1/x HTTP/1.1\r\nContent-Length: 12\r\n\r\n", false, SERVE_HEAD_OK, 12},
                {"POST /v1/x HTTP/1.1\r\ncontent-length:  7 \r\n\r\n", false, SERVE_HEAD_OK, 7},
                {"POST /v1/x HTTP/1.1\r\nExpect: 100-Continue\r\n\r\n", false, SERVE_HEAD_OK, 0},
                {"GET /v1/version HTTP/1.1\r\nAuthorization: Bearer "
                 "0123456789abcdef-secret\r\n\r\n",
                 true, SERVE_HEAD_OK, 0},
                {"GET /v1/version HTTP/1.1\r\n\r\n", true, SERVE_HEAD_NO_TOKEN, 0},
                {"GET /v1/version HTTP/1.1\r\nAuthorization: Bearer nope-nope-nope-nope\r\n\r\n",
                 true, SERVE_HEAD_WRONG_TOKEN, 0},
                /* The syntax is checked before the token, the limits after. */
                {"GARBAGE\r\n\r\n", true, SERVE_HEAD_MALFORMED, 0},
                {"POST /v1/x HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n", true,
                 SERVE_HEAD_NO_TOKEN, 0},
                {"POST /v1/x HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n", false,
                 SERVE_HEAD_BODY_TOO_LARGE, 0},
                {"POST /v1/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", false,
                 SERVE_HEAD_CHUNKED, 0},
                {"POST /v1/x HTTP/1.1\r\nExpect: x\r\n\r\n", false, SERVE_HEAD_EXPECTATION, 0},
                {"FROB /v1/x HTTP/1.1\r\n\r\n", false, SERVE_HEAD_BAD_METHOD, 0},
                {"CONNECT /v1/x HTTP/1.1\r\n\r\n", false, SERVE_HEAD_BAD_METHOD, 0},
                {"GET /v1/x HTTP/2.0\r\n\r\n", false, SERVE_HEAD_MALFORMED, 0},
                {"GET  /v1/x HTTP/1.1\r\n\r\n", false, SERVE_HEAD_MALFORMED, 0},
                {"GET v1/x HTTP/1.1\r\n\r\n", false, SERVE_HEAD_MALFORMED, 0},
                {"GET /v1/\x01 HTTP/1.1\r\n\r\n", false, SERVE_HEAD_MALFORMED, 0},
                {"\r\nGET /v1/x HTTP/1.1\r\n\r\n", false, SERVE_HEAD_MALFORMED, 0},
                {"GET /v1/x HTTP/1.1\r\n folded: x\r\n\r\n", false, SERVE_HEAD_MALFORMED, 0},
                {"GET /v1/x HTTP/1.1\r\nno colon\r\n\r\n", false, SERVE_HEAD_MALFORMED, 0},
                {"GET /v1/x HTTP/1.1\r\n: empty name\r\n\r\n", false, SERVE_HEAD_MALFORMED, 0},
                {"GET /v1/x HTTP/1.1\r\nA: b\rc\r\n\r\n", false, SERVE_HEAD_MALFORMED, 0},
                {"GET /v1/x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", false,
                 SERVE_HEAD_MALFORMED, 0},
                {"GET /v1/x HTTP/1.1\r\nContent-Length: -1\r\n\r\n", false, SERVE_HEAD_MALFORMED,
                 0},
                {"GET /v1/x HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", false, SERVE_HEAD_MALFORMED,
                 0},
                {"GET /v1/x HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", false,
                 SERVE_HEAD_MALFORMED, 0},
                {"HEAD /v1/x HTTP/1.1\r\nContent-Length: 3\r\n\r\n", false, SERVE_HEAD_MALFORMED,
                 0},
                {"GET /v1/x HTTP/1.1\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n", true,
                 SERVE_HEAD_MALFORMED, 0},
        };
        uint8_t sha[SERVE_SHA256_LEN];

        ASSERT_OK(serve_token_load("0123456789abcdef-secret", sha));
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                ServeHead h;

                serve_head_check(cases[i].head, strlen(cases[i].head), cases[i].token ? sha : NULL,
                                 1U << 20, &h);
                if (h.verdict != cases[i].want)
                        fail_msg("head %zu (%s): verdict %s, want %s", i, cases[i].head,
                                 serve_head_verdict_to_string(h.verdict),
                                 serve_head_verdict_to_string(cases[i].want));
                if (h.verdict == SERVE_HEAD_OK)
                        ASSERT_EQ(h.body_len, cases[i].body);
        }
}

TEST(preview_targets) {
        static const struct {
                const char *target;
                bool match;
                const char *name;
                unsigned port;
                const char *rest;
        } cases[] = {
                {"/v1/sandboxes/web/ports/8000", true, "web", 8000, ""},
                {"/v1/sandboxes/web/ports/8000/", true, "web", 8000, "/"},
                {"/v1/sandboxes/web.1_a-b/ports/1/x/y?z=1", true, "web.1_a-b", 1, "/x/y?z=1"},
                {"/v1/sandboxes/web/ports/65535?q", true, "web", 65535, "?q"},
                {"/v1/sandboxes/web/ports", false, NULL, 0, NULL},
                {"/v1/sandboxes/web/ports/", false, NULL, 0, NULL},
                {"/v1/sandboxes/web/ports/0", false, NULL, 0, NULL},
                {"/v1/sandboxes/web/ports/65536", false, NULL, 0, NULL},
                {"/v1/sandboxes/web/ports/080000", false, NULL, 0, NULL},
                {"/v1/sandboxes/web/ports/80x", false, NULL, 0, NULL},
                {"/v1/sandboxes/web/ports/-1", false, NULL, 0, NULL},
                {"/v1/sandboxes//ports/80", false, NULL, 0, NULL},
                {"/v1/sandboxes/a%2fb/ports/80", false, NULL, 0, NULL},
                {"/v1/sandboxes/web/files", false, NULL, 0, NULL},
                {"/v1/sandboxes/web/portsx/80", false, NULL, 0, NULL},
                {"/v2/sandboxes/web/ports/80", false, NULL, 0, NULL},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char name[SERVE_PREVIEW_NAME_MAX];
                unsigned port = 0;
                size_t rest = 0, len = strlen(cases[i].target);

                ASSERT_EQ(serve_preview_target(cases[i].target, len, name, &port, &rest),
                          cases[i].match);
                if (!cases[i].match)
                        continue;
                ASSERT_STREQ(name, cases[i].name);
                ASSERT_EQ(port, cases[i].port);
                ASSERT_STREQ(cases[i].target + rest, cases[i].rest);
        }
}

static char *preview_head(const char *head) {
        char name[SERVE_PREVIEW_NAME_MAX];
        size_t t = strchr(head, ' ') - head + 1, tl = strchr(head + t, ' ') - head - t, rest, n;
        unsigned port;
        char *out = NULL;

        ASSERT_TRUE(serve_preview_target(head + t, tl, name, &port, &rest));
        ASSERT_OK(serve_preview_head(head, strlen(head), t, tl, rest, &out, &n));
        ASSERT_EQ(n, strlen(out));
        return out;
}

TEST(preview_heads) {
        char *h;

        h = preview_head("GET /v1/sandboxes/w/ports/80/a?b HTTP/1.1\r\nHost: x\r\n"
                         "Authorization: Bearer secret\r\nconnection: keep-alive\r\n"
                         "Keep-Alive: timeout=5\r\nX-A: 1\r\n\r\n");
        ASSERT_STREQ(h, "GET /a?b HTTP/1.1\r\nHost: x\r\nconnection: keep-alive\r\n"
                        "Keep-Alive: timeout=5\r\nX-A: 1\r\n\r\n");
        free(h);
        h = preview_head("GET /v1/sandboxes/w/ports/80 HTTP/1.0\r\nAUTHORIZATION: x\r\n\r\n");
        ASSERT_STREQ(h, "GET / HTTP/1.0\r\n\r\n");
        free(h);
        h = preview_head("GET /v1/sandboxes/w/ports/80?q=1 HTTP/1.1\r\n\r\n");
        ASSERT_STREQ(h, "GET /?q=1 HTTP/1.1\r\n\r\n");
        free(h);
        /* An upgrade keeps its Connection header; the token still goes. */
        h = preview_head("GET /v1/sandboxes/w/ports/8765/echo HTTP/1.1\r\nHost: x\r\n"
                         "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                         "Authorization: Bearer secret\r\nSec-WebSocket-Key: k\r\n\r\n");
        ASSERT_STREQ(h, "GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                        "Connection: Upgrade\r\nSec-WebSocket-Key: k\r\n\r\n");
        free(h);
}
