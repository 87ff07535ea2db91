/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy-request.h"

/* Connection options a message may name; more is refused rather than
 * half-honoured. */
#define CONNECTION_TOKENS_MAX PROXY_CONNECTION_TOKENS_MAX

typedef ProxyToken Token;

/* A request's hop-by-hop fields (proxy_hop_fields_has()). */
static const char *const request_hop[] = {
        "connection", "proxy-connection", "keep-alive", "proxy-authorization",
        "te",         "trailer",          "upgrade",    NULL,
};

typedef struct Buf {
        char *data;
        size_t len, alloc;
        bool oom;
} Buf;

static void buf_add(Buf *b, const char *s, size_t n) {
        if (b->oom || n == 0)
                return;
        if (n > SIZE_MAX / 2 - b->len) {
                b->oom = true;
                return;
        }
        if (b->len + n > b->alloc) {
                size_t alloc = MAX(b->alloc * 2, b->len + n + 256);
                char *d = realloc(b->data, alloc);

                if (!d) {
                        b->oom = true;
                        return;
                }
                b->data = d;
                b->alloc = alloc;
        }
        memcpy(b->data + b->len, s, n);
        b->len += n;
}

static void buf_adds(Buf *b, const char *s) {
        buf_add(b, s, strlen(s));
}

static int buf_finish(Buf *b, char **ret, size_t *ret_len) {
        if (b->oom) {
                free(b->data);
                return -ENOMEM;
        }
        *ret = b->data;
        *ret_len = b->len;
        return 0;
}

static int request_fail(int *reterr_status, const char **reterr_reason, const char *reason) {
        if (reterr_status)
                *reterr_status = 400;
        if (reterr_reason)
                *reterr_reason = reason;
        return -EBADMSG;
}

static void trim_ows(const char **s, size_t *n) {
        while (*n > 0 && ((*s)[0] == ' ' || (*s)[0] == '\t')) {
                (*s)++;
                (*n)--;
        }
        while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
                (*n)--;
}

int proxy_authority_parse(const char *s, size_t n, Host *ret_host, uint16_t *ret_port) {
        const char *port_text = NULL;
        size_t host_len, port_len = 0;
        uint32_t port = 0;
        Host h;
        int r;

        if (!s || n == 0)
                return -EINVAL;
        if (s[0] == '[') {
                const char *close = memchr(s, ']', n);

                if (!close)
                        return -EINVAL;
                host_len = (size_t)(close - s) + 1;
        } else {
                const char *colon = memchr(s, ':', n);

                host_len = colon ? (size_t)(colon - s) : n;
        }
        if (host_len < n) {
                if (s[host_len] != ':')
                        return -EINVAL;
                port_text = s + host_len + 1;
                port_len = n - host_len - 1;
                /* An empty port is legal in URIs but never needed: refuse
                 * it rather than guess. */
                if (port_len == 0 || port_len > 5)
                        return -EINVAL;
                for (size_t i = 0; i < port_len; i++) {
                        if (port_text[i] < '0' || port_text[i] > '9')
                                return -EINVAL;
                        port = port * 10 + (uint32_t)(port_text[i] - '0');
                }
                if (port == 0 || port > 65535)
                        return -EINVAL;
        }

        r = host_parse(s, host_len, &h);
        if (r < 0)
                return r;
        *ret_host = h;
        *ret_port = (uint16_t)port;
        return 0;
}

static bool host_equal(const Host *a, const Host *b) {
        return a->kind == b->kind && strcmp(a->name, b->name) == 0;
}

