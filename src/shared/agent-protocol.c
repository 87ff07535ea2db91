/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent-protocol.h"
#include "crc32.h"
#include "fd-util.h"

void agent_put_le32(unsigned char out[4], uint32_t v) {
        for (size_t i = 0; i < 4; i++)
                out[i] = (unsigned char)(v >> (8 * i));
}

uint32_t agent_get_le32(const unsigned char in[4]) {
        return (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 |
               (uint32_t)in[3] << 24;
}

static void put_le64(unsigned char out[8], uint64_t v) {
        agent_put_le32(out, (uint32_t)v);
        agent_put_le32(out + 4, (uint32_t)(v >> 32));
}

static uint64_t get_le64(const unsigned char in[8]) {
        return (uint64_t)agent_get_le32(in) | (uint64_t)agent_get_le32(in + 4) << 32;
}

/* Drops the frame handed out last. */
static void reader_drop_taken(AgentReader *r) {
        if (r->taken == 0)
                return;
        memmove(r->buf, r->buf + r->taken, r->len - r->taken);
        r->len -= r->taken;
        r->taken = 0;
}

ssize_t agent_reader_fill(AgentReader *r, int fd) {
        ssize_t n;

        if (r->broken)
                return -EBADMSG;
        reader_drop_taken(r);
        if (r->len >= sizeof(r->buf))
                return -ENOBUFS;
        n = read(fd, r->buf + r->len, sizeof(r->buf) - r->len);
        if (n < 0)
                return errno == EINTR ? -EAGAIN : negative_errno();
        r->len += (size_t)n;
        return n;
}

int agent_reader_next(AgentReader *r, AgentFrame *ret) {
        uint32_t length, crc;

        if (r->broken)
                return -EBADMSG;
        reader_drop_taken(r);
        if (r->len < AGENT_HEADER_SIZE)
                return 0;
        length = agent_get_le32(r->buf + 8);
        /* SECURITY: the length is checked before it is used: a frame can
         * never be larger than the buffer. */
        if (agent_get_le32(r->buf) != AGENT_MAGIC || r->buf[4] != AGENT_VERSION_MAJOR ||
            length > AGENT_FRAME_MAX || r->buf[6] == 0 || r->buf[6] >= _AGENT_MSG_MAX ||
            r->buf[7] >= AGENT_MAX_EXECS) {
                r->broken = true;
                return -EBADMSG;
        }
        if (r->len < AGENT_HEADER_SIZE + length)
                return 0;
        crc = agent_get_le32(r->buf + 12);
        if (crc32_update(0, r->buf + AGENT_HEADER_SIZE, length) != crc) {
                r->broken = true;
                return -EBADMSG;
        }
        r->taken = AGENT_HEADER_SIZE + length;
        *ret = (AgentFrame){
                .type = r->buf[6],
                .chan = r->buf[7],
                .payload = r->buf + AGENT_HEADER_SIZE,
                .len = length,
        };
        return 1;
}

void agent_frame_header(unsigned char hdr[AGENT_HEADER_SIZE], AgentMsg type, uint8_t chan,
                        const void *payload, size_t len) {
        memset(hdr, 0, AGENT_HEADER_SIZE);
        agent_put_le32(hdr, AGENT_MAGIC);
        hdr[4] = AGENT_VERSION_MAJOR;
        hdr[5] = AGENT_VERSION_MINOR;
        hdr[6] = (unsigned char)type;
        hdr[7] = chan;
        agent_put_le32(hdr + 8, (uint32_t)len);
        agent_put_le32(hdr + 12, crc32_update(0, payload, len));
}

int agent_frame_write(int fd, AgentMsg type, uint8_t chan, const void *payload, size_t len) {
        unsigned char hdr[AGENT_HEADER_SIZE];
        int r;

        if (len > AGENT_FRAME_MAX)
                return -EMSGSIZE;
        agent_frame_header(hdr, type, chan, payload, len);
        r = loop_write(fd, hdr, sizeof(hdr));
        if (r < 0 || len == 0)
                return r;
        return loop_write(fd, payload, len);
}

int agent_frame_write_error(int fd, uint8_t chan, int err, const char *step, const char *msg) {
        size_t ls = strnlen(step, 128), lm = strnlen(msg, 1024);
        unsigned char buf[4 + 128 + 1 + 1024 + 1];

        agent_put_le32(buf, (uint32_t)err);
        memcpy(buf + 4, step, ls);
        buf[4 + ls] = '\0';
        memcpy(buf + 5 + ls, msg, lm);
        buf[5 + ls + lm] = '\0';
        return agent_frame_write(fd, AGENT_MSG_ERROR, chan, buf, 6 + ls + lm);
}

int agent_payload_add(char **buf, size_t *len, const char *prefix, const char *value) {
        size_t lp = strlen(prefix), lv = strlen(value), n = *len + lp + lv + 1;
        char *p;

        if (n > AGENT_FRAME_MAX)
                return -E2BIG;
        p = realloc(*buf, n);
        if (!p)
                return -ENOMEM;
        memcpy(p + *len, prefix, lp);
        memcpy(p + *len + lp, value, lv + 1);
        *buf = p;
        *len = n;
        return 0;
}

const char *agent_payload_next(const void *payload, size_t len, size_t *pos) {
        const char *s = (const char *)payload + *pos, *end;

        if (*pos >= len)
                return NULL;
        end = memchr(s, '\0', len - *pos);
        if (!end)
                return NULL;
        *pos += (size_t)(end - s) + 1;
        return s;
}

void agent_exit_encode(const AgentExit *e, unsigned char out[AGENT_EXIT_SIZE]) {
        agent_put_le32(out, (uint32_t)e->status);
        agent_put_le32(out + 4, e->flags);
        put_le64(out + 8, e->cpu_usec);
        put_le64(out + 16, e->mem_peak_bytes);
}

int agent_exit_decode(const void *payload, size_t len, AgentExit *ret) {
        const unsigned char *p = payload;

        if (len != AGENT_EXIT_SIZE)
                return -EBADMSG;
        *ret = (AgentExit){
                .status = (int32_t)agent_get_le32(p),
                .flags = agent_get_le32(p + 4),
                .cpu_usec = get_le64(p + 8),
                .mem_peak_bytes = get_le64(p + 16),
        };
        return 0;
}
