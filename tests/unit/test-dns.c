/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "net/dns-packet.h"
#include "net/dns-table.h"
#include "policy/policy.h"
#include "test.h"

/* Builds a query for @name (dotted, as given: case kept) into @buf;
 * returns its length. */
static size_t make_query(uint8_t *buf, uint16_t id, const char *name, uint16_t qtype) {
        size_t n = DNS_HEADER_SIZE;

        memset(buf, 0, DNS_HEADER_SIZE);
        buf[0] = (uint8_t)(id >> 8);
        buf[1] = (uint8_t)id;
        buf[2] = 0x01; /* RD */
        buf[5] = 1;    /* QDCOUNT */
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
        buf[n++] = 0;
        buf[n++] = DNS_CLASS_IN;
        return n;
}

TEST(query_parse_ok) {
        uint8_t q[DNS_PACKET_MAX];
        size_t n = make_query(q, 0x1234, "AlLoWeD.Test", DNS_TYPE_A);
        DnsRequest r;

        ASSERT_OK(dns_query_parse(q, n, &r));
        ASSERT_EQ(r.id, 0x1234);
        ASSERT_STREQ(r.name, "allowed.test");
        ASSERT_EQ(r.qtype, DNS_TYPE_A);
        ASSERT_EQ(r.qclass, DNS_CLASS_IN);
        ASSERT_EQ(r.question_end, n);

        /* An EDNS OPT record (one additional record) is allowed. */
        q[11] = 1;
        ASSERT_OK(dns_query_parse(q, n, &r));
        /* The root. */
        n = make_query(q, 1, "", DNS_TYPE_A);
        ASSERT_OK(dns_query_parse(q, n, &r));
        ASSERT_STREQ(r.name, "");
}

TEST(query_parse_errors) {
        uint8_t q[DNS_PACKET_MAX], big[1024];
        size_t n = make_query(q, 7, "a.test", DNS_TYPE_A);
        char label[70], name[300];
        DnsRequest r = {};

        /* Runts and responses: dropped, @ret untouched. */
        ASSERT_ERROR(dns_query_parse(q, DNS_HEADER_SIZE - 1, &r), EPROTO);
        ASSERT_ERROR(dns_query_parse(NULL, n, &r), EPROTO);
        q[2] |= 0x80;
        r.id = 99;
        ASSERT_ERROR(dns_query_parse(q, n, &r), EPROTO);
        ASSERT_EQ(r.id, 99);
        q[2] &= 0x7f;

        /* Other opcodes: NOTIMP, with the id. */
        q[2] |= 0x10; /* opcode 2 (STATUS) */
        ASSERT_ERROR(dns_query_parse(q, n, &r), EOPNOTSUPP);
        ASSERT_EQ(r.id, 7);
        ASSERT_EQ(r.question_end, 0);
        q[2] &= (uint8_t)~0x78;

        /* Counts. */
        q[5] = 2;
        ASSERT_ERROR(dns_query_parse(q, n, &r), EBADMSG);
        q[5] = 0;
        ASSERT_ERROR(dns_query_parse(q, n, &r), EBADMSG);
        q[5] = 1;
        q[7] = 1;
        ASSERT_ERROR(dns_query_parse(q, n, &r), EBADMSG);
        q[7] = 0;
        q[9] = 1;
        ASSERT_ERROR(dns_query_parse(q, n, &r), EBADMSG);
        q[9] = 0;
        q[11] = 2;
        ASSERT_ERROR(dns_query_parse(q, n, &r), EBADMSG);
        q[11] = 0;

        /* Truncated anywhere in the question. */
        for (size_t cut = DNS_HEADER_SIZE; cut < n; cut++) {
                ASSERT_ERROR(dns_query_parse(q, cut, &r), EBADMSG);
                ASSERT_EQ(r.id, 7);
                ASSERT_EQ(r.question_end, 0);
        }
        ASSERT_OK(dns_query_parse(q, n, &r));

        /* A compression pointer, reserved label types. */
        q[DNS_HEADER_SIZE] = 0xc0;
        ASSERT_ERROR(dns_query_parse(q, n, &r), EBADMSG);
        q[DNS_HEADER_SIZE] = 0x40;
        ASSERT_ERROR(dns_query_parse(q, n, &r), EBADMSG);
        q[DNS_HEADER_SIZE] = 1;

        /* Bytes a host name never has. */
        static const uint8_t bad[] = {'.', ' ', 0, 0x7f, 0x80, 0xff, '\n'};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                q[DNS_HEADER_SIZE + 1] = bad[i];
                ASSERT_ERROR(dns_query_parse(q, n, &r), EBADMSG);
        }
        q[DNS_HEADER_SIZE + 1] = 'a';
        ASSERT_OK(dns_query_parse(q, n, &r));

        /* A label of 64 bytes; 63 is fine. */
        memset(label, 'a', sizeof(label));
        label[63] = '\0';
        n = make_query(big, 1, label, DNS_TYPE_A);
        ASSERT_OK(dns_query_parse(big, n, &r));
        label[63] = 'a';
        label[64] = '\0';
        n = make_query(big, 1, label, DNS_TYPE_A);
        ASSERT_ERROR(dns_query_parse(big, n, &r), EBADMSG);

        /* Names of 253 bytes pass, 254 do not. */
        memset(name, 'b', sizeof(name));
        for (size_t i = 63; i < 253; i += 64)
                name[i] = '.';
        name[253] = '\0';
        n = make_query(big, 1, name, DNS_TYPE_A);
        ASSERT_OK(dns_query_parse(big, n, &r));
        ASSERT_EQ(strlen(r.name), 253);
        name[253] = 'b';
        name[254] = '\0';
        n = make_query(big, 1, name, DNS_TYPE_A);
        ASSERT_ERROR(dns_query_parse(big, n, &r), EBADMSG);
}

