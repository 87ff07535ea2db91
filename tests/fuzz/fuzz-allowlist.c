/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/addr.h"
#include "net/allowlist.h"

/* Fuzzes the allowlist entry parser and the host/address normalisers with
 * the same bytes, and checks the invariants the proxy relies on:
 *   - a parsed pattern's canonical text parses back to the same pattern;
 *   - an exact or address pattern matches its own host, a wildcard matches
 *     a subdomain of its domain and never the apex;
 *   - a normalised host is lowercase, has no trailing dot, and normalises
 *     to itself;
 *   - an address prints and parses back to itself;
 *   - a range contains its own base address. */

#define FUZZ_INPUT_MAX 1024

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_pattern(const char *text) {
        HostPattern p, q;
        char sub[HOST_NAME_MAX_LEN + 8];
        Host h;

        if (host_pattern_parse(text, &p, NULL) < 0)
                return;
        if (host_pattern_parse(p.text, &q, NULL) < 0 || strcmp(p.text, q.text) != 0 ||
            p.kind != q.kind || p.port != q.port || strcmp(p.name, q.name) != 0)
                abort();
        switch (p.kind) {
        case HOST_PATTERN_EXACT:
                if (host_parse(p.name, strlen(p.name), &h) < 0 ||
                    !host_pattern_matches_host(&p, &h))
                        abort();
                break;
        case HOST_PATTERN_ADDRESS:
                h = (Host){.kind = HOST_KIND_ADDRESS, .addr = p.addr};
                if (!host_pattern_matches_host(&p, &h))
                        abort();
                break;
        case HOST_PATTERN_WILDCARD:
                if (host_parse(p.name, strlen(p.name), &h) < 0)
                        abort();
                if (host_pattern_matches_host(&p, &h))
                        abort();
                (void)snprintf(sub, sizeof(sub), "x.%s", p.name);
                if (strlen(p.name) + 2 <= HOST_NAME_MAX_LEN &&
                    (host_parse(sub, strlen(sub), &h) < 0 || !host_pattern_matches_host(&p, &h)))
                        abort();
                break;
        case _HOST_PATTERN_KIND_MAX:
        case _HOST_PATTERN_KIND_INVALID:
                abort();
        }
}

static void check_host(const char *s, size_t n) {
        char again[HOST_NAME_MAX_LEN + 3];
        Host h, h2;
        size_t len;

        if (host_parse(s, n, &h) < 0)
                return;
        len = strlen(h.name);
        if (len == 0 || h.name[len - 1] == '.')
                abort();
        for (size_t i = 0; i < len; i++)
                if (h.name[i] >= 'A' && h.name[i] <= 'Z')
                        abort();
        if (h.kind == HOST_KIND_ADDRESS && h.addr.family == AF_INET6)
                (void)snprintf(again, sizeof(again), "[%s]", h.name);
        else
                (void)snprintf(again, sizeof(again), "%s", h.name);
        if (host_parse(again, strlen(again), &h2) < 0 || h2.kind != h.kind ||
            strcmp(h2.name, h.name) != 0)
                abort();
}

static void check_addr(const char *s, size_t n) {
        char buf[NET_ADDR_STRING_MAX];
        NetAddr a, b;

        if (net_addr_parse(s, n, &a) < 0)
                return;
        if (net_addr_to_string(&a, buf, sizeof(buf)) < 0)
                abort();
        if (net_addr_parse(buf, strlen(buf), &b) < 0 || !net_addr_equal(&a, &b))
                abort();
        if (net_addr_classify(&a) < 0 || net_addr_classify(&a) >= _NET_ADDR_CLASS_MAX)
                abort();
}

static void check_cidr(const char *s) {
        char buf[NET_CIDR_STRING_MAX];
        NetCidr c, d;

        if (net_cidr_parse(s, &c, NULL) < 0)
                return;
        if (!net_cidr_contains(&c, &c.addr))
                abort();
        if (net_cidr_to_string(&c, buf, sizeof(buf)) < 0 || net_cidr_parse(buf, &d, NULL) < 0 ||
            d.prefixlen != c.prefixlen || !net_addr_equal(&c.addr, &d.addr))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text;

        if (size > FUZZ_INPUT_MAX)
                return 0;
        text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = '\0';

        check_pattern(text);
        check_host((const char *)data, size);
        check_addr((const char *)data, size);
        check_cidr(text);

        free(text);
        return 0;
}
