/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "net/addr.h"
#include "net/allowlist.h"
#include "net/dns-table.h"
#include "policy/policy-internal.h"
#include "policy/policy.h"
#include "strv.h"

NetworkMode policy_network_mode(const Policy *p) {
        if (p->network == NETWORK_MODE_ALLOW || strv_length(p->allow_hosts) > 0 || p->n_secrets > 0)
                return NETWORK_MODE_ALLOW;
        return NETWORK_MODE_NONE;
}

/* Prefixes @e's message with @ctx ("--allow-host"), when there is one. */
static int with_ctx(int r, const char *ctx, HutchError *e, HutchError *reterr) {
        if (ctx)
                return hutch_error_set(reterr, -r, "invalid %s: %s", ctx, e->msg);
        if (reterr)
                *reterr = *e;
        return r;
}

static int check_pattern(const char *pattern, bool deny, const char *ctx, HutchError *reterr) {
        _cleanup_(allowlist_freep) Allowlist *al = NULL;
        HutchError e = {};
        int r;

        al = allowlist_new();
        if (!al)
                return -ENOMEM;
        r = deny ? allowlist_add_deny(al, pattern, &e) : allowlist_add_allow(al, pattern, &e);
        if (r < 0)
                return with_ctx(r, ctx, &e, reterr);
        return 0;
}

static int check_cidr(const char *cidr, const char *ctx, HutchError *reterr) {
        _cleanup_(allowlist_freep) Allowlist *al = NULL;
        HutchError e = {};
        int r;

        al = allowlist_new();
        if (!al)
                return -ENOMEM;
        r = allowlist_add_private(al, cidr, &e);
        if (r < 0)
                return with_ctx(r, ctx, &e, reterr);
        return 0;
}

/* "NAME:ADDR[,ADDR...]": a host name (not an address) and addresses in any
 * spelling net_addr_parse() takes (IPv6 with or without brackets). */
static int check_resolve(const char *entry, const char *ctx, HutchError *reterr) {
        const char *colon = strchr(entry, ':'), *p;
        Host h;

        if (!colon || colon == entry || colon[1] == '\0' ||
            host_parse(entry, (size_t)(colon - entry), &h) < 0 || h.kind != HOST_KIND_NAME)
                return hutch_error_set(reterr, EINVAL,
                                       "invalid %s '%s': expected NAME:ADDR[,ADDR...] with a host "
                                       "name and IP addresses",
                                       ctx ? ctx : "resolve entry", entry);
        for (p = colon + 1;; p++) {
                size_t n = strcspn(p, ",");
                NetAddr a;

                if (n == 0 || net_addr_parse(p, n, &a) < 0)
                        return hutch_error_set(reterr, EINVAL,
                                               "invalid %s '%s': '%.*s' is not an IP address",
                                               ctx ? ctx : "resolve entry", entry, (int)n, p);
                p += n;
                if (*p == '\0')
                        return 0;
        }
}

static int add_entry(char ***list, const char *value) {
        if (strv_length(*list) >= POLICY_MAX_NET_ENTRIES)
                return -E2BIG;
        if (strv_contains(*list, value))
                return 0;
        return strv_extend(list, value);
}

static int add_checked(char ***list, const char *value, const char *what, HutchError *reterr) {
        int r = add_entry(list, value);

        if (r == -E2BIG)
                return hutch_error_set(reterr, E2BIG, "too many %s entries (at most %d)", what,
                                       POLICY_MAX_NET_ENTRIES);
        return r;
}

int policy_add_allow_host(Policy *p, const char *pattern, const char *ctx, HutchError *reterr) {
        int r = check_pattern(pattern, false, ctx, reterr);

        if (r < 0)
                return r;
        return add_checked(&p->allow_hosts, pattern, "--allow-host", reterr);
}

