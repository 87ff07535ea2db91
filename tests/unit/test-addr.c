/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "net/addr.h"
#include "test.h"

/* Parses @in and returns its canonical text in a static buffer, or NULL if
 * it is not an address. */
static const char *canon(const char *in) {
        static char buf[NET_ADDR_STRING_MAX];
        NetAddr a;

        if (net_addr_parse(in, strlen(in), &a) < 0)
                return NULL;
        if (net_addr_to_string(&a, buf, sizeof(buf)) < 0)
                return NULL;
        return buf;
}

TEST(parse_ipv4_spellings) {
        static const struct {
                const char *in, *out;
        } table[] = {
                {"127.0.0.1", "127.0.0.1"},
                {"2130706433", "127.0.0.1"},
                {"0x7f000001", "127.0.0.1"},
                {"0X7F000001", "127.0.0.1"},
                {"017700000001", "127.0.0.1"},
                {"0177.0.0.1", "127.0.0.1"},
                {"0x7f.0.0.1", "127.0.0.1"},
                {"0x7f.1", "127.0.0.1"},
                {"127.1", "127.0.0.1"},
                {"127.0.1", "127.0.0.1"},
                {"127.0.0.1.", "127.0.0.1"},
                {"0", "0.0.0.0"},
                {"00", "0.0.0.0"},
                {"0x0", "0.0.0.0"},
                {"169.254.43518", "169.254.169.254"},
                {"0xa9.0xfe.0xa9.0xfe", "169.254.169.254"},
                {"0251.0376.0251.0376", "169.254.169.254"},
                {"2852039166", "169.254.169.254"},
                {"255.255.255.255", "255.255.255.255"},
                {"4294967295", "255.255.255.255"},
                {"1.2.65535", "1.2.255.255"},
                {"1.16777215", "1.255.255.255"},
                {"08.1.1.1", NULL},
                {"09", NULL},
                {"0x", NULL},
                {"0xg", NULL},
                {"256.0.0.1", NULL},
                {"1.2.3.256", NULL},
                {"1.2.65536", NULL},
                {"1.16777216", NULL},
                {"4294967296", NULL},
                {"99999999999999999999999", NULL},
                {"1.2.3.4.5", NULL},
                {"1..2.3", NULL},
                {".1.2.3", NULL},
                {"1.2.3.4..", NULL},
                {".", NULL},
                {"1.2.3.4 ", NULL},
                {" 1.2.3.4", NULL},
                {"-1", NULL},
                {"+1", NULL},
                {"1.2.3.a", NULL},
                {"example.com", NULL},
                {"[127.0.0.1]", NULL},
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                const char *got = canon(table[i].in);

                if (!table[i].out) {
                        if (got)
                                fail_msg("'%s' parsed as '%s', expected failure", table[i].in, got);
                        continue;
                }
                if (!got || strcmp(got, table[i].out) != 0)
                        fail_msg("'%s' -> '%s', expected '%s'", table[i].in, got ? got : "(fail)",
                                 table[i].out);
        }
}

TEST(parse_ipv6_spellings) {
        static const struct {
                const char *in, *out;
        } table[] = {
                {"::1", "::1"},
                {"[::1]", "::1"},
                {"0:0:0:0:0:0:0:1", "::1"},
                {"::", "::"},
                {"FD00:EC2::254", "fd00:ec2::254"},
                {"2001:DB8:0:0:0:0:0:1", "2001:db8::1"},
                /* v4-mapped addresses become the IPv4 they map */
                {"::ffff:127.0.0.1", "127.0.0.1"},
                {"[::ffff:127.0.0.1]", "127.0.0.1"},
                {"::ffff:7f00:1", "127.0.0.1"},
                {"0:0:0:0:0:ffff:a9fe:a9fe", "169.254.169.254"},
                {"::127.0.0.1", "::127.0.0.1"},
                {"fe80::1%eth0", NULL},
                {"[fe80::1%25eth0]", NULL},
                {"[::1", NULL},
                {"::1]", NULL},
                {"[]", NULL},
                {"[::1]:80", NULL},
                {":::1", NULL},
                {"1::2::3", NULL},
                {"::ffff:0177.0.0.1", NULL},
                {"12345::", NULL},
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                const char *got = canon(table[i].in);

                if (!table[i].out) {
                        if (got)
                                fail_msg("'%s' parsed as '%s', expected failure", table[i].in, got);
                        continue;
                }
                if (!got || strcmp(got, table[i].out) != 0)
                        fail_msg("'%s' -> '%s', expected '%s'", table[i].in, got ? got : "(fail)",
                                 table[i].out);
        }
}

