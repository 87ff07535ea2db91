/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http-message.h"

static int message_fail(HttpMessage *m, int status, const char *error) {
        if (m->state != HTTP_MESSAGE_FAILED) {
                m->state = HTTP_MESSAGE_FAILED;
                m->status = status;
                m->error = error;
        }
        return -EBADMSG;
}

/* Appends to the store. The store never outgrows the head, which is
 * bounded by limits.head_max; the check here is the backstop. */
static int store_append(HttpMessage *m, const char *at, size_t len) {
        if (len == 0)
                return 0;
        if (len > m->limits.head_max || m->store_len > m->limits.head_max - len)
                return message_fail(m, 431, "the request head is too large");
        if (m->store_len + len > m->store_alloc) {
                size_t alloc = MAX(m->store_alloc * 2, (size_t)1024);
                char *n;

                alloc = MAX(alloc, m->store_len + len);
                alloc = MIN(alloc, m->limits.head_max);
                n = realloc(m->store, alloc);
                if (!n)
                        return message_fail(m, 500, "out of memory");
                m->store = n;
                m->store_alloc = alloc;
        }
        memcpy(m->store + m->store_len, at, len);
        m->store_len += len;
        return 0;
}

/* RFC 9110 token characters, for field names. */
static bool is_tchar(unsigned char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c != '\0' && strchr("!#$%&'*+-.^_`|~", c));
}

static bool names_ok(const char *at, size_t len) {
        for (size_t i = 0; i < len; i++)
                if (!is_tchar((unsigned char)at[i]))
                        return false;
        return true;
}

/* Field values: visible characters, space, tab and obs-text; no other
 * control character (http-parser lets some through). */
static bool values_ok(const char *at, size_t len) {
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)at[i];

                if ((c < 0x20 && c != '\t') || c == 0x7f)
                        return false;
        }
        return true;
}

static HttpMessage *from_parser(http_parser *p) {
        return p->data;
}

static int on_target(http_parser *p, const char *at, size_t len) {
        HttpMessage *m = from_parser(p);

        if (!values_ok(at, len)) {
                (void)message_fail(m, m->type == HTTP_REQUEST ? 400 : 502,
                                   "invalid character in the start line");
                return -1;
        }
        if (!m->have_target) {
                m->have_target = true;
                m->target_off = (uint32_t)m->store_len;
        }
        if (store_append(m, at, len) < 0)
                return -1;
        m->target_len += (uint32_t)len;
        return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
        HttpMessage *m = from_parser(p);

        m->line_done = true;
        if (m->n_fields == 0 || m->in_value) {
                if (m->n_fields >= m->limits.fields_max) {
                        (void)message_fail(m, 431, "too many header fields");
                        return -1;
                }
                m->fields[m->n_fields++] = (HttpField){.name_off = (uint32_t)m->store_len};
                m->in_value = false;
        }
        /* SECURITY: names are re-emitted upstream; only tokens, so a name
         * cannot carry whitespace or separators another parser reads
         * differently. */
        if (!names_ok(at, len)) {
                (void)message_fail(m, 400, "invalid character in a header name");
                return -1;
        }
        if (store_append(m, at, len) < 0)
                return -1;
        m->fields[m->n_fields - 1].name_len += (uint32_t)len;
        return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
        HttpMessage *m = from_parser(p);
        HttpField *f;

        if (m->n_fields == 0) {
                (void)message_fail(m, 400, "a header value without a name");
                return -1;
        }
        f = &m->fields[m->n_fields - 1];
        if (!m->in_value) {
                m->in_value = true;
                f->value_off = (uint32_t)m->store_len;
        }
        /* SECURITY: a value is re-emitted on one line upstream; a CR, LF or
         * NUL inside (obsolete line folding) would split it into a second
         * header there, other control characters confuse other parsers. */
        if (!values_ok(at, len)) {
                (void)message_fail(m, 400, "invalid character in a header value");
                return -1;
        }
        if (store_append(m, at, len) < 0)
                return -1;
        f->value_len += (uint32_t)len;
        return 0;
}

static int on_headers_complete(http_parser *p) {
        HttpMessage *m = from_parser(p);

        m->line_done = true;
        m->state = HTTP_MESSAGE_BODY;
        http_parser_pause(p, 1);
        /* 1: "no body", for a response to HEAD. */
        return m->skip_body ? 1 : 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
        HttpMessage *m = from_parser(p);

        if (!m->on_body)
                return 0;
        if (m->on_body(m->body_userdata, at, len) != 0) {
                (void)message_fail(m, 502, "the body could not be passed on");
                return -1;
        }
        return 0;
}

static int on_message_complete(http_parser *p) {
        HttpMessage *m = from_parser(p);

        m->state = HTTP_MESSAGE_DONE;
        http_parser_pause(p, 1);
        return 0;
}

