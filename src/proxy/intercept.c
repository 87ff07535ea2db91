/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <zlib.h>

#include "exchange.h"
#include "fd-util.h"
#include "http-message.h"
#include "intercept.h"
#include "log.h"
#include "proxy-request.h"
#include "secrets.h"

#define REASON_MAX 1024

typedef enum IState {
        I_HANDSHAKE, /* TLS handshake with the client */
        I_HEAD,      /* reading a request head */
        I_WAIT_UP,   /* a request is complete; the upstream handshake is not */
        I_FORWARD,   /* request and response in flight */
        I_CLOSING,   /* flushing a final response */
        I_DEAD,
} IState;

struct Intercept {
        InterceptParams p;
        char address[NET_ADDR_STRING_MAX];
        char rule[HOST_PATTERN_STRING_MAX];
        IState state;
        struct bufferevent *cl, *up;
        bool up_ready, up_failed;
        char up_error[REASON_MAX];
        /* The HTTP exchange machine (exchange.h); the secret handling is
         * its hooks: i_refused() and the head rewrite before it runs, the
         * body scan and the masking as the messages' on_body. */
        Exchange ex;
        SecretFilter filter;
        SecretFilter scan;       /* the request body's placeholder scan */
        bool req_chunked;        /* the request body is re-chunked */
        const ProxySecret *trip; /* a placeholder found in the request body */
        z_stream z;              /* the response body's content decoding */
        bool decoding, z_ready, z_raw, z_end;
        bool chunked;  /* the response body is re-chunked */
        uint64_t used; /* secrets substituted in this request */
};

static struct timeval ms_tv(uint64_t ms) {
        return (struct timeval){.tv_sec = (time_t)(ms / 1000),
                                .tv_usec = (suseconds_t)((ms % 1000) * 1000)};
}

static void i_begin(Intercept *i) {
        exchange_begin(&i->ex);
        i->used = 0;
}

static void i_audit(Intercept *i, AuditDecision d, const char *reason, const char *secret) {
        const ProxyConfig *cfg = i->p.config;
        const char *names[PROXY_SECRETS_MAX];
        size_t n = 0;
        AuditRecord r;

        if (!i->ex.in_exchange)
                return;
        for (size_t k = 0; k < cfg->n_secrets && k < PROXY_SECRETS_MAX; k++)
                if (i->used & (UINT64_C(1) << k))
                        names[n++] = cfg->secrets[k].name;
        r = (AuditRecord){
                .host = i->p.host.name,
                .port = i->p.port,
                .address = i->address[0] ? i->address : NULL,
                .decision = d,
                .rule = i->rule[0] ? i->rule : NULL,
                .reason = reason,
                .intercepted = true,
                .secrets = names,
                .n_secrets = n,
                .secret = secret,
        };
        (void)exchange_audit(&i->ex, i->p.audit, &r);
}

static void i_release(Intercept *i) {
        exchange_stop_timer(&i->ex);
        i->ex.awaiting = false;
        if (i->cl) {
                bufferevent_free(i->cl);
                i->cl = i->ex.cl = NULL;
        }
        if (i->up) {
                bufferevent_free(i->up);
                i->up = i->ex.up = NULL;
        }
        i->state = I_DEAD;
}

/* The end: everything released, then the owner told (last). */
static void i_finish(Intercept *i) {
        if (i->state == I_DEAD)
                return;
        if (i->ex.in_exchange)
                i_audit(i, AUDIT_ALLOW, "the connection closed before the exchange completed",
                        NULL);
        i_release(i);
        i->p.done(i->p.userdata);
}

static void i_drop_upstream(Intercept *i) {
        if (i->up) {
                bufferevent_free(i->up);
                i->up = i->ex.up = NULL;
        }
}

static void i_close_after_flush(Intercept *i) {
        /* The client must read the last response within the header
         * timeout, as on the plain path (which closes then too). */
        struct timeval tv = ms_tv(i->p.config->header_timeout_ms);

        i_drop_upstream(i);
        i->state = I_CLOSING;
        (void)bufferevent_disable(i->cl, EV_READ);
        (void)bufferevent_set_timeouts(i->cl, NULL, &tv);
        if (evbuffer_get_length(bufferevent_get_output(i->cl)) == 0)
                i_finish(i);
}