static int analyze_absolute(const char *target, size_t tlen, ProxyRequest *r, int *reterr_status,
                            const char **reterr_reason) {
        const char *sep, *authority;
        size_t scheme_len, alen, end;
        uint16_t port;

        if (target[0] == '/')
                return request_fail(reterr_status, reterr_reason,
                                    "origin-form request: a proxy needs an absolute URI "
                                    "(http://host/path) or CONNECT host:port");
        sep = memmem(target, tlen, "://", 3);
        if (!sep)
                return request_fail(reterr_status, reterr_reason,
                                    "the request target is not an absolute URI");
        scheme_len = (size_t)(sep - target);
        if (http_token_equal(target, scheme_len, "https"))
                return request_fail(reterr_status, reterr_reason,
                                    "https:// URIs must be tunnelled with CONNECT");
        if (!http_token_equal(target, scheme_len, "http"))
                return request_fail(reterr_status, reterr_reason,
                                    "only http:// URIs can be forwarded");
        if (memchr(target, '#', tlen))
                return request_fail(reterr_status, reterr_reason,
                                    "a fragment in the request target is not allowed");

        authority = sep + 3;
        end = (size_t)(authority - target);
        while (end < tlen && target[end] != '/' && target[end] != '?')
                end++;
        alen = end - (size_t)(authority - target);
        /* SECURITY: "http://allowed.test@evil.test/" is a classic
         * allowlist bypass; userinfo is never legitimate here. */
        if (memchr(authority, '@', alen))
                return request_fail(reterr_status, reterr_reason,
                                    "userinfo in the request target is not allowed");
        if (proxy_authority_parse(authority, alen, &r->host, &port) < 0)
                return request_fail(reterr_status, reterr_reason,
                                    "invalid host or port in the request target");

        r->kind = PROXY_REQUEST_FORWARD;
        r->port = port != 0 ? port : 80;
        if (end == tlen) {
                r->path = "/";
                r->path_len = 1;
        } else {
                r->path = target + end;
                r->path_len = tlen - end;
                r->path_needs_slash = target[end] == '?';
        }
        return 0;
}

int proxy_request_analyze(const HttpMessage *m, ProxyRequest *ret, int *reterr_status,
                          const char **reterr_reason) {
        ProxyRequest r = {};
        const char *target, *hv = NULL;
        size_t tlen, hl = 0, n_host;
        uint16_t port;
        int k;

        if (!m || !ret || m->state == HTTP_MESSAGE_HEAD || m->state == HTTP_MESSAGE_FAILED)
                return request_fail(reterr_status, reterr_reason, "incomplete request head");
        if (m->parser.http_major != 1 || m->parser.http_minor > 1)
                return request_fail(reterr_status, reterr_reason, "unsupported HTTP version");
        target = http_message_target(m, &tlen);
        if (tlen == 0)
                return request_fail(reterr_status, reterr_reason, "empty request target");

        if (http_message_method(m) == HTTP_CONNECT) {
                if (proxy_authority_parse(target, tlen, &r.host, &port) < 0 || port == 0)
                        return request_fail(reterr_status, reterr_reason,
                                            "CONNECT needs a target of the form host:port");
                r.kind = PROXY_REQUEST_CONNECT;
                r.port = port;
        } else {
                k = analyze_absolute(target, tlen, &r, reterr_status, reterr_reason);
                if (k < 0)
                        return k;
        }

        /* SECURITY: one Host, and the same authority as the target:
         * upstream servers route on Host, so a mismatch would let a request
         * checked against one host reach another. */
        n_host = http_message_find(m, "host", &hv, &hl);
        if (n_host > 1)
                return request_fail(reterr_status, reterr_reason, "duplicate Host header");
        if (n_host == 1) {
                Host hh;
                uint16_t hp;

                trim_ows(&hv, &hl);
                if (proxy_authority_parse(hv, hl, &hh, &hp) < 0)
                        return request_fail(reterr_status, reterr_reason, "invalid Host header");
                /* Without a port, Host means the scheme's default: 80 for
                 * http://; CONNECT has no scheme, so the name must agree. */
                if (!host_equal(&hh, &r.host) ||
                    (hp != 0 ? hp != r.port : (r.kind == PROXY_REQUEST_FORWARD && r.port != 80)))
                        return request_fail(reterr_status, reterr_reason,
                                            "the Host header does not match the request target");
        }

        *ret = r;
        return 0;
}

/* True if the authority of @n bytes at @s is @h port @port, the port
 * written or elided as the default @default_port. */
