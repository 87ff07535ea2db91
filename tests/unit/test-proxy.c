/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <jansson.h>

#include "audit.h"
#include "http-message.h"
#include "proxy-config.h"
#include "proxy-request.h"
#include "test.h"

/* The pure parts of hutch-proxy: message framing and bounds, request
 * analysis, the heads sent on, configuration and the audit counters. The
 * event loop is covered by tests/integration/test_proxy.py. */

static const HttpLimits req_limits = {
        .line_max = HTTP_REQUEST_LINE_MAX,
        .head_max = HTTP_REQUEST_HEAD_MAX,
        .fields_max = HTTP_REQUEST_FIELDS_MAX,
};

static const HttpLimits resp_limits = {
        .line_max = HTTP_RESPONSE_LINE_MAX,
        .head_max = HTTP_RESPONSE_HEAD_MAX,
        .fields_max = HTTP_RESPONSE_FIELDS_MAX,
};

/* Feeds all of @text in one go and returns what feed() returned. */
static ssize_t feed_str(HttpMessage *m, const char *text) {
        return http_message_feed(m, text, strlen(text));
}

TEST(head_then_body_then_next) {
        static const char text[] = "POST http://a.test/x HTTP/1.1\r\nContent-Length: 5\r\n\r\n"
                                   "helloGET http://a.test/ HTTP/1.1\r\n\r\n";
        size_t head_len = strlen("POST http://a.test/x HTTP/1.1\r\nContent-Length: 5\r\n\r\n");
        HttpMessage m;
        ssize_t n;

        ASSERT_OK(http_message_init(&m, HTTP_REQUEST, &req_limits));
        /* Stops right after the head: no body byte is consumed. */
        n = http_message_feed(&m, text, strlen(text));
        ASSERT_EQ(n, head_len);
        ASSERT_EQ(m.state, HTTP_MESSAGE_BODY);
        ASSERT_EQ(http_message_method(&m), HTTP_POST);
        /* Then the body, and not a byte more. */
        n = http_message_feed(&m, text + head_len, strlen(text) - head_len);
        ASSERT_EQ(n, 5);
        ASSERT_EQ(m.state, HTTP_MESSAGE_DONE);
        ASSERT_EQ(m.body_bytes, 5);
        ASSERT_EQ(http_message_feed(&m, "x", 1), 0);
        /* The next message on the connection. */
        http_message_reset(&m);
        n = http_message_feed(&m, text + head_len + 5, strlen(text) - head_len - 5);
        ASSERT_EQ(n, strlen(text) - head_len - 5);
        ASSERT_EQ(m.state, HTTP_MESSAGE_DONE);
        http_message_done(&m);
}

TEST(byte_by_byte_chunked) {
        static const char text[] = "POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                                   "X-A: 1\r\n\r\n5\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n";
        HttpMessage m;
        size_t off = 0;

        ASSERT_OK(http_message_init(&m, HTTP_REQUEST, &req_limits));
        while (off < strlen(text) && m.state != HTTP_MESSAGE_DONE) {
                ssize_t n = http_message_feed(&m, text + off, 1);

                ASSERT_OK(n);
                off += (size_t)n;
        }
        ASSERT_EQ(m.state, HTTP_MESSAGE_DONE);
        ASSERT_EQ(off, strlen(text));
        /* Chunk framing is counted as body: the proxy forwards it verbatim. */
        ASSERT_EQ(m.body_bytes, strlen("5\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n"));
        /* Trailer fields are parsed (and checked) like head fields. */
        ASSERT_EQ(m.n_fields, 3);
        http_message_done(&m);
}

TEST(bounds) {
        static const struct {
                const char *what;
                size_t line, header, fields;
                int status;
        } table[] = {
                {"line at the limit", 8192 - strlen("GET http://a.test/ HTTP/1.1\r\n"), 0, 0, 0},
                {"line over", 8193 - strlen("GET http://a.test/ HTTP/1.1\r\n"), 0, 0, 414},
                {"big header", 0, 40000, 0, 431},
                {"100 fields", 0, 0, 100, 0},
                {"101 fields", 0, 0, 101, 431},
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                HttpMessage m;
                char *buf = malloc(65536);
                size_t len = 0;
                ssize_t n;

                assert_non_null(buf);
                len += (size_t)snprintf(buf, 65536, "GET http://a.test/");
                memset(buf + len, 'a', table[i].line);
                len += table[i].line;
                len += (size_t)snprintf(buf + len, 65536 - len, " HTTP/1.1\r\n");
                if (table[i].header) {
                        len += (size_t)snprintf(buf + len, 65536 - len, "X-Big: ");
                        memset(buf + len, 'b', table[i].header);
                        len += table[i].header;
                        len += (size_t)snprintf(buf + len, 65536 - len, "\r\n");
                }
                for (size_t f = 0; f < table[i].fields; f++)
                        len += (size_t)snprintf(buf + len, 65536 - len, "X-%zu: v\r\n", f);
                len += (size_t)snprintf(buf + len, 65536 - len, "\r\n");

                ASSERT_OK(http_message_init(&m, HTTP_REQUEST, &req_limits));
                n = http_message_feed(&m, buf, len);
                if (table[i].status == 0) {
                        if (n != (ssize_t)len || m.state != HTTP_MESSAGE_DONE)
                                fail_msg("%s: n=%zd state=%d", table[i].what, n, m.state);
                } else {
                        ASSERT_ERROR(n, EBADMSG);
                        if (m.status != table[i].status)
                                fail_msg("%s: status %d, expected %d", table[i].what, m.status,
                                         table[i].status);
                        ASSERT_NOT_NULL(m.error);
                        /* Failed stays failed. */
                        ASSERT_ERROR(http_message_feed(&m, "x", 1), EBADMSG);
                }
                http_message_done(&m);
                free(buf);
        }
}

