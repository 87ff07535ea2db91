/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "test.h"
#include "websocket.h"

static const uint8_t MASK[4] = {0x37, 0xfa, 0x21, 0x3d};

/* A client's frame of @op with @len bytes of @payload, masked, appended to
 * @buf at @at; returns the new end. */
static size_t put(uint8_t *buf, size_t at, bool fin, WsOpcode op, const void *payload, size_t len) {
        size_t h = ws_frame_header_masked(buf + at, fin, op, len, MASK);

        memcpy(buf + at + h, payload, len);
        ws_mask(buf + at + h, len, MASK, 0);
        return at + h + len;
}

/* Feeds all of @buf, one frame at a time; the last result. */
static int feed_all(WsReader *r, const uint8_t *buf, size_t len, WsMessage *m, uint16_t *code) {
        size_t used = 0;
        int k = 0;

        while (len > 0) {
                k = ws_reader_feed(r, buf, len, &used, m, code);
                if (k < 0 || used == 0)
                        return k;
                buf += used;
                len -= used;
        }
        return k;
}

TEST(text_message_round_trip) {
        WsReader r = WS_READER_INIT(1024);
        uint8_t buf[256];
        WsMessage m;
        uint16_t code = 0;
        size_t used = 0, n = put(buf, 0, true, WS_OP_TEXT, "hello", 5);

        /* Short reads: nothing taken until the frame is whole. */
        for (size_t i = 0; i < n; i++) {
                ASSERT_EQ(ws_reader_feed(&r, buf, i, &used, &m, &code), 0);
                ASSERT_EQ(used, 0);
        }
        ASSERT_EQ(ws_reader_feed(&r, buf, n, &used, &m, &code), 1);
        ASSERT_EQ(used, n);
        ASSERT_EQ(m.op, WS_OP_TEXT);
        ASSERT_EQ(m.len, 5);
        ASSERT_TRUE(memcmp(m.data, "hello", 5) == 0);
        ws_reader_done(&r);
}

TEST(length_encodings) {
        WsReader r = WS_READER_INIT(1U << 20);
        size_t sizes[] = {0, 125, 126, 65535, 65536, 100000};
        uint8_t *buf = malloc(100000 + WS_HEADER_MAX), *data = malloc(100000);
        WsMessage m;
        uint16_t code;
        size_t used;

        ASSERT_TRUE(buf && data);
        for (size_t i = 0; i < 100000; i++)
                data[i] = (uint8_t)(i * 7);
        for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
                size_t n = put(buf, 0, true, WS_OP_BINARY, data, sizes[i]);

                ASSERT_EQ(n - sizes[i], sizes[i] < 126 ? 6 : sizes[i] <= 65535 ? 8 : 14);
                ASSERT_EQ(ws_reader_feed(&r, buf, n, &used, &m, &code), 1);
                ASSERT_EQ(m.len, sizes[i]);
                ASSERT_TRUE(sizes[i] == 0 || memcmp(m.data, data, sizes[i]) == 0);
        }
        ws_reader_done(&r);
        free(buf);
        free(data);
}

TEST(fragments_and_control_frames_between) {
        WsReader r = WS_READER_INIT(1024);
        uint8_t buf[256];
        WsMessage m;
        uint16_t code;
        size_t used, n = 0;

        n = put(buf, n, false, WS_OP_TEXT, "he", 2);
        n = put(buf, n, true, WS_OP_PING, "p", 1);
        n = put(buf, n, false, WS_OP_CONTINUATION, "ll", 2);
        n = put(buf, n, true, WS_OP_CONTINUATION, "o", 1);
        ASSERT_EQ(ws_reader_feed(&r, buf, n, &used, &m, &code), 0);
        ASSERT_EQ(used, 8);
        ASSERT_EQ(ws_reader_feed(&r, buf + 8, n - 8, &used, &m, &code), 1);
        ASSERT_EQ(m.op, WS_OP_PING);
        ASSERT_EQ(m.len, 1);
        ASSERT_EQ(feed_all(&r, buf + 15, n - 15, &m, &code), 1);
        ASSERT_EQ(m.op, WS_OP_TEXT);
        ASSERT_EQ(m.len, 5);
        ASSERT_TRUE(memcmp(m.data, "hello", 5) == 0);
        ws_reader_done(&r);
}

