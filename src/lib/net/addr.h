/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* IP addresses as the egress proxy sees them: parsed from every spelling a
 * resolver would accept, normalised to one canonical form, and classified
 * so the proxy can refuse non-public destinations.
 *
 * A NetAddr is a plain value (no allocation). An IPv4-mapped IPv6 address
 * (::ffff:a.b.c.d) is always stored as the IPv4 address it maps, so that
 * "::ffff:127.0.0.1" and "127.0.0.1" compare equal and classify alike.
 *
 * IPv4 spellings follow inet_aton(3) and the WHATWG URL standard, because
 * those are what clients and getaddrinfo() accept: one to four parts, each
 * decimal, octal (leading 0) or hex (0x); the last part fills the remaining
 * bytes ("127.1" is 127.0.0.1, "2130706433" is 127.0.0.1), and one trailing
 * dot is allowed. IPv6 is RFC 4291 text, optionally in brackets; zone ids
 * ("fe80::1%eth0") are refused. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "macro.h"

/* Long enough for any canonical address text plus the NUL. */
#define NET_ADDR_STRING_MAX 46
/* Long enough for "ADDR/128" plus the NUL. */
#define NET_CIDR_STRING_MAX (NET_ADDR_STRING_MAX + 4)

typedef struct NetAddr {
        int family; /* AF_INET or AF_INET6 */
        /* network byte order; IPv4 uses the first 4 bytes, the rest are 0 */
        uint8_t bytes[16];
} NetAddr;

typedef struct NetCidr {
        NetAddr addr;       /* host bits are zero */
        unsigned prefixlen; /* 0..32 for IPv4, 0..128 for IPv6 */
} NetCidr;

/* Why an address is not a public internet destination. Everything but
 * NET_ADDR_PUBLIC is refused by the proxy unless an --allow-private range
 * covers the address. */
typedef enum NetAddrClass {
        NET_ADDR_PUBLIC,
        NET_ADDR_UNSPECIFIED,  /* 0.0.0.0/8, :: (Linux routes 0.0.0.0 to the host) */
        NET_ADDR_LOOPBACK,     /* 127.0.0.0/8, ::1 */
        NET_ADDR_PRIVATE,      /* RFC 1918: 10/8, 172.16/12, 192.168/16 */
        NET_ADDR_LINK_LOCAL,   /* 169.254/16, fe80::/10 */
        NET_ADDR_CGNAT,        /* 100.64.0.0/10 (RFC 6598) */
        NET_ADDR_MULTICAST,    /* 224/4, ff00::/8 */
        NET_ADDR_BROADCAST,    /* 255.255.255.255 */
        NET_ADDR_METADATA,     /* cloud instance metadata: 169.254.169.254, fd00:ec2::254 */
        NET_ADDR_UNIQUE_LOCAL, /* fc00::/7 (RFC 4193) */
        NET_ADDR_SITE_LOCAL,   /* fec0::/10 (deprecated, still routable on some hosts) */
        NET_ADDR_RESERVED,     /* documentation, benchmarking, 240/4, IETF, Teredo, ... */
        _NET_ADDR_CLASS_MAX,
        _NET_ADDR_CLASS_INVALID = -EINVAL,
} NetAddrClass;

const char *net_addr_class_to_string(NetAddrClass c);
NetAddrClass net_addr_class_from_string(const char *s);

/* Parses the @n bytes at @s (need not be NUL-terminated) as an IPv4 address
 * in any of the spellings above, or an IPv6 address with or without
 * brackets. Writes @ret only on success. Returns 0, or -EINVAL if the text
 * is not an IP address (including out-of-range parts, "08", "1.2.3.4.5",
 * empty parts, zone ids and surrounding space). */
int net_addr_parse(const char *s, size_t n, NetAddr *ret);

/* Returns true if the host text @s of @n bytes "ends in a number" (WHATWG
 * URL): its last dot-separated label, after one trailing dot is dropped, is
 * all decimal digits or "0x" followed by hex digits. Such a host is an IPv4
 * address or nothing: resolvers would read it as one, so it must never be
 * matched as a DNS name. */
bool net_host_ends_in_number(const char *s, size_t n);

/* Writes the canonical text of @a into @buf of @size bytes (at least
 * NET_ADDR_STRING_MAX): dotted quad, or RFC 5952 IPv6 without brackets.
 * Returns 0, or -ENOBUFS if @size is too small, -EAFNOSUPPORT for a bad
 * family. */
int net_addr_to_string(const NetAddr *a, char *buf, size_t size);

bool net_addr_equal(const NetAddr *a, const NetAddr *b);

/* Converts a socket address (AF_INET or AF_INET6; a v4-mapped AF_INET6 is
 * stored as IPv4) into @ret and, when @ret_port is non-NULL, its port.
 * Returns 0 or -EAFNOSUPPORT / -EINVAL for a short @len. */
int net_addr_from_sockaddr(const struct sockaddr *sa, socklen_t len, NetAddr *ret,
                           uint16_t *ret_port);

/* Fills @ret (zeroed first) with @a and @port; writes its length to
 * @ret_len. Returns 0 or -EAFNOSUPPORT. */
int net_addr_to_sockaddr(const NetAddr *a, uint16_t port, struct sockaddr_storage *ret,
                         socklen_t *ret_len);

/* Classifies @a. An IPv6 address that embeds an IPv4 address the network
 * would deliver to (6to4 2002::/16, NAT64 64:ff9b::/96) takes the class of
 * the embedded address, so 2002:7f00:1:: is loopback while a NAT64 address
 * of a public host stays public (DNS64 networks need it). Teredo
 * (2001::/32), local-use NAT64 (64:ff9b:1::/48) and IPv4-compatible
 * addresses (::a.b.c.d) are RESERVED outright: no allowlisted service needs
 * them and their embedding is ambiguous. Never fails. */
NetAddrClass net_addr_classify(const NetAddr *a);

static inline bool net_addr_is_public(const NetAddr *a) {
        return net_addr_classify(a) == NET_ADDR_PUBLIC;
}

/* Parses "ADDR/LEN" or a bare ADDR (a host route: /32 or /128). ADDR takes
 * any spelling net_addr_parse() accepts, brackets included; a v4-mapped
 * IPv6 range with LEN >= 96 becomes the IPv4 range. Writes @ret only on success. Returns 0,
 * or -EINVAL with @reterr_reason (when non-NULL) set to a static description:
 * bad address, bad or too long prefix length, or host bits set
 * ("10.1.0.0/8": write 10.0.0.0/8). */
int net_cidr_parse(const char *s, NetCidr *ret, const char **reterr_reason);

/* Returns true if @a lies within @c (families must agree). */
bool net_cidr_contains(const NetCidr *c, const NetAddr *a);

/* Writes "ADDR/LEN" into @buf (at least NET_CIDR_STRING_MAX bytes).
 * Returns 0 or -ENOBUFS. */
int net_cidr_to_string(const NetCidr *c, char *buf, size_t size);
