/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "policy/policy.h"
#include "sandbox/port-forward.h"
#include "strv.h"
#include "test.h"

/* Parses @in and compares its canonical text with @want. */
static void check_spec(const char *in, const char *want) {
        char buf[PORT_SPEC_STRING_MAX];
        PortSpec s;

        ASSERT_OK(port_spec_parse(in, &s, NULL));
        port_spec_to_string(&s, buf, sizeof(buf));
        ASSERT_STREQ(buf, want);
}

TEST(port_spec_docker_forms) {
        check_spec("80", "127.0.0.1:0:80");
        check_spec("8080:80", "127.0.0.1:8080:80");
        check_spec("0:80", "127.0.0.1:0:80");
        check_spec("0.0.0.0:8080:80", "0.0.0.0:8080:80");
        check_spec("127.0.0.2::80", "127.0.0.2:0:80");
        check_spec("[::1]:8080:80", "[::1]:8080:80");
        check_spec("[::1]::80", "[::1]:0:80");
        check_spec("8080:80/tcp", "127.0.0.1:8080:80");
        check_spec("65535:65535", "127.0.0.1:65535:65535");
}

TEST(port_spec_round_trips) {
        const char *in[] = {"127.0.0.1:0:80", "[::1]:8080:80", "10.0.0.1:1:65535"};

        for (size_t i = 0; i < ELEMENTSOF(in); i++)
                check_spec(in[i], in[i]);
}

TEST(port_spec_refuses_bad_input) {
        const char *bad[] = {"",
                             "0",
                             "65536",
                             "8080:0",
                             "-1",
                             "+80",
                             " 80",
                             "80 ",
                             "8080:65536",
                             "99999:80",
                             "a:80",
                             "::1:8080:80",
                             "[::1]:80",
                             "[::1:8080:80",
                             "[nope]::80",
                             "1.2.3:8080:80",
                             "127.1:80:80",
                             "localhost:80:80",
                             ":80",
                             "8080:",
                             "1:2:3:4",
                             "000080x",
                             "123456"};
        PortSpec s;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                HutchError e = {};

                ASSERT_ERROR(port_spec_parse(bad[i], &s, &e), EINVAL);
                ASSERT_TRUE(strstr(e.msg, "invalid port spec") != NULL);
        }
        ASSERT_ERROR(port_spec_parse("80/udp", &s, NULL), EPROTONOSUPPORT);
        ASSERT_ERROR(port_spec_parse("80/sctp", &s, NULL), EPROTONOSUPPORT);
        ASSERT_ERROR(port_spec_parse(NULL, &s, NULL), EINVAL);
}

TEST(port_spec_loopback) {
        PortSpec s;

        ASSERT_OK(port_spec_parse("80", &s, NULL));
        ASSERT_TRUE(port_spec_is_loopback(&s));
        ASSERT_OK(port_spec_parse("[::1]::80", &s, NULL));
        ASSERT_TRUE(port_spec_is_loopback(&s));
        ASSERT_OK(port_spec_parse("0.0.0.0::80", &s, NULL));
        ASSERT_FALSE(port_spec_is_loopback(&s));
        ASSERT_OK(port_spec_parse("[::]::80", &s, NULL));
        ASSERT_FALSE(port_spec_is_loopback(&s));
}

TEST(policy_ports_add_remove) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_NOT_NULL(p);
        ASSERT_OK(policy_add_port(p, "8080:80", "--publish", NULL));
        ASSERT_OK(policy_add_port(p, "81", NULL, NULL));
        ASSERT_OK(policy_add_port(p, "[::1]:8080:82", NULL, NULL));
        ASSERT_EQ(strv_length(p->ports), 3);
        /* the same sandbox port twice, the same host listener twice */
        ASSERT_ERROR(policy_add_port(p, "9000:80", "--publish", &e), EEXIST);
        ASSERT_TRUE(strstr(e.msg, "--publish: ") == e.msg);
        ASSERT_ERROR(policy_add_port(p, "8080:83", NULL, NULL), EEXIST);
        ASSERT_ERROR(policy_add_port(p, "x", "--publish", NULL), EINVAL);
        ASSERT_OK(policy_validate(p, NULL));
        ASSERT_EQ(policy_remove_port(p, 81), 1);
        ASSERT_EQ(policy_remove_port(p, 81), 0);
        ASSERT_EQ(strv_length(p->ports), 2);
        ASSERT_STREQ(p->ports[0], "127.0.0.1:8080:80");
        ASSERT_STREQ(p->ports[1], "[::1]:8080:82");
}

TEST(policy_ports_cap) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        char spec[16];

        ASSERT_NOT_NULL(p);
        for (int i = 1; i <= POLICY_MAX_PORTS; i++) {
                (void)snprintf(spec, sizeof(spec), "%d", i);
                ASSERT_OK(policy_add_port(p, spec, NULL, NULL));
        }
        ASSERT_ERROR(policy_add_port(p, "1000", NULL, NULL), E2BIG);
}

TEST(policy_ports_json_round_trip) {
        _cleanup_(policy_freep) Policy *p = policy_new(), *q = policy_new();
        _cleanup_free_ char *json = NULL;
        const char *doc = "{\"ports\":[\"8080:80\",\"[::1]::81\"]}";
        HutchError e = {};

        ASSERT_NOT_NULL(p);
        ASSERT_NOT_NULL(q);
        ASSERT_OK(policy_load_json(p, doc, strlen(doc), NULL));
        ASSERT_OK(policy_to_json(p, &json));
        ASSERT_TRUE(strstr(json, "\"ports\":[\"127.0.0.1:8080:80\",\"[::1]:0:81\"]") != NULL);
        ASSERT_OK(policy_load_json(q, json, strlen(json), NULL));
        ASSERT_EQ(strv_length(q->ports), 2);
        doc = "{\"ports\":[\"70000\"]}";
        ASSERT_ERROR(policy_load_json(q, doc, strlen(doc), &e), EINVAL);
        ASSERT_STREQ(e.pointer, "/ports/0");
}