/* Each violation with the close code RFC 6455 gives it. */
static void assert_refused(const uint8_t *buf, size_t n, int err, uint16_t want) {
        WsReader r = WS_READER_INIT(64);
        WsMessage m;
        uint16_t code = 0;

        ASSERT_EQ(feed_all(&r, buf, n, &m, &code), -err);
        ASSERT_EQ(code, want);
        ws_reader_done(&r);
}

TEST(violations) {
        uint8_t buf[256], big[200] = {};
        size_t n;

        /* Unmasked (§5.1). */
        buf[0] = 0x81;
        buf[1] = 0x01;
        buf[2] = 'x';
        assert_refused(buf, 3, EPROTO, WS_CLOSE_PROTOCOL_ERROR);
        /* A reserved bit, an unknown opcode. */
        n = put(buf, 0, true, WS_OP_TEXT, "x", 1);
        buf[0] |= 0x40;
        assert_refused(buf, n, EPROTO, WS_CLOSE_PROTOCOL_ERROR);
        n = put(buf, 0, true, (WsOpcode)0x3, "x", 1);
        assert_refused(buf, n, EPROTO, WS_CLOSE_PROTOCOL_ERROR);
        /* A fragmented control frame; a control frame over 125 bytes. */
        n = put(buf, 0, false, WS_OP_PING, "x", 1);
        assert_refused(buf, n, EPROTO, WS_CLOSE_PROTOCOL_ERROR);
        n = put(big, 0, true, WS_OP_PING, big + 100, 0);
        big[1] = 0x80 | 126;
        big[2] = 0;
        big[3] = 126;
        assert_refused(big, 8 + 126, EPROTO, WS_CLOSE_PROTOCOL_ERROR);
        /* A length not in its shortest form. */
        buf[0] = 0x82;
        buf[1] = 0x80 | 126;
        buf[2] = 0;
        buf[3] = 5;
        assert_refused(buf, 4, EPROTO, WS_CLOSE_PROTOCOL_ERROR);
        /* The 64-bit length with its top bit set. */
        buf[1] = 0x80 | 127;
        memset(buf + 2, 0xff, 8);
        assert_refused(buf, 10, EPROTO, WS_CLOSE_PROTOCOL_ERROR);
        /* A continuation outside a message; a new message inside one. */
        n = put(buf, 0, true, WS_OP_CONTINUATION, "x", 1);
        assert_refused(buf, n, EPROTO, WS_CLOSE_PROTOCOL_ERROR);
        n = put(buf, 0, false, WS_OP_TEXT, "x", 1);
        n = put(buf, n, true, WS_OP_BINARY, "y", 1);
        assert_refused(buf, n, EPROTO, WS_CLOSE_PROTOCOL_ERROR);
        /* Over the reader's 64 bytes: in one frame (refused from its
         * header alone), and over fragments. */
        buf[0] = 0x82;
        buf[1] = 0x80 | 126;
        buf[2] = 0;
        buf[3] = 200;
        assert_refused(buf, 4, EMSGSIZE, WS_CLOSE_TOO_BIG);
        n = put(big, 0, false, WS_OP_BINARY, big + 150, 40);
        n = put(big, n, true, WS_OP_CONTINUATION, big + 150, 40);
        assert_refused(big, n, EMSGSIZE, WS_CLOSE_TOO_BIG);
        /* A text that is not UTF-8, also cut between fragments. */
        n = put(buf, 0, true, WS_OP_TEXT, "\xc3\x28", 2);
        assert_refused(buf, n, EILSEQ, WS_CLOSE_INVALID_DATA);
        n = put(buf, 0, false, WS_OP_TEXT, "\xc3", 1);
        n = put(buf, n, true, WS_OP_CONTINUATION, "", 0);
        assert_refused(buf, n, EILSEQ, WS_CLOSE_INVALID_DATA);
        /* A close frame of one byte, of a code that must not be sent, with
         * a reason that is not UTF-8. */
        n = put(buf, 0, true, WS_OP_CLOSE, "\x03", 1);
        assert_refused(buf, n, EPROTO, WS_CLOSE_PROTOCOL_ERROR);
        n = put(buf, 0, true, WS_OP_CLOSE, "\x03\xed", 2); /* 1005 */
        assert_refused(buf, n, EPROTO, WS_CLOSE_PROTOCOL_ERROR);
        n = put(buf, 0, true, WS_OP_CLOSE, "\x03\xe8\xff", 3);
        assert_refused(buf, n, EILSEQ, WS_CLOSE_INVALID_DATA);
}

