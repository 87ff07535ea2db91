/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The refusal lines of `hutch run`/`hutch exec` (src/cli/refusals.c), from
 * the reasons hutch-proxy writes (src/proxy/proxy-server.c). */
#include <string.h>

#include "refusals.h"
#include "test.h"

static const char *fmt(const char *host, long long port, const char *reason, long long count) {
        static char buf[1024];

        refusal_format(host, port, reason, count, buf, sizeof(buf));
        return buf;
}

TEST(not_in_the_allowlist) {
        ASSERT_STREQ(fmt("files.example.org", 443,
                         "host 'files.example.org' port 443 is not in the allowlist", 1),
                     "refused files.example.org:443 (not in the allowlist; --allow-host "
                     "files.example.org)");
        ASSERT_STREQ(fmt("files.example.org", 80,
                         "host 'files.example.org' port 80 is not in the allowlist", 1),
                     "refused files.example.org:80 (not in the allowlist; --allow-host "
                     "files.example.org)");
        /* Another port must be in the flag, or the flag would not allow it. */
        ASSERT_STREQ(fmt("a.example.org", 8080,
                         "host 'a.example.org' port 8080 is not in the "
                         "allowlist",
                         3),
                     "refused a.example.org:8080 3 times (not in the allowlist; --allow-host "
                     "a.example.org:8080)");
        ASSERT_STREQ(
                fmt("2001:db8::1", 22, "host '2001:db8::1' port 22 is not in the allowlist", 1),
                "refused [2001:db8::1]:22 (not in the allowlist; --allow-host "
                "[2001:db8::1]:22)");
}

TEST(private_addresses) {
        ASSERT_STREQ(fmt("api.example.org", 443,
                         "host 'api.example.org' port 443 resolves to a private address 10.1.2.3 "
                         "(private); it needs --allow-private",
                         1),
                     "refused api.example.org:443 (a private address, 10.1.2.3; --allow-private "
                     "10.1.2.3/32)");
        ASSERT_STREQ(fmt("fd00::5", 80,
                         "address fd00::5 port 80 is a private address (unique-local); it needs "
                         "--allow-private",
                         1),
                     "refused [fd00::5]:80 (a private address, fd00::5; --allow-private "
                     "fd00::5/128)");
}

TEST(no_flag_allows_these) {
        ASSERT_STREQ(fmt("bad.example.org", 443,
                         "host 'bad.example.org' port 443 matches deny rule '*.example.org'", 1),
                     "refused bad.example.org:443 (matches --deny-host *.example.org)");
        ASSERT_STREQ(fmt("x.example.org", 443,
                         "tripwire: placeholder of TOKEN sent to x.example.org", 1),
                     "refused x.example.org:443 (tripwire: placeholder of TOKEN sent to "
                     "x.example.org)");
}

/* Transparent DNS: a refused query names no port. */
TEST(dns_refusals) {
        ASSERT_STREQ(fmt("other.example.test", 0,
                         "dns refused 'other.example.test': no exact --allow-host entry names it "
                         "(transparent DNS serves exact names only)",
                         2),
                     "refused other.example.test 2 times (dns refused 'other.example.test': no "
                     "exact --allow-host entry names it (transparent DNS serves exact names "
                     "only))");
}

TEST(cut_to_the_buffer) {
        char buf[16];

        refusal_format("files.example.org", 443, "whatever", 1, buf, sizeof(buf));
        ASSERT_EQ(strlen(buf), sizeof(buf) - 1);
}

DEFINE_TEST_MAIN