/* A VM sandbox publishes ports through its keeper (docs/vm.md); a
 * one-shot VM run refuses them in sandbox_run(), not in the policy. */
TEST(policy_ports_valid_with_vm) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_NOT_NULL(p);
        ASSERT_OK(policy_add_port(p, "80", NULL, NULL));
        ASSERT_OK(policy_set_backend(p, "vm", NULL));
        ASSERT_OK(policy_validate(p, &e));
}

static bool listens_on(uint16_t port) {
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;

        if (fd >= 0)
                (void)close(fd);
        return ok;
}

TEST(port_forwards_bind_and_refuse) {
        PortForwards t, u;
        HutchError e = {};
        PortSpec s;
        char spec[32];
        uint16_t bound;

        port_forwards_init(&t);
        port_forwards_init(&u);
        ASSERT_OK(port_spec_parse("127.0.0.1::80", &s, NULL));
        ASSERT_OK(port_forwards_add(&t, &s, &e));
        ASSERT_EQ(t.n, 1);
        bound = t.items[0].spec.host_port;
        ASSERT_TRUE(bound != 0);
        ASSERT_TRUE(listens_on(bound));
        /* The same sandbox port twice. */
        ASSERT_ERROR(port_forwards_add(&t, &s, &e), EEXIST);
        /* A host port in use, named. */
        (void)snprintf(spec, sizeof(spec), "%u:81", (unsigned)bound);
        ASSERT_OK(port_spec_parse(spec, &s, NULL));
        ASSERT_ERROR(port_forwards_add(&u, &s, &e), EADDRINUSE);
        ASSERT_TRUE(strstr(e.msg, "is already in use") != NULL);
        ASSERT_EQ(u.n, 0);
        /* An address this machine does not have (TEST-NET-1). */
        ASSERT_OK(port_spec_parse("192.0.2.77::82", &s, NULL));
        ASSERT_ERROR(port_forwards_add(&u, &s, &e), EADDRNOTAVAIL);
        ASSERT_TRUE(strstr(e.msg, "not an address of this machine") != NULL);
        /* No namespaces opened: nothing can start, nothing connects. */
        ASSERT_ERROR(port_forwards_start(&t, &e), EBADF);
        ASSERT_ERROR(port_forwards_connect(&t, 80, &(int){-1}), EBADF);
        ASSERT_ERROR(port_forwards_connect(&t, 0, &(int){-1}), EINVAL);
        ASSERT_EQ(port_forwards_remove(&t, 81), 0);
        ASSERT_EQ(port_forwards_remove(&t, 80), 1);
        ASSERT_EQ(t.n, 0);
        ASSERT_FALSE(listens_on(bound));
        port_forwards_done(&t);
        port_forwards_done(&u);
}

TEST(port_forwards_bind_all_or_nothing) {
        char *const specs[] = {(char *)"127.0.0.1::80", (char *)"x", NULL};
        PortForwards t;
        HutchError e = {};

        port_forwards_init(&t);
        ASSERT_ERROR(port_forwards_bind(&t, specs, &e), EINVAL);
        ASSERT_EQ(t.n, 0);
        port_forwards_done(&t);
        port_forwards_done(&t); /* idempotent */
}

TEST(port_forwards_full) {
        PortForwards t;
        HutchError e = {};
        PortSpec s;

        port_forwards_init(&t);
        for (unsigned i = 1; i <= POLICY_MAX_PORTS; i++) {
                ASSERT_OK(port_spec_parse("127.0.0.1::1", &s, NULL));
                s.port = (uint16_t)i;
                ASSERT_OK(port_forwards_add(&t, &s, &e));
        }
        s.port = 1000;
        ASSERT_ERROR(port_forwards_add(&t, &s, &e), E2BIG);
        port_forwards_done(&t);
        ASSERT_EQ(t.n, 0);
}

static int fake_connect(void *userdata, uint16_t port, int *ret_fd) {
        *(uint16_t *)userdata = port;
        *ret_fd = 42;
        return 0;
}

/* An owner that relays itself (a VM's keeper, vm-forward.h): start forks
 * nothing (no namespaces needed), connect is the owner's; its twin above
 * (no hook, no namespaces) refuses both. */
TEST(port_forwards_owner_hook) {
        PortForwards t;
        HutchError e = {};
        PortSpec s;
        uint16_t asked = 0;
        int fd = -1;

        port_forwards_init(&t);
        t.connect = fake_connect;
        t.userdata = &asked;
        ASSERT_OK(port_spec_parse("127.0.0.1::80", &s, NULL));
        ASSERT_OK(port_forwards_add(&t, &s, &e));
        ASSERT_OK(port_forwards_start(&t, &e));
        ASSERT_EQ(t.items[0].pid, 0);
        ASSERT_TRUE(t.items[0].listen_fd >= 0);
        ASSERT_OK(port_forwards_connect(&t, 8000, &fd));
        ASSERT_EQ(asked, 8000);
        ASSERT_EQ(fd, 42);
        ASSERT_ERROR(port_forwards_connect(&t, 0, &fd), EINVAL);
        port_forwards_done(&t);
}

DEFINE_TEST_MAIN