static bool authority_names(const char *s, size_t n, const Host *h, uint16_t port,
                            uint16_t default_port) {
        Host a;
        uint16_t ap;

        if (proxy_authority_parse(s, n, &a, &ap) < 0)
                return false;
        return host_equal(&a, h) && (ap != 0 ? ap == port : port == default_port);
}

int proxy_request_check_bound(const HttpMessage *m, const Host *h, uint16_t port,
                              const char **reterr_reason) {
        const char *target, *hv = NULL;
        size_t tlen, hl = 0, n_host;

        n_host = http_message_find(m, "host", &hv, &hl);
        if (n_host != 1)
                return request_fail(NULL, reterr_reason,
                                    n_host == 0 ? "a request without a Host header"
                                                : "duplicate Host header");
        trim_ows(&hv, &hl);
        if (!authority_names(hv, hl, h, port, 443))
                return request_fail(NULL, reterr_reason,
                                    "the Host header does not name the CONNECT target");
        target = http_message_target(m, &tlen);
        if (tlen > 0 && target[0] != '/') {
                const char *sep = memmem(target, tlen, "://", 3);
                size_t start, end;

                if (!sep)
                        return request_fail(NULL, reterr_reason,
                                            "the request target is not an absolute URI");
                start = end = (size_t)(sep - target) + 3;
                while (end < tlen && target[end] != '/' && target[end] != '?')
                        end++;
                if (memchr(target + start, '@', end - start) ||
                    !authority_names(target + start, end - start, h, port, 443))
                        return request_fail(NULL, reterr_reason,
                                            "the request target does not name the CONNECT "
                                            "target");
        }
        return 0;
}

/* Collects the comma-separated options of every Connection field. */
static int connection_tokens(const HttpMessage *m, Token tokens[static CONNECTION_TOKENS_MAX],
                             size_t *ret_n) {
        size_t n = 0;

        for (size_t i = 0; i < m->n_fields; i++) {
                const char *name, *v;
                size_t nl, vl;

                http_message_field(m, i, &name, &nl, &v, &vl);
                if (!http_token_equal(name, nl, "connection"))
                        continue;
                while (vl > 0) {
                        const char *comma = memchr(v, ',', vl);
                        size_t tl = comma ? (size_t)(comma - v) : vl;
                        const char *t = v;

                        v += comma ? tl + 1 : tl;
                        vl -= comma ? tl + 1 : tl;
                        trim_ows(&t, &tl);
                        if (tl == 0)
                                continue;
                        if (n >= CONNECTION_TOKENS_MAX)
                                return -EBADMSG;
                        tokens[n++] = (Token){t, tl};
                }
        }
        *ret_n = n;
        return 0;
}

static bool field_dropped(const char *name, size_t nl, const char *const *drop, const Token *tokens,
                          size_t n_tokens) {
        for (size_t i = 0; drop[i]; i++)
                if (http_token_equal(name, nl, drop[i]))
                        return true;
        /* The message framing is never hop-by-hop, whatever Connection says:
         * dropping it would change where the body ends. */
        if (http_token_equal(name, nl, "content-length") ||
            http_token_equal(name, nl, "transfer-encoding"))
                return false;
        for (size_t i = 0; i < n_tokens; i++)
                if (tokens[i].n == nl && strncasecmp(tokens[i].s, name, nl) == 0)
                        return true;
        return false;
}

static bool line_safe(const char *s, size_t n) {
        return !memchr(s, '\r', n) && !memchr(s, '\n', n) && !memchr(s, '\0', n);
}

int proxy_hop_fields_init(ProxyHopFields *ret, const HttpMessage *m) {
        ret->n_tokens = 0;
        return connection_tokens(m, ret->tokens, &ret->n_tokens);
}

bool proxy_hop_fields_has(const ProxyHopFields *h, const char *name, size_t nl) {
        return field_dropped(name, nl, request_hop, h->tokens, h->n_tokens);
}