TEST(answer_build) {
        static const uint8_t record[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 77, 0, 1};
        uint8_t q[DNS_PACKET_MAX], out[DNS_PACKET_MAX];
        size_t n = make_query(q, 0xbeef, "Allowed.test", DNS_TYPE_A);
        struct in_addr a = {.s_addr = htonl(0x7f4d0001)};
        DnsRequest r, again;
        ssize_t m;

        ASSERT_OK(dns_query_parse(q, n, &r));
        m = dns_answer_build(&r, q, DNS_RCODE_NOERROR, &a, 60, out, sizeof(out));
        ASSERT_EQ(m, (ssize_t)n + 16);
        ASSERT_EQ(out[0], 0xbe);
        ASSERT_EQ(out[1], 0xef);
        ASSERT_EQ(out[2], 0x85); /* QR, AA, RD */
        ASSERT_EQ(out[3], 0x00);
        ASSERT_EQ(out[5], 1);
        ASSERT_EQ(out[7], 1);
        /* The question is copied as asked (0x20 case kept). */
        ASSERT_TRUE(memcmp(out + DNS_HEADER_SIZE, q + DNS_HEADER_SIZE, n - DNS_HEADER_SIZE) == 0);
        ASSERT_TRUE(memcmp(out + n, record, sizeof(record)) == 0);
        /* SECURITY: an answer is never answered. */
        ASSERT_ERROR(dns_query_parse(out, (size_t)m, &again), EPROTO);

        /* NXDOMAIN and the empty AAAA answer carry the question only. */
        m = dns_answer_build(&r, q, DNS_RCODE_NXDOMAIN, NULL, 0, out, sizeof(out));
        ASSERT_EQ(m, (ssize_t)n);
        ASSERT_EQ(out[3], DNS_RCODE_NXDOMAIN);
        ASSERT_EQ(out[7], 0);

        /* Only an A question gets an address. */
        ASSERT_ERROR(dns_answer_build(&r, q, DNS_RCODE_NXDOMAIN, &a, 0, out, sizeof(out)), EINVAL);
        n = make_query(q, 1, "allowed.test", DNS_TYPE_AAAA);
        ASSERT_OK(dns_query_parse(q, n, &r));
        ASSERT_ERROR(dns_answer_build(&r, q, DNS_RCODE_NOERROR, &a, 0, out, sizeof(out)), EINVAL);
        ASSERT_ERROR(dns_answer_build(&r, q, 16, NULL, 0, out, sizeof(out)), EINVAL);

        /* Too small a buffer. */
        ASSERT_ERROR(dns_answer_build(&r, q, DNS_RCODE_NOERROR, NULL, 0, out, n - 1), ENOBUFS);
        ASSERT_ERROR(dns_answer_build(&r, q, DNS_RCODE_NOERROR, NULL, 0, out, 3), ENOBUFS);

        /* FORMERR after a bad question: the header alone. */
        q[5] = 2;
        ASSERT_ERROR(dns_query_parse(q, n, &r), EBADMSG);
        m = dns_answer_build(&r, q, DNS_RCODE_FORMERR, NULL, 0, out, sizeof(out));
        ASSERT_EQ(m, DNS_HEADER_SIZE);
        ASSERT_EQ(out[3], DNS_RCODE_FORMERR);
        ASSERT_EQ(out[5], 0);
}

