/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http-message.h"
#include "proxy-request.h"
#include "secrets.h"
#include "test.h"

/* The credential broker's pure parts (src/proxy/secrets.c and the target
 * binding in proxy-request.c, docs/secrets.md): lanes and tripwires, the
 * rebuilt head, and the masking of a value's derived forms, whole and in
 * pieces. The wire is covered by tests/integration/test_broker_leaks.py. */

#define VALUE "sk-live-REAL/value+0123456789abcdefXYZ"
#define PH "sk-live-PLCE/holdr+zzzzzzzzzzzzzzzzzzz"

static const HttpLimits req_limits = {
        .line_max = HTTP_REQUEST_LINE_MAX,
        .head_max = HTTP_REQUEST_HEAD_MAX,
        .fields_max = HTTP_REQUEST_FIELDS_MAX,
};

/* One secret for api.test (any port), with optional lanes. */
static void secret_init(ProxySecret *s, const char *header, const char *query) {
        HutchError e = {};

        *s = (ProxySecret){};
        s->name = strdup("TOKEN");
        s->placeholder = strdup(PH);
        s->placeholder_len = strlen(PH);
        s->header = header ? strdup(header) : NULL;
        s->query = query ? strdup(query) : NULL;
        s->hosts = allowlist_new();
        assert_non_null(s->hosts);
        ASSERT_OK(allowlist_add_allow(s->hosts, "api.test", &e));
        ASSERT_OK(proxy_secret_set_value(s, VALUE, strlen(VALUE)));
}

static void head_parse(HttpMessage *m, const char *text) {
        ASSERT_OK(http_message_init(m, HTTP_REQUEST, &req_limits));
        ASSERT_EQ(http_message_feed(m, text, strlen(text)), (ssize_t)strlen(text));
        ASSERT_TRUE(m->state != HTTP_MESSAGE_HEAD && m->state != HTTP_MESSAGE_FAILED);
}

TEST(lanes_default_set_and_header_option) {
        ProxySecret s, h;

        secret_init(&s, NULL, NULL);
        secret_init(&h, "X-Custom", NULL);
        ASSERT_TRUE(proxy_secret_header_in_lane(&s, "authorization", 13));
        ASSERT_TRUE(proxy_secret_header_in_lane(&s, "X-API-KEY", 9));
        ASSERT_TRUE(proxy_secret_header_in_lane(&s, "Api-Key", 7));
        ASSERT_TRUE(proxy_secret_header_in_lane(&s, "x-goog-api-key", 14));
        ASSERT_FALSE(proxy_secret_header_in_lane(&s, "User-Agent", 10));
        ASSERT_FALSE(proxy_secret_header_in_lane(&s, "X-Api-Keys", 10));
        /* ;header= replaces the set. */
        ASSERT_TRUE(proxy_secret_header_in_lane(&h, "x-custom", 8));
        ASSERT_FALSE(proxy_secret_header_in_lane(&h, "Authorization", 13));
        proxy_secret_done(&s);
        proxy_secret_done(&h);
}

TEST(misplaced_placeholder_table) {
        static const struct {
                const char *head;
                const char *query; /* the secret's ;query=, or NULL */
                bool misplaced;
        } cases[] = {
                {"GET / HTTP/1.1\r\nAuthorization: Bearer " PH "\r\n\r\n", NULL, false},
                {"GET / HTTP/1.1\r\nX-Api-Key: " PH "\r\n\r\n", NULL, false},
                {"GET / HTTP/1.1\r\nUser-Agent: a " PH "\r\n\r\n", NULL, true},
                {"GET / HTTP/1.1\r\nCookie: s=" PH "\r\n\r\n", NULL, true},
                {"GET /x/" PH " HTTP/1.1\r\n\r\n", NULL, true},
                {"GET /x?key=" PH " HTTP/1.1\r\n\r\n", NULL, true},
                {"GET /x?key=" PH " HTTP/1.1\r\n\r\n", "key", false},
                {"GET /x?a=1&key=" PH "&b=2 HTTP/1.1\r\n\r\n", "key", false},
                {"GET /x?other=" PH " HTTP/1.1\r\n\r\n", "key", true},
                {"GET /x?xkey=" PH " HTTP/1.1\r\n\r\n", "key", true},
                {"GET /x?key=1&" PH "=2 HTTP/1.1\r\n\r\n", "key", true},
                {"GET /" PH "?key=1 HTTP/1.1\r\n\r\n", "key", true},
                {"GET / HTTP/1.1\r\nNothing: here\r\n\r\n", NULL, false},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const char *where = NULL;
                ProxySecret s;
                HttpMessage m;

                secret_init(&s, NULL, cases[i].query);
                head_parse(&m, cases[i].head);
                ASSERT_EQ(secrets_find_misplaced(&s, 1, &m, &where) != NULL, cases[i].misplaced);
                ASSERT_EQ(where != NULL, cases[i].misplaced);
                http_message_done(&m);
                proxy_secret_done(&s);
        }
}