TEST(text_split_between_fragments_is_whole) {
        WsReader r = WS_READER_INIT(64);
        uint8_t buf[64];
        WsMessage m;
        uint16_t code;
        size_t n;

        n = put(buf, 0, false, WS_OP_TEXT, "\xc3", 1);
        n = put(buf, n, true, WS_OP_CONTINUATION, "\xa9", 1);
        ASSERT_EQ(feed_all(&r, buf, n, &m, &code), 1);
        ASSERT_EQ(m.len, 2);
        ws_reader_done(&r);
}

TEST(close_frames) {
        WsReader r = WS_READER_INIT(64);
        uint8_t buf[64], payload[WS_CONTROL_MAX];
        char reason[200];
        WsMessage m;
        uint16_t code;
        size_t n;

        n = put(buf, 0, true, WS_OP_CLOSE, "", 0);
        ASSERT_EQ(feed_all(&r, buf, n, &m, &code), 1);
        ASSERT_EQ(m.op, WS_OP_CLOSE);
        ASSERT_EQ(m.len, 0);
        n = put(buf, 0, true, WS_OP_CLOSE, "\x03\xe8ok", 4);
        ASSERT_EQ(feed_all(&r, buf, n, &m, &code), 1);
        ASSERT_EQ(m.len, 4);
        /* The server's: a reason cut to fit, never inside a character. */
        ASSERT_EQ(ws_close_payload(payload, WS_CLOSE_POLICY, "bye"), 5);
        ASSERT_EQ(payload[0], 0x03);
        ASSERT_EQ(payload[1], 0xf0);
        memset(reason, 'a', 122);
        memcpy(reason + 122, "\xc3\xa9", 3);
        ASSERT_EQ(ws_close_payload(payload, 1000, reason), 124);
        ws_reader_done(&r);
}

TEST(server_frame_headers) {
        uint8_t h[WS_HEADER_MAX];

        ASSERT_EQ(ws_frame_header(h, WS_OP_BINARY, 5), 2);
        ASSERT_EQ(h[0], 0x82);
        ASSERT_EQ(h[1], 5);
        ASSERT_EQ(ws_frame_header(h, WS_OP_TEXT, 300), 4);
        ASSERT_EQ(h[1], 126);
        ASSERT_EQ(h[2] << 8 | h[3], 300);
        ASSERT_EQ(ws_frame_header(h, WS_OP_BINARY, 70000), 10);
        ASSERT_EQ(h[1], 127);
        ASSERT_EQ(h[7] << 16 | h[8] << 8 | h[9], 70000);
}

TEST(handshake_key) {
        ASSERT_TRUE(ws_key_is_valid("dGhlIHNhbXBsZSBub25jZQ=="));
        ASSERT_FALSE(ws_key_is_valid("dGhlIHNhbXBsZSBub25jZQ="));
        ASSERT_FALSE(ws_key_is_valid("dGhlIHNhbXBsZSBub25jZR=="));
        ASSERT_FALSE(ws_key_is_valid("dGhlIHNhbXBsZSBub25j!Q=="));
        ASSERT_FALSE(ws_key_is_valid(""));
        ASSERT_FALSE(ws_key_is_valid(NULL));
}

DEFINE_TEST_MAIN
