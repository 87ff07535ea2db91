/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* One HTTP/1.x message (request or response) as hutch-proxy reads it: the
 * framing is http-parser's (Debian's libhttp-parser, v2.9), this wrapper
 * adds the bounds and hands the message over in two steps so the proxy can
 * decide before any body byte is consumed:
 *
 *   http_message_feed() in state HEAD consumes bytes up to and including
 *   the end of the head and stops there. The head's request target (or
 *   status reason) and header fields are then readable. If the message has
 *   no body the state is already DONE, else BODY.
 *
 *   In state BODY, http_message_feed() consumes body bytes (including any
 *   chunked framing, which the proxy forwards verbatim) and stops at the end
 *   of the message (state DONE). Bytes after it belong to the next message;
 *   http_message_reset() starts one.
 *
 * Bounds (HttpLimits): the request/status line, the whole head and the
 * number of header fields. A violation fails the message with the status
 * the proxy answers: 414 for a long request line, 431 for a large head or
 * too many fields, 400 for anything http-parser refuses. Memory held is at
 * most about head_max bytes plus the field table. The trailer fields of a
 * chunked body are parsed, checked and counted like head fields.
 *
 * An HttpMessage is a stack or embedded object: http_message_init() and
 * http_message_done(). Not thread-safe; nothing global is modified (the
 * parser's global header-size cap is left at its default, above ours). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <http_parser.h>

#include "macro.h"

typedef struct HttpLimits {
        size_t line_max;   /* request or status line in bytes, CRLF included */
        size_t head_max;   /* the whole head, final empty line included */
        size_t fields_max; /* header fields */
} HttpLimits;

/* What hutch-proxy accepts from a sandbox (docs/network.md). */
#define HTTP_REQUEST_LINE_MAX 8192
#define HTTP_REQUEST_HEAD_MAX 32768
#define HTTP_REQUEST_FIELDS_MAX 100
/* What it accepts from an upstream server. */
#define HTTP_RESPONSE_LINE_MAX 8192
#define HTTP_RESPONSE_HEAD_MAX 65536
#define HTTP_RESPONSE_FIELDS_MAX 256

typedef enum HttpMessageState {
        HTTP_MESSAGE_HEAD,   /* reading the head */
        HTTP_MESSAGE_BODY,   /* head complete, body bytes follow */
        HTTP_MESSAGE_DONE,   /* message complete */
        HTTP_MESSAGE_FAILED, /* see status and error */
        _HTTP_MESSAGE_STATE_MAX,
        _HTTP_MESSAGE_STATE_INVALID = -EINVAL,
} HttpMessageState;

typedef struct HttpField {
        uint32_t name_off, name_len;   /* into HttpMessage.store */
        uint32_t value_off, value_len; /* into HttpMessage.store */
} HttpField;

typedef struct HttpMessage {
        http_parser parser;
        enum http_parser_type type;
        HttpLimits limits;
        HttpMessageState state;
        bool skip_body; /* a response to HEAD: no body whatever the head says */

        size_t head_bytes;   /* bytes of the head consumed so far */
        size_t line_bytes;   /* bytes of the request/status line seen so far */
        bool line_started;   /* a byte other than CR/LF was seen */
        bool line_done;      /* the line's LF was seen */
        bool in_value;       /* the last header callback was a value */
        bool after_lf;       /* the last head byte seen was a LF */
        uint64_t body_bytes; /* raw body bytes consumed (framing included) */

        char *store; /* target/reason and field names and values, back to back */
        size_t store_len, store_alloc;
        uint32_t target_off, target_len; /* request target, or response reason */
        bool have_target;
        HttpField *fields;
        size_t n_fields;

        /* Optional: called with each piece of decoded body data (chunked
         * framing removed) while http_message_feed() runs. A non-zero
         * return fails the message. Kept by http_message_reset(). */
        int (*on_body)(void *userdata, const char *data, size_t len);
        void *body_userdata;

        int status;        /* FAILED: the status to answer with (400, 414, 431) */
        const char *error; /* FAILED: static description */
} HttpMessage;

/* Initialises @m for a request (HTTP_REQUEST) or response (HTTP_RESPONSE)
 * with the given limits (copied). Returns 0 or -ENOMEM. */
int http_message_init(HttpMessage *m, enum http_parser_type type, const HttpLimits *limits);
/* Frees what @m holds; @m may be re-initialised afterwards. */
void http_message_done(HttpMessage *m);
/* Prepares @m for the next message on the same connection. */
void http_message_reset(HttpMessage *m);

/* Feeds @len bytes at @data (see the contract above). Returns the number of
 * bytes consumed (possibly fewer than @len: the head or the message ended),
 * or -EBADMSG once the message failed (m->status and m->error say why).
 * In state DONE nothing is consumed and 0 is returned. */
ssize_t http_message_feed(HttpMessage *m, const char *data, size_t len);

/* Tells @m that the peer closed the connection. A response whose body runs
 * until EOF completes (returns 0, state DONE); any other unfinished message
 * fails with -EPIPE. 0 if already DONE. */
int http_message_finish(HttpMessage *m);

/* Method, version, status: valid once the head is complete. */
static inline enum http_method http_message_method(const HttpMessage *m) {
        return (enum http_method)m->parser.method;
}
static inline unsigned http_message_status_code(const HttpMessage *m) {
        return m->parser.status_code;
}
static inline bool http_message_has_body(const HttpMessage *m) {
        return m->state == HTTP_MESSAGE_BODY;
}
/* True if the peer wants to keep the connection after this message
 * (http_should_keep_alive()); valid once the head is complete. */
bool http_message_keep_alive(const HttpMessage *m);

/* The request target (requests) or reason phrase (responses); not
 * NUL-terminated; length 0 and a non-NULL pointer when absent. */
const char *http_message_target(const HttpMessage *m, size_t *ret_len);

/* Field @i (0-based, < m->n_fields) as name and value pointers into @m. */
void http_message_field(const HttpMessage *m, size_t i, const char **ret_name, size_t *ret_name_len,
                        const char **ret_value, size_t *ret_value_len);

/* Returns the number of fields named @name (case-insensitive) and, if at
 * least one, the first one's value in @ret_value / @ret_len. */
size_t http_message_find(const HttpMessage *m, const char *name, const char **ret_value,
                         size_t *ret_len);

/* Case-insensitive comparison of a counted string with a C string. */
bool http_token_equal(const char *s, size_t n, const char *token);
