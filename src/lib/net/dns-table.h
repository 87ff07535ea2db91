/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The name table of transparent DNS (docs/network.md, "Transparent DNS"):
 * which synthetic address stands for which allowlisted name, and on which
 * ports the sandbox's init listens there for hutch-proxy.
 *
 * Init (which makes the listeners inside the sandbox's network namespace)
 * and hutch-proxy (which answers the queries and learns, from the local
 * address of an accepted connection, the name it was for) build the same
 * table from the same allow entries: the exact names, deduplicated and
 * sorted, the i-th of them at DNS_SYNTHETIC_BASE + 1 + i. Wildcard and
 * address entries have no place in it. The ports of a name are those of
 * its exact entries (80 and 443 for an entry without one).
 *
 * Caps: DNS_TABLE_LISTENERS_MAX (name, port) pairs in all, so that the
 * listeners, the resolver socket and the proxy's own two sockets travel
 * in one SCM_RIGHTS message. */

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hutch-error.h"
#include "macro.h"
#include "net/allowlist.h"

/* 127.77.0.0/16: inside the sandbox's network namespace all of 127/8
 * routes to lo, so these addresses need no route and no interface set up,
 * and outside the namespace they mean nothing. */
#define DNS_SYNTHETIC_BASE 0x7f4d0000U
#define DNS_SYNTHETIC_PREFIXLEN 16
/* Where /etc/resolv.conf points in a sandbox with transparent DNS. */
#define DNS_RESOLVER_ADDR 0x7f000035U /* 127.0.0.53 */
#define DNS_RESOLVER_ADDR_STRING "127.0.0.53"
#define DNS_RESOLVER_PORT 53
#define DNS_TABLE_LISTENERS_MAX 48
#define DNS_TABLE_PORTS_MAX 8
/* Answers are for this sandbox only and never change while it runs. */
#define DNS_ANSWER_TTL 60

typedef struct DnsTableEntry {
        char name[HOST_NAME_MAX_LEN + 1];
        struct in_addr addr;
        uint16_t ports[DNS_TABLE_PORTS_MAX];
        size_t n_ports;
} DnsTableEntry;

typedef struct DnsTable {
        DnsTableEntry *entries; /* sorted by name */
        size_t n_entries;
        size_t n_listeners; /* sum of n_ports */
} DnsTable;

/* Adds the exact-name entries of @patterns (@n of them; wildcard and
 * address entries are skipped) to @t, then sorts and numbers the table
 * again. Returns 0; -E2BIG with @reterr naming the entry when the table
 * would need more than DNS_TABLE_LISTENERS_MAX listeners, or a name more
 * than DNS_TABLE_PORTS_MAX ports; -ENOMEM. @t is unchanged on error. */
int dns_table_add(DnsTable *t, const HostPattern *patterns, size_t n, HutchError *reterr);

/* Parses each "PATTERN[:PORT]" of @entries (NULL-terminated, may be
 * NULL) with host_pattern_parse() and adds it as dns_table_add() does.
 * -EINVAL for an entry that does not parse, else as dns_table_add(). */
int dns_table_add_strv(DnsTable *t, char *const *entries, HutchError *reterr);

void dns_table_done(DnsTable *t);

/* The entry of the normalised @name, or NULL. */
const DnsTableEntry *dns_table_find_name(const DnsTable *t, const char *name);

/* The entry whose synthetic address is @addr (network order), or NULL. */
const DnsTableEntry *dns_table_find_addr(const DnsTable *t, struct in_addr addr);

/* True when @port is one of @e's ports. */
bool dns_table_entry_has_port(const DnsTableEntry *e, uint16_t port);
