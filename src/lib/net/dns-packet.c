/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>

#include "net/dns-packet.h"

#define DNS_FLAG_QR 0x8000U
#define DNS_FLAG_AA 0x0400U
#define DNS_FLAG_RD 0x0100U
#define DNS_OPCODE(flags) (((flags) >> 11) & 0xfU)

static uint16_t get16(const uint8_t *p) {
        return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v) {
        p[0] = (uint8_t)(v >> 8);
        p[1] = (uint8_t)v;
}

/* Reads the name at @off into @name; returns the offset past it or
 * -EBADMSG. */
static ssize_t parse_name(const uint8_t *buf, size_t len, size_t off,
                          char name[static HOST_NAME_MAX_LEN + 1]) {
        size_t n = 0;

        for (;;) {
                size_t l;

                if (off >= len)
                        return -EBADMSG;
                l = buf[off++];
                if (l == 0)
                        break;
                /* 0xc0: a compression pointer; 0x40, 0x80: reserved. */
                if (l > HOST_LABEL_MAX_LEN)
                        return -EBADMSG;
                if (l > len - off)
                        return -EBADMSG;
                /* The dot before every label but the first, then the label. */
                if (n + (n > 0) + l > HOST_NAME_MAX_LEN)
                        return -EBADMSG;
                if (n > 0)
                        name[n++] = '.';
                for (size_t i = 0; i < l; i++) {
                        uint8_t c = buf[off + i];

                        if (c <= 0x20 || c >= 0x7f || c == '.')
                                return -EBADMSG;
                        name[n++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
                }
                off += l;
        }
        name[n] = '\0';
        return (ssize_t)off;
}

int dns_query_parse(const uint8_t *buf, size_t len, DnsRequest *ret) {
        DnsRequest q = {};
        ssize_t off;

        if (!buf || !ret || len < DNS_HEADER_SIZE)
                return -EPROTO;
        q.id = get16(buf);
        q.flags = get16(buf + 2);
        /* SECURITY: never answer an answer (no reflection loops). */
        if (q.flags & DNS_FLAG_QR)
                return -EPROTO;
        if (DNS_OPCODE(q.flags) != 0) {
                *ret = q;
                return -EOPNOTSUPP;
        }
        /* One question; an EDNS OPT record in the additional section is
         * allowed (and ignored: the answer has none, RFC 6891 6.1.1). */
        if (get16(buf + 4) != 1 || get16(buf + 6) != 0 || get16(buf + 8) != 0 ||
            get16(buf + 10) > 1) {
                *ret = q;
                return -EBADMSG;
        }
        off = parse_name(buf, len, DNS_HEADER_SIZE, q.name);
        if (off < 0 || (size_t)off > len || len - (size_t)off < 4) {
                *ret = (DnsRequest){.id = q.id, .flags = q.flags};
                return -EBADMSG;
        }
        q.qtype = get16(buf + off);
        q.qclass = get16(buf + off + 2);
        q.question_end = (size_t)off + 4;
        *ret = q;
        return 0;
}

ssize_t dns_answer_build(const DnsRequest *q, const uint8_t *query, unsigned rcode,
                         const struct in_addr *addr, uint32_t ttl, uint8_t *out, size_t size) {
        size_t qlen = q->question_end > DNS_HEADER_SIZE ? q->question_end - DNS_HEADER_SIZE : 0;
        size_t n = DNS_HEADER_SIZE;
        uint16_t flags;

        if (rcode > 15)
                return -EINVAL;
        if (addr && (qlen == 0 || q->qtype != DNS_TYPE_A || q->qclass != DNS_CLASS_IN ||
                     rcode != DNS_RCODE_NOERROR))
                return -EINVAL;
        if (qlen > 0 && !query)
                return -EINVAL;
        if (size < DNS_HEADER_SIZE || size - DNS_HEADER_SIZE < qlen + (addr ? 16 : 0))
                return -ENOBUFS;

        flags = (uint16_t)(DNS_FLAG_QR | DNS_FLAG_AA | (q->flags & DNS_FLAG_RD) | rcode);
        put16(out, q->id);
        put16(out + 2, flags);
        put16(out + 4, qlen > 0 ? 1 : 0);
        put16(out + 6, addr ? 1 : 0);
        put16(out + 8, 0);
        put16(out + 10, 0);
        if (qlen > 0) {
                memcpy(out + n, query + DNS_HEADER_SIZE, qlen);
                n += qlen;
        }
        if (addr) {
                /* The owner name is a pointer to the question's (offset 12). */
                put16(out + n, 0xc000 | DNS_HEADER_SIZE);
                put16(out + n + 2, DNS_TYPE_A);
                put16(out + n + 4, DNS_CLASS_IN);
                put16(out + n + 6, (uint16_t)(ttl >> 16));
                put16(out + n + 8, (uint16_t)ttl);
                put16(out + n + 10, 4);
                memcpy(out + n + 12, &addr->s_addr, 4);
                n += 16;
        }
        return (ssize_t)n;
}
