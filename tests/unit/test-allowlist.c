/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <netinet/in.h>

#include "net/allowlist.h"
#include "test.h"

TEST(pattern_parse_ok) {
        static const struct {
                const char *in;
                HostPatternKind kind;
                const char *name;
                uint16_t port;
                const char *text;
        } table[] = {
                {"example.com", HOST_PATTERN_EXACT, "example.com", 0, "example.com"},
                {"Example.COM", HOST_PATTERN_EXACT, "example.com", 0, "example.com"},
                {"example.com.", HOST_PATTERN_EXACT, "example.com", 0, "example.com"},
                {"example.com:8443", HOST_PATTERN_EXACT, "example.com", 8443, "example.com:8443"},
                {"example.com.:1", HOST_PATTERN_EXACT, "example.com", 1, "example.com:1"},
                {"localhost:65535", HOST_PATTERN_EXACT, "localhost", 65535, "localhost:65535"},
                {"*.example.com", HOST_PATTERN_WILDCARD, "example.com", 0, "*.example.com"},
                {"*.Example.Com.:443", HOST_PATTERN_WILDCARD, "example.com", 443,
                 "*.example.com:443"},
                {"*.com", HOST_PATTERN_WILDCARD, "com", 0, "*.com"},
                {"xn--bcher-kva.example", HOST_PATTERN_EXACT, "xn--bcher-kva.example", 0,
                 "xn--bcher-kva.example"},
                {"_srv.example.com", HOST_PATTERN_EXACT, "_srv.example.com", 0, "_srv.example.com"},
                {"a-b.c-d.e", HOST_PATTERN_EXACT, "a-b.c-d.e", 0, "a-b.c-d.e"},
                {"127.0.0.1", HOST_PATTERN_ADDRESS, "127.0.0.1", 0, "127.0.0.1"},
                {"127.1:8080", HOST_PATTERN_ADDRESS, "127.0.0.1", 8080, "127.0.0.1:8080"},
                {"2130706433", HOST_PATTERN_ADDRESS, "127.0.0.1", 0, "127.0.0.1"},
                {"0x7f000001:80", HOST_PATTERN_ADDRESS, "127.0.0.1", 80, "127.0.0.1:80"},
                {"[::1]", HOST_PATTERN_ADDRESS, "::1", 0, "[::1]"},
                {"[::1]:443", HOST_PATTERN_ADDRESS, "::1", 443, "[::1]:443"},
                {"[::ffff:127.0.0.1]", HOST_PATTERN_ADDRESS, "127.0.0.1", 0, "127.0.0.1"},
                {"[2001:DB8::1]:8080", HOST_PATTERN_ADDRESS, "2001:db8::1", 8080,
                 "[2001:db8::1]:8080"},
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                HostPattern p;
                HutchError e = {};
                int r;

                r = host_pattern_parse(table[i].in, &p, &e);
                if (r < 0)
                        fail_msg("'%s' failed: %s", table[i].in, e.msg);
                ASSERT_EQ(p.kind, table[i].kind);
                ASSERT_STREQ(p.name, table[i].name);
                ASSERT_EQ(p.port, table[i].port);
                ASSERT_STREQ(p.text, table[i].text);
        }
}

