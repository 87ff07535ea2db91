/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "refusals.h"

/* hutch-proxy's reasons (src/proxy/proxy-server.c) end in these; the rest
 * of a reason is said as it is. */
#define NOT_ALLOWED " is not in the allowlist"
#define DENY_RULE " matches deny rule '"
#define PRIVATE_ADDR "private address "

/* The address in a private-address reason: "... resolves to a private
 * address 10.0.0.5 (private); ..." or, for a literal address, the host. */
static void private_address(const char *host, const char *reason, char *buf, size_t size) {
        const char *p = strstr(reason, "resolves to a " PRIVATE_ADDR);
        size_t n;

        if (!p) {
                (void)snprintf(buf, size, "%s", host);
                return;
        }
        p += strlen("resolves to a " PRIVATE_ADDR);
        n = strcspn(p, " ;");
        (void)snprintf(buf, size, "%.*s", (int)n, p);
}

void refusal_format(const char *host, long long port, const char *reason, long long count,
                    char *buf, size_t size) {
        char where[300], times[32] = "", addr[64];
        const char *rule;
        bool v6 = strchr(host, ':') != NULL;

        (void)snprintf(where, sizeof(where), "%s%s%s:%lld", v6 ? "[" : "", host, v6 ? "]" : "",
                       port);
        /* A refused DNS query (transparent DNS) names no port. */
        if (port == 0)
                (void)snprintf(where, sizeof(where), "%s", host);
        if (count > 1)
                (void)snprintf(times, sizeof(times), " %lld times", count);

        if (strstr(reason, NOT_ALLOWED)) {
                /* --allow-host's default ports are 80 and 443. */
                if (port == 80 || port == 443)
                        (void)snprintf(buf, size,
                                       "refused %s%s (not in the allowlist; --allow-host %s)",
                                       where, times, host);
                else
                        (void)snprintf(
                                buf, size,
                                "refused %s%s (not in the allowlist; --allow-host %s%s%s:%lld)",
                                where, times, v6 ? "[" : "", host, v6 ? "]" : "", port);
        } else if ((rule = strstr(reason, DENY_RULE))) {
                rule += strlen(DENY_RULE);
                (void)snprintf(buf, size, "refused %s%s (matches --deny-host %.*s)", where, times,
                               (int)strcspn(rule, "'"), rule);
        } else if (strstr(reason, PRIVATE_ADDR)) {
                private_address(host, reason, addr, sizeof(addr));
                (void)snprintf(buf, size,
                               "refused %s%s (a private address, %s; --allow-private %s/%d)", where,
                               times, addr, addr, strchr(addr, ':') ? 128 : 32);
        } else
                (void)snprintf(buf, size, "refused %s%s (%s)", where, times, reason);
}

void refusals_print(const char *denied_json) {
        json_t *denied = denied_json ? json_loads(denied_json, 0, NULL) : NULL;
        json_t *d;
        size_t i;

        json_array_foreach(denied, i, d) {
                json_t *host = json_object_get(d, "host"), *reason = json_object_get(d, "reason");
                json_t *count = json_object_get(d, "count");
                char line[1024];

                if (!json_is_string(host) || !json_is_string(reason))
                        continue;
                refusal_format(
                        json_string_value(host), json_integer_value(json_object_get(d, "port")),
                        json_string_value(reason),
                        json_is_integer(count) ? json_integer_value(count) : 1, line, sizeof(line));
                log_info("%s", line);
        }
        json_decref(denied);
}
