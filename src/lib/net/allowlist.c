/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/allowlist.h"
#include "parse-util.h"
#include "string-table.h"
#include "strv.h"

/* Longest entry text accepted; longer ones cannot be valid anyway and are
 * refused before any work. */
#define HOST_PATTERN_TEXT_MAX 512

static const char *const host_pattern_kind_table[_HOST_PATTERN_KIND_MAX] = {
        [HOST_PATTERN_EXACT] = "exact",
        [HOST_PATTERN_WILDCARD] = "wildcard",
        [HOST_PATTERN_ADDRESS] = "address",
};

static const char *const allowlist_verdict_table[_ALLOWLIST_VERDICT_MAX] = {
        [ALLOWLIST_ALLOW] = "allow",
        [ALLOWLIST_DENY_RULE] = "deny-rule",
        [ALLOWLIST_DENY_UNLISTED] = "deny-unlisted",
};

DEFINE_STRING_TABLE_LOOKUP(host_pattern_kind, HostPatternKind, host_pattern_kind_table);

DEFINE_STRING_TABLE_LOOKUP(allowlist_verdict, AllowlistVerdict, allowlist_verdict_table);

static bool name_char_ok(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Validates and case-folds the DNS name at @s (@n bytes, one trailing dot
 * allowed) into @out. On failure returns -EINVAL and points @reterr_reason
 * at a static description. */
static int name_normalize(const char *s, size_t n, char out[static HOST_NAME_MAX_LEN + 1],
                          const char **reterr_reason) {
        const char *reason = NULL;
        size_t label_len = 0;

        if (n > 0 && s[n - 1] == '.')
                n--;
        if (n == 0)
                reason = "the name is empty";
        else if (n > HOST_NAME_MAX_LEN)
                reason = "the name is longer than 253 bytes";

        for (size_t i = 0; !reason && i < n; i++) {
                char c = s[i];

                if (c == '.') {
                        if (label_len == 0)
                                reason = "the name has an empty label";
                        else if (out[i - 1] == '-')
                                reason = "a label ends with '-'";
                        label_len = 0;
                        out[i] = '.';
                        continue;
                }
                if (c >= 'A' && c <= 'Z')
                        c = (char)(c - 'A' + 'a');
                if (!name_char_ok(c))
                        reason = "the name has a character other than letters, digits, '-', '_' "
                                 "and '.'";
                else if (c == '-' && label_len == 0)
                        reason = "a label starts with '-'";
                else if (++label_len > HOST_LABEL_MAX_LEN)
                        reason = "a label is longer than 63 bytes";
                out[i] = c;
        }
        if (!reason && label_len == 0)
                reason = "the name has an empty label";
        if (!reason && out[n - 1] == '-')
                reason = "a label ends with '-'";
        if (reason) {
                if (reterr_reason)
                        *reterr_reason = reason;
                return -EINVAL;
        }
        out[n] = '\0';
        return 0;
}

static int host_parse_full(const char *s, size_t n, Host *ret, const char **reterr_reason) {
        Host h = {};
        int r;

        if (!s || n == 0) {
                *reterr_reason = "the host is empty";
                return -EINVAL;
        }
        if (s[0] == '[' || memchr(s, ':', n)) {
                if (s[0] != '[' || s[n - 1] != ']') {
                        *reterr_reason = "an IPv6 address must be in brackets";
                        return -EINVAL;
                }
                r = net_addr_parse(s, n, &h.addr);
                if (r < 0) {
                        *reterr_reason = "not a valid IPv6 address";
                        return r;
                }
                h.kind = HOST_KIND_ADDRESS;
        } else if (net_host_ends_in_number(s, n)) {
                /* SECURITY: "127.1", "2130706433" and "0x7f.1" are what a
                 * resolver would turn into 127.0.0.1; never treat them as
                 * names. */
                r = net_addr_parse(s, n, &h.addr);
                if (r < 0) {
                        *reterr_reason = "it ends in a number but is not a valid IPv4 address";
                        return r;
                }
                h.kind = HOST_KIND_ADDRESS;
        } else {
                r = name_normalize(s, n, h.name, reterr_reason);
                if (r < 0)
                        return r;
                h.kind = HOST_KIND_NAME;
        }

        if (h.kind == HOST_KIND_ADDRESS) {
                r = net_addr_to_string(&h.addr, h.name, sizeof(h.name));
                if (r < 0)
                        return r;
        }
        *ret = h;
        return 0;
}

int host_parse(const char *s, size_t n, Host *ret) {
        const char *reason = NULL;

        if (!ret)
                return -EINVAL;
        return host_parse_full(s, n, ret, &reason);
}

static int pattern_error(HutchError *reterr, const char *text, const char *reason) {
        return hutch_error_set(reterr, EINVAL, "invalid host pattern '%s': %s", text, reason);
}

static int parse_port(const char *s, uint16_t *ret, const char **reterr_reason) {
        uint32_t v;
        int r;

        if (*s == '\0') {
                *reterr_reason = "the port is empty";
                return -EINVAL;
        }
        r = safe_atou32(s, &v);
        if (r == -EINVAL) {
                *reterr_reason = "the port is not a number";
                return r;
        }
        if (r < 0 || v == 0 || v > 65535) {
                *reterr_reason = "the port is out of range (1-65535)";
                return -EINVAL;
        }
        *ret = (uint16_t)v;
        return 0;
}

int host_pattern_parse(const char *text, HostPattern *ret, HutchError *reterr) {
        const char *reason = NULL, *port_text = NULL, *host;
        size_t len, host_len;
        HostPattern p = {};
        Host h;
        int r;

        if (!text || text[0] == '\0')
                return hutch_error_set(reterr, EINVAL,
                                       "invalid host pattern '': the pattern is empty");
        if (!ret)
                return -EINVAL;
        len = strnlen(text, HOST_PATTERN_TEXT_MAX + 1);
        if (len > HOST_PATTERN_TEXT_MAX)
                return hutch_error_set(reterr, EINVAL, "invalid host pattern '%.64s...': too long",
                                       text);

        host = text;
        if (text[0] == '[') {
                const char *close = strchr(text, ']');

                if (!close)
                        return pattern_error(reterr, text, "'[' without a closing ']'");
                host_len = (size_t)(close - text) + 1;
                if (close[1] == ':')
                        port_text = close + 2;
                else if (close[1] != '\0')
                        return pattern_error(reterr, text, "unexpected text after ']'");
        } else {
                const char *colon = strchr(text, ':');

                if (colon && strchr(colon + 1, ':'))
                        return pattern_error(reterr, text,
                                             text[0] == '*'
                                                     ? "a wildcard cannot cover an IP address"
                                                     : "an IPv6 address must be in brackets");
                host_len = colon ? (size_t)(colon - text) : len;
                if (colon)
                        port_text = colon + 1;
        }

        if (port_text) {
                r = parse_port(port_text, &p.port, &reason);
                if (r < 0)
                        return pattern_error(reterr, text, reason);
        }
        if (host_len == 0)
                return pattern_error(reterr, text, "the host is empty");

        if (host_len >= 2 && host[0] == '*' && host[1] == '.') {
                const char *suffix = host + 2;
                size_t suffix_len = host_len - 2;

                if (suffix_len == 0 || (suffix_len == 1 && suffix[0] == '.'))
                        return pattern_error(reterr, text, "a wildcard needs a domain after '*.'");
                if (memchr(suffix, '*', suffix_len))
                        return pattern_error(reterr, text, "only one leading '*.' is allowed");
                if (suffix[0] == '[' || memchr(suffix, ':', suffix_len) ||
                    net_host_ends_in_number(suffix, suffix_len))
                        return pattern_error(reterr, text, "a wildcard cannot cover an IP address");
                r = name_normalize(suffix, suffix_len, p.name, &reason);
                if (r < 0)
                        return pattern_error(reterr, text, reason);
                p.kind = HOST_PATTERN_WILDCARD;
        } else {
                if (memchr(host, '*', host_len))
                        return pattern_error(reterr, text,
                                             "a wildcard must be a whole leading label, as in "
                                             "'*.example.com'");
                r = host_parse_full(host, host_len, &h, &reason);
                if (r < 0)
                        return pattern_error(reterr, text, reason);
                memcpy(p.name, h.name, sizeof(p.name));
                if (h.kind == HOST_KIND_ADDRESS) {
                        p.kind = HOST_PATTERN_ADDRESS;
                        p.addr = h.addr;
                } else
                        p.kind = HOST_PATTERN_EXACT;
        }

        /* The canonical spelling; the buffer is sized for the longest one. */
        r = snprintf(p.text, sizeof(p.text), "%s%s%s%s",
                     p.kind == HOST_PATTERN_WILDCARD ? "*." : "",
                     p.kind == HOST_PATTERN_ADDRESS && p.addr.family == AF_INET6 ? "[" : "", p.name,
                     p.kind == HOST_PATTERN_ADDRESS && p.addr.family == AF_INET6 ? "]" : "");
        if (r < 0 || (size_t)r >= sizeof(p.text))
                return pattern_error(reterr, text, "too long");
        if (p.port != 0) {
                size_t used = (size_t)r;

                r = snprintf(p.text + used, sizeof(p.text) - used, ":%u", (unsigned)p.port);
                if (r < 0 || (size_t)r >= sizeof(p.text) - used)
                        return pattern_error(reterr, text, "too long");
        }

        *ret = p;
        return 0;
}

bool host_pattern_matches_host(const HostPattern *p, const Host *h) {
        size_t hl, sl;

        if (!p || !h)
                return false;
        switch (p->kind) {
        case HOST_PATTERN_ADDRESS:
                return h->kind == HOST_KIND_ADDRESS && net_addr_equal(&p->addr, &h->addr);
        case HOST_PATTERN_EXACT:
                return h->kind == HOST_KIND_NAME && strcmp(p->name, h->name) == 0;
        case HOST_PATTERN_WILDCARD:
                if (h->kind != HOST_KIND_NAME)
                        return false;
                hl = strlen(h->name);
                sl = strlen(p->name);
                /* At least one label, then a dot, then the domain. */
                return hl > sl + 1 && h->name[hl - sl - 1] == '.' &&
                       strcmp(h->name + hl - sl, p->name) == 0;
        case _HOST_PATTERN_KIND_MAX:
        case _HOST_PATTERN_KIND_INVALID:
                break;
        }
        return false;
}

Allowlist *allowlist_new(void) {
        return calloc(1, sizeof(Allowlist));
}

Allowlist *allowlist_free(Allowlist *al) {
        if (!al)
                return NULL;
        free(al->allow);
        free(al->deny);
        free(al->private_ok);
        free(al);
        return NULL;
}

static bool pattern_equal(const HostPattern *a, const HostPattern *b) {
        return a->kind == b->kind && a->port == b->port && strcmp(a->text, b->text) == 0;
}

static int allowlist_append(HostPattern **list, size_t *n, const char *text, const char *what,
                            HutchError *reterr) {
        HostPattern p, *grown;
        int r;

        r = host_pattern_parse(text, &p, reterr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < *n; i++)
                if (pattern_equal(&(*list)[i], &p))
                        return 0;
        if (*n >= ALLOWLIST_ENTRIES_MAX)
                return hutch_error_set(reterr, E2BIG, "too many %s entries (at most %d)", what,
                                       ALLOWLIST_ENTRIES_MAX);
        grown = reallocarray(*list, *n + 1, sizeof(HostPattern));
        if (!grown)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        grown[(*n)++] = p;
        *list = grown;
        return 0;
}

int allowlist_add_allow(Allowlist *al, const char *text, HutchError *reterr) {
        if (!al)
                return -EINVAL;
        return allowlist_append(&al->allow, &al->n_allow, text, "allow", reterr);
}

int allowlist_add_deny(Allowlist *al, const char *text, HutchError *reterr) {
        if (!al)
                return -EINVAL;
        return allowlist_append(&al->deny, &al->n_deny, text, "deny", reterr);
}

int allowlist_add_private(Allowlist *al, const char *text, HutchError *reterr) {
        const char *reason = NULL;
        NetCidr c, *grown;
        int r;

        if (!al)
                return -EINVAL;
        r = net_cidr_parse(text, &c, &reason);
        if (r < 0)
                return hutch_error_set(reterr, EINVAL, "invalid address range '%s': %s",
                                       text ? text : "", reason);
        for (size_t i = 0; i < al->n_private_ok; i++)
                if (al->private_ok[i].prefixlen == c.prefixlen &&
                    net_addr_equal(&al->private_ok[i].addr, &c.addr))
                        return 0;
        if (al->n_private_ok >= ALLOWLIST_ENTRIES_MAX)
                return hutch_error_set(reterr, E2BIG,
                                       "too many --allow-private ranges (at most %d)",
                                       ALLOWLIST_ENTRIES_MAX);
        grown = reallocarray(al->private_ok, al->n_private_ok + 1, sizeof(NetCidr));
        if (!grown)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        grown[al->n_private_ok++] = c;
        al->private_ok = grown;
        return 0;
}

static bool port_matches(const HostPattern *p, uint16_t port, bool deny) {
        if (p->port != 0)
                return p->port == port;
        /* No port: deny entries cover every port, allow entries the web. */
        return deny || port == 80 || port == 443;
}

int allowlist_check_host(const Allowlist *al, const Host *h, uint16_t port,
                         const HostPattern **ret_rule) {
        if (!al || !h || port == 0)
                return -EINVAL;

        for (size_t i = 0; i < al->n_deny; i++)
                if (port_matches(&al->deny[i], port, true) &&
                    host_pattern_matches_host(&al->deny[i], h)) {
                        if (ret_rule)
                                *ret_rule = &al->deny[i];
                        return ALLOWLIST_DENY_RULE;
                }
        for (size_t i = 0; i < al->n_allow; i++)
                if (port_matches(&al->allow[i], port, false) &&
                    host_pattern_matches_host(&al->allow[i], h)) {
                        if (ret_rule)
                                *ret_rule = &al->allow[i];
                        return ALLOWLIST_ALLOW;
                }
        if (ret_rule)
                *ret_rule = NULL;
        return ALLOWLIST_DENY_UNLISTED;
}

int allowlist_check_address(const Allowlist *al, const NetAddr *a, const NetCidr **ret_range) {
        if (!al || !a)
                return -EINVAL;
        if (net_addr_is_public(a)) {
                if (ret_range)
                        *ret_range = NULL;
                return 1;
        }
        for (size_t i = 0; i < al->n_private_ok; i++)
                if (net_cidr_contains(&al->private_ok[i], a)) {
                        if (ret_range)
                                *ret_range = &al->private_ok[i];
                        return 1;
                }
        return 0;
}

/* The E2B server's allowlist ceiling (issue 20), here since issue 16 (h16x). */
bool host_pattern_within(char **ceiling, const char *entry) {
        HostPattern want;
        HutchError err = {};

        if (host_pattern_parse(entry, &want, &err) < 0)
                return false;
        STRV_FOREACH(c, ceiling) {
                HostPattern have;
                bool port_ok, host_ok = false;

                if (host_pattern_parse(*c, &have, &err) < 0)
                        continue;
                port_ok = have.port == 0 ? (want.port == 0 || want.port == 80 || want.port == 443)
                                         : want.port == have.port;
                if (!port_ok)
                        continue;
                switch (want.kind) {
                case HOST_PATTERN_EXACT: {
                        Host h = {.kind = HOST_KIND_NAME};

                        (void)snprintf(h.name, sizeof(h.name), "%s", want.name);
                        host_ok = have.kind != HOST_PATTERN_ADDRESS &&
                                  host_pattern_matches_host(&have, &h);
                        break;
                }
                case HOST_PATTERN_WILDCARD: {
                        size_t wl = strlen(want.name), hl = strlen(have.name);

                        host_ok = have.kind == HOST_PATTERN_WILDCARD &&
                                  (strcmp(want.name, have.name) == 0 ||
                                   (wl > hl + 1 && want.name[wl - hl - 1] == '.' &&
                                    strcmp(want.name + wl - hl, have.name) == 0));
                        break;
                }
                case HOST_PATTERN_ADDRESS:
                        host_ok = have.kind == HOST_PATTERN_ADDRESS &&
                                  strcmp(want.text, have.text) == 0;
                        break;
                case _HOST_PATTERN_KIND_MAX:
                case _HOST_PATTERN_KIND_INVALID:
                default:
                        break;
                }
                if (host_ok)
                        return true;
        }
        return false;
}