int policy_add_deny_host(Policy *p, const char *pattern, const char *ctx, HutchError *reterr) {
        int r = check_pattern(pattern, true, ctx, reterr);

        if (r < 0)
                return r;
        return add_checked(&p->deny_hosts, pattern, "--deny-host", reterr);
}

int policy_add_allow_private(Policy *p, const char *cidr, const char *ctx, HutchError *reterr) {
        int r = check_cidr(cidr, ctx, reterr);

        if (r < 0)
                return r;
        return add_checked(&p->allow_private, cidr, "--allow-private", reterr);
}

int policy_add_resolve(Policy *p, const char *entry, const char *ctx, HutchError *reterr) {
        int r = check_resolve(entry, ctx, reterr);

        if (r < 0)
                return r;
        return add_checked(&p->resolve, entry, "--resolve", reterr);
}

int policy_set_audit_log(Policy *p, const char *path, HutchError *reterr) {
        char *abs = NULL;
        int r;

        if (!path || path[0] == '\0')
                return hutch_error_set(reterr, EINVAL, "--audit-log needs a file name");
        /* Absolute now, so a stored policy names the same file from any
         * current directory (and hutch-proxy's cwd never matters). */
        r = policy_path_make_absolute(path, &abs);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot make audit log '%s' absolute: %s", path,
                                       strerror(-r));
        free(p->audit_log);
        p->audit_log = abs;
        return 0;
}

int policy_set_dns(Policy *p, const char *mode, HutchError *reterr) {
        if (mode && strcmp(mode, "proxy") == 0)
                p->dns_transparent = false;
        else if (mode && strcmp(mode, "transparent") == 0)
                p->dns_transparent = true;
        else
                return hutch_error_set(reterr, EINVAL,
                                       "invalid DNS mode '%s' (expected 'proxy' or 'transparent')",
                                       mode ? mode : "");
        return 0;
}

/* Transparent DNS: a sandbox with a network wall, on the namespace
 * backend, with few enough listeners (src/lib/net/dns-table.h). */
static int validate_dns(const Policy *p, HutchError *reterr) {
        _cleanup_(dns_table_done) DnsTable t = {};
        int r;

        if (!p->dns_transparent)
                return 0;
        if (policy_network_mode(p) != NETWORK_MODE_ALLOW)
                return hutch_error_set(reterr, EINVAL,
                                       "--dns transparent needs network mode 'allow' (give "
                                       "--allow-host)");
        if (p->backend == SANDBOX_BACKEND_VM)
                return hutch_error_set(
                        reterr, EOPNOTSUPP,
                        "--dns transparent is not supported with the vm backend yet");
        r = dns_table_add_strv(&t, p->allow_hosts, reterr);
        for (size_t i = 0; r >= 0 && i < p->n_secrets; i++)
                r = dns_table_add_strv(&t, p->secrets[i].hosts, reterr);
        return r;
}

int policy_validate_network(const Policy *p, HutchError *reterr) {
        int r;

        r = validate_dns(p, reterr);
        if (r < 0)
                return r;

        if (p->network_set && p->network == NETWORK_MODE_NONE && strv_length(p->allow_hosts) > 0)
                return hutch_error_set(reterr, EINVAL,
                                       "--allow-host '%s' needs network mode 'allow', but "
                                       "'--network none' was given",
                                       p->allow_hosts[0]);
        STRV_FOREACH(e, p->allow_hosts) {
                r = check_pattern(*e, false, "--allow-host", reterr);
                if (r < 0)
                        return r;
        }
        STRV_FOREACH(e, p->deny_hosts) {
                r = check_pattern(*e, true, "--deny-host", reterr);
                if (r < 0)
                        return r;
        }
        STRV_FOREACH(e, p->allow_private) {
                r = check_cidr(*e, "--allow-private", reterr);
                if (r < 0)
                        return r;
        }
        STRV_FOREACH(e, p->resolve) {
                r = check_resolve(*e, "--resolve", reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}