TEST(pattern_parse_errors) {
        static const struct {
                const char *in, *reason;
        } table[] = {
                {"", "empty"},
                {"*.", "a wildcard needs a domain"},
                {"*..", "a wildcard needs a domain"},
                {"*", "a wildcard must be a whole leading label"},
                {"*foo.com", "a wildcard must be a whole leading label"},
                {"foo.*.com", "a wildcard must be a whole leading label"},
                {"foo.com.*", "a wildcard must be a whole leading label"},
                {"**.foo.com", "a wildcard must be a whole leading label"},
                {"*.*.foo.com", "only one leading"},
                {"*.127.0.0.1", "cannot cover an IP address"},
                {"*.[::1]", "cannot cover an IP address"},
                {"*.foo.123", "cannot cover an IP address"},
                {"a..b", "empty label"},
                {".a.b", "empty label"},
                {"a.b..", "empty label"},
                {".", "empty"},
                {"-a.com", "starts with '-'"},
                {"a-.com", "ends with '-'"},
                {"a.com-", "ends with '-'"},
                {"exa mple.com", "a character other than"},
                {"exa%6dple.com", "a character other than"},
                {"ex\xc3\xa4mple.com", "a character other than"},
                {"user@example.com", "a character other than"},
                {"example.com/path", "a character other than"},
                {"a\tb", "a character other than"},
                {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com",
                 "longer than 63"},
                {"example.com:0", "out of range"},
                {"example.com:65536", "out of range"},
                {"example.com:99999999999", "out of range"},
                {"example.com:", "port is empty"},
                {"example.com:http", "not a number"},
                {"example.com:-1", "not a number"},
                {"example.com:+80", "not a number"},
                {"example.com: 80", "not a number"},
                {":80", "host is empty"},
                {"::1", "in brackets"},
                {"fe80::1:443", "in brackets"},
                {"[::1", "without a closing"},
                {"[::1]x", "unexpected text"},
                {"[::1]:", "port is empty"},
                {"[::1]:0", "out of range"},
                {"[127.0.0.1]", "not a valid IPv6"},
                {"[fe80::1%eth0]", "not a valid IPv6"},
                {"[]", "not a valid IPv6"},
                {"256.1.1.1", "not a valid IPv4"},
                {"1.2.3.4.5", "not a valid IPv4"},
                {"08.0.0.1", "not a valid IPv4"},
                {"example.0x", "not a valid IPv4"},
                {"foo.123", "not a valid IPv4"},
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                HostPattern p;
                HutchError e = {};
                char quoted[600];
                int r;

                r = host_pattern_parse(table[i].in, &p, &e);
                if (r != -EINVAL)
                        fail_msg("'%s': r=%d, expected -EINVAL (text '%s')", table[i].in, r,
                                 r >= 0 ? p.text : "");
                ASSERT_EQ(e.errnum, EINVAL);
                /* The message names the pattern and says what is wrong. */
                (void)snprintf(quoted, sizeof(quoted), "'%s'", table[i].in);
                if (!strstr(e.msg, quoted))
                        fail_msg("message for '%s' does not quote it: %s", table[i].in, e.msg);
                if (!strstr(e.msg, table[i].reason))
                        fail_msg("message for '%s' lacks '%s': %s", table[i].in, table[i].reason,
                                 e.msg);
        }
}

TEST(pattern_parse_lengths) {
        char name[300], label[70];
        HostPattern p;
        HutchError e = {};

        /* 63-byte labels are fine, 64 are not. */
        memset(label, 'a', 63);
        label[63] = '\0';
        (void)snprintf(name, sizeof(name), "%s.com", label);
        ASSERT_OK(host_pattern_parse(name, &p, &e));

        /* 253 bytes (plus a trailing dot) is the longest name. */
        memset(name, 0, sizeof(name));
        for (size_t i = 0; i < 253; i++)
                name[i] = (i % 2 == 0) ? 'a' : '.';
        ASSERT_OK(host_pattern_parse(name, &p, &e));
        ASSERT_EQ(strlen(p.name), 253);
        name[253] = '.';
        ASSERT_OK(host_pattern_parse(name, &p, &e));
        name[253] = '.';
        name[254] = 'a';
        ASSERT_ERROR(host_pattern_parse(name, &p, &e), EINVAL);
        ASSERT_TRUE(strstr(e.msg, "longer than 253") != NULL);

        /* Absurdly long input is refused without being echoed whole. */
        {
                char big[2048];

                memset(big, 'a', sizeof(big) - 1);
                big[sizeof(big) - 1] = '\0';
                ASSERT_ERROR(host_pattern_parse(big, &p, &e), EINVAL);
                ASSERT_TRUE(strstr(e.msg, "too long") != NULL);
        }
        ASSERT_ERROR(host_pattern_parse(NULL, &p, &e), EINVAL);
        ASSERT_ERROR(host_pattern_parse("example.com", NULL, &e), EINVAL);
        /* reterr is optional */
        ASSERT_ERROR(host_pattern_parse("*.", &p, NULL), EINVAL);
}