/* Answers the current request with a short text and closes. */
static void i_answer(Intercept *i, AuditDecision d, unsigned status, const char *text,
                     const char *secret) {
        (void)exchange_answer_text(&i->ex, status, text, false);
        i_audit(i, d, text, secret);
        i_close_after_flush(i);
}

static void i_emit(Intercept *i, const char *data, size_t len) {
        struct evbuffer *out = bufferevent_get_output(i->cl);

        if (len == 0)
                return;
        if (i->chunked) {
                (void)evbuffer_add_printf(out, "%zx\r\n", len);
                (void)evbuffer_add(out, data, len);
                (void)evbuffer_add(out, "\r\n", 2);
        } else
                (void)evbuffer_add(out, data, len);
        i->ex.bytes_down += len;
}

static int i_mask_emit(Intercept *i, const char *data, size_t len) {
        const ProxyConfig *cfg = i->p.config;
        const char *out;
        size_t n;

        if (secret_filter_feed(&i->filter, cfg->secrets, cfg->n_secrets, data, len, &out, &n) < 0)
                return -1;
        i_emit(i, out, n);
        return 0;
}

/* True if the two bytes at @p start a zlib stream (RFC 1950): deflate,
 * and a header check that is a multiple of 31. Else "deflate" is taken to
 * be raw deflate, as some servers send it. */
static bool zlib_header(const unsigned char *p) {
        return (p[0] & 0x0f) == 8 && ((unsigned)p[0] * 256 + p[1]) % 31 == 0;
}

/* Inflates @len bytes of a gzip or deflate body into the masking. */
static int i_inflate(Intercept *i, const char *data, size_t len) {
        char out[16384];

        if (!i->z_ready) {
                int bits = 15 + 32; /* gzip or zlib, by their headers */

                if (i->z_raw)
                        bits = len >= 2 && zlib_header((const unsigned char *)data) ? 15 : -15;
                if (inflateInit2(&i->z, bits) != Z_OK) {
                        i->ex.body_error = "out of memory";
                        return -1;
                }
                i->z_ready = true;
                i->z_raw = bits < 0;
        }
        i->z.next_in = (Bytef *)data;
        i->z.avail_in = (uInt)len;
        while (i->z.avail_in > 0) {
                uInt before = i->z.avail_in;
                size_t produced;
                int zr;

                if (i->z_end) {
                        /* Another gzip member; after raw deflate, junk. */
                        if (i->z_raw || inflateReset(&i->z) != Z_OK) {
                                i->ex.body_error = "data after the end of the compressed body";
                                return -1;
                        }
                        i->z_end = false;
                }
                i->z.next_out = (Bytef *)out;
                i->z.avail_out = sizeof(out);
                zr = inflate(&i->z, Z_NO_FLUSH);
                if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
                        i->ex.body_error = "the compressed body is corrupt";
                        return -1;
                }
                produced = sizeof(out) - i->z.avail_out;
                if (produced > 0 && i_mask_emit(i, out, produced) < 0) {
                        i->ex.body_error = "out of memory";
                        return -1;
                }
                if (zr == Z_STREAM_END)
                        i->z_end = true;
                else if (produced == 0 && i->z.avail_in == before) {
                        i->ex.body_error = "the compressed body is corrupt";
                        return -1;
                }
        }
        return 0;
}

/* Decoded response body (chunked framing removed): content-decoded if it
 * has to be, then masked, held back where a value may start. */
static int i_on_body(void *userdata, const char *data, size_t len) {
        Intercept *i = userdata;

        if (i->decoding)
                return i_inflate(i, data, len);
        return i_mask_emit(i, data, len);
}

static void i_emit_up(Intercept *i, const char *data, size_t len) {
        struct evbuffer *out = bufferevent_get_output(i->up);

        if (len == 0)
                return;
        if (i->req_chunked) {
                (void)evbuffer_add_printf(out, "%zx\r\n", len);
                (void)evbuffer_add(out, data, len);
                (void)evbuffer_add(out, "\r\n", 2);
        } else
                (void)evbuffer_add(out, data, len);
        i->ex.bytes_up += len;
}