TEST(parse_bad_arguments) {
        NetAddr a;

        ASSERT_ERROR(net_addr_parse(NULL, 3, &a), EINVAL);
        ASSERT_ERROR(net_addr_parse("::1", 0, &a), EINVAL);
        ASSERT_ERROR(net_addr_parse("::1", 3, NULL), EINVAL);
        /* An embedded NUL must not cut the text short. */
        ASSERT_ERROR(net_addr_parse("::1\0zz", 6, &a), EINVAL);
        ASSERT_ERROR(net_addr_parse("1.2.3.4\0", 8, &a), EINVAL);
        /* Only @n bytes are read. */
        ASSERT_OK(net_addr_parse("10.0.0.1garbage", 8, &a));
        ASSERT_EQ(a.family, AF_INET);
        ASSERT_EQ(a.bytes[3], 1);
}

TEST(ends_in_number) {
        static const struct {
                const char *in;
                bool expect;
        } table[] = {
                {"127.0.0.1", true},   {"2130706433", true},   {"0x7f000001", true},
                {"example.123", true}, {"example.0x", true},   {"example.0x1f", true},
                {"1.2.3.4.", true},    {"example.com", false}, {"example.0x1g", false},
                {"123a", false},       {"a.b.", false},        {"1.2.3.4..", false},
                {"", false},           {".", false},           {"1e3", false},
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (net_host_ends_in_number(table[i].in, strlen(table[i].in)) != table[i].expect)
                        fail_msg("net_host_ends_in_number('%s') != %d", table[i].in,
                                 table[i].expect);
}

TEST(classify) {
        static const struct {
                const char *in;
                NetAddrClass expect;
        } table[] = {
                {"8.8.8.8", NET_ADDR_PUBLIC},
                {"1.1.1.1", NET_ADDR_PUBLIC},
                {"0.0.0.0", NET_ADDR_UNSPECIFIED},
                {"0.1.2.3", NET_ADDR_UNSPECIFIED},
                {"127.0.0.1", NET_ADDR_LOOPBACK},
                {"127.255.255.254", NET_ADDR_LOOPBACK},
                {"10.0.0.1", NET_ADDR_PRIVATE},
                {"172.16.0.1", NET_ADDR_PRIVATE},
                {"172.31.255.255", NET_ADDR_PRIVATE},
                {"172.32.0.1", NET_ADDR_PUBLIC},
                {"172.15.255.255", NET_ADDR_PUBLIC},
                {"192.168.1.1", NET_ADDR_PRIVATE},
                {"192.169.1.1", NET_ADDR_PUBLIC},
                {"100.64.0.1", NET_ADDR_CGNAT},
                {"100.127.255.255", NET_ADDR_CGNAT},
                {"100.128.0.1", NET_ADDR_PUBLIC},
                {"100.63.255.255", NET_ADDR_PUBLIC},
                {"169.254.1.1", NET_ADDR_LINK_LOCAL},
                {"169.254.169.254", NET_ADDR_METADATA},
                {"224.0.0.1", NET_ADDR_MULTICAST},
                {"239.255.255.255", NET_ADDR_MULTICAST},
                {"240.0.0.1", NET_ADDR_RESERVED},
                {"255.255.255.255", NET_ADDR_BROADCAST},
                {"192.0.0.8", NET_ADDR_RESERVED},
                {"192.0.2.1", NET_ADDR_RESERVED},
                {"198.51.100.1", NET_ADDR_RESERVED},
                {"203.0.113.1", NET_ADDR_RESERVED},
                {"198.18.0.1", NET_ADDR_RESERVED},
                {"198.19.255.255", NET_ADDR_RESERVED},
                {"198.20.0.1", NET_ADDR_PUBLIC},
                {"::", NET_ADDR_UNSPECIFIED},
                {"::1", NET_ADDR_LOOPBACK},
                {"::ffff:10.1.2.3", NET_ADDR_PRIVATE},
                {"::127.0.0.1", NET_ADDR_RESERVED},
                {"::ffff:0:127.0.0.1", NET_ADDR_RESERVED},
                {"fe80::1", NET_ADDR_LINK_LOCAL},
                {"febf::1", NET_ADDR_LINK_LOCAL},
                {"fec0::1", NET_ADDR_SITE_LOCAL},
                {"fc00::1", NET_ADDR_UNIQUE_LOCAL},
                {"fd12:3456::1", NET_ADDR_UNIQUE_LOCAL},
                {"fd00:ec2::254", NET_ADDR_METADATA},
                {"fd00:ec2::253", NET_ADDR_UNIQUE_LOCAL},
                {"ff02::1", NET_ADDR_MULTICAST},
                {"2606:4700::1111", NET_ADDR_PUBLIC},
                {"2002:7f00:1::", NET_ADDR_LOOPBACK},
                {"2002:a9fe:a9fe::1", NET_ADDR_METADATA},
                {"2002:0808:0808::", NET_ADDR_PUBLIC},
                {"64:ff9b::127.0.0.1", NET_ADDR_LOOPBACK},
                {"64:ff9b::10.0.0.1", NET_ADDR_PRIVATE},
                {"64:ff9b::8.8.8.8", NET_ADDR_PUBLIC},
                {"64:ff9b:1::1", NET_ADDR_RESERVED},
                {"2001::1", NET_ADDR_RESERVED},
                {"2001:db8::1", NET_ADDR_RESERVED},
                {"100::1", NET_ADDR_RESERVED},
                {"4000::1", NET_ADDR_RESERVED},
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                NetAddr a;
                NetAddrClass c;

                ASSERT_OK(net_addr_parse(table[i].in, strlen(table[i].in), &a));
                c = net_addr_classify(&a);
                if (c != table[i].expect)
                        fail_msg("classify('%s') = %s, expected %s", table[i].in,
                                 net_addr_class_to_string(c),
                                 net_addr_class_to_string(table[i].expect));
                ASSERT_EQ(net_addr_is_public(&a), table[i].expect == NET_ADDR_PUBLIC);
        }
}

TEST(class_strings) {
        for (NetAddrClass c = 0; c < _NET_ADDR_CLASS_MAX; c++) {
                const char *s = net_addr_class_to_string(c);

                ASSERT_NOT_NULL(s);
                ASSERT_EQ(net_addr_class_from_string(s), c);
        }
        ASSERT_NULL(net_addr_class_to_string(_NET_ADDR_CLASS_MAX));
        ASSERT_NULL(net_addr_class_to_string(_NET_ADDR_CLASS_INVALID));
        ASSERT_ERROR(net_addr_class_from_string("nope"), EINVAL);
        ASSERT_ERROR(net_addr_class_from_string(NULL), EINVAL);
}

TEST(to_string_errors) {
        NetAddr a = {.family = AF_INET, .bytes = {1, 2, 3, 4}};
        NetAddr bad = {.family = AF_UNIX};
        char small[4], buf[NET_ADDR_STRING_MAX];

        ASSERT_ERROR(net_addr_to_string(&a, small, sizeof(small)), ENOBUFS);
        ASSERT_ERROR(net_addr_to_string(&bad, buf, sizeof(buf)), EAFNOSUPPORT);
        ASSERT_ERROR(net_addr_to_string(NULL, buf, sizeof(buf)), EINVAL);
        ASSERT_OK(net_addr_to_string(&a, buf, sizeof(buf)));
        ASSERT_STREQ(buf, "1.2.3.4");
}

TEST(sockaddr_roundtrip) {
        struct sockaddr_storage ss;
        struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons(8080)};
        NetAddr a, b, bad = {.family = AF_UNIX};
        socklen_t len;
        uint16_t port;

        ASSERT_OK(net_addr_parse("::1", 3, &a));
        ASSERT_OK(net_addr_to_sockaddr(&a, 443, &ss, &len));
        ASSERT_EQ(len, sizeof(struct sockaddr_in6));
        ASSERT_OK(net_addr_from_sockaddr((struct sockaddr *)&ss, len, &b, &port));
        ASSERT_TRUE(net_addr_equal(&a, &b));
        ASSERT_EQ(port, 443);

        ASSERT_OK(net_addr_parse("10.1.2.3", 8, &a));
        ASSERT_OK(net_addr_to_sockaddr(&a, 80, &ss, &len));
        ASSERT_EQ(len, sizeof(struct sockaddr_in));
        ASSERT_OK(net_addr_from_sockaddr((struct sockaddr *)&ss, len, &b, NULL));
        ASSERT_TRUE(net_addr_equal(&a, &b));

        /* A v4-mapped socket address comes back as IPv4. */
        ASSERT_EQ(inet_pton(AF_INET6, "::ffff:127.0.0.1", &in6.sin6_addr), 1);
        ASSERT_OK(net_addr_from_sockaddr((struct sockaddr *)&in6, sizeof(in6), &b, &port));
        ASSERT_EQ(b.family, AF_INET);
        ASSERT_EQ(port, 8080);
        ASSERT_EQ(net_addr_classify(&b), NET_ADDR_LOOPBACK);

        ASSERT_ERROR(net_addr_from_sockaddr((struct sockaddr *)&in6, sizeof(struct sockaddr_in), &b,
                                            NULL),
                     EINVAL);
        ss.ss_family = AF_UNIX;
        ASSERT_ERROR(net_addr_from_sockaddr((struct sockaddr *)&ss, sizeof(ss), &b, NULL),
                     EAFNOSUPPORT);
        ASSERT_ERROR(net_addr_to_sockaddr(&bad, 80, &ss, &len), EAFNOSUPPORT);
        ASSERT_ERROR(net_addr_to_sockaddr(NULL, 80, &ss, &len), EINVAL);
}

