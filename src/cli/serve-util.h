/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The pure parts of `hutch serve` (docs/api.md), kept apart from the event
 * loop so that tests/unit/test-serve.c covers them: route matching, the
 * table-driven decoding of request bodies, errno to HTTP status, base64,
 * the UTF-8 boundary of streamed output, --listen parsing and the bearer
 * token check. Nothing here logs or touches the network. */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <jansson.h>

#include "hutch-error.h"
#include "json-fields.h"

#define SERVE_TOKEN_MIN 16
#define SERVE_TOKEN_MAX 4096
#define SERVE_SHA256_LEN 32

/* Whether the raw URL path @path matches @pattern, whose segments are
 * literal or one "{param}" that matches a whole non-empty segment. On a
 * match the parameter's segment (pointing into @path, not terminated) goes
 * to @ret_param / @ret_param_len when the pattern has one, else they are
 * set to NULL / 0. */
bool serve_path_match(const char *pattern, const char *path, const char **ret_param,
                      size_t *ret_param_len);

/* ---- request bodies ---- */

/* "/" + @key escaped as RFC 6901 says, plus "/@index" when @index >= 0,
 * into @buf (truncated to @size). */
void serve_member_pointer(char *buf, size_t size, const char *key, long index);

/* The decoder is src/basic/json-fields.h's; these are its names here. */
typedef JsonFieldType ServeFieldType;
typedef JsonFieldDef ServeField;
#define SERVE_FIELD_STRING JSON_FIELD_STRING
#define SERVE_FIELD_STRV JSON_FIELD_STRV
#define SERVE_FIELD_BOOL JSON_FIELD_BOOL
#define SERVE_FIELD_U64 JSON_FIELD_U64
#define SERVE_FIELD_OBJECT JSON_FIELD_OBJECT
#define SERVE_FIELD_ENV JSON_FIELD_ENV

/* A request body: -EINVAL ("the request body must be a JSON object") when
 * @obj is not an object, else json_fields_decode(). */
int serve_decode_object(json_t *obj, const ServeField *fields, size_t n_fields, void *dest,
                        HutchError *reterr);

/* ---- responses ---- */

/* The HTTP status and the error code string ("not_found", ...) of a
 * positive errno. Unknown ones are 500 "internal". */
void serve_errno_to_status(int errnum, int *ret_status, const char **ret_code);

/* How many bytes at the end of @s (0 to 3) start a UTF-8 sequence that is
 * not complete yet: a streamed chunk holds them back for the next one, so
 * that text split across reads stays text. */
size_t serve_utf8_incomplete_tail(const char *s, size_t len);

/* A JSON string of @len bytes when they are valid UTF-8 (@ret_encoding
 * "utf-8"), else of their base64 ("base64"). NULL on OOM. */
json_t *serve_output_string(const char *data, size_t len, const char **ret_encoding);

/* ---- listening and authentication ---- */

/* Parses --listen's numeric "IPV4:PORT" or "[IPV6]:PORT" (port 0 picks a
 * free one). Host names are refused: only what is asked is bound.
 * -EINVAL for anything else. */
int serve_parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len);

/* Loads the bearer token of @text (a token file's contents): one trailing
 * newline is dropped, the rest must be SERVE_TOKEN_MIN..SERVE_TOKEN_MAX
 * visible ASCII characters (no spaces), and its SHA-256 goes to @ret_sha.
 * -EINVAL otherwise. */
int serve_token_load(const char *text, uint8_t ret_sha[SERVE_SHA256_LEN]);

/* Loads the token file @path (serve_token_load() of its contents): a
 * regular file, not accessible to other users. Each refusal is logged
 * naming the file, @what is ("token" for --token-file, "API key" for
 * --api-key-file). Returns 0 or the -errno it logged. */
int serve_token_file_load(const char *path, const char *what, uint8_t ret_sha[SERVE_SHA256_LEN]);

/* Whether the Authorization header value @header (may be NULL) is
 * "Bearer <token>" with the token whose SHA-256 is @sha. The comparison
 * takes the same time wherever the first difference is. */
bool serve_token_check(const char *header, const uint8_t sha[SERVE_SHA256_LEN]);

/* ---- request heads (the front, serve-front.c) ---- */

/* What serve_head_check() found. Each but OK is answered with the error
 * of docs/api.md named in the comment, and the connection closed, with no
 * byte of the body read. */
typedef enum ServeHeadVerdict {
        SERVE_HEAD_OK,
        SERVE_HEAD_MALFORMED,      /* 400 invalid_argument */
        SERVE_HEAD_TOO_LARGE,      /* 431 too_large */
        SERVE_HEAD_BAD_METHOD,     /* 405 method_not_allowed */
        SERVE_HEAD_NO_TOKEN,       /* 401 unauthorized */
        SERVE_HEAD_WRONG_TOKEN,    /* 401 unauthorized */
        SERVE_HEAD_CHUNKED,        /* 411 length_required */
        SERVE_HEAD_BODY_TOO_LARGE, /* 413 too_large */
        SERVE_HEAD_EXPECTATION,    /* 417 expectation_failed */
        _SERVE_HEAD_VERDICT_MAX,
        _SERVE_HEAD_VERDICT_INVALID = -EINVAL,
} ServeHeadVerdict;

/* "ok", "malformed", "too-large", ...; NULL when out of range. */
const char *serve_head_verdict_to_string(ServeHeadVerdict v);
ServeHeadVerdict serve_head_verdict_from_string(const char *s);

/* The end of the request head in @buf (@len bytes): the offset just past
 * the empty line ("\n\n" or "\n\r\n") that ends it, or 0 when @buf does not
 * hold it yet. */
size_t serve_head_end(const char *buf, size_t len);

typedef struct ServeHead {
        ServeHeadVerdict verdict;
        uint64_t body_len; /* OK: the bytes of body that follow the head */
        size_t target;     /* OK: offset of the request target in the head */
        size_t target_len;
} ServeHead;

/* Checks the request head @head (@len bytes: the request line and the
 * header lines through the empty line that ends them), at least as
 * strictly as libevent's evhttp parses it, so that evhttp never answers
 * an error of its own: "METHOD SP TARGET SP HTTP/1.0|1.1", a known
 * method, a target of visible ASCII; header lines "name: value" with a
 * token name, no folding and no control characters; Content-Length at
 * most once, digits, at most @body_max (none or 0 for HEAD and TRACE); no
 * Transfer-Encoding; Expect only "100-continue".
 * With @token_sha (NULL: no token needed), exactly one Authorization
 * header that serve_token_check() accepts, checked after the syntax and
 * before the limits, so an unauthenticated client learns nothing more.
 * The result goes to @ret. */
void serve_head_check(const char *head, size_t len, const uint8_t *token_sha, uint64_t body_max,
                      ServeHead *ret);
