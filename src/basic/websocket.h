/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The WebSocket frame codec (RFC 6455 §5), for `hutch serve`'s exec stream
 * (docs/api.md "The exec WebSocket"). No I/O: the reader takes bytes as
 * they came and hands out whole messages, the writer makes frame headers.
 *
 * The reader is the server's side: every frame from a client must be
 * masked (§5.1), reserved bits must be 0 (no extension is negotiated),
 * opcodes are continuation, text, binary, close, ping and pong; control
 * frames are final and carry at most 125 bytes (§5.5); a length uses its
 * shortest encoding and the 64-bit form has its top bit clear (§5.2); a
 * data message is fragmented as §5.4 says (a continuation only inside a
 * message, a new text/binary only outside one; control frames may come in
 * between); a text message is valid UTF-8 (§8.1); a message's payload is
 * at most the reader's @max bytes, counted over all its fragments. A
 * violation is reported with the close code the RFC gives for it (§7.4.1),
 * after which the connection is to be closed: the reader keeps no state
 * worth continuing from. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum WsOpcode {
        WS_OP_CONTINUATION = 0x0,
        WS_OP_TEXT = 0x1,
        WS_OP_BINARY = 0x2,
        WS_OP_CLOSE = 0x8,
        WS_OP_PING = 0x9,
        WS_OP_PONG = 0xa,
} WsOpcode;

/* Close codes (RFC 6455 §7.4.1). */
#define WS_CLOSE_NORMAL 1000
#define WS_CLOSE_GOING_AWAY 1001
#define WS_CLOSE_PROTOCOL_ERROR 1002
#define WS_CLOSE_UNSUPPORTED 1003
#define WS_CLOSE_INVALID_DATA 1007
#define WS_CLOSE_POLICY 1008
#define WS_CLOSE_TOO_BIG 1009
#define WS_CLOSE_INTERNAL 1011

/* The largest control frame payload (§5.5). */
#define WS_CONTROL_MAX 125
/* The longest frame header: 2 bytes, 8 of length, 4 of mask. */
#define WS_HEADER_MAX 14

/* The accept value of the handshake (§4.2.2): "258EAFA5-...-C5AB0DC85B11"
 * appended to the client's key, SHA-1, base64: the caller's (it has the
 * hash); this only checks the client's key: base64 of 16 bytes. */
bool ws_key_is_valid(const char *key);
#define WS_ACCEPT_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

typedef struct WsReader {
        size_t max;      /* the largest message payload accepted */
        uint8_t *msg;    /* the data message being assembled (owned) */
        size_t msg_len;  /* bytes in @msg */
        WsOpcode msg_op; /* its opcode (text or binary) */
        bool in_message; /* a first fragment came, not yet the last */
        uint8_t ctl[WS_CONTROL_MAX];
} WsReader;

/* A message the reader handed out: a whole data message, or a control
 * frame. @data points into the reader (valid until the next call). */
typedef struct WsMessage {
        WsOpcode op;
        const uint8_t *data;
        size_t len;
} WsMessage;

#define WS_READER_INIT(m) ((WsReader){.max = (m)})
void ws_reader_done(WsReader *r);

/* Takes the next frame from the @len bytes at @buf. Returns 1 when a
 * message is complete (@ret set), 0 when not (yet): either more bytes are
 * needed (@ret_used is 0) or a fragment was taken; @ret_used is then
 * the count of bytes taken, which the caller drops before it calls again.
 * On a violation returns -EPROTO (or -EMSGSIZE for a message over @max,
 * -EILSEQ for a text that is not UTF-8, -ENOMEM) with @ret_close set to the
 * close code to send. */
int ws_reader_feed(WsReader *r, const uint8_t *buf, size_t len, size_t *ret_used, WsMessage *ret,
                   uint16_t *ret_close);

/* Writes the header of a final, unmasked (server) frame of @op with a
 * payload of @len bytes into @buf; returns its size (2 to 10). */
size_t ws_frame_header(uint8_t buf[WS_HEADER_MAX], WsOpcode op, uint64_t len);

/* The same for a client's frame, masked with @mask, and @fin: for tests
 * and fuzzing (the payload is masked with ws_mask()). */
size_t ws_frame_header_masked(uint8_t buf[WS_HEADER_MAX], bool fin, WsOpcode op, uint64_t len,
                              const uint8_t mask[4]);

/* XORs @len bytes at @data with @mask, as from payload offset @offset. */
void ws_mask(uint8_t *data, size_t len, const uint8_t mask[4], uint64_t offset);

/* The payload of a close frame: @code, then @reason (at most 123 bytes,
 * cut there). Returns its size. */
size_t ws_close_payload(uint8_t buf[WS_CONTROL_MAX], uint16_t code, const char *reason);
