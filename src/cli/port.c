/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "api/hutch-ext.h"
#include "cli-util.h"
#include "cli.h"
#include "log.h"
#include "parse-util.h"
#include "persist.h"
#include "port.h"
#include "strv.h"

static const char port_usage[] =
        "usage: hutch port NAME [PORT]\n"
        "       hutch port NAME add [IP:][HOSTPORT:]PORT\n"
        "       hutch port NAME rm PORT\n\n"
        "Lists the published ports of the running sandbox NAME as docker port does\n"
        "(\"80/tcp -> 127.0.0.1:49153\"), or only PORT's host address; add publishes one\n"
        "more (saved in its policy; started now when it runs), rm stops one.\n"
        "See docs/network.md, \"Published ports\".\n";

void ports_warn_exposed(char *const *ports) {
        for (char *const *e = ports; e && *e; e++) {
                char host[HUTCH_EXT_PORT_HOST_MAX];
                unsigned port;

                if (hutch_ext_port_exposed(*e, host, sizeof(host), &port) <= 0)
                        continue;
                log_warning("publishing on %s exposes port %u of the sandbox to the network", host,
                            port);
        }
}

/* Prints the entries of the JSON array @json ("80/tcp -> 127.0.0.1:49153"),
 * only those of @only (0: all), without the "80/tcp -> " part with @only.
 * Returns how many were printed. */
static int print_ports(const char *json, unsigned only) {
        json_t *arr = json_loads(json, 0, NULL), *e;
        size_t i;
        int n = 0;

        json_array_foreach(arr, i, e) {
                unsigned port = (unsigned)json_integer_value(json_object_get(e, "port"));
                const char *ip = json_string_value(json_object_get(e, "host_ip"));
                unsigned hp = (unsigned)json_integer_value(json_object_get(e, "host_port"));
                bool v6 = ip && strchr(ip, ':');

                if (!ip || (only && port != only))
                        continue;
                if (!only)
                        (void)printf("%u/tcp -> ", port);
                (void)printf("%s%s%s:%u\n", v6 ? "[" : "", ip, v6 ? "]" : "", hp);
                n++;
        }
        json_decref(arr);
        return n;
}

/* "80" or "80/tcp" */
static int parse_port_arg(const char *s, unsigned *ret) {
        char buf[16];
        uint32_t v;
        size_t n = strcspn(s, "/");

        if (n == 0 || n >= sizeof(buf) || (s[n] && strcmp(s + n, "/tcp") != 0))
                return -EINVAL;
        memcpy(buf, s, n);
        buf[n] = '\0';
        if (safe_atou32(buf, &v) < 0 || v == 0 || v > 65535)
                return -EINVAL;
        *ret = v;
        return 0;
}

int verb_port(int argc, char **argv) {
        _cleanup_free_ char *json = NULL, *name = NULL;
        HutchError err = {};
        unsigned port = 0;
        bool running;
        int r;

        if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
                (void)fputs(port_usage, stdout);
                return 0;
        }
        if (argc < 2 || argc > 4 ||
            (argc == 4 && strcmp(argv[2], "add") != 0 && strcmp(argv[2], "rm") != 0)) {
                (void)fputs(port_usage, stderr);
                return HUTCH_EXIT_FAILURE;
        }
        if ((argc == 3 && (strcmp(argv[2], "add") == 0 || strcmp(argv[2], "rm") == 0))) {
                log_error("hutch port %s %s: missing the port", argv[1], argv[2]);
                return HUTCH_EXIT_FAILURE;
        }
        if ((argc == 3 || (argc == 4 && strcmp(argv[2], "rm") == 0)) &&
            parse_port_arg(argv[argc - 1], &port) < 0) {
                log_error("invalid port '%s' (expected a number from 1 to 65535)", argv[argc - 1]);
                return HUTCH_EXIT_FAILURE;
        }
        r = hutch_ext_sandbox_name(argv[1], &name, &err);
        if (r < 0)
                return cli_fail(&err, r);
        if (argc == 4 && strcmp(argv[2], "add") == 0) {
                _cleanup_strv_free_ char **one = NULL;

                r = hutch_ext_port_add(name, argv[3], &json, &err);
                if (r < 0) {
                        log_error("%s", err.msg[0] ? err.msg : strerror(-r));
                        return HUTCH_EXIT_FAILURE;
                }
                if (strv_extend(&one, argv[3]) >= 0)
                        ports_warn_exposed(one);
                (void)print_ports(json, 0);
                return 0;
        }
        if (argc == 4) {
                r = hutch_ext_port_remove(name, (uint16_t)port, &err);
                if (r < 0) {
                        log_error("%s", err.msg[0] ? err.msg : strerror(-r));
                        return HUTCH_EXIT_FAILURE;
                }
                return 0;
        }
        r = hutch_ext_ports_list(name, &json, &running, &err);
        if (r < 0) {
                log_error("%s", err.msg[0] ? err.msg : strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }
        /* As docker: a stopped sandbox has nothing bound, so nothing is
         * listed (its policy's entries: GET /v1/sandboxes/NAME/ports). */
        if (!running) {
                if (port) {
                        log_error("no public port '%u/tcp' published for '%s' (it is not "
                                  "running)",
                                  port, name);
                        return 1;
                }
                return 0;
        }
        if (print_ports(json, port) == 0 && port) {
                log_error("no public port '%u/tcp' published for '%s'", port, name);
                return 1;
        }
        return 0;
}
