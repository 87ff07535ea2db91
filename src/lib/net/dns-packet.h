/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The DNS wire format, only as far as the transparent resolver of
 * hutch-proxy needs it (docs/network.md, "Transparent DNS"): parse one
 * query of one question, build its answer (at most one A record, or an
 * error code). RFC 1035 section 4.
 *
 * SECURITY: the packet comes from the sandbox. Every length and offset is
 * checked against the packet's size before it is read; names use no
 * compression pointers (a query's one question has nothing to point at);
 * a label holds printable ASCII only, never a dot, and is folded to lower
 * case. Nothing is allocated. */

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "net/allowlist.h"

#define DNS_HEADER_SIZE 12
/* What the resolver reads at most (a query is far smaller) and writes at
 * most (header + question + one A record fits in 512, the UDP limit
 * without EDNS). */
#define DNS_PACKET_MAX 512

#define DNS_TYPE_A 1
#define DNS_TYPE_AAAA 28
#define DNS_CLASS_IN 1

#define DNS_RCODE_NOERROR 0
#define DNS_RCODE_FORMERR 1
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_NOTIMP 4
#define DNS_RCODE_REFUSED 5

typedef struct DnsRequest {
        uint16_t id;
        uint16_t flags; /* the query's flags word (RD is echoed in the answer) */
        /* Lowercased, dotted, no trailing dot; "" for the root. */
        char name[HOST_NAME_MAX_LEN + 1];
        uint16_t qtype;
        uint16_t qclass;
        size_t question_end; /* offset just past the question; 0 if unparsed */
} DnsRequest;

/* Parses the query of @len bytes at @buf. On success fills @ret and
 * returns 0. A packet shorter than a header, or a response (QR set), is
 * -EPROTO with @ret untouched: drop it, never answer it. Otherwise @ret's
 * id and flags are set (question_end 0) and the error says what to
 * answer with dns_answer_build(): -EOPNOTSUPP when the opcode is not
 * QUERY (NOTIMP); -EBADMSG when the header or question is malformed
 * (FORMERR): not exactly one question, answer or authority records, more
 * than one additional record, a truncated name, a compression pointer, a
 * label over 63 bytes, a name over 253 bytes, a byte that is not
 * printable ASCII or is a dot. */
int dns_query_parse(const uint8_t *buf, size_t len, DnsRequest *ret);

/* Writes the answer to @q (parsed from @query, borrowed) into @out of
 * @size bytes: the query's id, QR and AA set, RD copied, @rcode, the
 * question copied byte for byte when @q has one, and with @addr (not NULL,
 * only for an A question and NOERROR) one A record of @ttl seconds.
 * Returns the length written, or -ENOBUFS if @size is too small, -EINVAL
 * for an @rcode above 15 or @addr with a question that is not A/IN. */
ssize_t dns_answer_build(const DnsRequest *q, const uint8_t *query, unsigned rcode,
                         const struct in_addr *addr, uint32_t ttl, uint8_t *out, size_t size);
