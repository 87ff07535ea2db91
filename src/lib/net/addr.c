/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "net/addr.h"
#include "parse-util.h"
#include "string-table.h"

static const char *const net_addr_class_table[_NET_ADDR_CLASS_MAX] = {
        [NET_ADDR_PUBLIC] = "public",         [NET_ADDR_UNSPECIFIED] = "unspecified",
        [NET_ADDR_LOOPBACK] = "loopback",     [NET_ADDR_PRIVATE] = "private",
        [NET_ADDR_LINK_LOCAL] = "link-local", [NET_ADDR_CGNAT] = "cgnat",
        [NET_ADDR_MULTICAST] = "multicast",   [NET_ADDR_BROADCAST] = "broadcast",
        [NET_ADDR_METADATA] = "metadata",     [NET_ADDR_UNIQUE_LOCAL] = "unique-local",
        [NET_ADDR_SITE_LOCAL] = "site-local", [NET_ADDR_RESERVED] = "reserved",
};

DEFINE_STRING_TABLE_LOOKUP(net_addr_class, NetAddrClass, net_addr_class_table);

/* One part of an inet_aton()-style IPv4 address: decimal, octal with a
 * leading 0, or hex with 0x. Values above @max are refused, which also keeps
 * the accumulator from overflowing (@max < 2^32). */
static int parse_v4_part(const char *s, size_t n, uint32_t max, uint32_t *ret) {
        unsigned base = 10;
        uint64_t v = 0;

        if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
                base = 16;
                s += 2;
                n -= 2;
        } else if (n >= 2 && s[0] == '0') {
                base = 8;
                s++;
                n--;
        }
        if (n == 0)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                int d = hex_digit(s[i]);

                if (d < 0 || (unsigned)d >= base)
                        return -EINVAL;
                v = v * base + (unsigned)d;
                if (v > max)
                        return -EINVAL;
        }
        *ret = (uint32_t)v;
        return 0;
}

static int parse_v4(const char *s, size_t n, NetAddr *ret) {
        uint32_t parts[4], value = 0;
        size_t n_parts = 0, start = 0;
        int r;

        /* One trailing dot is part of the spelling (WHATWG), two are not. */
        if (n > 0 && s[n - 1] == '.')
                n--;
        if (n == 0)
                return -EINVAL;

        for (size_t i = 0; i <= n; i++) {
                if (i < n && s[i] != '.')
                        continue;
                if (n_parts == ELEMENTSOF(parts))
                        return -EINVAL;
                /* All parts but the last are single bytes; the last fills
                 * the bytes that are left. */
                r = parse_v4_part(s + start, i - start, UINT32_MAX, &parts[n_parts]);
                if (r < 0)
                        return r;
                n_parts++;
                start = i + 1;
        }

        for (size_t i = 0; i + 1 < n_parts; i++) {
                if (parts[i] > 255)
                        return -EINVAL;
                value |= parts[i] << (24 - 8 * i);
        }
        if ((uint64_t)parts[n_parts - 1] >= (UINT64_C(1) << (8 * (5 - n_parts))))
                return -EINVAL;
        value |= parts[n_parts - 1];

        *ret = (NetAddr){.family = AF_INET};
        ret->bytes[0] = (uint8_t)(value >> 24);
        ret->bytes[1] = (uint8_t)(value >> 16);
        ret->bytes[2] = (uint8_t)(value >> 8);
        ret->bytes[3] = (uint8_t)value;
        return 0;
}

static bool v6_is_v4_mapped(const uint8_t b[16]) {
        static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

        return memcmp(b, prefix, sizeof(prefix)) == 0;
}

/* Stores the IPv6 bytes @b, unmapping ::ffff:a.b.c.d to IPv4. */
static void net_addr_set_v6(NetAddr *a, const uint8_t b[16]) {
        *a = (NetAddr){.family = AF_INET6};
        if (v6_is_v4_mapped(b)) {
                a->family = AF_INET;
                memcpy(a->bytes, b + 12, 4);
        } else
                memcpy(a->bytes, b, 16);
}