TEST(malformed_heads) {
        static const char *const table[] = {
                "GET http://a.test/ HTTP/1.1\r\nX-A: one\r\n two\r\n\r\n",
                "GET http://a.test/ HTTP/1.1\r\n X-A: one\r\n\r\n",
                "GET http://a.test/ HTTP/1.1\r\nX-A: a\001b\r\n\r\n",
                "GET http://a.test/ HTTP/1.1\r\nX A: a\r\n\r\n",
                "GET http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                "POST http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: "
                "chunked\r\n\r\n",
                "\x16\x03\x01\x00\x05hello",
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                HttpMessage m;

                ASSERT_OK(http_message_init(&m, HTTP_REQUEST, &req_limits));
                if (feed_str(&m, table[i]) != -EBADMSG || m.status != 400)
                        fail_msg("accepted: %s (state %d)", table[i], m.state);
                http_message_done(&m);
        }
}

TEST(response_framing) {
        HttpMessage m;

        /* A body that runs until EOF completes at finish(). */
        ASSERT_OK(http_message_init(&m, HTTP_RESPONSE, &resp_limits));
        ASSERT_EQ(feed_str(&m, "HTTP/1.0 200 OK\r\n\r\nuntil eof"),
                  strlen("HTTP/1.0 200 OK\r\n\r\n"));
        ASSERT_EQ(m.state, HTTP_MESSAGE_BODY);
        ASSERT_FALSE(http_message_keep_alive(&m));
        ASSERT_EQ(feed_str(&m, "until eof"), 9);
        ASSERT_OK(http_message_finish(&m));
        ASSERT_EQ(m.state, HTTP_MESSAGE_DONE);
        http_message_reset(&m);

        /* A Content-Length body cut short is an error. */
        ASSERT_OK(feed_str(&m, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"));
        ASSERT_OK(feed_str(&m, "short"));
        ASSERT_ERROR(http_message_finish(&m), EPIPE);
        http_message_reset(&m);

        /* A response to HEAD has no body whatever it says. */
        m.skip_body = true;
        ASSERT_OK(feed_str(&m, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"));
        ASSERT_EQ(m.state, HTTP_MESSAGE_DONE);
        ASSERT_TRUE(http_message_keep_alive(&m));
        http_message_reset(&m);

        /* An interim response is a message of its own. */
        ASSERT_OK(feed_str(&m, "HTTP/1.1 100 Continue\r\n\r\n"));
        ASSERT_EQ(m.state, HTTP_MESSAGE_DONE);
        ASSERT_EQ(http_message_status_code(&m), 100);
        http_message_reset(&m);
        ASSERT_ERROR(http_message_finish(&m), EPIPE);
        http_message_done(&m);
}

/* Parses @head completely and analyses it. */
static int analyze(const char *head, HttpMessage *m, ProxyRequest *r, const char **reason) {
        int status = 0;

        if (http_message_init(m, HTTP_REQUEST, &req_limits) < 0)
                return -ENOMEM;
        if (feed_str(m, head) < 0)
                return -EIO;
        return proxy_request_analyze(m, r, &status, reason);
}

TEST(analyze_table) {
        static const struct {
                const char *head;
                const char *reason; /* NULL: accepted */
                ProxyRequestKind kind;
                const char *host;
                uint16_t port;
        } table[] = {
                {"GET http://Example.COM./a?b HTTP/1.1\r\nHost: example.com\r\n\r\n", NULL,
                 PROXY_REQUEST_FORWARD, "example.com", 80},
                {"GET http://a.test:8080 HTTP/1.1\r\n\r\n", NULL, PROXY_REQUEST_FORWARD, "a.test",
                 8080},
                {"GET HTTP://a.test/ HTTP/1.0\r\n\r\n", NULL, PROXY_REQUEST_FORWARD, "a.test", 80},
                {"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test\r\n\r\n", NULL, PROXY_REQUEST_CONNECT,
                 "a.test", 443},
                {"CONNECT 2130706433:443 HTTP/1.1\r\nHost: 127.1:443\r\n\r\n", NULL,
                 PROXY_REQUEST_CONNECT, "127.0.0.1", 443},
                {"CONNECT [::ffff:127.0.0.1]:22 HTTP/1.1\r\n\r\n", NULL, PROXY_REQUEST_CONNECT,
                 "127.0.0.1", 22},
                {"CONNECT [::1]:443 HTTP/1.1\r\n\r\n", NULL, PROXY_REQUEST_CONNECT, "::1", 443},
                {"GET http://a.test/ HTTP/1.1\r\nHost:  a.test \r\n\r\n", NULL,
                 PROXY_REQUEST_FORWARD, "a.test", 80},
                {"GET /x HTTP/1.1\r\nHost: a.test\r\n\r\n", "origin-form", 0, NULL, 0},
                {"OPTIONS * HTTP/1.1\r\n\r\n", "not an absolute URI", 0, NULL, 0},
                {"GET https://a.test/ HTTP/1.1\r\n\r\n", "CONNECT", 0, NULL, 0},
                {"GET ftp://a.test/ HTTP/1.1\r\n\r\n", "only http://", 0, NULL, 0},
                {"GET http://u@a.test/ HTTP/1.1\r\n\r\n", "userinfo", 0, NULL, 0},
                {"GET http://a.test@b.test/ HTTP/1.1\r\n\r\n", "userinfo", 0, NULL, 0},
                {"GET http://a.test/#f HTTP/1.1\r\n\r\n", "fragment", 0, NULL, 0},
                {"GET http://a..test/ HTTP/1.1\r\n\r\n", "invalid host", 0, NULL, 0},
                {"GET http://a.test:0/ HTTP/1.1\r\n\r\n", "invalid host", 0, NULL, 0},
                {"GET http://a.test:65536/ HTTP/1.1\r\n\r\n", "invalid host", 0, NULL, 0},
                {"GET http://a.test:/ HTTP/1.1\r\n\r\n", "invalid host", 0, NULL, 0},
                {"GET http://a.test:8x/ HTTP/1.1\r\n\r\n", "invalid host", 0, NULL, 0},
                {"GET http://[::1/ HTTP/1.1\r\n\r\n", "invalid host", 0, NULL, 0},
                {"GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n", "does not match", 0, NULL,
                 0},
                {"GET http://a.test/ HTTP/1.1\r\nHost: a.test:81\r\n\r\n", "does not match", 0,
                 NULL, 0},
                {"GET http://a.test:81/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "does not match", 0,
                 NULL, 0},
                {"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nHost: a.test\r\n\r\n",
                 "duplicate Host", 0, NULL, 0},
                {"GET http://a.test/ HTTP/1.1\r\nHost: \r\n\r\n", "invalid Host", 0, NULL, 0},
                {"CONNECT a.test HTTP/1.1\r\n\r\n", "host:port", 0, NULL, 0},
                {"GET http://a.test/ HTTP/2.0\r\n\r\n", "unsupported HTTP version", 0, NULL, 0},
                {"CONNECT a.test:443 HTTP/1.1\r\nHost: b.test:443\r\n\r\n", "does not match", 0,
                 NULL, 0},
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                const char *reason = NULL;
                HttpMessage m;
                ProxyRequest r;
                int k;

                k = analyze(table[i].head, &m, &r, &reason);
                if (!table[i].reason) {
                        if (k < 0)
                                fail_msg("refused (%d, %s): %s", k, reason ? reason : "?",
                                         table[i].head);
                        ASSERT_EQ(r.kind, table[i].kind);
                        ASSERT_STREQ(r.host.name, table[i].host);
                        ASSERT_EQ(r.port, table[i].port);
                } else if (k != -EBADMSG || !reason || !strstr(reason, table[i].reason))
                        fail_msg("%s: k=%d reason '%s', expected '%s'", table[i].head, k,
                                 reason ? reason : "(none)", table[i].reason);
                http_message_done(&m);
        }
}

TEST(request_head_rebuilt) {
        static const char head[] = "POST http://A.test:8080?q=1 HTTP/1.1\r\n"
                                   "Host: a.test:8080\r\n"
                                   "Connection: keep-alive, X-Hop, Content-Length, Host\r\n"
                                   "X-Hop: secret\r\n"
                                   "Proxy-Connection: keep-alive\r\n"
                                   "Proxy-Authorization: Basic eA==\r\n"
                                   "Keep-Alive: 5\r\nTE: trailers\r\nTrailer: X-T\r\n"
                                   "Upgrade: h2c\r\n"
                                   "X-Keep: yes\r\n"
                                   "Content-Length: 2\r\n\r\n";
        const char *reason = NULL;
        HttpMessage m;
        ProxyRequest r;
        char *out = NULL;
        size_t len = 0;

        ASSERT_OK(analyze(head, &m, &r, &reason));
        ASSERT_OK(proxy_request_build_head(&m, &r, false, &out, &len));
        out = realloc(out, len + 1);
        out[len] = '\0';
        ASSERT_STREQ(out, "POST /?q=1 HTTP/1.1\r\n"
                          "Host: a.test:8080\r\n"
                          "X-Keep: yes\r\n"
                          "Content-Length: 2\r\n\r\n");
        free(out);
        ASSERT_OK(proxy_request_build_head(&m, &r, true, &out, &len));
        ASSERT_TRUE(len > 19 && memcmp(out + len - 23, "\r\nConnection: close\r\n\r\n", 23) == 0);
        free(out);
        /* CONNECT has no head to forward. */
        r.kind = PROXY_REQUEST_CONNECT;
        ASSERT_ERROR(proxy_request_build_head(&m, &r, false, &out, &len), EINVAL);
        http_message_done(&m);

        /* IPv6 hosts get brackets back. */
        ASSERT_OK(analyze("GET http://[::1]:81/ HTTP/1.1\r\n\r\n", &m, &r, &reason));
        ASSERT_OK(proxy_request_build_head(&m, &r, false, &out, &len));
        ASSERT_TRUE(memmem(out, len, "\r\nHost: [::1]:81\r\n", 18) != NULL);
        free(out);
        http_message_done(&m);
}

TEST(response_head_rebuilt) {
        HttpMessage m;
        char *out = NULL;
        size_t len = 0;

        ASSERT_OK(http_message_init(&m, HTTP_RESPONSE, &resp_limits));
        ASSERT_OK(feed_str(&m, "HTTP/1.1 404 Not Here\r\nConnection: keep-alive, X-Hop\r\n"
                               "X-Hop: 1\r\nKeep-Alive: timeout=5\r\nProxy-Authenticate: Basic\r\n"
                               "Transfer-Encoding: chunked\r\nTrailer: X-T\r\nX-Keep: y\r\n\r\n"));
        ASSERT_OK(proxy_response_build_head(&m, RESPONSE_HEAD_CLOSE, &out, &len));
        out = realloc(out, len + 1);
        out[len] = '\0';
        ASSERT_STREQ(out, "HTTP/1.1 404 Not Here\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n"
                          "X-Keep: y\r\nConnection: close\r\n\r\n");
        free(out);
        http_message_done(&m);
}

/* The intercepted path's decoded body: the old framing goes, chunked is
 * said when asked; the negative twin (not decoded) keeps the framing. */
TEST(response_head_decoded) {
        static const char text[] =
                "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n"
                "Content-Length: 20\r\nKeep-Alive: timeout=5\r\nX-Keep: y\r\n\r\n";
        HttpMessage m;
        char *out = NULL;
        size_t len = 0;

        ASSERT_OK(http_message_init(&m, HTTP_RESPONSE, &resp_limits));
        ASSERT_OK(feed_str(&m, text));
        ASSERT_OK(proxy_response_build_head(&m, RESPONSE_HEAD_DECODED | RESPONSE_HEAD_CHUNKED, &out,
                                            &len));
        out = realloc(out, len + 1);
        out[len] = '\0';
        ASSERT_STREQ(out, "HTTP/1.1 200 OK\r\nX-Keep: y\r\nTransfer-Encoding: chunked\r\n\r\n");
        free(out);
        /* HTTP/1.0 client: until the close, and said so. */
        ASSERT_OK(proxy_response_build_head(&m, RESPONSE_HEAD_DECODED | RESPONSE_HEAD_CLOSE, &out,
                                            &len));
        out = realloc(out, len + 1);
        out[len] = '\0';
        ASSERT_STREQ(out, "HTTP/1.1 200 OK\r\nX-Keep: y\r\nConnection: close\r\n\r\n");
        free(out);
        ASSERT_OK(proxy_response_build_head(&m, 0, &out, &len));
        out = realloc(out, len + 1);
        out[len] = '\0';
        ASSERT_STREQ(out, "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 20\r\n"
                          "X-Keep: y\r\n\r\n");
        free(out);
        http_message_done(&m);
}

/* One list of a request's hop-by-hop fields for both paths: Connection
 * and what it names, the fixed ones; never the framing; end-to-end fields
 * (the twin) are not hop-by-hop. */
TEST(request_hop_fields) {
        ProxyHopFields hop;
        HttpMessage m;

        ASSERT_OK(http_message_init(&m, HTTP_REQUEST, &req_limits));
        ASSERT_OK(feed_str(&m, "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: X-Hop, "
                               "content-length\r\nContent-Length: 0\r\n\r\n"));
        ASSERT_OK(proxy_hop_fields_init(&hop, &m));
        ASSERT_TRUE(proxy_hop_fields_has(&hop, "x-hop", 5));
        ASSERT_TRUE(proxy_hop_fields_has(&hop, "Connection", 10));
        ASSERT_TRUE(proxy_hop_fields_has(&hop, "TE", 2));
        ASSERT_TRUE(proxy_hop_fields_has(&hop, "Upgrade", 7));
        ASSERT_TRUE(proxy_hop_fields_has(&hop, "Proxy-Authorization", 19));
        ASSERT_FALSE(proxy_hop_fields_has(&hop, "Content-Length", 14));
        ASSERT_FALSE(proxy_hop_fields_has(&hop, "Authorization", 13));
        ASSERT_FALSE(proxy_hop_fields_has(&hop, "Host", 4));
        http_message_done(&m);
}

TEST(too_many_connection_tokens) {
        char head[2048];
        size_t n;
        const char *reason = NULL;
        HttpMessage m;
        ProxyRequest r;
        char *out = NULL;
        size_t len = 0;

        n = (size_t)snprintf(head, sizeof(head), "GET http://a.test/ HTTP/1.1\r\nConnection: ");
        for (int i = 0; i < 40; i++)
                n += (size_t)snprintf(head + n, sizeof(head) - n, "x%d, ", i);
        (void)snprintf(head + n, sizeof(head) - n, "y\r\n\r\n");
        ASSERT_OK(analyze(head, &m, &r, &reason));
        ASSERT_ERROR(proxy_request_build_head(&m, &r, false, &out, &len), EBADMSG);
        http_message_done(&m);
}

TEST(authority_parse) {
        Host h;
        uint16_t port = 1;

        ASSERT_OK(proxy_authority_parse("a.test", 6, &h, &port));
        ASSERT_EQ(port, 0);
        ASSERT_OK(proxy_authority_parse("a.test:65535", 12, &h, &port));
        ASSERT_EQ(port, 65535);
        ASSERT_OK(proxy_authority_parse("[::1]:1", 7, &h, &port));
        ASSERT_STREQ(h.name, "::1");
        ASSERT_ERROR(proxy_authority_parse("", 0, &h, &port), EINVAL);
        ASSERT_ERROR(proxy_authority_parse("a.test:", 7, &h, &port), EINVAL);
        ASSERT_ERROR(proxy_authority_parse("a.test:000001", 13, &h, &port), EINVAL);
        ASSERT_ERROR(proxy_authority_parse("a.test:1:2", 10, &h, &port), EINVAL);
        ASSERT_ERROR(proxy_authority_parse("[::1]x", 6, &h, &port), EINVAL);
        ASSERT_ERROR(proxy_authority_parse("[::1", 4, &h, &port), EINVAL);
        ASSERT_ERROR(proxy_authority_parse("::1", 3, &h, &port), EINVAL);
}

/* Runs the command-line parser over a NULL-terminated list. */
static int parse_args(ProxyConfig *c, HutchError *e, const char *const *args) {
        char *argv[32] = {(char *)"hutch-proxy"};
        int argc = 1;

        for (size_t i = 0; args[i]; i++)
                argv[argc++] = (char *)args[i];
        return proxy_config_parse_argv(c, argc, argv, e);
}

TEST(config_flags) {
        _cleanup_(proxy_config_freep) ProxyConfig *c = proxy_config_new();
        HutchError e = {};
        int fds[2];
        char fd_text[16];

        ASSERT_NOT_NULL(c);
        ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
        (void)snprintf(fd_text, sizeof(fd_text), "%d", fds[0]);
        ASSERT_OK(parse_args(c, &e,
                             (const char *const[]){"--listen-fd",
                                                   fd_text,
                                                   "--allow",
                                                   "a.test",
                                                   "--deny",
                                                   "b.test",
                                                   "--allow-private",
                                                   "127.0.0.0/8",
                                                   "--resolve",
                                                   "A.Test.:127.1,[::1]",
                                                   "--nameserver",
                                                   "127.0.0.1",
                                                   "--nameserver",
                                                   "[::1]:5353",
                                                   "--header-timeout",
                                                   "1500ms",
                                                   "--max-connections",
                                                   "7",
                                                   "-v",
                                                   NULL}));
        ASSERT_EQ(c->n_listen_fds, 1);
        ASSERT_EQ(c->allowlist->n_allow, 1);
        ASSERT_EQ(c->allowlist->n_deny, 1);
        ASSERT_EQ(c->allowlist->n_private_ok, 1);
        ASSERT_NOT_NULL(proxy_config_find_resolve(c, "a.test"));
        ASSERT_EQ(proxy_config_find_resolve(c, "a.test")->n_addrs, 2);
        ASSERT_NULL(proxy_config_find_resolve(c, "b.test"));
        ASSERT_STREQ(c->nameservers[0], "127.0.0.1:53");
        ASSERT_STREQ(c->nameservers[1], "[::1]:5353");
        ASSERT_EQ(c->header_timeout_ms, 1500);
        ASSERT_EQ(c->max_connections, 7);
        ASSERT_TRUE(c->verbose);
        ASSERT_OK(proxy_config_validate(c, &e));
        (void)close(fds[0]);
        (void)close(fds[1]);
}

TEST(config_flag_errors) {
        static const struct {
                const char *args[4];
                const char *msg;
        } table[] = {
                {{"--allow", "*foo.com"}, "invalid host pattern '*foo.com'"},
                {{"--deny", "a..b"}, "invalid host pattern 'a..b'"},
                {{"--allow-private", "10.0.0.1/8"}, "host bits"},
                {{"--resolve", "a.test"}, "expected NAME:ADDR"},
                {{"--resolve", "127.0.0.1:1.2.3.4"}, "is not a DNS name"},
                {{"--resolve", "a.test:1.2.3.4,"}, "is not an IP address"},
                {{"--nameserver", "dns.test"}, "not an IP address"},
                {{"--nameserver", "1.2.3.4:0"}, "bad port"},
                {{"--listen-fd", "2"}, "not a file descriptor number >= 3"},
                {{"--listen-fd", "x"}, "not a file descriptor number"},
                {{"--audit-fd", "987"}, "not open"},
                {{"--idle-timeout", "0"}, "expected a duration"},
                {{"--dns-timeout", "25h"}, "expected a duration"},
                {{"--max-connections", "0"}, "expected 1 to"},
                {{"--sandbox-id", ""}, "empty"},
                {{"--nope"}, "unknown option"},
                {{"--allow"}, "needs a value"},
                {{"stray"}, "unexpected argument"},
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_(proxy_config_freep) ProxyConfig *c = proxy_config_new();
                HutchError e = {};
                int r;

                r = parse_args(c, &e, table[i].args);
                if (r >= 0 || !strstr(e.msg, table[i].msg))
                        fail_msg("%s: r=%d msg '%s', expected '%s'", table[i].args[0], r, e.msg,
                                 table[i].msg);
        }
}

TEST(config_validate) {
        _cleanup_(proxy_config_freep) ProxyConfig *c = proxy_config_new();
        HutchError e = {};

        ASSERT_ERROR(proxy_config_validate(c, &e), EINVAL);
        ASSERT_TRUE(strstr(e.msg, "no --listen-fd") != NULL);
        c->n_listen_fds = 1;
        c->audit_fd = 1;
        c->audit_path = strdup("/tmp/x");
        ASSERT_ERROR(proxy_config_validate(c, &e), EINVAL);
        ASSERT_TRUE(strstr(e.msg, "cannot be used together") != NULL);
}

TEST(config_json) {
        static const struct {
                const char *json;
                const char *pointer; /* NULL: accepted */
        } table[] = {
                {"{\"allow\": [\"a.test\", \"*.b.test:8443\"], \"sandbox_id\": \"s\", "
                 "\"header_timeout\": \"3s\", \"max_connections\": 9, \"verbose\": true}",
                 NULL},
                {"{\"allow\": [\"a.test\", \"*bad\"]}", "/allow/1"},
                {"{\"allow\": \"a.test\"}", "/allow"},
                {"{\"allow\": [1]}", "/allow/0"},
                {"{\"max_connections\": \"9\"}", "/max_connections"},
                {"{\"max_connections\": -1}", "/max_connections"},
                {"{\"listen_fds\": [2]}", "/listen_fds/0"},
                {"{\"surprise\": 1}", "/surprise"},
                {"[1]", ""},
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_(proxy_config_freep) ProxyConfig *c = proxy_config_new();
                HutchError e = {};
                int r;

                r = proxy_config_load_json(c, table[i].json, strlen(table[i].json), &e);
                if (!table[i].pointer) {
                        if (r < 0)
                                fail_msg("%s: %s", table[i].json, e.msg);
                        ASSERT_EQ(c->allowlist->n_allow, 2);
                        ASSERT_STREQ(c->sandbox_id, "s");
                        ASSERT_EQ(c->header_timeout_ms, 3000);
                        ASSERT_EQ(c->max_connections, 9);
                        ASSERT_TRUE(c->verbose);
                        continue;
                }
                ASSERT_ERROR(r, EINVAL);
                if (strcmp(e.pointer, table[i].pointer) != 0)
                        fail_msg("%s: pointer '%s', expected '%s' (%s)", table[i].json, e.pointer,
                                 table[i].pointer, e.msg);
        }
        {
                _cleanup_(proxy_config_freep) ProxyConfig *c = proxy_config_new();
                HutchError e = {};

                ASSERT_ERROR(proxy_config_load_json(c, "{\"allow\": [", 11, &e), EINVAL);
                ASSERT_EQ(e.line, 1);
                ASSERT_ERROR(proxy_config_load_json(c, "{\"a\":1,\"a\":2}", 13, &e), EINVAL);
        }
}

/* The configuration document's refusals, word for word with their
 * pointers: what the field-table decoder reports in the proxy's own words
 * (an unknown key, a wrong type, a missing member), each with an accepted
 * twin. */
#define SECRET_WITH(extra)                                                                         \
        "{\"secrets\": [{\"name\": \"K\", \"placeholder\": \"PH_aaaaaaaa\", \"value\": "           \
        "\"sk-realval1\", \"hosts\": [\"api.test\"]" extra "}]}"
TEST(config_json_messages) {
        static const struct {
                const char *json;
                int err; /* 0: accepted */
                const char *msg, *pointer;
        } table[] = {
                {"{\"surprise\": 1}", EINVAL, "unknown configuration key 'surprise'", "/surprise"},
                {"{\"verbose\": \"yes\"}", EINVAL, "'verbose' must be a boolean", "/verbose"},
                {"{\"verbose\": true}", 0},
                {"{\"audit_log\": null}", EINVAL, "'audit_log' must be a string", "/audit_log"},
                {"{\"audit_log\": \"/tmp/a\"}", 0},
                {"{\"listen_fds\": 3}", EINVAL, "'listen_fds' must be an array of integers",
                 "/listen_fds"},
                {"{\"secrets\": {}}", EINVAL, "'secrets' must be an array of objects", "/secrets"},
                {"{\"secrets\": [1]}", EINVAL, "a secret must be an object", "/secrets/0"},
                {SECRET_WITH(", \"bogus\": 1"), EINVAL, "unknown key 'bogus' in a secret",
                 "/secrets/0/bogus"},
                {SECRET_WITH(""), 0},
                {SECRET_WITH(", \"header\": 3"), EINVAL,
                 "'header' of a secret must be a non-empty string", "/secrets/0/header"},
                {SECRET_WITH(", \"header\": \"X-Key\""), 0},
                {"{\"secrets\": [{\"placeholder\": \"PH_aaaaaaaa\", \"value\": \"sk-realval1\", "
                 "\"hosts\": [\"api.test\"]}]}",
                 EINVAL, "'name' of a secret must be a non-empty string", "/secrets/0/name"},
                {SECRET_WITH(", \"methods\": \"GET\""), EINVAL,
                 "'methods' must be a non-empty array", "/secrets/0/methods"},
                {SECRET_WITH(", \"methods\": [\"GET\"]"), 0},
                {"{\"secrets\": [{\"name\": \"K\", \"placeholder\": \"PH_aaaaaaaa\", \"value\": "
                 "\"sk-realval1\", \"hosts\": \"api.test\"}]}",
                 EINVAL, "secret 'K': 'hosts' must be a non-empty array", "/secrets/0"},
                /* The unknown key is found first, wherever it is. */
                {"{\"secrets\": [{\"name\": 5, \"bogus\": 1}]}", EINVAL,
                 "unknown key 'bogus' in a secret", "/secrets/0/bogus"},
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_(proxy_config_freep) ProxyConfig *c = proxy_config_new();
                HutchError e = {};
                int r;

                ASSERT_NOT_NULL(c);
                r = proxy_config_load_json(c, table[i].json, strlen(table[i].json), &e);
                if (table[i].err == 0) {
                        if (r < 0)
                                fail_msg("%s: %s", table[i].json, e.msg);
                        continue;
                }
                if (r != -table[i].err || strcmp(e.msg, table[i].msg) != 0 ||
                    strcmp(e.pointer, table[i].pointer) != 0)
                        fail_msg("%s: r=%d '%s' at '%s', expected '%s' at '%s'", table[i].json, r,
                                 e.msg, e.pointer, table[i].msg, table[i].pointer);
        }
}

/* A running proxy's policy change: only the four live keys, all of it
 * valid or nothing; the swap leaves everything else as it was. */
TEST(config_live_policy) {
        static const char good[] = "{\"allow\": [\"a.test\", \"c.test:8443\"], \"deny\": "
                                   "[\"b.test\"], \"allow_private\": [\"10.0.0.0/8\"], "
                                   "\"resolve\": [\"c.test:10.1.2.3\"]}";
        static const struct {
                const char *json;
                const char *msg;
        } bad[] = {
                {"{\"allow\": [\"a.test\"], \"sandbox_id\": \"x\"}", "'sandbox_id' cannot change"},
                {"{\"secrets\": []}", "'secrets' cannot change"},
                {"{\"listen_fds\": [3]}", "'listen_fds' cannot change"},
                {"{\"allow\": [\"*bad\"]}", "invalid host pattern"},
                {"{\"resolve\": [\"c.test\"]}", "expected NAME:ADDR"},
                {"[1]", "invalid policy document"},
                {"{\"allow\": [", "invalid policy document"},
        };
        _cleanup_(proxy_config_freep) ProxyConfig *c = proxy_config_new();
        _cleanup_(proxy_config_freep) ProxyConfig *next = NULL;
        HutchError e = {};

        ASSERT_NOT_NULL(c);
        ASSERT_OK(proxy_config_load_json(
                c, "{\"allow\": [\"old.test\"], \"sandbox_id\": \"s\"}",
                strlen("{\"allow\": [\"old.test\"], \"sandbox_id\": \"s\"}"), &e));
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                ProxyConfig *n = NULL;
                int r = proxy_config_load_policy(bad[i].json, strlen(bad[i].json), &n, &e);

                if (r >= 0 || n || !strstr(e.msg, bad[i].msg))
                        fail_msg("%s: r=%d msg '%s', expected '%s'", bad[i].json, r, e.msg,
                                 bad[i].msg);
        }
        ASSERT_OK(proxy_config_load_policy(good, strlen(good), &next, &e));
        proxy_config_swap_policy(c, next);
        ASSERT_EQ(c->allowlist->n_allow, 2);
        ASSERT_EQ(c->allowlist->n_deny, 1);
        ASSERT_EQ(c->allowlist->n_private_ok, 1);
        ASSERT_NOT_NULL(proxy_config_find_resolve(c, "c.test"));
        ASSERT_STREQ(c->sandbox_id, "s");
        /* The old policy went to @next, to be freed. */
        ASSERT_EQ(next->allowlist->n_allow, 1);
        ASSERT_NULL(proxy_config_find_resolve(next, "c.test"));
}

TEST(audit_counts_and_summary) {
        Audit a;
        AuditRecord deny = {.method = "GET",
                            .host = "evil.test",
                            .port = 80,
                            .decision = AUDIT_DENY,
                            .reason = "not in the allowlist",
                            .status = 403};
        AuditRecord allow = {.method = "CONNECT",
                             .host = "ok.test",
                             .port = 443,
                             .address = "1.2.3.4",
                             .decision = AUDIT_ALLOW,
                             .rule = "ok.test",
                             .status = 200,
                             .bytes_up = 10,
                             .bytes_down = 20};
        AuditRecord err = {.decision = AUDIT_ERROR, .reason = "bad", .status = 400};
        _cleanup_free_ char *summary = NULL;
        json_t *root, *denied;
        int fds[2];
        char buf[4096];
        ssize_t n;

        ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
        ASSERT_OK(audit_init(&a, fds[1], "sbx"));
        ASSERT_OK(audit_log(&a, &deny));
        ASSERT_OK(audit_log(&a, &deny));
        ASSERT_OK(audit_log(&a, &allow));
        ASSERT_OK(audit_log(&a, &err));
        ASSERT_ERROR(audit_log(&a, &(AuditRecord){.decision = _AUDIT_DECISION_MAX}), EINVAL);

        /* One line per record, valid JSON, with every field. */
        n = read(fds[0], buf, sizeof(buf) - 1);
        ASSERT_TRUE(n > 0);
        buf[n] = '\0';
        {
                char *save = NULL, *line;
                size_t lines = 0;

                for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                        json_t *o = json_loads(line, 0, NULL);

                        ASSERT_NOT_NULL(o);
                        ASSERT_STREQ(json_string_value(json_object_get(o, "sandbox")), "sbx");
                        ASSERT_NOT_NULL(json_object_get(o, "duration_ms"));
                        ASSERT_NOT_NULL(json_object_get(o, "bytes_up"));
                        json_decref(o);
                        lines++;
                }
                ASSERT_EQ(lines, 4);
        }

        summary = audit_summary(&a);
        ASSERT_NOT_NULL(summary);
        root = json_loads(summary, 0, NULL);
        ASSERT_NOT_NULL(root);
        ASSERT_EQ(json_integer_value(json_object_get(root, "allowed")), 1);
        ASSERT_EQ(json_integer_value(json_object_get(root, "denied_total")), 2);
        ASSERT_EQ(json_integer_value(json_object_get(root, "errors")), 1);
        denied = json_object_get(root, "denied");
        ASSERT_EQ(json_array_size(denied), 1);
        ASSERT_EQ(json_integer_value(json_object_get(json_array_get(denied, 0), "count")), 2);
        json_decref(root);

        /* The cap: distinct denials beyond AUDIT_DENIALS_MAX are only counted. */
        for (unsigned i = 0; i < AUDIT_DENIALS_MAX + 5; i++) {
                char host[32];

                (void)snprintf(host, sizeof(host), "h%u.test", i);
                deny.host = host;
                ASSERT_OK(audit_log(&a, &deny));
                /* drain the pipe so writes never block: each denial wrote its line */
                ASSERT_TRUE(read(fds[0], buf, sizeof(buf)) > 0);
        }
        ASSERT_EQ(a.n_denials, AUDIT_DENIALS_MAX);
        ASSERT_TRUE(a.denials_truncated);
        ASSERT_EQ(a.n_denied, 2 + AUDIT_DENIALS_MAX + 5);

        /* A write error is reported but the record is still counted. */
        (void)signal(SIGPIPE, SIG_IGN);
        (void)close(fds[0]);
        ASSERT_ERROR(audit_log(&a, &allow), EPIPE);
        ASSERT_EQ(a.n_allowed, 2);
        audit_done(&a);
}

TEST(audit_decision_strings) {
        for (AuditDecision d = 0; d < _AUDIT_DECISION_MAX; d++)
                ASSERT_EQ(audit_decision_from_string(audit_decision_to_string(d)), d);
        ASSERT_NULL(audit_decision_to_string(_AUDIT_DECISION_MAX));
        ASSERT_ERROR(audit_decision_from_string("maybe"), EINVAL);
        ASSERT_ERROR(audit_decision_from_string(NULL), EINVAL);
}

DEFINE_TEST_MAIN