TEST(table) {
        _cleanup_(dns_table_done) DnsTable t = {};
        const DnsTableEntry *e;
        char *entries[] = {"b.test:8080", "*.wild.test", "127.0.0.1:22", "A.test",
                           "b.test",      "b.test:8080", "[::1]:443",    NULL};
        HutchError err = {};

        ASSERT_OK(dns_table_add_strv(&t, entries, &err));
        /* Wildcards and addresses have no place; names sorted, deduplicated. */
        ASSERT_EQ(t.n_entries, 2);
        ASSERT_STREQ(t.entries[0].name, "a.test");
        ASSERT_STREQ(t.entries[1].name, "b.test");
        ASSERT_EQ(ntohl(t.entries[0].addr.s_addr), 0x7f4d0001);
        ASSERT_EQ(ntohl(t.entries[1].addr.s_addr), 0x7f4d0002);
        ASSERT_EQ(t.entries[0].n_ports, 2);
        ASSERT_TRUE(dns_table_entry_has_port(&t.entries[0], 80));
        ASSERT_TRUE(dns_table_entry_has_port(&t.entries[0], 443));
        ASSERT_FALSE(dns_table_entry_has_port(&t.entries[0], 8080));
        ASSERT_EQ(t.entries[1].n_ports, 3);
        ASSERT_TRUE(dns_table_entry_has_port(&t.entries[1], 8080));
        ASSERT_EQ(t.n_listeners, 5);

        e = dns_table_find_name(&t, "b.test");
        ASSERT_TRUE(e == &t.entries[1]);
        ASSERT_NULL(dns_table_find_name(&t, "c.test"));
        ASSERT_NULL(dns_table_find_name(&t, "x.wild.test"));
        ASSERT_NULL(dns_table_find_name(&t, NULL));
        ASSERT_TRUE(dns_table_find_addr(&t, (struct in_addr){htonl(0x7f4d0001)}) == &t.entries[0]);
        ASSERT_NULL(dns_table_find_addr(&t, (struct in_addr){htonl(0x7f4d0000)}));
        ASSERT_NULL(dns_table_find_addr(&t, (struct in_addr){htonl(0x7f4d0003)}));
        ASSERT_NULL(dns_table_find_addr(&t, (struct in_addr){htonl(0x7f000001)}));
        ASSERT_NULL(dns_table_find_addr(&t, (struct in_addr){htonl(0x7f4c0001)}));

        /* Adding a name that sorts first renumbers: both sides build the
         * table from the whole list, so they agree whatever the order. */
        ASSERT_OK(dns_table_add_strv(&t, (char *[]){"0.test", NULL}, NULL));
        ASSERT_STREQ(dns_table_find_addr(&t, (struct in_addr){htonl(0x7f4d0002)})->name, "a.test");
        ASSERT_ERROR(dns_table_add_strv(&t, (char *[]){"bad..test", NULL}, NULL), EINVAL);
}

