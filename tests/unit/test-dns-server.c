/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <string.h>

#include "dns-server.h"
#include "proxy-config.h"
#include "test.h"

/* What hutch-proxy's transparent resolver answers, decided against the
 * live allowlist (src/proxy/dns-server.c). */

static size_t make_query(uint8_t *buf, const char *name, uint16_t qtype, uint16_t qclass) {
        size_t n = DNS_HEADER_SIZE;

        memset(buf, 0, DNS_HEADER_SIZE);
        buf[0] = 0x42;
        buf[5] = 1;
        while (*name) {
                size_t l = strcspn(name, ".");

                buf[n++] = (uint8_t)l;
                memcpy(buf + n, name, l);
                n += l;
                name += l;
                if (*name == '.')
                        name++;
        }
        buf[n++] = 0;
        buf[n++] = (uint8_t)(qtype >> 8);
        buf[n++] = (uint8_t)qtype;
        buf[n++] = (uint8_t)(qclass >> 8);
        buf[n++] = (uint8_t)qclass;
        return n;
}

typedef struct Answer {
        size_t len;
        unsigned rcode;
        unsigned n_answers;
        uint32_t addr; /* host order, of the one A record */
        char refused[HOST_NAME_MAX_LEN + 1];
        char reason[1024];
} Answer;

static Answer ask(const ProxyConfig *c, const DnsTable *t, const char *name, uint16_t qtype,
                  uint16_t qclass) {
        uint8_t q[DNS_PACKET_MAX], out[DNS_PACKET_MAX];
        size_t n = make_query(q, name, qtype, qclass);
        Answer a = {};

        a.len = dns_server_answer(c, t, q, n, out, a.refused, sizeof(a.refused), a.reason,
                                  sizeof(a.reason));
        if (a.len >= DNS_HEADER_SIZE) {
                a.rcode = out[3] & 0xf;
                a.n_answers = out[7];
                if (a.n_answers == 1 && a.len == n + 16)
                        a.addr = (uint32_t)out[n + 12] << 24 | (uint32_t)out[n + 13] << 16 |
                                 (uint32_t)out[n + 14] << 8 | out[n + 15];
        }
        return a;
}

static void setup(ProxyConfig *c, DnsTable *t) {
        ASSERT_OK(allowlist_add_allow(c->allowlist, "allowed.test:8080", NULL));
        ASSERT_OK(allowlist_add_allow(c->allowlist, "denied.test", NULL));
        ASSERT_OK(allowlist_add_allow(c->allowlist, "*.wild.test", NULL));
        ASSERT_OK(allowlist_add_deny(c->allowlist, "denied.test", NULL));
        ASSERT_OK(dns_table_add(t, c->allowlist->allow, c->allowlist->n_allow, NULL));
}

TEST(answers) {
        _cleanup_(proxy_config_freep) ProxyConfig *c = proxy_config_new();
        _cleanup_(dns_table_done) DnsTable t = {};
        Answer a;

        ASSERT_NOT_NULL(c);
        setup(c, &t);

        a = ask(c, &t, "Allowed.TEST", DNS_TYPE_A, DNS_CLASS_IN);
        ASSERT_EQ(a.rcode, DNS_RCODE_NOERROR);
        ASSERT_EQ(a.n_answers, 1);
        ASSERT_EQ(a.addr, 0x7f4d0001);
        ASSERT_STREQ(a.refused, "");

        /* AAAA: the name exists, no IPv6 address. */
        a = ask(c, &t, "allowed.test", DNS_TYPE_AAAA, DNS_CLASS_IN);
        ASSERT_EQ(a.rcode, DNS_RCODE_NOERROR);
        ASSERT_EQ(a.n_answers, 0);
        ASSERT_STREQ(a.refused, "");

        /* Other types and classes: REFUSED, no audit line. */
        a = ask(c, &t, "allowed.test", 15 /* MX */, DNS_CLASS_IN);
        ASSERT_EQ(a.rcode, DNS_RCODE_REFUSED);
        ASSERT_EQ(a.n_answers, 0);
        a = ask(c, &t, "allowed.test", DNS_TYPE_A, 3 /* CH */);
        ASSERT_EQ(a.rcode, DNS_RCODE_REFUSED);
        ASSERT_STREQ(a.refused, "");
}