TEST(cidr_parse) {
        static const struct {
                const char *in, *out;
        } table[] = {
                {"127.0.0.0/8", "127.0.0.0/8"},
                {"127.0.0.1", "127.0.0.1/32"},
                {"127.1/32", "127.0.0.1/32"},
                {"10.0.0.0/8", "10.0.0.0/8"},
                {"0.0.0.0/0", "0.0.0.0/0"},
                {"::1", "::1/128"},
                {"[::1]/128", "::1/128"},
                {"fd00::/8", "fd00::/8"},
                {"::/0", "::/0"},
                {"::ffff:127.0.0.0/104", "127.0.0.0/8"},
                {"::ffff:0.0.0.0/96", "0.0.0.0/0"},
                {"10.1.0.0/8", NULL},
                {"127.0.0.1/8", NULL},
                {"127.0.0.0/33", NULL},
                {"::/129", NULL},
                {"::ffff:127.0.0.0/95", NULL},
                {"127.0.0.0/", NULL},
                {"127.0.0.0/x", NULL},
                {"127.0.0.0/-1", NULL},
                {"/8", NULL},
                {"", NULL},
                {"example.com/8", NULL},
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                char buf[NET_CIDR_STRING_MAX];
                const char *reason = NULL;
                NetCidr c;
                int r;

                r = net_cidr_parse(table[i].in, &c, &reason);
                if (!table[i].out) {
                        if (r != -EINVAL || !reason)
                                fail_msg("'%s' parsed (r=%d), expected -EINVAL with a reason",
                                         table[i].in, r);
                        continue;
                }
                if (r < 0)
                        fail_msg("'%s' failed: %s", table[i].in, reason ? reason : "?");
                ASSERT_OK(net_cidr_to_string(&c, buf, sizeof(buf)));
                if (strcmp(buf, table[i].out) != 0)
                        fail_msg("'%s' -> '%s', expected '%s'", table[i].in, buf, table[i].out);
        }
}

