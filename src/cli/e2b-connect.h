/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The Connect protocol (connectrpc.com/docs/protocol) as envd speaks it
 * to E2B's SDK (docs/e2b-envd.md), kept apart from the sockets so that
 * tests/unit/test-e2b-connect.c and tests/fuzz/fuzz-e2b-envelope.c cover
 * it: the error codes and their HTTP statuses, the error body, the
 * 5-byte envelope of streams (flags, big-endian length) and its
 * end-of-stream frame, the Content-Type of the two call shapes, and the
 * proto3 JSON forms the SDK sends (int64 as strings or numbers, bytes as
 * base64 of either alphabet, with or without padding).
 * Only JSON is spoken: the SDK's transport says useBinaryFormat: false.
 * Nothing here logs or touches the network. */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A stream message's envelope: 1 byte of flags, 4 of length. */
#define CONNECT_ENVELOPE_HEAD 5
#define CONNECT_FLAG_COMPRESSED 0x01
#define CONNECT_FLAG_END_STREAM 0x02

/* The most a request message may hold (unary body or the one message of
 * a server-stream request): file bytes travel over /files, not here. */
#define CONNECT_MESSAGE_MAX (4U << 20)

typedef enum ConnectCode {
        CONNECT_OK,
        CONNECT_CANCELED,
        CONNECT_UNKNOWN,
        CONNECT_INVALID_ARGUMENT,
        CONNECT_DEADLINE_EXCEEDED,
        CONNECT_NOT_FOUND,
        CONNECT_ALREADY_EXISTS,
        CONNECT_PERMISSION_DENIED,
        CONNECT_RESOURCE_EXHAUSTED,
        CONNECT_FAILED_PRECONDITION,
        CONNECT_ABORTED,
        CONNECT_OUT_OF_RANGE,
        CONNECT_UNIMPLEMENTED,
        CONNECT_INTERNAL,
        CONNECT_UNAVAILABLE,
        CONNECT_DATA_LOSS,
        CONNECT_UNAUTHENTICATED,
        _CONNECT_CODE_MAX,
        _CONNECT_CODE_INVALID = -EINVAL,
} ConnectCode;

/* "canceled", "invalid_argument", ... as the spec spells them; "ok" for
 * CONNECT_OK (never sent); NULL when out of range. */
const char *connect_code_to_string(ConnectCode c);
ConnectCode connect_code_from_string(const char *s);

/* The HTTP status of a unary error with code @c (the spec's table:
 * canceled 499, unimplemented 501, ...); 200 for CONNECT_OK, 500 when out
 * of range. */
int connect_code_to_http_status(ConnectCode c);

/* The code of a hutch C API failure, positive @errnum: ENOENT not_found,
 * EEXIST already_exists, EACCES/EPERM permission_denied, EINVAL and the
 * like invalid_argument, ... internal for the rest. */
ConnectCode connect_code_from_errno(int errnum);

/* The error body {"code":"...","message":"..."} (message left out when
 * NULL or empty) as a new NUL-terminated string. NULL on OOM or a code
 * out of range or CONNECT_OK. */
char *connect_error_json(ConnectCode c, const char *message);

/* The end-of-stream frame's JSON: "{}" for CONNECT_OK, else
 * {"error":{"code":...,"message":...}}. NULL on OOM or out of range. */
char *connect_end_stream_json(ConnectCode c, const char *message);

/* ---- envelopes ---- */

typedef struct ConnectEnvelope {
        uint8_t flags;
        const uint8_t *data; /* points into the parsed buffer */
        uint32_t len;
} ConnectEnvelope;

/* Reads the envelope at the start of @buf (@len bytes). Returns the bytes
 * it takes (> 0) and fills @ret; 0 when @buf does not hold all of it yet;
 * -EBADMSG for flags other than the end-of-stream bit (compression is
 * never negotiated); -EMSGSIZE for a length over @max (checked on the
 * head alone, so nothing is buffered for it). */
int connect_envelope_parse(const uint8_t *buf, size_t len, uint32_t max, ConnectEnvelope *ret);

/* The one message of a server-stream request body (@body, @len bytes):
 * exactly one envelope, flags 0, nothing after it. Its payload goes to
 * @ret_data / @ret_len (pointing into @body). -EBADMSG for any other
 * shape, -EMSGSIZE beyond @max. */
int connect_stream_request(const uint8_t *body, size_t len, uint32_t max, const uint8_t **ret_data,
                           size_t *ret_len);

/* Writes the 5-byte head of an envelope of @len bytes with @flags into
 * @head. -EMSGSIZE when @len does not fit 32 bits. */
int connect_envelope_head(uint8_t flags, size_t len, uint8_t head[CONNECT_ENVELOPE_HEAD]);

/* ---- content types ---- */

typedef enum ConnectShape {
        CONNECT_SHAPE_UNARY,  /* application/json */
        CONNECT_SHAPE_STREAM, /* application/connect+json */
        _CONNECT_SHAPE_MAX,
        _CONNECT_SHAPE_INVALID = -EINVAL,
} ConnectShape;

/* Whether the Content-Type value @ct (may be NULL: false) is the JSON one
 * of @shape: the media type case-insensitively, optional whitespace and
 * parameters after ';' of which only charset=utf-8 is allowed. */
bool connect_content_type_ok(const char *ct, ConnectShape shape);

/* The Connect-Timeout-Ms header @s (may be NULL: 0, no deadline) as
 * milliseconds in @ret: 1 to 10 digits, as the spec says. -EINVAL
 * otherwise. */
int connect_timeout_parse(const char *s, uint64_t *ret);

/* ---- proto3 JSON ---- */

/* proto3 JSON bytes are base64 of the standard or URL alphabet, padded or
 * not: base64_decode() with BASE64_URL_TOO | BASE64_PAD_OPTIONAL. */

/* A google.protobuf.Timestamp in proto3 JSON (RFC 3339, UTC, "Z", with
 * 0, 3, 6 or 9 fraction digits as protobuf writes them) into @buf.
 * -EINVAL when it does not fit @size or @sec is outside years 1..9999. */
int connect_timestamp_format(int64_t sec, uint32_t nsec, char *buf, size_t size);