TEST(request_head_substitutes_in_lanes_and_asks_for_identity) {
        ProxySecret s;
        HttpMessage m;
        Host h;
        char *head = NULL;
        size_t len = 0;
        uint64_t used = 0;

        secret_init(&s, NULL, "key");
        ASSERT_OK(host_parse("api.test", 8, &h));
        head_parse(&m, "GET /v1?key=" PH "&x=1 HTTP/1.1\r\nHost: api.test\r\n"
                       "Authorization: Bearer " PH "\r\nAccept-Encoding: gzip, br\r\n"
                       "Range: bytes=1-2\r\nIf-Range: \"x\"\r\nTE: gzip\r\n\r\n");
        ASSERT_OK(secrets_build_request_head(&s, 1, &h, 443, &m, &head, &len, &used));
        ASSERT_EQ(used, (uint64_t)1);
        ASSERT_STREQ(head, "GET /v1?key=" VALUE "&x=1 HTTP/1.1\r\nHost: api.test\r\n"
                           "Authorization: Bearer " VALUE "\r\n"
                           "Accept-Encoding: identity\r\n\r\n");
        free(head);
        http_message_done(&m);

        /* Negative twin: no value, nothing changed. */
        head_parse(&m, "GET /v1 HTTP/1.1\r\nHost: api.test\r\nAccept-Encoding: gzip\r\n"
                       "Range: bytes=1-2\r\n\r\n");
        ASSERT_OK(secrets_build_request_head(&s, 1, &h, 443, &m, &head, &len, &used));
        ASSERT_EQ(used, (uint64_t)0);
        ASSERT_STREQ(head, "GET /v1 HTTP/1.1\r\nHost: api.test\r\nAccept-Encoding: gzip\r\n"
                           "Range: bytes=1-2\r\n\r\n");
        free(head);
        http_message_done(&m);
        proxy_secret_done(&s);
}

TEST(target_binding_table) {
        static const struct {
                const char *head;
                uint16_t port;
                bool ok;
        } cases[] = {
                {"GET / HTTP/1.1\r\nHost: api.test\r\n\r\n", 443, true},
                {"GET / HTTP/1.1\r\nHost: API.Test:443\r\n\r\n", 443, true},
                {"GET / HTTP/1.1\r\nHost: api.test:8443\r\n\r\n", 8443, true},
                {"GET / HTTP/1.1\r\nHost:  api.test:8443 \r\n\r\n", 8443, true},
                {"GET / HTTP/1.1\r\nHost: api.test\r\n\r\n", 8443, false},
                {"GET / HTTP/1.1\r\nHost: api.test:443\r\n\r\n", 8443, false},
                {"GET / HTTP/1.1\r\nHost: evil.test:8443\r\n\r\n", 8443, false},
                {"GET / HTTP/1.1\r\nHost: api.test.evil.test\r\n\r\n", 443, false},
                {"GET / HTTP/1.1\r\nHost: api.test.\r\n\r\n", 443, true},
                {"GET / HTTP/1.1\r\n\r\n", 443, false},
                {"GET / HTTP/1.0\r\n\r\n", 443, false},
                {"GET / HTTP/1.1\r\nHost: api.test\r\nHost: api.test\r\n\r\n", 443, false},
                {"GET https://api.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n", 443, true},
                {"GET https://evil.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n", 443, false},
                {"GET https://api.test@evil.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n", 443, false},
        };
        Host h;

        ASSERT_OK(host_parse("api.test", 8, &h));
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const char *why = NULL;
                HttpMessage m;

                head_parse(&m, cases[i].head);
                if (cases[i].ok)
                        ASSERT_OK(proxy_request_check_bound(&m, &h, cases[i].port, &why));
                else {
                        ASSERT_ERROR(proxy_request_check_bound(&m, &h, cases[i].port, &why),
                                     EBADMSG);
                        ASSERT_NOT_NULL(why);
                }
                http_message_done(&m);
        }
}

