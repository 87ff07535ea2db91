/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"
#include "websocket.h"

bool ws_key_is_valid(const char *key) {
        /* 16 bytes in base64: 22 characters of the alphabet, then "==",
         * and the last character's low bits zero (a canonical encoding). */
        static const char alphabet[] =
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const char *last;

        if (!key || strlen(key) != 24 || strcmp(key + 22, "==") != 0)
                return false;
        for (size_t i = 0; i < 22; i++)
                if (!key[i] || !strchr(alphabet, key[i]))
                        return false;
        last = strchr(alphabet, key[21]);
        return ((last - alphabet) & 0xf) == 0;
}

void ws_reader_done(WsReader *r) {
        free(r->msg);
        r->msg = NULL;
        r->msg_len = 0;
        r->in_message = false;
}

void ws_mask(uint8_t *data, size_t len, const uint8_t mask[4], uint64_t offset) {
        for (size_t i = 0; i < len; i++)
                data[i] ^= mask[(offset + i) & 3];
}

static int violation(uint16_t *ret_close, uint16_t code, int r) {
        *ret_close = code;
        return r;
}

int ws_reader_feed(WsReader *r, const uint8_t *buf, size_t len, size_t *ret_used, WsMessage *ret,
                   uint16_t *ret_close) {
        uint8_t mask[4];
        uint64_t plen;
        size_t hlen = 2;
        bool fin;
        WsOpcode op;

        *ret_used = 0;
        if (len < 2)
                return 0;
        fin = buf[0] & 0x80;
        op = (WsOpcode)(buf[0] & 0x0f);
        /* No extension was negotiated: RSV1-3 must be 0 (§5.2). */
        if (buf[0] & 0x70)
                return violation(ret_close, WS_CLOSE_PROTOCOL_ERROR, -EPROTO);
        switch (op) {
        case WS_OP_CONTINUATION:
        case WS_OP_TEXT:
        case WS_OP_BINARY:
        case WS_OP_CLOSE:
        case WS_OP_PING:
        case WS_OP_PONG:
                break;
        default:
                return violation(ret_close, WS_CLOSE_PROTOCOL_ERROR, -EPROTO);
        }
        /* SECURITY: a client's frames are masked (§5.1; the masking keeps
         * a proxy's cache from being poisoned by chosen bytes). */
        if (!(buf[1] & 0x80))
                return violation(ret_close, WS_CLOSE_PROTOCOL_ERROR, -EPROTO);
        plen = buf[1] & 0x7f;
        if (plen == 126) {
                if (len < 4)
                        return 0;
                plen = (uint64_t)buf[2] << 8 | buf[3];
                hlen = 4;
                if (plen < 126)
                        return violation(ret_close, WS_CLOSE_PROTOCOL_ERROR, -EPROTO);
        } else if (plen == 127) {
                if (len < 10)
                        return 0;
                plen = 0;
                for (int i = 0; i < 8; i++)
                        plen = plen << 8 | buf[2 + i];
                hlen = 10;
                if (plen >> 63 || plen <= 0xffff)
                        return violation(ret_close, WS_CLOSE_PROTOCOL_ERROR, -EPROTO);
        }
        if (op >= WS_OP_CLOSE) {
                /* Control frames: final and short (§5.5). */
                if (!fin || plen > WS_CONTROL_MAX)
                        return violation(ret_close, WS_CLOSE_PROTOCOL_ERROR, -EPROTO);
        } else if (op == WS_OP_CONTINUATION ? !r->in_message : r->in_message)
                return violation(ret_close, WS_CLOSE_PROTOCOL_ERROR, -EPROTO);
        /* The message's size over its fragments, checked before any byte
         * of it is held. */
        if (op < WS_OP_CLOSE && plen > r->max - (op == WS_OP_CONTINUATION ? r->msg_len : 0))
                return violation(ret_close, WS_CLOSE_TOO_BIG, -EMSGSIZE);
        if (len - hlen < 4)
                return 0;
        memcpy(mask, buf + hlen, 4);
        hlen += 4;
        if (len - hlen < plen)
                return 0;

        if (op >= WS_OP_CLOSE) {
                memcpy(r->ctl, buf + hlen, (size_t)plen);
                ws_mask(r->ctl, (size_t)plen, mask, 0);
                if (op == WS_OP_CLOSE) {
                        uint16_t code;

                        /* Empty, or a code of 2 bytes and a UTF-8 reason
                         * (§5.5.1); codes that must not be sent (§7.4). */
                        if (plen == 1)
                                return violation(ret_close, WS_CLOSE_PROTOCOL_ERROR, -EPROTO);
                        if (plen >= 2) {
                                code = (uint16_t)(r->ctl[0] << 8 | r->ctl[1]);
                                if (code < 1000 || code == 1004 || code == 1005 || code == 1006 ||
                                    (code > 1011 && code < 3000) || code > 4999)
                                        return violation(ret_close, WS_CLOSE_PROTOCOL_ERROR,
                                                         -EPROTO);
                                if (!utf8_is_valid_n((const char *)r->ctl + 2, (size_t)plen - 2))
                                        return violation(ret_close, WS_CLOSE_INVALID_DATA, -EILSEQ);
                        }
                }
                *ret = (WsMessage){.op = op, .data = r->ctl, .len = (size_t)plen};
                *ret_used = hlen + (size_t)plen;
                return 1;
        }

        if (op != WS_OP_CONTINUATION) {
                r->msg_op = op;
                r->msg_len = 0;
        }
        if (plen > 0) {
                uint8_t *m = realloc(r->msg, r->msg_len + (size_t)plen);

                if (!m)
                        return violation(ret_close, WS_CLOSE_INTERNAL, -ENOMEM);
                r->msg = m;
                memcpy(r->msg + r->msg_len, buf + hlen, (size_t)plen);
                ws_mask(r->msg + r->msg_len, (size_t)plen, mask, 0);
                r->msg_len += (size_t)plen;
        }
        *ret_used = hlen + (size_t)plen;
        r->in_message = !fin;
        if (!fin)
                return 0;
        if (r->msg_op == WS_OP_TEXT && !utf8_is_valid_n((const char *)r->msg, r->msg_len))
                return violation(ret_close, WS_CLOSE_INVALID_DATA, -EILSEQ);
        *ret = (WsMessage){.op = r->msg_op, .data = r->msg, .len = r->msg_len};
        return 1;
}