TEST(cidr_contains) {
        static const struct {
                const char *cidr, *addr;
                bool expect;
        } table[] = {
                {"127.0.0.0/8", "127.0.0.1", true},
                {"127.0.0.0/8", "127.255.255.255", true},
                {"127.0.0.0/8", "128.0.0.0", false},
                {"127.0.0.0/8", "::1", false},
                {"127.0.0.0/8", "::ffff:127.0.0.1", true},
                {"169.254.169.254/32", "169.254.169.254", true},
                {"169.254.169.254/32", "169.254.169.253", false},
                {"10.0.0.0/9", "10.127.0.1", true},
                {"10.0.0.0/9", "10.128.0.1", false},
                {"0.0.0.0/0", "8.8.8.8", true},
                {"::1/128", "::1", true},
                {"::1/128", "::2", false},
                {"fd00::/8", "fd00:ec2::254", true},
                {"fe80::/10", "febf::1", true},
                {"fe80::/10", "fec0::1", false},
                {"::/0", "2001:db8::1", true},
                {"::/0", "127.0.0.1", false},
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                NetCidr c;
                NetAddr a;

                ASSERT_OK(net_cidr_parse(table[i].cidr, &c, NULL));
                ASSERT_OK(net_addr_parse(table[i].addr, strlen(table[i].addr), &a));
                if (net_cidr_contains(&c, &a) != table[i].expect)
                        fail_msg("%s contains %s != %d", table[i].cidr, table[i].addr,
                                 table[i].expect);
        }
        ASSERT_FALSE(net_cidr_contains(NULL, NULL));
}

TEST(cidr_errors) {
        NetCidr c = {};
        char small[4];

        ASSERT_ERROR(net_cidr_parse(NULL, &c, NULL), EINVAL);
        ASSERT_ERROR(net_cidr_parse("10.0.0.0/8", NULL, NULL), EINVAL);
        ASSERT_OK(net_cidr_parse("10.0.0.0/8", &c, NULL));
        ASSERT_ERROR(net_cidr_to_string(&c, small, sizeof(small)), ENOBUFS);
        ASSERT_ERROR(net_cidr_to_string(NULL, small, sizeof(small)), EINVAL);
}

DEFINE_TEST_MAIN