static int parse_v6(const char *s, size_t n, NetAddr *ret) {
        char buf[INET6_ADDRSTRLEN];
        uint8_t b[16];

        if (n > 0 && s[0] == '[') {
                if (n < 2 || s[n - 1] != ']')
                        return -EINVAL;
                s++;
                n -= 2;
        }
        /* SECURITY: inet_pton() reads a C string: an embedded NUL would cut
         * the text short and accept "::1\0garbage". */
        if (n == 0 || n >= sizeof(buf) || memchr(s, '\0', n))
                return -EINVAL;
        memcpy(buf, s, n);
        buf[n] = '\0';
        if (inet_pton(AF_INET6, buf, b) != 1)
                return -EINVAL;
        net_addr_set_v6(ret, b);
        return 0;
}

int net_addr_parse(const char *s, size_t n, NetAddr *ret) {
        NetAddr a;
        int r;

        if (!s || !ret || n == 0)
                return -EINVAL;
        if (memchr(s, ':', n) || s[0] == '[')
                r = parse_v6(s, n, &a);
        else
                r = parse_v4(s, n, &a);
        if (r < 0)
                return r;
        *ret = a;
        return 0;
}

bool net_host_ends_in_number(const char *s, size_t n) {
        size_t start;

        if (!s || n == 0)
                return false;
        if (s[n - 1] == '.')
                n--;
        if (n == 0)
                return false;
        start = n;
        while (start > 0 && s[start - 1] != '.')
                start--;
        s += start;
        n -= start;
        if (n == 0)
                return false;
        if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
                for (size_t i = 2; i < n; i++)
                        if (hex_digit(s[i]) < 0)
                                return false;
                return true;
        }
        for (size_t i = 0; i < n; i++)
                if (s[i] < '0' || s[i] > '9')
                        return false;
        return true;
}

int net_addr_to_string(const NetAddr *a, char *buf, size_t size) {
        char tmp[NET_ADDR_STRING_MAX];
        size_t len;

        if (!a || !buf)
                return -EINVAL;
        if (a->family != AF_INET && a->family != AF_INET6)
                return -EAFNOSUPPORT;
        if (!inet_ntop(a->family, a->bytes, tmp, sizeof(tmp)))
                return negative_errno();
        len = strlen(tmp);
        if (len >= size)
                return -ENOBUFS;
        memcpy(buf, tmp, len + 1);
        return 0;
}

bool net_addr_equal(const NetAddr *a, const NetAddr *b) {
        return a->family == b->family &&
               memcmp(a->bytes, b->bytes, a->family == AF_INET ? 4 : 16) == 0;
}

int net_addr_from_sockaddr(const struct sockaddr *sa, socklen_t len, NetAddr *ret,
                           uint16_t *ret_port) {
        NetAddr a = {};
        uint16_t port;

        if (!sa || !ret)
                return -EINVAL;
        if (sa->sa_family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

                if (len < (socklen_t)sizeof(*in))
                        return -EINVAL;
                a.family = AF_INET;
                memcpy(a.bytes, &in->sin_addr, 4);
                port = ntohs(in->sin_port);
        } else if (sa->sa_family == AF_INET6) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

                if (len < (socklen_t)sizeof(*in6))
                        return -EINVAL;
                net_addr_set_v6(&a, in6->sin6_addr.s6_addr);
                port = ntohs(in6->sin6_port);
        } else
                return -EAFNOSUPPORT;

        *ret = a;
        if (ret_port)
                *ret_port = port;
        return 0;
}