/* Request body (chunked framing removed): SECURITY: a body is no lane, so
 * a placeholder in it is a tripwire. What could be the start of one is held
 * back, so none ever reaches the upstream, even in part. */
static int i_on_req_body(void *userdata, const char *data, size_t len) {
        Intercept *i = userdata;
        const ProxyConfig *cfg = i->p.config;
        const char *out;
        size_t n;

        if (secret_scan_feed(&i->scan, cfg->secrets, cfg->n_secrets, data, len, &out, &n,
                             &i->trip) < 0)
                return -1;
        i_emit_up(i, out, n);
        return 0;
}

static void i_request_body_done(Intercept *i) {
        const char *rest;
        size_t n;

        secret_filter_flush(&i->scan, NULL, 0, &rest, &n);
        i_emit_up(i, rest, n);
        if (i->req_chunked)
                (void)evbuffer_add(bufferevent_get_output(i->up), "0\r\n\r\n", 5);
}

static void i_decode_end(Intercept *i) {
        if (i->z_ready)
                (void)inflateEnd(&i->z);
        i->z = (z_stream){};
        i->z_ready = i->z_raw = i->z_end = i->decoding = false;
        i->ex.body_error = NULL;
}

static void i_exchange_done(Intercept *i) {
        const char *rest;
        size_t n;

        secret_filter_flush(&i->filter, i->p.config->secrets, i->p.config->n_secrets, &rest, &n);
        i_emit(i, rest, n);
        i_decode_end(i);
        if (i->chunked)
                (void)evbuffer_add(bufferevent_get_output(i->cl), "0\r\n\r\n", 5);
        i_audit(i, AUDIT_ALLOW, NULL, NULL);
        if (i->ex.close_after || i->ex.up_eof) {
                i_close_after_flush(i);
                return;
        }
        i->state = I_HEAD;
        (void)bufferevent_disable(i->up, EV_WRITE);
        exchange_await_request(&i->ex, i->p.config->idle_timeout_ms);
}

typedef enum Coding {
        CODING_NONE,
        CODING_GZIP,
        CODING_DEFLATE,
        CODING_OTHER,
} Coding;

/* The content coding of the response in @m: every Content-Encoding field,
 * a comma-separated list; "identity" counts as none. A transfer coding
 * other than chunked (which the proxy removes) counts as one it cannot
 * decode: the client would undo it. */
static Coding response_coding(const HttpMessage *m) {
        Coding c = CODING_NONE;

        for (size_t f = 0; f < m->n_fields; f++) {
                const char *name, *v;
                size_t nl, vl;
                bool transfer;

                http_message_field(m, f, &name, &nl, &v, &vl);
                transfer = http_token_equal(name, nl, "Transfer-Encoding");
                if (!transfer && !http_token_equal(name, nl, "Content-Encoding"))
                        continue;
                for (size_t a = 0; a < vl;) {
                        size_t b = a;
                        Coding t;

                        while (b < vl && v[b] != ',')
                                b++;
                        while (a < b && (v[a] == ' ' || v[a] == '\t'))
                                a++;
                        while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
                                b--;
                        if (b == a || http_token_equal(v + a, b - a, "identity") ||
                            (transfer && http_token_equal(v + a, b - a, "chunked")))
                                t = CODING_NONE;
                        else if (transfer)
                                t = CODING_OTHER;
                        else if (http_token_equal(v + a, b - a, "gzip") ||
                                 http_token_equal(v + a, b - a, "x-gzip"))
                                t = CODING_GZIP;
                        else if (http_token_equal(v + a, b - a, "deflate"))
                                t = CODING_DEFLATE;
                        else
                                t = CODING_OTHER;
                        /* One coding at most: a stack of them is refused. */
                        if (t != CODING_NONE)
                                c = c == CODING_NONE ? t : CODING_OTHER;
                        while (b < vl && v[b] != ',')
                                b++;
                        a = b + 1;
                }
        }
        return c;
}

/* The exchange machine's response_head hook (it re-arms the parser after
 * an interim head). */