/* The forms the masking must recognise, each framed by other text. */
static char *b64(const char *prefix, const char *v, bool url) {
        const char *a = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                            : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        size_t pl = strlen(prefix), n = pl + strlen(v) + 5, k = 0;
        unsigned char *in = malloc(n);
        char *out = malloc(n * 2 + 8);

        memcpy(in, prefix, pl);
        memcpy(in + pl, v, strlen(v));
        memcpy(in + pl + strlen(v), "!tail", 5);
        for (size_t i = 0; i < n; i += 3) {
                unsigned v24 = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
                               (i + 2 < n ? in[i + 2] : 0);

                out[k++] = a[v24 >> 18 & 63];
                out[k++] = a[v24 >> 12 & 63];
                out[k++] = i + 1 < n ? a[v24 >> 6 & 63] : '=';
                out[k++] = i + 2 < n ? a[v24 & 63] : '=';
        }
        out[k] = '\0';
        free(in);
        return out;
}

static char *pct(const char *v, bool lower, bool all) {
        char *out = malloc(strlen(v) * 3 + 1), *p = out;

        for (; *v; v++) {
                if (!all && ((*v >= 'a' && *v <= 'z') || (*v >= 'A' && *v <= 'Z') ||
                             (*v >= '0' && *v <= '9') || *v == '-'))
                        *p++ = *v;
                else
                        p += sprintf(p, lower ? "%%%02x" : "%%%02X", (unsigned char)*v);
        }
        *p = '\0';
        return out;
}

static char *json_u(const char *v, bool lower) {
        char *out = malloc(strlen(v) * 6 + 1), *p = out;

        for (; *v; v++)
                p += sprintf(p, lower ? "\\u%04x" : "\\u%04X", (unsigned char)*v);
        *p = '\0';
        return out;
}

static char *json_slash(const char *v) {
        char *out = malloc(strlen(v) * 2 + 1), *p = out;

        for (; *v; v++) {
                if (*v == '/')
                        *p++ = '\\';
                *p++ = *v;
        }
        *p = '\0';
        return out;
}

/* All forms of VALUE, and one of the placeholder's, joined by @sep. */
static char *all_forms(const char *v, const char *sep) {
        char *forms[16];
        size_t n = 0, len = 1;
        char *out;

        forms[n++] = strdup(v);
        for (int off = 0; off < 3; off++) {
                forms[n++] = b64(&"xx"[2 - off], v, false);
                forms[n++] = b64(&"xx"[2 - off], v, true);
        }
        forms[n++] = pct(v, false, false);
        forms[n++] = pct(v, true, true);
        forms[n++] = json_u(v, false);
        forms[n++] = json_u(v, true);
        forms[n++] = json_slash(v);
        for (size_t i = 0; i < n; i++)
                len += strlen(forms[i]) + strlen(sep);
        out = calloc(1, len);
        for (size_t i = 0; i < n; i++) {
                strcat(out, forms[i]);
                strcat(out, sep);
                free(forms[i]);
        }
        return out;
}

static bool holds_a_form(const char *buf, size_t len) {
        char *f = all_forms(VALUE, "\n"), *save = NULL;
        bool found = false;

        for (char *tok = strtok_r(f, "\n", &save); tok && !found;
             tok = strtok_r(NULL, "\n", &save)) {
                /* b64 forms: their stable inner part (2 chars in from
                 * each end covers every alignment). */
                size_t tl = strlen(tok);
                const char *needle = tok;
                size_t nl = tl;

                if (tl > 8 && !strchr(tok, '-') && !strchr(tok, '%') && !strchr(tok, '\\')) {
                        needle = tok + 4;
                        nl = tl - 12;
                }
                found = memmem(buf, len, needle, nl) != NULL;
        }
        free(f);
        return found;
}

TEST(mask_every_form_whole) {
        ProxySecret s;
        char *text = all_forms(VALUE, " | ");
        size_t len = strlen(text), count;

        secret_init(&s, NULL, NULL);
        ASSERT_TRUE(holds_a_form(text, len));
        count = secrets_mask_values(&s, 1, text, len);
        ASSERT_EQ(strlen(text), len);
        ASSERT_TRUE(count >= 12);
        ASSERT_FALSE(holds_a_form(text, len));
        /* The placeholder's own forms are what the client sees. */
        {
                char *p1 = pct(PH, true, true), *p2 = json_u(PH, false), *p3 = json_slash(PH);

                ASSERT_NOT_NULL(strstr(text, PH));
                ASSERT_NOT_NULL(strstr(text, p1));
                ASSERT_NOT_NULL(strstr(text, p2));
                ASSERT_NOT_NULL(strstr(text, p3));
                free(p1);
                free(p2);
                free(p3);
        }
        free(text);
        proxy_secret_done(&s);
}

