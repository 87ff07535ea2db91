/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The egress allowlist: which hosts and ports a sandbox may reach through
 * hutch-proxy, and which non-public address ranges it may reach at all.
 * docs/network.md is the user-facing reference.
 *
 * Entries are "PATTERN[:PORT]". PATTERN is an exact DNS name
 * ("api.github.com"), a wildcard "*.example.com" (one or more labels on the
 * left, never the apex), an IPv4 address in any spelling ("127.1",
 * "0x7f000001") or a bracketed IPv6 address ("[::1]"). Names are
 * case-folded and one trailing dot is removed. Without a PORT an allow entry
 * covers ports 80 and 443 and a deny entry covers every port. Deny entries
 * win over allow entries. An empty allowlist allows nothing.
 *
 * Names and addresses never match each other: "127.0.0.1" in a request only
 * matches an address entry, and a name only matches a name or wildcard
 * entry. Whether the address a name resolves to may be used is a separate
 * check (allowlist_check_address()): non-public addresses need an
 * --allow-private range, whatever the host entries say.
 *
 * An Allowlist owns its entries. Caps: ALLOWLIST_ENTRIES_MAX per list. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hutch-error.h"
#include "macro.h"
#include "net/addr.h"

#define HOST_NAME_MAX_LEN 253
#define HOST_LABEL_MAX_LEN 63
/* "[" + longest IPv6 text + "]" or "*." + longest name, ":65535", NUL. */
#define HOST_PATTERN_STRING_MAX (HOST_NAME_MAX_LEN + 2 + 6 + 1)
#define ALLOWLIST_ENTRIES_MAX 4096

typedef enum HostKind {
        HOST_KIND_NAME,
        HOST_KIND_ADDRESS,
        _HOST_KIND_MAX,
        _HOST_KIND_INVALID = -EINVAL,
} HostKind;

/* A host as a request names it, normalised. */
typedef struct Host {
        HostKind kind;
        /* NAME: lowercased, no trailing dot. ADDRESS: the canonical address
         * text (IPv6 without brackets). */
        char name[HOST_NAME_MAX_LEN + 1];
        NetAddr addr; /* ADDRESS only */
} Host;

typedef enum HostPatternKind {
        HOST_PATTERN_EXACT,
        HOST_PATTERN_WILDCARD,
        HOST_PATTERN_ADDRESS,
        _HOST_PATTERN_KIND_MAX,
        _HOST_PATTERN_KIND_INVALID = -EINVAL,
} HostPatternKind;

typedef struct HostPattern {
        HostPatternKind kind;
        /* EXACT: the name; WILDCARD: the domain after "*."; ADDRESS: the
         * canonical address text. */
        char name[HOST_NAME_MAX_LEN + 1];
        NetAddr addr;  /* ADDRESS only */
        uint16_t port; /* 0 when the entry names no port */
        /* The canonical spelling, for messages and the audit log:
         * "*.example.com:8443", "[::1]", "127.0.0.1". */
        char text[HOST_PATTERN_STRING_MAX];
} HostPattern;

const char *host_pattern_kind_to_string(HostPatternKind k);
HostPatternKind host_pattern_kind_from_string(const char *s);

/* Normalises the host part of a request target (no port) of @n bytes at @s:
 * a DNS name (letters, digits, '-', '_'; labels of 1-63 bytes, not starting
 * or ending with '-'; at most 253 bytes without the trailing dot), an IPv4
 * address in any spelling, or a bracketed IPv6 address. A host that ends in
 * a number (net_host_ends_in_number()) must be a valid IPv4 address.
 * Writes @ret only on success. Returns 0 or -EINVAL (also for an empty
 * host, a percent-encoded or non-ASCII name, or an unbracketed IPv6). */
int host_parse(const char *s, size_t n, Host *ret);

/* Parses one "PATTERN[:PORT]" entry. Writes @ret only on success. Returns
 * 0, or -EINVAL with @reterr naming the entry: empty, too long, malformed
 * name ("a..b", bad characters, long labels), a misplaced wildcard ("*.",
 * "*foo.com", "foo.*.com", "*"), a wildcard over an address, an unbracketed
 * IPv6 address, or a port that is empty, not a number, 0 or > 65535. */
int host_pattern_parse(const char *text, HostPattern *ret, HutchError *reterr);

/* Returns true if @h is covered by the host part of @p, ignoring ports. A
 * wildcard matches one or more labels on the left and never the apex:
 * "*.example.com" matches "a.b.example.com", not "example.com" nor
 * "evilexample.com". */
bool host_pattern_matches_host(const HostPattern *p, const Host *h);

/* Whether allow entry @entry ("PATTERN[:PORT]") is within an entry of
 * @ceiling (a strv, e.g. hutch serve --e2b's --allow-host; NULL: none): a
 * name the ceiling's name or wildcard covers, a wildcard at or under the
 * ceiling's wildcard, the same address; on a port the ceiling entry allows
 * (no port: 80 and 443). A malformed entry is false. */
bool host_pattern_within(char **ceiling, const char *entry);

typedef struct Allowlist {
        HostPattern *allow;
        size_t n_allow;
        HostPattern *deny;
        size_t n_deny;
        NetCidr *private_ok; /* --allow-private ranges */
        size_t n_private_ok;
} Allowlist;

/* Returns an empty allowlist (which allows nothing), or NULL on OOM. */
Allowlist *allowlist_new(void);
Allowlist *allowlist_free(Allowlist *al);
DEFINE_POINTER_CLEANUP(Allowlist, allowlist_free)

/* Parse @text with host_pattern_parse() and append it to the allow or deny
 * list. Returns 0, -EINVAL (see host_pattern_parse()), -E2BIG beyond
 * ALLOWLIST_ENTRIES_MAX or -ENOMEM, with @reterr filled. A duplicate entry
 * is accepted and kept once. */
int allowlist_add_allow(Allowlist *al, const char *text, HutchError *reterr);
int allowlist_add_deny(Allowlist *al, const char *text, HutchError *reterr);

/* Parses @text with net_cidr_parse() and appends it to the ranges of
 * non-public addresses that may be connected to. Returns 0, -EINVAL naming
 * the range and why, -E2BIG or -ENOMEM, with @reterr filled. */
int allowlist_add_private(Allowlist *al, const char *text, HutchError *reterr);

typedef enum AllowlistVerdict {
        ALLOWLIST_ALLOW,         /* an allow entry matched and no deny entry did */
        ALLOWLIST_DENY_RULE,     /* a deny entry matched */
        ALLOWLIST_DENY_UNLISTED, /* no entry matched */
        _ALLOWLIST_VERDICT_MAX,
        _ALLOWLIST_VERDICT_INVALID = -EINVAL,
} AllowlistVerdict;

const char *allowlist_verdict_to_string(AllowlistVerdict v);
AllowlistVerdict allowlist_verdict_from_string(const char *s);

/* Decides whether @h port @port may be reached. Deny entries are checked
 * first and win. Returns the verdict (>= 0); on ALLOW and DENY_RULE
 * @ret_rule (when non-NULL) points at the deciding entry, borrowed from
 * @al; on DENY_UNLISTED it is set to NULL. -EINVAL for NULL arguments or
 * port 0. */
int allowlist_check_host(const Allowlist *al, const Host *h, uint16_t port,
                         const HostPattern **ret_rule);

/* Decides whether a connection to @a may be made: 1 if @a is public or an
 * --allow-private range covers it (@ret_range then points at that range,
 * or NULL for a public address), 0 if not. -EINVAL for NULL arguments. */
int allowlist_check_address(const Allowlist *al, const NetAddr *a, const NetCidr **ret_range);