static const http_parser_settings request_settings = {
        .on_url = on_target,
        .on_header_field = on_header_field,
        .on_header_value = on_header_value,
        .on_headers_complete = on_headers_complete,
        .on_body = on_body,
        .on_message_complete = on_message_complete,
};

static const http_parser_settings response_settings = {
        .on_status = on_target,
        .on_header_field = on_header_field,
        .on_header_value = on_header_value,
        .on_headers_complete = on_headers_complete,
        .on_body = on_body,
        .on_message_complete = on_message_complete,
};

static const http_parser_settings *settings_of(const HttpMessage *m) {
        return m->type == HTTP_REQUEST ? &request_settings : &response_settings;
}

int http_message_init(HttpMessage *m, enum http_parser_type type, const HttpLimits *limits) {
        assert(m);
        assert(limits);
        assert(type == HTTP_REQUEST || type == HTTP_RESPONSE);

        *m = (HttpMessage){.type = type, .limits = *limits};
        m->fields = calloc(MAX(limits->fields_max, (size_t)1), sizeof(HttpField));
        if (!m->fields)
                return -ENOMEM;
        http_message_reset(m);
        return 0;
}

void http_message_done(HttpMessage *m) {
        if (!m)
                return;
        free(m->store);
        free(m->fields);
        m->store = NULL;
        m->fields = NULL;
        m->store_alloc = m->store_len = 0;
}

void http_message_reset(HttpMessage *m) {
        http_parser_init(&m->parser, m->type);
        m->parser.data = m;
        m->state = HTTP_MESSAGE_HEAD;
        m->skip_body = false;
        m->head_bytes = m->line_bytes = 0;
        m->line_started = m->line_done = m->in_value = m->after_lf = false;
        m->body_bytes = 0;
        m->store_len = 0;
        m->target_off = m->target_len = 0;
        m->have_target = false;
        m->n_fields = 0;
        m->status = 0;
        m->error = NULL;
}

/* Tracks the request/status line over the next @len bytes and fails the
 * message once it outgrows limits.line_max. */
static int track_line(HttpMessage *m, const char *data, size_t len) {
        for (size_t i = 0; i < len && !m->line_done; i++) {
                if (!m->line_started) {
                        /* http-parser skips empty lines before a request. */
                        if (data[i] == '\r' || data[i] == '\n')
                                continue;
                        m->line_started = true;
                }
                if (++m->line_bytes > m->limits.line_max)
                        return message_fail(m, m->type == HTTP_REQUEST ? 414 : 502,
                                            m->type == HTTP_REQUEST
                                                    ? "the request line is too long"
                                                    : "the status line is too long");
                if (data[i] == '\n')
                        m->line_done = true;
        }
        return 0;
}

/* SECURITY: a head line that starts with a space or tab is obsolete line
 * folding (or junk before a field name); http-parser accepts it, other
 * parsers read it differently, so it is refused (RFC 9112 section 5.2
 * lets a proxy do so). Scans the @len head bytes just parsed. */
static int check_folding(HttpMessage *m, const char *data, size_t len) {
        for (size_t i = 0; i < len; i++) {
                if (m->after_lf && m->line_done && (data[i] == ' ' || data[i] == '\t'))
                        return message_fail(m, m->type == HTTP_REQUEST ? 400 : 502,
                                            "obsolete line folding in the head");
                m->after_lf = data[i] == '\n';
        }
        return 0;
}

static int fail_from_parser(HttpMessage *m) {
        enum http_errno e = HTTP_PARSER_ERRNO(&m->parser);

        /* A callback may already have said why. */
        if (m->state == HTTP_MESSAGE_FAILED)
                return -EBADMSG;
        if (e == HPE_HEADER_OVERFLOW)
                return message_fail(m, 431, "the request head is too large");
        return message_fail(m, 400, http_errno_description(e));
}