TEST(host_parse_table) {
        static const struct {
                const char *in;
                int r;
                HostKind kind;
                const char *name;
        } table[] = {
                {"Example.COM", 0, HOST_KIND_NAME, "example.com"},
                {"example.com.", 0, HOST_KIND_NAME, "example.com"},
                {"127.0.0.1", 0, HOST_KIND_ADDRESS, "127.0.0.1"},
                {"2130706433", 0, HOST_KIND_ADDRESS, "127.0.0.1"},
                {"0x7f.1", 0, HOST_KIND_ADDRESS, "127.0.0.1"},
                {"0177.0.0.1", 0, HOST_KIND_ADDRESS, "127.0.0.1"},
                {"127.0.0.1.", 0, HOST_KIND_ADDRESS, "127.0.0.1"},
                {"[::1]", 0, HOST_KIND_ADDRESS, "::1"},
                {"[::FFFF:127.0.0.1]", 0, HOST_KIND_ADDRESS, "127.0.0.1"},
                {"1.0x7g", 0, HOST_KIND_NAME, "1.0x7g"},
                {"::1", -EINVAL, 0, NULL},
                {"", -EINVAL, 0, NULL},
                {"a..b", -EINVAL, 0, NULL},
                {"example.com..", -EINVAL, 0, NULL},
                {"1.2.3.999", -EINVAL, 0, NULL},
                {"evil.127", -EINVAL, 0, NULL},
                {"*.example.com", -EINVAL, 0, NULL},
                {"exa mple", -EINVAL, 0, NULL},
                {"[::1]:80", -EINVAL, 0, NULL},
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                Host h = {.kind = _HOST_KIND_INVALID};
                int r;

                r = host_parse(table[i].in, strlen(table[i].in), &h);
                if (r != table[i].r)
                        fail_msg("host_parse('%s') = %d, expected %d", table[i].in, r, table[i].r);
                if (r < 0) {
                        /* ret untouched on failure */
                        ASSERT_EQ(h.kind, _HOST_KIND_INVALID);
                        continue;
                }
                ASSERT_EQ(h.kind, table[i].kind);
                ASSERT_STREQ(h.name, table[i].name);
        }
        ASSERT_ERROR(host_parse("a", 1, NULL), EINVAL);
        ASSERT_ERROR(host_parse(NULL, 1, &(Host){}), EINVAL);
}

static Allowlist *make(const char *const *allow, const char *const *deny,
                       const char *const *private_ok) {
        Allowlist *al = allowlist_new();
        HutchError e = {};

        assert_non_null(al);
        for (size_t i = 0; allow && allow[i]; i++)
                if (allowlist_add_allow(al, allow[i], &e) < 0)
                        fail_msg("allow '%s': %s", allow[i], e.msg);
        for (size_t i = 0; deny && deny[i]; i++)
                if (allowlist_add_deny(al, deny[i], &e) < 0)
                        fail_msg("deny '%s': %s", deny[i], e.msg);
        for (size_t i = 0; private_ok && private_ok[i]; i++)
                if (allowlist_add_private(al, private_ok[i], &e) < 0)
                        fail_msg("private '%s': %s", private_ok[i], e.msg);
        return al;
}

/* Returns the verdict for @host (as a request spells it) port @port, with
 * the deciding rule's text in @rule. */
static int check(const Allowlist *al, const char *host, uint16_t port, const char **rule) {
        const HostPattern *p = NULL;
        Host h;
        int r;

        r = host_parse(host, strlen(host), &h);
        if (r < 0)
                return r;
        r = allowlist_check_host(al, &h, port, &p);
        *rule = p ? p->text : NULL;
        return r;
}