static int i_response_head(Intercept *i) {
        unsigned code = http_message_status_code(&i->ex.resp);
        bool interim = code < 200, decoded = false;
        unsigned flags = 0;
        char *head = NULL;
        size_t len = 0;
        int r;

        /* SECURITY: a response to a request that carried a value is masked
         * in the form the client will read: decoded. A coding the proxy
         * cannot decode is refused, not passed on unmasked. */
        if (!interim && i->used != 0 && http_message_has_body(&i->ex.resp)) {
                Coding c = response_coding(&i->ex.resp);

                if (c == CODING_OTHER) {
                        i_answer(i, AUDIT_DENY, 502,
                                 "the upstream server answered with a content coding the proxy "
                                 "cannot decode to mask a secret",
                                 NULL);
                        return -EBADMSG;
                }
                if (c != CODING_NONE) {
                        decoded = true;
                        i->decoding = true;
                        i->z_raw = c == CODING_DEFLATE;
                }
        }
        if (!interim) {
                i->chunked =
                        (i->ex.resp.parser.flags & F_CHUNKED) && http_message_has_body(&i->ex.resp);
                if (decoded) {
                        /* The decoded length is unknown: chunked for
                         * HTTP/1.1, until the close for 1.0. */
                        i->chunked = i->ex.req.parser.http_minor >= 1;
                        i->ex.close_after = i->ex.close_after || !i->chunked;
                        flags |= RESPONSE_HEAD_DECODED | (i->chunked ? RESPONSE_HEAD_CHUNKED : 0);
                        /* SECURITY: decoding, a little input at a time, so
                         * a small compressed body cannot flood the client's
                         * buffer at once (deflate expands at most about
                         * 1,000 times). */
                        i->ex.resp_feed_max = 4096;
                }
                if (i->ex.close_after)
                        flags |= RESPONSE_HEAD_CLOSE;
        }
        r = secrets_build_response_head(i->p.config->secrets, i->p.config->n_secrets, &i->ex.resp,
                                        flags, &head, &len);
        if (r < 0) {
                exchange_fail(&i->ex, AUDIT_ALLOW, 502,
                              r == -ENOMEM ? "out of memory"
                                           : "bad response head from the upstream server",
                              NULL);
                return r;
        }
        (void)evbuffer_add(bufferevent_get_output(i->cl), head, len);
        free(head);
        i->ex.bytes_down += len;
        return 0;
}

static Intercept *ex_intercept(Exchange *e) {
        return e->userdata;
}

static bool ex_forwarding(Exchange *e) {
        return ex_intercept(e)->state == I_FORWARD;
}

static int ex_response_head(Exchange *e) {
        return i_response_head(ex_intercept(e));
}

static void ex_done(Exchange *e) {
        i_exchange_done(ex_intercept(e));
}

static void ex_answer(Exchange *e, AuditDecision d, unsigned status, const char *reason,
                      const char *secret) {
        i_answer(ex_intercept(e), d, status, reason, secret);
}

static void ex_cut(Exchange *e, AuditDecision d, const char *reason, const char *secret) {
        Intercept *i = ex_intercept(e);

        i_audit(i, d, reason, secret);
        i_finish(i);
}

/* A request body the scan stopped: a tripwire of its own; else the
 * machine's 400. */
static bool ex_request_failed(Exchange *e, const char *reason) {
        Intercept *i = ex_intercept(e);
        char why[REASON_MAX];

        if (!i->trip)
                return false;
        (void)snprintf(why, sizeof(why), "tripwire: placeholder of %s in a request body to %s",
                       i->trip->name, i->p.host.name);
        /* The upstream gets no more of it, and no end. */
        i_drop_upstream(i);
        exchange_fail(e, AUDIT_DENY, 403, why, i->trip->name);
        return true;
}

static void ex_request_done(Exchange *e) {
        i_request_body_done(ex_intercept(e));
}

/* The checks before anything of a request goes upstream. Returns true if
 * the request was answered (and the connection is closing). */
