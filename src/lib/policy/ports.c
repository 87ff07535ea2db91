/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "policy/policy-internal.h"
#include "policy/policy.h"
#include "strv.h"

/* A port number: 1-5 decimal digits, nothing else (no sign, no space),
 * at most 65535. -EINVAL otherwise. */
static int parse_port(const char *s, size_t n, uint16_t *ret) {
        unsigned v = 0;

        if (n == 0 || n > 5)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned)(s[i] - '0');
        }
        if (v > 65535)
                return -EINVAL;
        *ret = (uint16_t)v;
        return 0;
}

static int bad_spec(HutchError *reterr, const char *text, const char *why) {
        return hutch_error_set(reterr, EINVAL, "invalid port spec '%s': %s", text, why);
}

/* The host address: the @n bytes at @s, an IPv4 dotted quad or (with
 * @bracketed) an IPv6 address. Strict inet_pton() spellings only: the
 * address is where a listener is bound, and "127.1" is not worth the
 * surprise. */
static int parse_host_ip(const char *s, size_t n, bool bracketed, PortSpec *spec) {
        char buf[64];

        if (n == 0 || n >= sizeof(buf))
                return -EINVAL;
        memcpy(buf, s, n);
        buf[n] = '\0';
        if (bracketed) {
                if (inet_pton(AF_INET6, buf, spec->host_ip) != 1)
                        return -EINVAL;
                spec->family = AF_INET6;
                return 0;
        }
        memset(spec->host_ip, 0, sizeof(spec->host_ip));
        if (inet_pton(AF_INET, buf, spec->host_ip) != 1)
                return -EINVAL;
        spec->family = AF_INET;
        return 0;
}

int port_spec_parse(const char *text, PortSpec *ret, HutchError *reterr) {
        PortSpec spec = {.family = AF_INET, .host_ip = {127, 0, 0, 1}};
        const char *slash, *colon, *end;
        size_t len;

        if (!text || !*text)
                return hutch_error_set(reterr, EINVAL, "invalid port spec '': it is empty");
        len = strlen(text);
        if (len >= PORT_SPEC_STRING_MAX)
                return bad_spec(reterr, text, "it is too long");
        end = text + len;
        slash = strchr(text, '/');
        if (slash) {
                if (strcmp(slash, "/tcp") != 0)
                        return hutch_error_set(reterr, EPROTONOSUPPORT,
                                               "invalid port spec '%s': only TCP ports can be "
                                               "published",
                                               text);
                end = slash;
        }
        /* PORT is after the last colon. */
        colon = NULL;
        for (const char *c = text; c < end; c++)
                if (*c == ':')
                        colon = c;
        if (parse_port(colon ? colon + 1 : text, (size_t)(end - (colon ? colon + 1 : text)),
                       &spec.port) < 0 ||
            spec.port == 0)
                return bad_spec(reterr, text, "the sandbox port must be a number from 1 to 65535");
        if (!colon) {
                *ret = spec;
                return 0;
        }
        end = colon; /* now [IP:]HOSTPORT in [text, end) */
        if (text[0] == '[') {
                const char *close = memchr(text, ']', (size_t)(end - text));

                if (!close || close + 1 >= end || close[1] != ':')
                        return bad_spec(reterr, text,
                                        "an IPv6 address is written in brackets, as "
                                        "[::1]:8080:80");
                if (parse_host_ip(text + 1, (size_t)(close - text - 1), true, &spec) < 0)
                        return bad_spec(reterr, text, "the host address is not an IP address");
                colon = close + 1;
        } else {
                colon = NULL;
                for (const char *c = text; c < end; c++)
                        if (*c == ':')
                                colon = c;
                if (colon && parse_host_ip(text, (size_t)(colon - text), false, &spec) < 0)
                        return bad_spec(reterr, text,
                                        "the host address is not an IPv4 address (write IPv6 "
                                        "in brackets)");
        }
        /* HOSTPORT in [colon + 1, end) (or [text, end) without an IP); empty = 0. */
        {
                const char *hp = colon ? colon + 1 : text;

                if (hp < end && parse_port(hp, (size_t)(end - hp), &spec.host_port) < 0)
                        return bad_spec(reterr, text,
                                        "the host port must be a number from 0 to 65535");
                if (hp == end && !colon)
                        return bad_spec(reterr, text, "the host port is empty");
        }
        *ret = spec;
        return 0;
}