TEST(match_table) {
        static const char *const allow[] = {
                "example.com", "*.example.org",   "api.test:8443",   "127.0.0.1:8080",
                "[::1]:9000",  "*.wild.test:443", "bad.example.org", NULL};
        static const char *const deny[] = {"bad.example.org", "*.evil.example.org", NULL};
        static const struct {
                const char *host;
                uint16_t port;
                AllowlistVerdict expect;
                const char *rule;
        } table[] = {
                {"example.com", 443, ALLOWLIST_ALLOW, "example.com"},
                {"example.com", 80, ALLOWLIST_ALLOW, "example.com"},
                {"EXAMPLE.com", 443, ALLOWLIST_ALLOW, "example.com"},
                {"example.com.", 443, ALLOWLIST_ALLOW, "example.com"},
                {"example.com", 8080, ALLOWLIST_DENY_UNLISTED, NULL},
                {"example.com", 22, ALLOWLIST_DENY_UNLISTED, NULL},
                {"www.example.com", 443, ALLOWLIST_DENY_UNLISTED, NULL},
                {"example.com.evil.test", 443, ALLOWLIST_DENY_UNLISTED, NULL},
                {"evilexample.com", 443, ALLOWLIST_DENY_UNLISTED, NULL},
                {"xexample.com", 443, ALLOWLIST_DENY_UNLISTED, NULL},
                {"example.co", 443, ALLOWLIST_DENY_UNLISTED, NULL},
                /* wildcard vs apex */
                {"example.org", 443, ALLOWLIST_DENY_UNLISTED, NULL},
                {"a.example.org", 443, ALLOWLIST_ALLOW, "*.example.org"},
                {"a.b.c.example.org", 80, ALLOWLIST_ALLOW, "*.example.org"},
                {"A.Example.Org.", 80, ALLOWLIST_ALLOW, "*.example.org"},
                {"evilexample.org", 443, ALLOWLIST_DENY_UNLISTED, NULL},
                {"a.example.org.evil.test", 443, ALLOWLIST_DENY_UNLISTED, NULL},
                {"a.example.org", 444, ALLOWLIST_DENY_UNLISTED, NULL},
                /* deny wins, on every port */
                {"bad.example.org", 443, ALLOWLIST_DENY_RULE, "bad.example.org"},
                {"bad.example.org", 8080, ALLOWLIST_DENY_RULE, "bad.example.org"},
                {"x.evil.example.org", 443, ALLOWLIST_DENY_RULE, "*.evil.example.org"},
                {"evil.example.org", 443, ALLOWLIST_ALLOW, "*.example.org"},
                /* explicit ports replace the defaults */
                {"api.test", 8443, ALLOWLIST_ALLOW, "api.test:8443"},
                {"api.test", 443, ALLOWLIST_DENY_UNLISTED, NULL},
                {"api.test", 80, ALLOWLIST_DENY_UNLISTED, NULL},
                {"x.wild.test", 443, ALLOWLIST_ALLOW, "*.wild.test:443"},
                {"x.wild.test", 80, ALLOWLIST_DENY_UNLISTED, NULL},
                /* addresses in every spelling match only address entries */
                {"127.0.0.1", 8080, ALLOWLIST_ALLOW, "127.0.0.1:8080"},
                {"2130706433", 8080, ALLOWLIST_ALLOW, "127.0.0.1:8080"},
                {"0x7f000001", 8080, ALLOWLIST_ALLOW, "127.0.0.1:8080"},
                {"0177.0.0.1", 8080, ALLOWLIST_ALLOW, "127.0.0.1:8080"},
                {"127.1", 8080, ALLOWLIST_ALLOW, "127.0.0.1:8080"},
                {"[::ffff:127.0.0.1]", 8080, ALLOWLIST_ALLOW, "127.0.0.1:8080"},
                {"127.0.0.1", 443, ALLOWLIST_DENY_UNLISTED, NULL},
                {"127.0.0.2", 8080, ALLOWLIST_DENY_UNLISTED, NULL},
                {"[::1]", 9000, ALLOWLIST_ALLOW, "[::1]:9000"},
                {"[0:0::1]", 9000, ALLOWLIST_ALLOW, "[::1]:9000"},
                {"[::1]", 8080, ALLOWLIST_DENY_UNLISTED, NULL},
        };
        _cleanup_(allowlist_freep) Allowlist *al = make(allow, deny, NULL);

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                const char *rule = "unset";
                int r;

                r = check(al, table[i].host, table[i].port, &rule);
                if (r != (int)table[i].expect)
                        fail_msg("%s:%u: %s, expected %s", table[i].host, table[i].port,
                                 r >= 0 ? allowlist_verdict_to_string(r) : strerror(-r),
                                 allowlist_verdict_to_string(table[i].expect));
                if ((rule == NULL) != (table[i].rule == NULL) ||
                    (rule && strcmp(rule, table[i].rule) != 0))
                        fail_msg("%s:%u: rule %s, expected %s", table[i].host, table[i].port,
                                 rule ? rule : "(none)", table[i].rule ? table[i].rule : "(none)");
        }
}

TEST(empty_allows_nothing) {
        _cleanup_(allowlist_freep) Allowlist *al = allowlist_new();
        const char *rule = "unset";

        ASSERT_NOT_NULL(al);
        ASSERT_EQ(check(al, "example.com", 443, &rule), ALLOWLIST_DENY_UNLISTED);
        ASSERT_NULL(rule);
        ASSERT_EQ(check(al, "127.0.0.1", 80, &rule), ALLOWLIST_DENY_UNLISTED);
}