static bool i_refused(Intercept *i) {
        const ProxyConfig *cfg = i->p.config;
        const ProxySecret *trip;
        const char *why = NULL;

        /* SECURITY: a placeholder of a secret that is not for this host is
         * an attempt to send it elsewhere: refused, named, never valued. */
        trip = secrets_find_tripwire(cfg->secrets, cfg->n_secrets, &i->p.host, i->p.port,
                                     &i->ex.req);
        if (trip) {
                char reason[REASON_MAX];

                (void)snprintf(reason, sizeof(reason), "tripwire: placeholder of %s sent to %s",
                               trip->name, i->p.host.name);
                i_answer(i, AUDIT_DENY, 403, reason, trip->name);
                return true;
        }
        /* SECURITY: target binding: the request must be for the host the
         * tunnel was checked (and its secrets chosen) for; a shared front
         * end would route on Host. 421 and no further use. */
        if (proxy_request_check_bound(&i->ex.req, &i->p.host, i->p.port, &why) < 0) {
                char reason[REASON_MAX];

                (void)snprintf(reason, sizeof(reason), "misdirected request: %s ('%s' port %u)",
                               why, i->p.host.name, (unsigned)i->p.port);
                i_answer(i, AUDIT_DENY, 421, reason, NULL);
                return true;
        }
        /* SECURITY: lanes: a placeholder where no value may go (a header
         * an upstream may echo, the path, the query) is a tripwire too. */
        trip = secrets_find_misplaced(cfg->secrets, cfg->n_secrets, &i->ex.req, &why);
        if (trip) {
                char reason[REASON_MAX];

                (void)snprintf(reason, sizeof(reason),
                               "tripwire: placeholder of %s in %s, sent to %s", trip->name, why,
                               i->p.host.name);
                i_answer(i, AUDIT_DENY, 403, reason, trip->name);
                return true;
        }
        return false;
}

static void i_handle_request(Intercept *i) {
        const ProxyConfig *cfg = i->p.config;
        struct timeval idle = ms_tv(cfg->idle_timeout_ms);
        char *head = NULL;
        size_t len = 0;
        int r;

        if (i->up_failed) {
                i_answer(i, AUDIT_ERROR, 502, i->up_error, NULL);
                return;
        }
        if (i_refused(i))
                return;
        r = secrets_build_request_head(cfg->secrets, cfg->n_secrets, &i->p.host, i->p.port,
                                       &i->ex.req, &head, &len, &i->used);
        if (r == -EBADMSG) {
                i_answer(i, AUDIT_ERROR, 400,
                         "only origin-form requests (\"GET /path\") are accepted inside an "
                         "intercepted connection",
                         NULL);
                return;
        }
        if (r == -E2BIG) {
                i_answer(i, AUDIT_ERROR, 400, "the request head cannot be forwarded", NULL);
                return;
        }
        if (r < 0) {
                i_answer(i, AUDIT_ERROR, 500, "out of memory", NULL);
                return;
        }
        r = evbuffer_add(bufferevent_get_output(i->up), head, len);
        /* SECURITY: the head holds real values. */
        explicit_bzero(head, len);
        free(head);
        if (r < 0) {
                i_answer(i, AUDIT_ERROR, 500, "out of memory", NULL);
                return;
        }
        i->ex.bytes_up += len;
        i->chunked = false;
        i_decode_end(i);
        i->req_chunked = (i->ex.req.parser.flags & F_CHUNKED) != 0;
        i->trip = NULL;
        i->scan.tail_len = 0;
        i->filter.tail_len = 0;
        i->state = I_FORWARD;
        (void)bufferevent_set_timeouts(i->up, &idle, NULL);
        (void)bufferevent_enable(i->up, EV_READ | EV_WRITE);
        exchange_run(&i->ex);
}

static void i_handle_head(Intercept *i) {
        if (!i->up && !i->up_failed) {
                /* The upstream closed while idle: the client must come
                 * again on a new connection. */
                i_finish(i);
                return;
        }
        i_begin(i);
        if (!i->up_ready && !i->up_failed) {
                i->state = I_WAIT_UP;
                return;
        }
        i_handle_request(i);
}

static void ex_request_head(Exchange *e) {
        i_handle_head(ex_intercept(e));
}

static void ex_request_refused(Exchange *e, unsigned status, const char *reason) {
        Intercept *i = ex_intercept(e);

        i_begin(i);
        i_answer(i, AUDIT_ERROR, status, reason, NULL);
}

static void ex_idle(Exchange *e) {
        i_finish(ex_intercept(e));
}

/* The intercepted path: bodies re-framed through the secret scan (request)
 * and the masking (response), see i_on_req_body() and i_on_body(). */