static size_t header(uint8_t *buf, bool fin, WsOpcode op, uint64_t len, bool masked) {
        size_t n = 2;

        buf[0] = (uint8_t)((fin ? 0x80 : 0) | op);
        buf[1] = masked ? 0x80 : 0;
        if (len < 126)
                buf[1] |= (uint8_t)len;
        else if (len <= 0xffff) {
                buf[1] |= 126;
                buf[2] = (uint8_t)(len >> 8);
                buf[3] = (uint8_t)len;
                n = 4;
        } else {
                buf[1] |= 127;
                for (int i = 0; i < 8; i++)
                        buf[2 + i] = (uint8_t)(len >> (56 - 8 * i));
                n = 10;
        }
        return n;
}

size_t ws_frame_header(uint8_t buf[WS_HEADER_MAX], WsOpcode op, uint64_t len) {
        return header(buf, true, op, len, false);
}

size_t ws_frame_header_masked(uint8_t buf[WS_HEADER_MAX], bool fin, WsOpcode op, uint64_t len,
                              const uint8_t mask[4]) {
        size_t n = header(buf, fin, op, len, true);

        memcpy(buf + n, mask, 4);
        return n + 4;
}

size_t ws_close_payload(uint8_t buf[WS_CONTROL_MAX], uint16_t code, const char *reason) {
        size_t n = reason ? strlen(reason) : 0;

        if (n > WS_CONTROL_MAX - 2)
                n = WS_CONTROL_MAX - 2;
        /* A cut must not leave half a character. */
        while (n > 0 && !utf8_is_valid_n(reason, n))
                n--;
        buf[0] = (uint8_t)(code >> 8);
        buf[1] = (uint8_t)code;
        if (n)
                memcpy(buf + 2, reason, n);
        return n + 2;
}