TEST(check_bad_arguments) {
        _cleanup_(allowlist_freep) Allowlist *al = allowlist_new();
        Host h;
        NetAddr a;

        ASSERT_OK(host_parse("example.com", 11, &h));
        ASSERT_ERROR(allowlist_check_host(al, &h, 0, NULL), EINVAL);
        ASSERT_ERROR(allowlist_check_host(NULL, &h, 443, NULL), EINVAL);
        ASSERT_ERROR(allowlist_check_host(al, NULL, 443, NULL), EINVAL);
        ASSERT_EQ(allowlist_check_host(al, &h, 443, NULL), ALLOWLIST_DENY_UNLISTED);
        ASSERT_OK(net_addr_parse("8.8.8.8", 7, &a));
        ASSERT_ERROR(allowlist_check_address(NULL, &a, NULL), EINVAL);
        ASSERT_ERROR(allowlist_check_address(al, NULL, NULL), EINVAL);
        ASSERT_ERROR(allowlist_add_allow(NULL, "a", NULL), EINVAL);
        ASSERT_ERROR(allowlist_add_deny(NULL, "a", NULL), EINVAL);
        ASSERT_ERROR(allowlist_add_private(NULL, "10.0.0.0/8", NULL), EINVAL);
        ASSERT_NULL(allowlist_free(NULL));
}

TEST(add_errors) {
        _cleanup_(allowlist_freep) Allowlist *al = allowlist_new();
        HutchError e = {};
        char buf[32];

        ASSERT_ERROR(allowlist_add_allow(al, "*foo.com", &e), EINVAL);
        ASSERT_TRUE(strstr(e.msg, "'*foo.com'") != NULL);
        ASSERT_ERROR(allowlist_add_deny(al, "a..b", &e), EINVAL);
        ASSERT_TRUE(strstr(e.msg, "'a..b'") != NULL);
        ASSERT_ERROR(allowlist_add_private(al, "10.1.0.0/8", &e), EINVAL);
        ASSERT_TRUE(strstr(e.msg, "'10.1.0.0/8'") != NULL);
        ASSERT_TRUE(strstr(e.msg, "host bits") != NULL);
        ASSERT_ERROR(allowlist_add_private(al, "example.com", &e), EINVAL);
        ASSERT_ERROR(allowlist_add_private(al, NULL, &e), EINVAL);
        ASSERT_EQ(al->n_allow + al->n_deny + al->n_private_ok, 0);

        /* Duplicates are kept once. */
        ASSERT_OK(allowlist_add_allow(al, "Example.com", &e));
        ASSERT_OK(allowlist_add_allow(al, "example.com.", &e));
        ASSERT_EQ(al->n_allow, 1);
        ASSERT_OK(allowlist_add_private(al, "127.0.0.0/8", &e));
        ASSERT_OK(allowlist_add_private(al, "::ffff:127.0.0.0/104", &e));
        ASSERT_EQ(al->n_private_ok, 1);

        /* The cap. */
        for (unsigned i = al->n_allow; i < ALLOWLIST_ENTRIES_MAX; i++) {
                (void)snprintf(buf, sizeof(buf), "h%u.test", i);
                ASSERT_OK(allowlist_add_allow(al, buf, &e));
        }
        ASSERT_EQ(al->n_allow, ALLOWLIST_ENTRIES_MAX);
        ASSERT_ERROR(allowlist_add_allow(al, "one-more.test", &e), E2BIG);
        ASSERT_EQ(e.errnum, E2BIG);
        /* A duplicate still succeeds at the cap. */
        ASSERT_OK(allowlist_add_allow(al, "example.com", &e));
}

TEST(private_cap) {
        _cleanup_(allowlist_freep) Allowlist *al = allowlist_new();
        HutchError e = {};
        char buf[64];

        for (unsigned i = 0; i < ALLOWLIST_ENTRIES_MAX; i++) {
                (void)snprintf(buf, sizeof(buf), "10.%u.%u.0/24", i / 256, i % 256);
                ASSERT_OK(allowlist_add_private(al, buf, &e));
        }
        ASSERT_ERROR(allowlist_add_private(al, "192.168.0.0/16", &e), E2BIG);
        ASSERT_EQ(e.errnum, E2BIG);
}