int net_addr_to_sockaddr(const NetAddr *a, uint16_t port, struct sockaddr_storage *ret,
                         socklen_t *ret_len) {
        if (!a || !ret || !ret_len)
                return -EINVAL;
        if (a->family == AF_INET) {
                struct sockaddr_in *in = (struct sockaddr_in *)ret;

                memset(ret, 0, sizeof(*ret));
                in->sin_family = AF_INET;
                in->sin_port = htons(port);
                memcpy(&in->sin_addr, a->bytes, 4);
                *ret_len = sizeof(*in);
                return 0;
        }
        if (a->family == AF_INET6) {
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ret;

                memset(ret, 0, sizeof(*ret));
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons(port);
                memcpy(&in6->sin6_addr, a->bytes, 16);
                *ret_len = sizeof(*in6);
                return 0;
        }
        return -EAFNOSUPPORT;
}

static NetAddrClass classify_v4(const uint8_t b[4]) {
        if (b[0] == 0)
                return NET_ADDR_UNSPECIFIED;
        if (b[0] == 127)
                return NET_ADDR_LOOPBACK;
        if (b[0] == 10 || (b[0] == 172 && (b[1] & 0xf0) == 16) || (b[0] == 192 && b[1] == 168))
                return NET_ADDR_PRIVATE;
        if (b[0] == 100 && (b[1] & 0xc0) == 64)
                return NET_ADDR_CGNAT;
        if (b[0] == 169 && b[1] == 254)
                return b[2] == 169 && b[3] == 254 ? NET_ADDR_METADATA : NET_ADDR_LINK_LOCAL;
        if (b[0] >= 224 && b[0] <= 239)
                return NET_ADDR_MULTICAST;
        if (b[0] == 255 && b[1] == 255 && b[2] == 255 && b[3] == 255)
                return NET_ADDR_BROADCAST;
        if (b[0] >= 240)
                return NET_ADDR_RESERVED;
        /* 192.0.0.0/24 IETF assignments, 192.0.2.0/24, 198.51.100.0/24 and
         * 203.0.113.0/24 documentation, 198.18.0.0/15 benchmarking. */
        if ((b[0] == 192 && b[1] == 0 && (b[2] == 0 || b[2] == 2)) ||
            (b[0] == 198 && b[1] == 51 && b[2] == 100) ||
            (b[0] == 203 && b[1] == 0 && b[2] == 113) || (b[0] == 198 && (b[1] & 0xfe) == 18))
                return NET_ADDR_RESERVED;
        return NET_ADDR_PUBLIC;
}

static bool bytes_zero(const uint8_t *b, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (b[i] != 0)
                        return false;
        return true;
}

static NetAddrClass classify_v6(const uint8_t b[16]) {
        static const uint8_t metadata[16] = {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0,    0,
                                             0,    0,    0,    0,    0, 0, 0x02, 0x54};
        static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};

        if (bytes_zero(b, 16))
                return NET_ADDR_UNSPECIFIED;
        if (bytes_zero(b, 15) && b[15] == 1)
                return NET_ADDR_LOOPBACK;
        if (v6_is_v4_mapped(b))
                return classify_v4(b + 12);
        /* IPv4-compatible (::a.b.c.d) and ::ffff:0:a.b.c.d (SIIT). */
        if (bytes_zero(b, 8))
                return NET_ADDR_RESERVED;
        if (memcmp(b, metadata, 16) == 0)
                return NET_ADDR_METADATA;
        if (b[0] == 0xff)
                return NET_ADDR_MULTICAST;
        if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
                return NET_ADDR_LINK_LOCAL;
        if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)
                return NET_ADDR_SITE_LOCAL;
        if ((b[0] & 0xfe) == 0xfc)
                return NET_ADDR_UNIQUE_LOCAL;
        /* NAT64 well-known prefix: the packet goes to the embedded IPv4. */
        if (memcmp(b, nat64, sizeof(nat64)) == 0)
                return classify_v4(b + 12);
        /* 6to4: a relay would deliver to the embedded IPv4 address. */
        if (b[0] == 0x20 && b[1] == 0x02)
                return classify_v4(b + 2);
        /* Teredo 2001::/32 and documentation 2001:db8::/32. */
        if (b[0] == 0x20 && b[1] == 0x01 &&
            ((b[2] == 0 && b[3] == 0) || (b[2] == 0x0d && b[3] == 0xb8)))
                return NET_ADDR_RESERVED;
        /* Everything outside global unicast 2000::/3 that is not named above
         * (64:ff9b:1::/48 local-use NAT64, 100::/64 discard, unallocated
         * space) has no business being an egress destination. */
        if ((b[0] & 0xe0) != 0x20)
                return NET_ADDR_RESERVED;
        return NET_ADDR_PUBLIC;
}

