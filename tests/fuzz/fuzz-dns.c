/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/allowlist.h"
#include "net/dns-packet.h"
#include "net/dns-table.h"

/* Fuzzes the transparent resolver's packet parser (a query from inside
 * the sandbox) and its answer builder, and checks the invariants the
 * resolver relies on:
 *   - a parsed query's name is at most 253 bytes of lowercase printable
 *     ASCII, its labels 1-63 bytes, and its question ends inside the input;
 *   - the answer (each rcode, and an A record for an A question) fits in
 *     DNS_PACKET_MAX, keeps the id, has QR set, and is never taken for a
 *     query (no reflection loops);
 *   - a name that parses as a host is found in a table made of it, and
 *     its synthetic address leads back to it. */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const char *name) {
        size_t n = strlen(name), label = 0;

        if (n > HOST_NAME_MAX_LEN)
                abort();
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)name[i];

                if (c == '.') {
                        if (label == 0 || label > HOST_LABEL_MAX_LEN)
                                abort();
                        label = 0;
                        continue;
                }
                if (c <= 0x20 || c >= 0x7f || (c >= 'A' && c <= 'Z'))
                        abort();
                label++;
        }
        if (n > 0 && (label == 0 || label > HOST_LABEL_MAX_LEN))
                abort();
}

static void check_answer(const DnsRequest *q, const uint8_t *data, unsigned rcode,
                         const struct in_addr *addr) {
        uint8_t out[DNS_PACKET_MAX];
        DnsRequest again;
        ssize_t n;

        n = dns_answer_build(q, data, rcode, addr, DNS_ANSWER_TTL, out, sizeof(out));
        if (n < 0)
                return;
        if (n < DNS_HEADER_SIZE || (size_t)n > sizeof(out))
                abort();
        if (out[0] != (uint8_t)(q->id >> 8) || out[1] != (uint8_t)q->id || !(out[2] & 0x80) ||
            (out[3] & 0xf) != rcode)
                abort();
        if (dns_query_parse(out, (size_t)n, &again) != -EPROTO)
                abort();
}

static void check_table(const char *name) {
        _cleanup_(dns_table_done) DnsTable t = {};
        const DnsTableEntry *e;
        HostPattern p;

        if (host_pattern_parse(name, &p, NULL) < 0 || p.kind != HOST_PATTERN_EXACT)
                return;
        if (dns_table_add(&t, &p, 1, NULL) < 0)
                return;
        e = dns_table_find_name(&t, p.name);
        if (!e || dns_table_find_addr(&t, e->addr) != e || e->n_ports == 0)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct in_addr a = {.s_addr = htonl(DNS_SYNTHETIC_BASE + 1)};
        DnsRequest q;
        int r;

        if (size > DNS_PACKET_MAX)
                return 0;
        r = dns_query_parse(data, size, &q);
        if (r == -EPROTO)
                return 0;
        if (r < 0) {
                if (q.question_end != 0)
                        abort();
                check_answer(&q, data, r == -EOPNOTSUPP ? DNS_RCODE_NOTIMP : DNS_RCODE_FORMERR,
                             NULL);
                return 0;
        }
        if (q.question_end <= DNS_HEADER_SIZE || q.question_end > size)
                abort();
        check_name(q.name);
        check_answer(&q, data, DNS_RCODE_NXDOMAIN, NULL);
        check_answer(&q, data, DNS_RCODE_REFUSED, NULL);
        if (q.qtype == DNS_TYPE_A && q.qclass == DNS_CLASS_IN)
                check_answer(&q, data, DNS_RCODE_NOERROR, &a);
        check_table(q.name);
        return 0;
}