TEST(refusals) {
        _cleanup_(proxy_config_freep) ProxyConfig *c = proxy_config_new();
        _cleanup_(dns_table_done) DnsTable t = {};
        Answer a;

        ASSERT_NOT_NULL(c);
        setup(c, &t);

        /* Not allowed at all: NXDOMAIN, named for the audit line. */
        a = ask(c, &t, "other.test", DNS_TYPE_A, DNS_CLASS_IN);
        ASSERT_EQ(a.rcode, DNS_RCODE_NXDOMAIN);
        ASSERT_EQ(a.n_answers, 0);
        ASSERT_STREQ(a.refused, "other.test");
        ASSERT_TRUE(strstr(a.reason, "dns refused 'other.test'") != NULL);
        a = ask(c, &t, "other.test", DNS_TYPE_AAAA, DNS_CLASS_IN);
        ASSERT_EQ(a.rcode, DNS_RCODE_NXDOMAIN);

        /* Allowed, but a deny rule wins. */
        a = ask(c, &t, "denied.test", DNS_TYPE_A, DNS_CLASS_IN);
        ASSERT_EQ(a.rcode, DNS_RCODE_NXDOMAIN);
        ASSERT_TRUE(strstr(a.reason, "deny rule 'denied.test'") != NULL);

        /* Wildcards are not served (their names are unknown in advance). */
        a = ask(c, &t, "a.wild.test", DNS_TYPE_A, DNS_CLASS_IN);
        ASSERT_EQ(a.rcode, DNS_RCODE_NXDOMAIN);
        ASSERT_TRUE(strstr(a.reason, "exact names only") != NULL);

        /* A suffix, a prefix, the root: not the allowed name. */
        a = ask(c, &t, "allowed.test.evil.test", DNS_TYPE_A, DNS_CLASS_IN);
        ASSERT_EQ(a.rcode, DNS_RCODE_NXDOMAIN);
        a = ask(c, &t, "xallowed.test", DNS_TYPE_A, DNS_CLASS_IN);
        ASSERT_EQ(a.rcode, DNS_RCODE_NXDOMAIN);
        a = ask(c, &t, "", DNS_TYPE_A, DNS_CLASS_IN);
        ASSERT_EQ(a.rcode, DNS_RCODE_NXDOMAIN);
}

TEST(policy_change) {
        _cleanup_(proxy_config_freep) ProxyConfig *c = proxy_config_new();
        _cleanup_(proxy_config_freep) ProxyConfig *next = NULL;
        _cleanup_(dns_table_done) DnsTable t = {};
        static const char doc[] =
                "{\"allow\": [\"new.test\"], \"deny\": [], \"allow_private\": [], "
                "\"resolve\": []}";
        HutchError e = {};
        Answer a;

        ASSERT_NOT_NULL(c);
        setup(c, &t);
        ASSERT_OK(proxy_config_load_policy(doc, strlen(doc), &next, &e));
        proxy_config_swap_policy(c, next);

        /* The table is the start's: a name the new policy dropped is
         * refused at once, a name it added has no listener and no answer. */
        a = ask(c, &t, "allowed.test", DNS_TYPE_A, DNS_CLASS_IN);
        ASSERT_EQ(a.rcode, DNS_RCODE_NXDOMAIN);
        ASSERT_TRUE(strstr(a.reason, "the policy changed") != NULL);
        a = ask(c, &t, "new.test", DNS_TYPE_A, DNS_CLASS_IN);
        ASSERT_EQ(a.rcode, DNS_RCODE_NXDOMAIN);
}

TEST(malformed) {
        _cleanup_(proxy_config_freep) ProxyConfig *c = proxy_config_new();
        _cleanup_(dns_table_done) DnsTable t = {};
        uint8_t q[DNS_PACKET_MAX], out[DNS_PACKET_MAX];
        char name[HOST_NAME_MAX_LEN + 1], reason[512];
        size_t n;

        ASSERT_NOT_NULL(c);
        setup(c, &t);
        n = make_query(q, "allowed.test", DNS_TYPE_A, DNS_CLASS_IN);

        /* A response or a runt: no answer at all. */
        q[2] = 0x80;
        ASSERT_EQ(dns_server_answer(c, &t, q, n, out, name, sizeof(name), reason, sizeof(reason)),
                  0);
        q[2] = 0;
        ASSERT_EQ(dns_server_answer(c, &t, q, 5, out, name, sizeof(name), reason, sizeof(reason)),
                  0);
        /* Cut: FORMERR, header only. */
        ASSERT_EQ(
                dns_server_answer(c, &t, q, n - 1, out, name, sizeof(name), reason, sizeof(reason)),
                DNS_HEADER_SIZE);
        ASSERT_EQ(out[3] & 0xf, DNS_RCODE_FORMERR);
        /* Another opcode: NOTIMP. */
        q[2] = 0x28;
        ASSERT_EQ(dns_server_answer(c, &t, q, n, out, name, sizeof(name), reason, sizeof(reason)),
                  DNS_HEADER_SIZE);
        ASSERT_EQ(out[3] & 0xf, DNS_RCODE_NOTIMP);
        ASSERT_STREQ(name, "");
}

DEFINE_TEST_MAIN