NetAddrClass net_addr_classify(const NetAddr *a) {
        assert(a);
        if (a->family == AF_INET)
                return classify_v4(a->bytes);
        return classify_v6(a->bytes);
}

static bool prefix_matches(const uint8_t *a, const uint8_t *b, unsigned prefixlen) {
        size_t full = prefixlen / 8;
        unsigned rest = prefixlen % 8;

        if (memcmp(a, b, full) != 0)
                return false;
        if (rest == 0)
                return true;
        return ((a[full] ^ b[full]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

static bool host_bits_zero(const NetAddr *a, unsigned prefixlen) {
        size_t total = a->family == AF_INET ? 4 : 16;

        for (size_t i = 0; i < total; i++) {
                unsigned bit0 = (unsigned)i * 8;
                uint8_t mask;

                if (bit0 + 8 <= prefixlen)
                        continue;
                mask = bit0 >= prefixlen ? 0xff : (uint8_t)(0xff >> (prefixlen - bit0));
                if (a->bytes[i] & mask)
                        return false;
        }
        return true;
}

static int cidr_fail(const char **reterr_reason, const char *reason) {
        if (reterr_reason)
                *reterr_reason = reason;
        return -EINVAL;
}

int net_cidr_parse(const char *s, NetCidr *ret, const char **reterr_reason) {
        const char *slash;
        unsigned max, prefixlen;
        bool v6_text;
        NetAddr a;
        int r;

        if (!s || !ret)
                return cidr_fail(reterr_reason, "no range given");
        slash = strchr(s, '/');
        v6_text = strchr(s, ':') != NULL;
        r = net_addr_parse(s, slash ? (size_t)(slash - s) : strlen(s), &a);
        if (r < 0)
                return cidr_fail(reterr_reason, "not an IP address");
        max = a.family == AF_INET ? 32 : 128;
        prefixlen = max;

        if (slash) {
                uint32_t v;

                r = safe_atou32(slash + 1, &v);
                if (r < 0)
                        return cidr_fail(reterr_reason, "the prefix length is not a number");
                /* A v4-mapped range is written with an IPv6 prefix length. */
                if (v6_text && a.family == AF_INET) {
                        if (v < 96 || v > 128)
                                return cidr_fail(
                                        reterr_reason,
                                        "a v4-mapped range needs a prefix length of 96 to 128");
                        v -= 96;
                }
                if (v > max)
                        return cidr_fail(reterr_reason,
                                         "the prefix length is too long for the address family");
                prefixlen = v;
        }

        if (!host_bits_zero(&a, prefixlen))
                return cidr_fail(reterr_reason, "host bits are set after the prefix");

        *ret = (NetCidr){.addr = a, .prefixlen = prefixlen};
        return 0;
}

bool net_cidr_contains(const NetCidr *c, const NetAddr *a) {
        if (!c || !a || c->addr.family != a->family)
                return false;
        return prefix_matches(c->addr.bytes, a->bytes, c->prefixlen);
}

int net_cidr_to_string(const NetCidr *c, char *buf, size_t size) {
        char tmp[NET_ADDR_STRING_MAX];
        int r, n;

        if (!c || !buf)
                return -EINVAL;
        r = net_addr_to_string(&c->addr, tmp, sizeof(tmp));
        if (r < 0)
                return r;
        n = snprintf(buf, size, "%s/%u", tmp, c->prefixlen);
        if (n < 0 || (size_t)n >= size)
                return -ENOBUFS;
        return 0;
}