TEST(table_caps) {
        _cleanup_(dns_table_done) DnsTable t = {};
        HutchError err = {};
        char entry[64];

        for (int i = 0; i < DNS_TABLE_LISTENERS_MAX / 2; i++) {
                (void)snprintf(entry, sizeof(entry), "n%d.test", i);
                ASSERT_OK(dns_table_add_strv(&t, (char *[]){entry, NULL}, NULL));
        }
        ASSERT_EQ(t.n_listeners, DNS_TABLE_LISTENERS_MAX);
        /* One more listener is refused, naming the entry; nothing changed. */
        ASSERT_ERROR(dns_table_add_strv(&t, (char *[]){"n0.test:8080", NULL}, &err), E2BIG);
        ASSERT_TRUE(strstr(err.msg, "'n0.test:8080'") != NULL);
        ASSERT_EQ(t.n_listeners, DNS_TABLE_LISTENERS_MAX);
        /* A port already there costs nothing. */
        ASSERT_OK(dns_table_add_strv(&t, (char *[]){"n0.test:443", NULL}, NULL));

        dns_table_done(&t);
        for (int i = 1; i <= DNS_TABLE_PORTS_MAX; i++) {
                (void)snprintf(entry, sizeof(entry), "p.test:%d", i);
                ASSERT_OK(dns_table_add_strv(&t, (char *[]){entry, NULL}, NULL));
        }
        ASSERT_ERROR(dns_table_add_strv(&t, (char *[]){"p.test:999", NULL}, NULL), E2BIG);
}

TEST(policy_field) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_(policy_freep) Policy *q = policy_new();
        _cleanup_free_ char *json = NULL;
        HutchError e = {};

        ASSERT_NOT_NULL(p);
        ASSERT_NOT_NULL(q);
        ASSERT_ERROR(policy_set_dns(p, "magic", &e), EINVAL);
        ASSERT_TRUE(strstr(e.msg, "invalid DNS mode 'magic'") != NULL);
        ASSERT_ERROR(policy_set_dns(p, NULL, NULL), EINVAL);

        /* The default is not written; "transparent" is, and reads back. */
        ASSERT_OK(policy_to_json(p, &json));
        ASSERT_NULL(strstr(json, "\"dns\""));
        json = mfree(json);
        ASSERT_OK(policy_set_dns(p, "transparent", NULL));
        ASSERT_OK(policy_to_json(p, &json));
        ASSERT_NOT_NULL(strstr(json, "\"dns\":\"transparent\""));
        ASSERT_OK(policy_load_json(q, json, strlen(json), NULL));
        ASSERT_TRUE(q->dns_transparent);

        /* Needs network mode allow; then at most 48 listeners. */
        e = (HutchError){};
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        ASSERT_TRUE(strstr(e.msg, "needs network mode 'allow'") != NULL);
        ASSERT_OK(policy_add_allow_host(p, "a.test", "--allow-host", NULL));
        ASSERT_OK(policy_validate(p, NULL));
        p->backend = SANDBOX_BACKEND_VM;
        ASSERT_ERROR(policy_validate(p, NULL), EOPNOTSUPP);
        p->backend = SANDBOX_BACKEND_NS;
        for (int i = 0; i < DNS_TABLE_LISTENERS_MAX / 2; i++) {
                char entry[32];

                (void)snprintf(entry, sizeof(entry), "n%d.test", i);
                ASSERT_OK(policy_add_allow_host(p, entry, "--allow-host", NULL));
        }
        ASSERT_ERROR(policy_validate(p, NULL), E2BIG);
        ASSERT_OK(policy_set_dns(p, "proxy", NULL));
        ASSERT_OK(policy_validate(p, NULL));
}

DEFINE_TEST_MAIN