static const ExchangeOps intercept_exchange_ops = {
        .request_head = ex_request_head,
        .request_refused = ex_request_refused,
        .idle = ex_idle,
        .forwarding = ex_forwarding,
        .response_head = ex_response_head,
        .done = ex_done,
        .answer = ex_answer,
        .cut = ex_cut,
        .request_failed = ex_request_failed,
        .request_done = ex_request_done,
};

static void openssl_error(struct bufferevent *bev, char *buf, size_t size) {
        unsigned long e = bufferevent_get_openssl_error(bev);

        if (e == 0) {
                int err = EVUTIL_SOCKET_ERROR();

                (void)snprintf(buf, size, "%s", err != 0 ? strerror(err) : "connection closed");
                return;
        }
        ERR_error_string_n(e, buf, size);
        while (bufferevent_get_openssl_error(bev) != 0)
                ;
}

static void cl_event_cb(struct bufferevent *bev, short what, void *arg) {
        Intercept *i = arg;

        if (what & BEV_EVENT_CONNECTED) {
                /* From now on the exchange's idle timer and head deadline
                 * watch the client, as on the plain path. */
                i->state = I_HEAD;
                (void)bufferevent_set_timeouts(bev, NULL, NULL);
                exchange_await_request(&i->ex, i->p.config->idle_timeout_ms);
                return;
        }
        if (i->state == I_HANDSHAKE) {
                char detail[256], reason[REASON_MAX];

                if (what & BEV_EVENT_TIMEOUT)
                        (void)snprintf(detail, sizeof(detail), "timed out");
                else
                        openssl_error(bev, detail, sizeof(detail));
                (void)snprintf(reason, sizeof(reason),
                               "the TLS handshake with the client failed: %s", detail);
                i_begin(i);
                i_audit(i, AUDIT_ERROR, reason, NULL);
        } else if (i->ex.in_exchange)
                i_audit(i, AUDIT_ALLOW, "the client closed the connection", NULL);
        i_finish(i);
}

static void cl_read_cb(struct bufferevent *bev, void *arg) {
        Intercept *i = arg;

        if (i->state == I_HEAD)
                exchange_read_request(&i->ex);
        else if (i->state == I_FORWARD && i->ex.req.state == HTTP_MESSAGE_BODY)
                exchange_forward_request_body(&i->ex);
}

static void cl_write_cb(struct bufferevent *bev, void *arg) {
        Intercept *i = arg;

        if (i->state == I_CLOSING) {
                if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
                        i_finish(i);
                return;
        }
        if (i->state == I_FORWARD)
                exchange_client_writable(&i->ex);
}

static void up_event_cb(struct bufferevent *bev, short what, void *arg) {
        Intercept *i = arg;

        if (what & BEV_EVENT_CONNECTED) {
                i->up_ready = true;
                (void)bufferevent_set_timeouts(bev, NULL, NULL);
                if (i->state == I_WAIT_UP)
                        i_handle_request(i);
                return;
        }
        if (!i->up_ready) {
                SSL *ssl = bufferevent_openssl_get_ssl(bev);
                long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
                char detail[256];

                if (v != X509_V_OK)
                        (void)snprintf(i->up_error, sizeof(i->up_error),
                                       "upstream certificate for '%s' did not verify: %s",
                                       i->p.host.name, X509_verify_cert_error_string(v));
                else {
                        if (what & BEV_EVENT_TIMEOUT)
                                (void)snprintf(detail, sizeof(detail), "timed out");
                        else
                                openssl_error(bev, detail, sizeof(detail));
                        (void)snprintf(i->up_error, sizeof(i->up_error),
                                       "the TLS handshake with upstream '%s' failed: %s",
                                       i->p.host.name, detail);
                }
                i->up_failed = true;
                i_drop_upstream(i);
                if (i->state == I_WAIT_UP)
                        i_handle_request(i);
                return;
        }
        if (i->state == I_FORWARD) {
                exchange_upstream_event(&i->ex, what);
                return;
        }
        /* Closed while idle: the next request cannot be sent. */
        i_drop_upstream(i);
        if (i->state == I_HEAD && evbuffer_get_length(bufferevent_get_input(i->cl)) == 0 &&
            i->ex.req.head_bytes == 0)
                i_finish(i);
}

