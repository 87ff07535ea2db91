/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dns-server.h"
#include "log.h"
#include "net/dns-packet.h"

/* Datagrams read per wake-up before other events get their turn. */
#define DNS_BATCH 64

struct DnsServer {
        int fd;
        struct event *ev;
        const ProxyConfig *config;
        const DnsTable *table;
        Audit *audit;
        bool audit_warned;
};

/* Whether the current allowlist allows @e on one of its ports; @why gets
 * the reason when it does not. */
static bool entry_allowed(const Allowlist *al, const DnsTableEntry *e, char *why, size_t size) {
        const HostPattern *rule = NULL;
        Host h;

        if (host_parse(e->name, strlen(e->name), &h) < 0) {
                (void)snprintf(why, size, "not a host name");
                return false;
        }
        for (size_t i = 0; i < e->n_ports; i++) {
                int v = allowlist_check_host(al, &h, e->ports[i], &rule);

                if (v == ALLOWLIST_ALLOW)
                        return true;
                if (v == ALLOWLIST_DENY_RULE && rule)
                        (void)snprintf(why, size, "matches deny rule '%s'", rule->text);
        }
        if (!why[0])
                (void)snprintf(why, size, "no longer allowed (the policy changed)");
        return false;
}

size_t dns_server_answer(const ProxyConfig *config, const DnsTable *table, const uint8_t *query,
                         size_t len, uint8_t out[static DNS_PACKET_MAX], char *refused_name,
                         size_t name_size, char *refused_reason, size_t reason_size) {
        const DnsTableEntry *e;
        unsigned rcode = DNS_RCODE_NOERROR;
        const struct in_addr *addr = NULL;
        char why[HOST_PATTERN_STRING_MAX + 64] = "";
        DnsRequest q;
        ssize_t n;
        int r;

        refused_name[0] = refused_reason[0] = '\0';
        r = dns_query_parse(query, len, &q);
        if (r == -EPROTO)
                return 0;
        if (r == -EOPNOTSUPP)
                rcode = DNS_RCODE_NOTIMP;
        else if (r < 0)
                rcode = DNS_RCODE_FORMERR;
        else if (q.qclass != DNS_CLASS_IN)
                rcode = DNS_RCODE_REFUSED;
        else {
                e = dns_table_find_name(table, q.name);
                if (!e)
                        (void)snprintf(why, sizeof(why),
                                       "no exact --allow-host entry names it (transparent DNS "
                                       "serves exact names only)");
                if (e && entry_allowed(config->allowlist, e, why, sizeof(why))) {
                        if (q.qtype == DNS_TYPE_A)
                                addr = &e->addr;
                        else if (q.qtype != DNS_TYPE_AAAA)
                                rcode = DNS_RCODE_REFUSED;
                } else {
                        /* SECURITY: a name the policy does not allow gets no
                         * address, so nothing can even be attempted. */
                        rcode = DNS_RCODE_NXDOMAIN;
                        (void)snprintf(refused_name, name_size, "%s", q.name);
                        (void)snprintf(refused_reason, reason_size, "dns refused '%s': %s", q.name,
                                       why);
                }
        }
        n = dns_answer_build(&q, query, rcode, addr, DNS_ANSWER_TTL, out, DNS_PACKET_MAX);
        return n > 0 ? (size_t)n : 0;
}

static void dns_read_cb(evutil_socket_t fd, short what, void *arg) {
        DnsServer *s = arg;

        for (size_t i = 0; i < DNS_BATCH; i++) {
                uint8_t in[DNS_PACKET_MAX], out[DNS_PACKET_MAX];
                char name[HOST_NAME_MAX_LEN + 1],
                        reason[HOST_NAME_MAX_LEN + HOST_PATTERN_STRING_MAX + 128];
                struct sockaddr_storage from;
                socklen_t from_len = sizeof(from);
                ssize_t n;
                size_t m;

                n = recvfrom(fd, in, sizeof(in), MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&from,
                             &from_len);
                if (n < 0)
                        return; /* EAGAIN, or an error the next packet will not have */
                /* A datagram larger than any query: treat it as cut. */
                m = dns_server_answer(s->config, s->table, in,
                                      (size_t)n > sizeof(in) ? sizeof(in) : (size_t)n, out, name,
                                      sizeof(name), reason, sizeof(reason));
                if (name[0]) {
                        AuditRecord rec = {
                                .method = "DNS",
                                .host = name,
                                .decision = AUDIT_DENY,
                                .reason = reason,
                        };
                        int k = audit_log(s->audit, &rec);

                        if (k < 0 && !s->audit_warned) {
                                s->audit_warned = true;
                                log_warning_errno(k, "failed to write the audit log: %m");
                        }
                }
                if (m > 0)
                        (void)sendto(fd, out, m, MSG_DONTWAIT, (struct sockaddr *)&from, from_len);
        }
}

int dns_server_new(struct event_base *base, int fd, const ProxyConfig *config,
                   const DnsTable *table, Audit *audit, DnsServer **ret) {
        DnsServer *s;

        s = calloc(1, sizeof(DnsServer));
        if (!s)
                return -ENOMEM;
        *s = (DnsServer){.fd = fd, .config = config, .table = table, .audit = audit};
        s->ev = event_new(base, fd, EV_READ | EV_PERSIST, dns_read_cb, s);
        if (!s->ev || event_add(s->ev, NULL) < 0) {
                dns_server_free(s);
                return -ENOMEM;
        }
        *ret = s;
        return 0;
}

DnsServer *dns_server_free(DnsServer *s) {
        if (!s)
                return NULL;
        if (s->ev)
                event_free(s->ev);
        free(s);
        return NULL;
}
