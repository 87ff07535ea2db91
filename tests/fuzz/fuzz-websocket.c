/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"
#include "websocket.h"

/* Fuzzes the WebSocket frame reader of hutch serve's exec stream
 * (src/basic/websocket.c): the input is what a client sends, fed in pieces
 * whose lengths the first byte seeds (as a socket delivers them), through
 * a reader that takes at most 4 KiB messages.
 *
 * Invariants checked (abort() on violation):
 *   - the reader never takes more bytes than it was given, nor takes
 *     nothing while saying it handed out a message;
 *   - a data message is at most the reader's maximum, a control frame at
 *     most 125 bytes, and a text message is valid UTF-8;
 *   - a refusal comes with a close code of RFC 6455 §7.4.1;
 *   - feeding the same bytes in one piece gives the same messages. */

#define MAX_MSG 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t digest(uint64_t h, const WsMessage *m) {
        h = h * 1099511628211ULL ^ (uint64_t)m->op;
        for (size_t i = 0; i < m->len; i++)
                h = h * 1099511628211ULL ^ m->data[i];
        return h;
}

/* Feeds @data as pieces of 1 + (seed % 97) bytes growing as bytes arrive
 * (a piece that holds no whole frame waits for the next); returns a digest
 * of the messages and the last result. */
static uint64_t run(const uint8_t *data, size_t size, unsigned seed, int *ret_last) {
        WsReader r = WS_READER_INIT(MAX_MSG);
        uint8_t *pending = malloc(size ? size : 1);
        size_t have = 0, pos = 0;
        uint64_t h = 14695981039346656037ULL;
        int last = 0;

        if (!pending)
                abort();
        while (pos < size || have > 0) {
                size_t piece = seed ? 1 + (seed % 97) : size;
                size_t used = 0;
                WsMessage m;
                uint16_t code = 0;
                int k;

                if (pos < size) {
                        piece = piece < size - pos ? piece : size - pos;
                        memcpy(pending + have, data + pos, piece);
                        have += piece;
                        pos += piece;
                        seed = seed * 1103515245U + 12345U;
                }
                for (;;) {
                        k = ws_reader_feed(&r, pending, have, &used, &m, &code);
                        last = k;
                        if (k < 0) {
                                if (code < 1000 || code > 1011)
                                        abort();
                                goto out;
                        }
                        if (used > have || (k == 1 && used == 0))
                                abort();
                        if (k == 1) {
                                if (m.op >= WS_OP_CLOSE ? m.len > WS_CONTROL_MAX : m.len > MAX_MSG)
                                        abort();
                                if (m.op == WS_OP_TEXT &&
                                    !utf8_is_valid_n((const char *)m.data, m.len))
                                        abort();
                                h = digest(h, &m);
                        }
                        if (used == 0)
                                break;
                        memmove(pending, pending + used, have - used);
                        have -= used;
                }
                if (pos >= size)
                        break;
        }
out:
        ws_reader_done(&r);
        free(pending);
        *ret_last = last;
        return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        int a, b;

        if (size < 1 || size > 65536)
                return 0;
        if (run(data + 1, size - 1, data[0] | 1U, &a) != run(data + 1, size - 1, 0, &b) || a != b)
                abort();
        return 0;
}