static ssize_t feed_head(HttpMessage *m, const char *data, size_t len) {
        static const char lf = '\n';
        size_t n, chunk;
        int r;

        if (m->head_bytes >= m->limits.head_max)
                return message_fail(m, m->type == HTTP_REQUEST ? 431 : 502,
                                    "the message head is too large");
        chunk = MIN(len, m->limits.head_max - m->head_bytes);
        r = track_line(m, data, chunk);
        if (r < 0)
                return r;

        n = http_parser_execute(&m->parser, settings_of(m), data, chunk);
        if (m->state == HTTP_MESSAGE_FAILED)
                return -EBADMSG;
        r = check_folding(m, data, MIN(n + 1, chunk));
        if (r < 0)
                return r;
        if (HTTP_PARSER_ERRNO(&m->parser) == HPE_OK) {
                m->head_bytes += n;
                if (n != chunk)
                        return message_fail(m, 400, "malformed message head");
                if (m->head_bytes >= m->limits.head_max)
                        return message_fail(m, m->type == HTTP_REQUEST ? 431 : 502,
                                            "the message head is too large");
                return (ssize_t)n;
        }
        if (HTTP_PARSER_ERRNO(&m->parser) != HPE_PAUSED || m->state != HTTP_MESSAGE_BODY)
                return fail_from_parser(m);

        /* Paused in on_headers_complete: the parser stopped on the head's
         * final LF without consuming it. Count it, and feed a copy of it
         * now: that moves the parser to the body, or completes a message
         * without one, and never consumes a body byte. */
        if (n >= chunk || data[n] != '\n')
                return message_fail(m, 400, "malformed message head");
        n++;
        m->head_bytes += n;
        http_parser_pause(&m->parser, 0);
        (void)http_parser_execute(&m->parser, settings_of(m), &lf, 1);
        if (m->state == HTTP_MESSAGE_DONE)
                return (ssize_t)n;
        if (HTTP_PARSER_ERRNO(&m->parser) != HPE_OK)
                return fail_from_parser(m);
        return (ssize_t)n;
}

static ssize_t feed_body(HttpMessage *m, const char *data, size_t len) {
        size_t n;

        n = http_parser_execute(&m->parser, settings_of(m), data, len);
        if (m->state == HTTP_MESSAGE_FAILED)
                return -EBADMSG;
        if (m->state == HTTP_MESSAGE_DONE) {
                m->body_bytes += n;
                return (ssize_t)n;
        }
        if (HTTP_PARSER_ERRNO(&m->parser) != HPE_OK || n != len)
                return fail_from_parser(m);
        m->body_bytes += n;
        return (ssize_t)n;
}

ssize_t http_message_feed(HttpMessage *m, const char *data, size_t len) {
        size_t consumed = 0;

        assert(m);
        if (m->state == HTTP_MESSAGE_FAILED)
                return -EBADMSG;
        if (len == 0 || m->state == HTTP_MESSAGE_DONE)
                return 0;
        assert(data);

        while (consumed < len && m->state == HTTP_MESSAGE_HEAD) {
                ssize_t n = feed_head(m, data + consumed, len - consumed);

                if (n < 0)
                        return n;
                consumed += (size_t)n;
                /* Stop after the head so the caller can look at it. */
                if (m->state != HTTP_MESSAGE_HEAD)
                        return (ssize_t)consumed;
        }
        if (consumed < len && m->state == HTTP_MESSAGE_BODY) {
                ssize_t n = feed_body(m, data + consumed, len - consumed);

                if (n < 0)
                        return n;
                consumed += (size_t)n;
        }
        return (ssize_t)consumed;
}

int http_message_finish(HttpMessage *m) {
        assert(m);
        if (m->state == HTTP_MESSAGE_DONE)
                return 0;
        if (m->state == HTTP_MESSAGE_FAILED)
                return -EBADMSG;
        if (m->state == HTTP_MESSAGE_BODY) {
                /* A zero-length execute signals EOF; a body that runs until
                 * EOF completes, anything else is an error. */
                (void)http_parser_execute(&m->parser, settings_of(m), NULL, 0);
                if (m->state == HTTP_MESSAGE_DONE)
                        return 0;
        }
        (void)message_fail(m, 502, "the connection closed in the middle of a message");
        return -EPIPE;
}

bool http_message_keep_alive(const HttpMessage *m) {
        return http_should_keep_alive(&m->parser) != 0;
}

const char *http_message_target(const HttpMessage *m, size_t *ret_len) {
        *ret_len = m->target_len;
        return m->store ? m->store + m->target_off : "";
}

void http_message_field(const HttpMessage *m, size_t i, const char **ret_name, size_t *ret_name_len,
                        const char **ret_value, size_t *ret_value_len) {
        const HttpField *f;

        assert(i < m->n_fields);
        f = &m->fields[i];
        *ret_name = m->store + f->name_off;
        *ret_name_len = f->name_len;
        /* A field whose value never arrived ("X:\r\n") has an empty one. */
        *ret_value = f->value_len > 0 ? m->store + f->value_off : "";
        *ret_value_len = f->value_len;
}

bool http_token_equal(const char *s, size_t n, const char *token) {
        return strlen(token) == n && strncasecmp(s, token, n) == 0;
}

size_t http_message_find(const HttpMessage *m, const char *name, const char **ret_value,
                         size_t *ret_len) {
        size_t count = 0;

        for (size_t i = 0; i < m->n_fields; i++) {
                const char *n, *v;
                size_t nl, vl;

                http_message_field(m, i, &n, &nl, &v, &vl);
                if (!http_token_equal(n, nl, name))
                        continue;
                if (count++ == 0) {
                        if (ret_value)
                                *ret_value = v;
                        if (ret_len)
                                *ret_len = vl;
                }
        }
        return count;
}