TEST(mask_every_form_split_anywhere) {
        ProxySecret s;
        char *text = all_forms(VALUE, " | "), *whole;
        size_t len = strlen(text);

        secret_init(&s, NULL, NULL);
        whole = strdup(text);
        (void)secrets_mask_values(&s, 1, whole, len);
        for (size_t chunk = 1; chunk <= 64; chunk += (chunk < 8 ? 1 : 7)) {
                SecretFilter f = {};
                char *got = malloc(len + 1);
                size_t off = 0, n_got = 0, n;
                const char *out;

                while (off < len) {
                        size_t k = MIN(chunk, len - off);

                        ASSERT_OK(secret_filter_feed(&f, &s, 1, text + off, k, &out, &n));
                        memcpy(got + n_got, out, n);
                        n_got += n;
                        off += k;
                }
                secret_filter_flush(&f, &s, 1, &out, &n);
                memcpy(got + n_got, out, n);
                n_got += n;
                ASSERT_EQ(n_got, len);
                ASSERT_TRUE(memcmp(got, whole, len) == 0);
                ASSERT_FALSE(holds_a_form(got, len));
                secret_filter_done(&f);
                free(got);
        }
        free(whole);
        free(text);
        proxy_secret_done(&s);
}

TEST(mask_base64_is_the_placeholders_encoding_exactly) {
        ProxySecret s;

        secret_init(&s, NULL, NULL);
        /* Every alignment, both alphabets, whole and one byte at a time:
         * the characters shared with the neighbours are fixed up too, so
         * not a bit of the value is left. */
        for (int off = 0; off < 3; off++)
                for (int url = 0; url < 2; url++)
                        for (int split = 0; split < 2; split++) {
                                char *text = b64(&"xx"[2 - off], VALUE, url);
                                char *want = b64(&"xx"[2 - off], PH, url);
                                size_t len = strlen(text);

                                if (split) {
                                        SecretFilter f = {};
                                        char *got = calloc(1, len + 1);
                                        size_t n_got = 0, n;
                                        const char *out;

                                        for (size_t i = 0; i < len; i++) {
                                                ASSERT_OK(secret_filter_feed(&f, &s, 1, text + i, 1,
                                                                             &out, &n));
                                                memcpy(got + n_got, out, n);
                                                n_got += n;
                                        }
                                        secret_filter_flush(&f, &s, 1, &out, &n);
                                        memcpy(got + n_got, out, n);
                                        ASSERT_STREQ(got, want);
                                        secret_filter_done(&f);
                                        free(got);
                                } else {
                                        ASSERT_EQ(secrets_mask_values(&s, 1, text, len), (size_t)1);
                                        ASSERT_STREQ(text, want);
                                }
                                free(text);
                                free(want);
                        }
        proxy_secret_done(&s);
}

TEST(mask_leaves_near_misses_alone) {
        ProxySecret s;
        char text[] = "sk-live-REAL/value+0123456789abcdefXY_ %73k-live %ZZ \\u00 \\q";
        char copy[sizeof(text)];

        secret_init(&s, NULL, NULL);
        memcpy(copy, text, sizeof(text));
        ASSERT_EQ(secrets_mask_values(&s, 1, text, strlen(text)), (size_t)0);
        ASSERT_STREQ(text, copy);
        proxy_secret_done(&s);
}

TEST(scan_finds_a_placeholder_split_anywhere) {
        static const char body[] = "payload=" PH "&more";
        ProxySecret s;

        secret_init(&s, NULL, NULL);
        for (size_t cut = 0; cut < sizeof(body) - 1; cut++) {
                const ProxySecret *hit = NULL;
                SecretFilter f = {};
                const char *out;
                size_t n, sent = 0;
                int r;

                r = secret_scan_feed(&f, &s, 1, body, cut, &out, &n, &hit);
                if (r >= 0) {
                        sent += n;
                        r = secret_scan_feed(&f, &s, 1, body + cut, sizeof(body) - 1 - cut, &out,
                                             &n, &hit);
                }
                ASSERT_ERROR(r, EPERM);
                ASSERT_TRUE(hit == &s);
                /* Nothing from the placeholder on was let through. */
                ASSERT_TRUE(sent <= strlen("payload="));
                secret_filter_done(&f);
        }
        proxy_secret_done(&s);
}

DEFINE_TEST_MAIN