TEST(check_address) {
        static const char *const private_ok[] = {"127.0.0.0/8", "fd00::/8", NULL};
        static const struct {
                const char *addr;
                int expect;
                const char *range;
        } table[] = {
                {"8.8.8.8", 1, NULL},
                {"2606:4700::1111", 1, NULL},
                {"127.0.0.1", 1, "127.0.0.0/8"},
                {"::ffff:127.0.0.1", 1, "127.0.0.0/8"},
                {"fd00:ec2::254", 1, "fd00::/8"},
                {"::1", 0, NULL},
                {"169.254.169.254", 0, NULL},
                {"10.0.0.1", 0, NULL},
                {"100.64.0.1", 0, NULL},
                {"0.0.0.0", 0, NULL},
                {"224.0.0.1", 0, NULL},
                {"fe80::1", 0, NULL},
                {"2002:7f00:1::", 0, NULL},
        };
        _cleanup_(allowlist_freep) Allowlist *al = make(NULL, NULL, private_ok);
        _cleanup_(allowlist_freep) Allowlist *strict = allowlist_new();

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                const NetCidr *c = (const NetCidr *)1;
                char buf[NET_CIDR_STRING_MAX];
                NetAddr a;
                int r;

                ASSERT_OK(net_addr_parse(table[i].addr, strlen(table[i].addr), &a));
                r = allowlist_check_address(al, &a, &c);
                if (r != table[i].expect)
                        fail_msg("check_address(%s) = %d, expected %d", table[i].addr, r,
                                 table[i].expect);
                if (r == 1 && table[i].range) {
                        ASSERT_NOT_NULL(c);
                        ASSERT_OK(net_cidr_to_string(c, buf, sizeof(buf)));
                        ASSERT_STREQ(buf, table[i].range);
                } else if (r == 1)
                        ASSERT_NULL(c);
                /* Without ranges only public addresses pass. */
                ASSERT_EQ(allowlist_check_address(strict, &a, NULL), table[i].range ? 0 : r);
        }
}

TEST(matches_host_kinds) {
        HostPattern p;
        Host h;

        ASSERT_OK(host_pattern_parse("127.0.0.1", &p, NULL));
        /* A name never matches an address entry, even a numeric-looking one. */
        ASSERT_OK(host_parse("localhost", 9, &h));
        ASSERT_FALSE(host_pattern_matches_host(&p, &h));
        ASSERT_OK(host_pattern_parse("localhost", &p, NULL));
        ASSERT_OK(host_parse("127.0.0.1", 9, &h));
        ASSERT_FALSE(host_pattern_matches_host(&p, &h));
        ASSERT_OK(host_pattern_parse("*.test", &p, NULL));
        ASSERT_FALSE(host_pattern_matches_host(&p, &h));
        ASSERT_OK(host_parse("test", 4, &h));
        ASSERT_FALSE(host_pattern_matches_host(&p, &h));
        ASSERT_ERROR(host_parse(".test", 5, &(Host){}), EINVAL);
        ASSERT_FALSE(host_pattern_matches_host(NULL, &h));
        ASSERT_FALSE(host_pattern_matches_host(&p, NULL));
}

TEST(enum_strings) {
        for (HostPatternKind k = 0; k < _HOST_PATTERN_KIND_MAX; k++)
                ASSERT_EQ(host_pattern_kind_from_string(host_pattern_kind_to_string(k)), k);
        ASSERT_NULL(host_pattern_kind_to_string(_HOST_PATTERN_KIND_MAX));
        ASSERT_ERROR(host_pattern_kind_from_string("x"), EINVAL);
        ASSERT_ERROR(host_pattern_kind_from_string(NULL), EINVAL);
        for (AllowlistVerdict v = 0; v < _ALLOWLIST_VERDICT_MAX; v++)
                ASSERT_EQ(allowlist_verdict_from_string(allowlist_verdict_to_string(v)), v);
        ASSERT_NULL(allowlist_verdict_to_string(_ALLOWLIST_VERDICT_INVALID));
        ASSERT_ERROR(allowlist_verdict_from_string("x"), EINVAL);
        ASSERT_ERROR(allowlist_verdict_from_string(NULL), EINVAL);
}

DEFINE_TEST_MAIN