void port_spec_host_to_string(const PortSpec *s, char *buf, size_t size) {
        if (!inet_ntop(s->family, s->host_ip, buf, (socklen_t)size))
                (void)snprintf(buf, size, "?");
}

void port_spec_to_string(const PortSpec *s, char *buf, size_t size) {
        char ip[INET6_ADDRSTRLEN];

        port_spec_host_to_string(s, ip, sizeof(ip));
        (void)snprintf(buf, size, s->family == AF_INET6 ? "[%s]:%u:%u" : "%s:%u:%u", ip,
                       (unsigned)s->host_port, (unsigned)s->port);
}

bool port_spec_is_loopback(const PortSpec *s) {
        static const uint8_t v6_loopback[16] = {[15] = 1};

        if (s->family == AF_INET)
                return s->host_ip[0] == 127;
        return memcmp(s->host_ip, v6_loopback, 16) == 0;
}

static bool port_spec_same_listener(const PortSpec *a, const PortSpec *b) {
        return a->host_port != 0 && a->host_port == b->host_port && a->family == b->family &&
               memcmp(a->host_ip, b->host_ip, sizeof(a->host_ip)) == 0;
}

/* -EEXIST when @s clashes with an entry of @list. */
static int check_clash(char *const *list, const PortSpec *s, const char *text, HutchError *reterr) {
        for (char *const *e = list; e && *e; e++) {
                PortSpec o;

                if (port_spec_parse(*e, &o, NULL) < 0)
                        continue;
                if (o.port == s->port)
                        return hutch_error_set(reterr, EEXIST,
                                               "port %u of the sandbox is already published ('%s')",
                                               (unsigned)s->port, *e);
                if (port_spec_same_listener(&o, s))
                        return hutch_error_set(reterr, EEXIST,
                                               "'%s' asks for the host port of '%s' again", text,
                                               *e);
        }
        return 0;
}

int policy_add_port(Policy *p, const char *spec, const char *ctx, HutchError *reterr) {
        char buf[PORT_SPEC_STRING_MAX];
        HutchError e = {};
        PortSpec s;
        int r;

        r = port_spec_parse(spec, &s, &e);
        if (r >= 0)
                r = check_clash(p->ports, &s, spec, &e);
        if (r >= 0 && strv_length(p->ports) >= POLICY_MAX_PORTS)
                r = hutch_error_set(&e, E2BIG, "too many published ports (at most %d)",
                                    POLICY_MAX_PORTS);
        if (r < 0) {
                if (ctx)
                        return hutch_error_set(reterr, -r, "%s: %s", ctx, e.msg);
                if (reterr)
                        *reterr = e;
                return r;
        }
        port_spec_to_string(&s, buf, sizeof(buf));
        return strv_extend(&p->ports, buf);
}

int policy_remove_port(Policy *p, uint16_t port) {
        size_t w = 0;
        int n = 0;

        if (!p->ports)
                return 0;
        for (size_t i = 0; p->ports[i]; i++) {
                PortSpec s;

                if (port_spec_parse(p->ports[i], &s, NULL) >= 0 && s.port == port) {
                        free(p->ports[i]);
                        n++;
                        continue;
                }
                p->ports[w++] = p->ports[i];
        }
        p->ports[w] = NULL;
        return n;
}

int policy_validate_ports(const Policy *p, HutchError *reterr) {
        size_t n = strv_length(p->ports);
        int r;

        if (n > POLICY_MAX_PORTS)
                return hutch_error_set(reterr, E2BIG, "too many published ports (at most %d)",
                                       POLICY_MAX_PORTS);
        for (size_t i = 0; i < n; i++) {
                PortSpec s;

                r = port_spec_parse(p->ports[i], &s, reterr);
                if (r < 0)
                        return r;
                r = check_clash(p->ports + i + 1, &s, p->ports[i], reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}
