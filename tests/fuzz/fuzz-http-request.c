/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http-message.h"
#include "proxy-request.h"

/* Fuzzes the part of hutch-proxy that reads a client's bytes and decides:
 * http_message_feed() (framing and bounds), proxy_request_analyze() (what
 * is asked for) and the head rebuilt for upstream. The first input byte
 * picks the chunk size the rest is fed in (framing must not depend on it)
 * and whether the bytes are read as a request or an upstream response.
 *
 * Invariants checked (abort() on violation):
 *   - a failed message has a 4xx/5xx status and a reason;
 *   - the head never outgrows its limit;
 *   - a rebuilt head parses again as exactly one complete head, with the
 *     same method and target, exactly one Host, and no hop-by-hop field:
 *     nothing a client sends can smuggle a second request or header. */

static const HttpLimits request_limits = {
        .line_max = HTTP_REQUEST_LINE_MAX,
        .head_max = HTTP_REQUEST_HEAD_MAX,
        .fields_max = HTTP_REQUEST_FIELDS_MAX,
};

static const HttpLimits response_limits = {
        .line_max = HTTP_RESPONSE_LINE_MAX,
        .head_max = HTTP_RESPONSE_HEAD_MAX,
        .fields_max = HTTP_RESPONSE_FIELDS_MAX,
};

/* Generous, so a rebuilt head is never refused for its size. */
static const HttpLimits reparse_limits = {
        .line_max = 2 * HTTP_RESPONSE_HEAD_MAX,
        .head_max = 2 * HTTP_RESPONSE_HEAD_MAX,
        .fields_max = 2 * HTTP_RESPONSE_FIELDS_MAX,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Feeds @data in chunks of @chunk until the head is complete, the message
 * fails or the data ends. Returns the bytes consumed. */
static size_t feed_head(HttpMessage *m, const char *data, size_t size, size_t chunk) {
        size_t off = 0;

        while (off < size && m->state == HTTP_MESSAGE_HEAD) {
                size_t n = size - off < chunk ? size - off : chunk;
                ssize_t k = http_message_feed(m, data + off, n);

                if (k < 0)
                        break;
                if ((size_t)k > n)
                        abort();
                off += (size_t)k;
                if (k == 0 && m->state == HTTP_MESSAGE_HEAD)
                        abort(); /* no progress without a state change */
        }
        if (m->head_bytes > m->limits.head_max)
                abort();
        if (m->state == HTTP_MESSAGE_FAILED && (m->status < 400 || m->status > 599 || !m->error))
                abort();
        return off;
}

static void feed_body(HttpMessage *m, const char *data, size_t size, size_t chunk) {
        size_t off = 0;

        while (off < size && m->state == HTTP_MESSAGE_BODY) {
                size_t n = size - off < chunk ? size - off : chunk;
                ssize_t k = http_message_feed(m, data + off, n);

                if (k <= 0)
                        break;
                off += (size_t)k;
        }
        (void)http_message_finish(m);
}

static void check_reparse(const char *head, size_t len, enum http_parser_type type,
                          const HttpMessage *orig, const ProxyRequest *req) {
        HttpMessage m;
        ssize_t k;

        if (http_message_init(&m, type, &reparse_limits) < 0)
                return;
        k = http_message_feed(&m, head, len);
        /* One complete head, consumed exactly. */
        if (k != (ssize_t)len || m.state == HTTP_MESSAGE_HEAD || m.state == HTTP_MESSAGE_FAILED)
                abort();
        if (type == HTTP_REQUEST) {
                const char *t;
                size_t tl;

                if (http_message_method(&m) != http_message_method(orig))
                        abort();
                t = http_message_target(&m, &tl);
                if (tl != req->path_len + (req->path_needs_slash ? 1 : 0) ||
                    memcmp(t + (req->path_needs_slash ? 1 : 0), req->path, req->path_len) != 0)
                        abort();
                if (http_message_find(&m, "host", NULL, NULL) != 1 ||
                    http_message_find(&m, "proxy-authorization", NULL, NULL) != 0 ||
                    http_message_find(&m, "proxy-connection", NULL, NULL) != 0 ||
                    http_message_find(&m, "upgrade", NULL, NULL) != 0 ||
                    http_message_find(&m, "te", NULL, NULL) != 0)
                        abort();
        } else {
                if (http_message_status_code(&m) != http_message_status_code(orig))
                        abort();
                if (http_message_find(&m, "upgrade", NULL, NULL) != 0 ||
                    http_message_find(&m, "keep-alive", NULL, NULL) != 0)
                        abort();
        }
        if (http_message_find(&m, "connection", NULL, NULL) > 1)
                abort();
        http_message_done(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *text = (const char *)data + 1;
        HttpMessage m;
        ProxyRequest req;
        enum http_parser_type type;
        size_t chunk, off, len = 0;
        const char *reason = NULL;
        char *head = NULL;
        int status = 0;

        if (size < 1 || size > 256 * 1024)
                return 0;
        type = (data[0] & 0x80) ? HTTP_RESPONSE : HTTP_REQUEST;
        chunk = (size_t)(data[0] & 0x7f) + 1;
        if (chunk == 128)
                chunk = size; /* all at once */
        size--;

        if (http_message_init(&m, type, type == HTTP_REQUEST ? &request_limits : &response_limits) <
            0)
                return 0;
        off = feed_head(&m, text, size, chunk);
        if (m.state == HTTP_MESSAGE_BODY || m.state == HTTP_MESSAGE_DONE) {
                if (type == HTTP_REQUEST) {
                        if (proxy_request_analyze(&m, &req, &status, &reason) < 0) {
                                if (status != 400 || !reason)
                                        abort();
                        } else if (req.kind == PROXY_REQUEST_FORWARD) {
                                if (req.port == 0 || req.host.name[0] == '\0')
                                        abort();
                                if (proxy_request_build_head(&m, &req, data[0] & 1, &head, &len) >=
                                    0) {
                                        check_reparse(head, len, HTTP_REQUEST, &m, &req);
                                        free(head);
                                }
                        } else if (req.port == 0)
                                abort();
                } else if (http_message_status_code(&m) >= 100 &&
                           proxy_response_build_head(&m, data[0] & 7, &head, &len) >= 0) {
                        check_reparse(head, len, HTTP_RESPONSE, &m, NULL);
                        free(head);
                }
                feed_body(&m, text + off, size - off, chunk);
        }
        http_message_done(&m);
        return 0;
}