static void up_read_cb(struct bufferevent *bev, void *arg) {
        Intercept *i = arg;

        if (i->state == I_FORWARD)
                exchange_forward_response(&i->ex);
        else
                (void)evbuffer_drain(bufferevent_get_input(bev),
                                     evbuffer_get_length(bufferevent_get_input(bev)));
}

static void up_write_cb(struct bufferevent *bev, void *arg) {
        Intercept *i = arg;

        if (i->state == I_FORWARD)
                exchange_upstream_writable(&i->ex);
}

int intercept_start(const InterceptParams *p, int client_fd, int up_fd, Intercept **ret) {
        struct timeval hs = ms_tv(p->config->header_timeout_ms);
        struct timeval ct = ms_tv(p->config->connect_timeout_ms);
        SSL *cl_ssl = NULL, *up_ssl = NULL;
        Intercept *i;

        i = calloc(1, sizeof(Intercept));
        if (!i)
                goto fail;
        i->p = *p;
        (void)snprintf(i->address, sizeof(i->address), "%s", p->address ? p->address : "");
        (void)snprintf(i->rule, sizeof(i->rule), "%s", p->rule ? p->rule : "");
        i->p.address = i->p.rule = NULL;
        i->state = I_HANDSHAKE;
        if (exchange_init(&i->ex, &intercept_exchange_ops, i, p->base,
                          p->config->header_timeout_ms) < 0)
                goto fail;
        i->ex.resp.on_body = i_on_body;
        i->ex.resp.body_userdata = i;
        i->ex.req.on_body = i_on_req_body;
        i->ex.req.body_userdata = i;
        if (tls_mint_server_ssl(p->mint, &p->host, &cl_ssl) < 0 ||
            tls_mint_client_ssl(p->mint, &p->host, &up_ssl) < 0)
                goto fail;

        /* From here the bufferevents own the SSLs and the fds. */
        i->cl = bufferevent_openssl_socket_new(p->base, client_fd, cl_ssl,
                                               BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
        if (!i->cl)
                goto fail;
        client_fd = -EBADF;
        cl_ssl = NULL;
        i->up = bufferevent_openssl_socket_new(p->base, up_fd, up_ssl, BUFFEREVENT_SSL_CONNECTING,
                                               BEV_OPT_CLOSE_ON_FREE);
        if (!i->up)
                goto fail;
        up_fd = -EBADF;
        up_ssl = NULL;
        i->ex.cl = i->cl;
        i->ex.up = i->up;
        /* Servers (and clients) often close without close_notify. */
        bufferevent_openssl_set_allow_dirty_shutdown(i->cl, 1);
        bufferevent_openssl_set_allow_dirty_shutdown(i->up, 1);
        bufferevent_setcb(i->cl, cl_read_cb, cl_write_cb, cl_event_cb, i);
        bufferevent_setcb(i->up, up_read_cb, up_write_cb, up_event_cb, i);
        (void)bufferevent_set_timeouts(i->cl, &hs, &hs);
        (void)bufferevent_set_timeouts(i->up, &ct, &ct);
        (void)bufferevent_enable(i->cl, EV_READ | EV_WRITE);
        (void)bufferevent_enable(i->up, EV_READ | EV_WRITE);
        *ret = i;
        return 0;
fail:
        SSL_free(cl_ssl);
        SSL_free(up_ssl);
        safe_close(client_fd);
        safe_close(up_fd);
        intercept_free(i);
        return -ENOMEM;
}

Intercept *intercept_end(Intercept *i, const char *reason) {
        if (i && i->state != I_DEAD) {
                i_audit(i, AUDIT_DENY, reason, NULL);
                i_release(i);
        }
        return intercept_free(i);
}

Intercept *intercept_free(Intercept *i) {
        if (!i)
                return NULL;
        if (i->state != I_DEAD) {
                i_audit(i, AUDIT_ALLOW, "the proxy shut down", NULL);
                i_release(i);
        }
        exchange_done(&i->ex);
        secret_filter_done(&i->filter);
        secret_filter_done(&i->scan);
        i_decode_end(i);
        free(i);
        return NULL;
}
