/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* hutch-proxy's transparent resolver (docs/network.md, "Transparent
 * DNS"): answers the sandbox's queries on the datagram socket init made at
 * the address /etc/resolv.conf names. An A question for a name of the
 * table (src/lib/net/dns-table.h) that the current allowlist allows on one
 * of its ports gets the name's synthetic address; AAAA for such a name
 * gets no record (NOERROR); any other name gets NXDOMAIN and an audit
 * line "dns refused 'NAME'"; other types and classes REFUSED; malformed
 * queries FORMERR, other opcodes NOTIMP; responses and runts nothing.
 * Nothing is ever asked upstream: the answer is the table's. */

#include <event2/event.h>

#include "audit.h"
#include "net/dns-packet.h"
#include "net/dns-table.h"
#include "proxy-config.h"

typedef struct DnsServer DnsServer;

/* Serves on @fd (a bound datagram socket, borrowed; the caller closes it
 * after dns_server_free()). @config (its allowlist is read at every query,
 * so a live policy change applies at once), @table and @audit are
 * borrowed and must outlive the server. Returns 0 or -ENOMEM. */
int dns_server_new(struct event_base *base, int fd, const ProxyConfig *config,
                   const DnsTable *table, Audit *audit, DnsServer **ret);
DnsServer *dns_server_free(DnsServer *s);

/* What the resolver answers to the query of @len bytes at @query: writes
 * the answer to @out (DNS_PACKET_MAX bytes) and returns its length, or 0
 * when nothing is to be sent; with a refused name, @ret_refused (if not
 * NULL) is set to true and @refused_reason (@reason_size bytes) says
 * why. Exposed for the unit test. */
size_t dns_server_answer(const ProxyConfig *config, const DnsTable *table, const uint8_t *query,
                         size_t len, uint8_t out[static DNS_PACKET_MAX], char *refused_name,
                         size_t name_size, char *refused_reason, size_t reason_size);