static int add_fields(Buf *b, const HttpMessage *m, const char *const *drop, bool drop_host) {
        Token tokens[CONNECTION_TOKENS_MAX];
        size_t n_tokens = 0;
        int r;

        r = connection_tokens(m, tokens, &n_tokens);
        if (r < 0)
                return r;
        for (size_t i = 0; i < m->n_fields; i++) {
                const char *name, *v;
                size_t nl, vl;

                http_message_field(m, i, &name, &nl, &v, &vl);
                if ((drop_host && http_token_equal(name, nl, "host")) ||
                    field_dropped(name, nl, drop, tokens, n_tokens))
                        continue;
                if (nl == 0 || !line_safe(name, nl) || memchr(name, ':', nl) || !line_safe(v, vl))
                        return -EBADMSG;
                buf_add(b, name, nl);
                buf_adds(b, ": ");
                buf_add(b, v, vl);
                buf_adds(b, "\r\n");
        }
        return 0;
}

int proxy_request_build_head(const HttpMessage *m, const ProxyRequest *req, bool close, char **ret,
                             size_t *ret_len) {
        Buf b = {};
        char line[64];
        int r;

        if (!m || !req || !ret || !ret_len || req->kind != PROXY_REQUEST_FORWARD)
                return -EINVAL;
        if (!line_safe(req->path, req->path_len) || memchr(req->path, ' ', req->path_len))
                return -EBADMSG;

        buf_adds(&b, http_method_str(http_message_method(m)));
        buf_adds(&b, " ");
        if (req->path_needs_slash)
                buf_adds(&b, "/");
        buf_add(&b, req->path, req->path_len);
        (void)snprintf(line, sizeof(line), " HTTP/1.%u\r\nHost: ", m->parser.http_minor ? 1U : 0U);
        buf_adds(&b, line);
        if (req->host.kind == HOST_KIND_ADDRESS && req->host.addr.family == AF_INET6) {
                buf_adds(&b, "[");
                buf_adds(&b, req->host.name);
                buf_adds(&b, "]");
        } else
                buf_adds(&b, req->host.name);
        if (req->port != 80) {
                (void)snprintf(line, sizeof(line), ":%u", (unsigned)req->port);
                buf_adds(&b, line);
        }
        buf_adds(&b, "\r\n");

        /* Host is written above, from the checked target. */
        r = add_fields(&b, m, request_hop, true);
        if (r < 0) {
                free(b.data);
                return r;
        }
        if (close)
                buf_adds(&b, "Connection: close\r\n");
        buf_adds(&b, "\r\n");
        return buf_finish(&b, ret, ret_len);
}

int proxy_response_build_head(const HttpMessage *m, unsigned flags, char **ret, size_t *ret_len) {
        static const char *const drop[] = {
                "connection", "proxy-connection",   "keep-alive",
                "upgrade",    "proxy-authenticate", NULL,
        };
        /* SECURITY: a decoded body's old framing would misframe it. */
        static const char *const drop_decoded[] = {
                "connection",     "proxy-connection",   "keep-alive",
                "upgrade",        "proxy-authenticate", "content-encoding",
                "content-length", "transfer-encoding",  NULL,
        };
        const char *reason;
        size_t reason_len;
        Buf b = {};
        char line[64];
        int r;

        if (!m || !ret || !ret_len)
                return -EINVAL;
        reason = http_message_target(m, &reason_len);
        if (!line_safe(reason, reason_len))
                return -EBADMSG;

        (void)snprintf(line, sizeof(line), "HTTP/1.1 %u ", http_message_status_code(m));
        buf_adds(&b, line);
        buf_add(&b, reason, reason_len);
        buf_adds(&b, "\r\n");
        r = add_fields(&b, m, flags & RESPONSE_HEAD_DECODED ? drop_decoded : drop, false);
        if (r < 0) {
                free(b.data);
                return r;
        }
        if ((flags & RESPONSE_HEAD_DECODED) && (flags & RESPONSE_HEAD_CHUNKED))
                buf_adds(&b, "Transfer-Encoding: chunked\r\n");
        if (flags & RESPONSE_HEAD_CLOSE)
                buf_adds(&b, "Connection: close\r\n");
        buf_adds(&b, "\r\n");
        return buf_finish(&b, ret, ret_len);
}
