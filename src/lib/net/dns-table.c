/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/dns-table.h"

static int entry_compare(const void *a, const void *b) {
        return strcmp(((const DnsTableEntry *)a)->name, ((const DnsTableEntry *)b)->name);
}

static int entry_add_port(DnsTableEntry *e, uint16_t port) {
        if (dns_table_entry_has_port(e, port))
                return 0;
        if (e->n_ports >= DNS_TABLE_PORTS_MAX)
                return -E2BIG;
        e->ports[e->n_ports++] = port;
        return 1;
}

static int table_add_one(DnsTableEntry **entries, size_t *n_entries, size_t *n_listeners,
                         const HostPattern *p) {
        static const uint16_t default_ports[] = {80, 443};
        DnsTableEntry *e = NULL;

        for (size_t i = 0; i < *n_entries; i++)
                if (strcmp((*entries)[i].name, p->name) == 0)
                        e = &(*entries)[i];
        if (!e) {
                DnsTableEntry *grown = reallocarray(*entries, *n_entries + 1, sizeof(**entries));

                if (!grown)
                        return -ENOMEM;
                *entries = grown;
                e = &grown[(*n_entries)++];
                *e = (DnsTableEntry){};
                (void)snprintf(e->name, sizeof(e->name), "%s", p->name);
        }
        for (size_t i = 0; i < (p->port ? 1 : ELEMENTSOF(default_ports)); i++) {
                int r = entry_add_port(e, p->port ? p->port : default_ports[i]);

                if (r < 0)
                        return r;
                *n_listeners += (size_t)r;
                if (*n_listeners > DNS_TABLE_LISTENERS_MAX)
                        return -E2BIG;
        }
        return 0;
}

int dns_table_add(DnsTable *t, const HostPattern *patterns, size_t n, HutchError *reterr) {
        _cleanup_free_ DnsTableEntry *entries = NULL;
        size_t n_entries = t->n_entries, n_listeners = t->n_listeners;

        if (t->n_entries > 0) {
                entries = reallocarray(NULL, t->n_entries, sizeof(*entries));
                if (!entries)
                        return -ENOMEM;
                memcpy(entries, t->entries, t->n_entries * sizeof(*entries));
        }
        for (size_t i = 0; i < n; i++) {
                int r;

                if (patterns[i].kind != HOST_PATTERN_EXACT)
                        continue;
                r = table_add_one(&entries, &n_entries, &n_listeners, &patterns[i]);
                if (r == -E2BIG)
                        return hutch_error_set(reterr, E2BIG,
                                               "transparent DNS serves at most %d host:port "
                                               "pairs (%d ports per name); '%s' is one too many",
                                               DNS_TABLE_LISTENERS_MAX, DNS_TABLE_PORTS_MAX,
                                               patterns[i].text);
                if (r < 0)
                        return r;
        }
        if (n_entries > 0)
                qsort(entries, n_entries, sizeof(*entries), entry_compare);
        for (size_t i = 0; i < n_entries; i++)
                entries[i].addr.s_addr = htonl(DNS_SYNTHETIC_BASE + 1 + (uint32_t)i);
        free(t->entries);
        t->entries = TAKE_PTR(entries);
        t->n_entries = n_entries;
        t->n_listeners = n_listeners;
        return 0;
}

int dns_table_add_strv(DnsTable *t, char *const *entries, HutchError *reterr) {
        for (size_t i = 0; entries && entries[i]; i++) {
                HostPattern p;
                int r;

                r = host_pattern_parse(entries[i], &p, reterr);
                if (r < 0)
                        return r;
                r = dns_table_add(t, &p, 1, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

void dns_table_done(DnsTable *t) {
        t->entries = mfree(t->entries);
        t->n_entries = t->n_listeners = 0;
}

const DnsTableEntry *dns_table_find_name(const DnsTable *t, const char *name) {
        DnsTableEntry key = {};

        if (!name || t->n_entries == 0 || strlen(name) > HOST_NAME_MAX_LEN)
                return NULL;
        (void)snprintf(key.name, sizeof(key.name), "%s", name);
        return bsearch(&key, t->entries, t->n_entries, sizeof(key), entry_compare);
}

const DnsTableEntry *dns_table_find_addr(const DnsTable *t, struct in_addr addr) {
        uint32_t a = ntohl(addr.s_addr);

        if (a <= DNS_SYNTHETIC_BASE || a - DNS_SYNTHETIC_BASE > t->n_entries)
                return NULL;
        return &t->entries[a - DNS_SYNTHETIC_BASE - 1];
}

bool dns_table_entry_has_port(const DnsTableEntry *e, uint16_t port) {
        for (size_t i = 0; i < e->n_ports; i++)
                if (e->ports[i] == port)
                        return true;
        return false;
}
