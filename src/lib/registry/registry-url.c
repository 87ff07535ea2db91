/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* URLs of the registry client: the registry's, a redirect's Location, a
 * token realm (registry-internal.h). Kept apart from the transport so the
 * fuzzer links it without OpenSSL's libssl. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parse-util.h"
#include "registry-internal.h"

void url_done(Url *u) {
        u->host = mfree(u->host);
        u->path = mfree(u->path);
}

bool http_value_is_safe(const char *s) {
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
                        return false;
        return true;
}

int url_parse(const char *s, Url *ret) {
        Url u = {};
        const char *p, *host_end, *path;
        uint32_t port;

        if (strncasecmp(s, "https://", 8) == 0) {
                u.https = true;
                p = s + 8;
        } else if (strncasecmp(s, "http://", 7) == 0) {
                p = s + 7;
        } else {
                return strstr(s, "://") ? -EPROTONOSUPPORT : -EINVAL;
        }
        if (!http_value_is_safe(s) || strchr(s, ' '))
                return -EINVAL;
        path = p + strcspn(p, "/?#");
        if (memchr(p, '@', (size_t)(path - p)))
                return -EINVAL;
        if (*p == '[') {
                host_end = memchr(p, ']', (size_t)(path - p));
                if (!host_end || host_end == p + 1)
                        return -EINVAL;
                u.host = strndup(p + 1, (size_t)(host_end - p - 1));
                host_end++;
        } else {
                host_end = p + strcspn(p, ":/?#");
                if (host_end == p)
                        return -EINVAL;
                u.host = strndup(p, (size_t)(host_end - p));
        }
        if (!u.host)
                return -ENOMEM;
        u.port = u.https ? 443 : 80;
        if (host_end < path) {
                _cleanup_free_ char *ps = NULL;
                if (*host_end != ':') {
                        url_done(&u);
                        return -EINVAL;
                }
                ps = strndup(host_end + 1, (size_t)(path - host_end - 1));
                if (!ps || safe_atou32(ps, &port) < 0 || port == 0 || port > 65535) {
                        url_done(&u);
                        return ps ? -EINVAL : -ENOMEM;
                }
                u.port = (uint16_t)port;
        }
        if (*path == '/')
                u.path = strndup(path, strcspn(path, "#"));
        else if (asprintf(&u.path, "/%.*s", (int)strcspn(path, "#"), path) < 0)
                u.path = NULL;
        if (!u.path) {
                url_done(&u);
                return -ENOMEM;
        }
        *ret = u;
        return 0;
}

int url_resolve(const Url *base, const char *location, Url *ret) {
        Url u = {};

        if (strstr(location, "://"))
                return url_parse(location, ret);
        if (location[0] != '/' || location[1] == '/' || !http_value_is_safe(location) ||
            strchr(location, ' '))
                return -EINVAL;
        u.https = base->https;
        u.port = base->port;
        u.host = strdup(base->host);
        u.path = strndup(location, strcspn(location, "#"));
        if (!u.host || !u.path) {
                url_done(&u);
                return -ENOMEM;
        }
        *ret = u;
        return 0;
}

bool url_same_origin(const Url *a, const Url *b) {
        return a->https == b->https && a->port == b->port && strcasecmp(a->host, b->host) == 0;
}

bool host_is_loopback(const char *host) {
        struct in_addr a4;
        struct in6_addr a6;

        if (strcasecmp(host, "localhost") == 0)
                return true;
        if (inet_pton(AF_INET, host, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        if (inet_pton(AF_INET6, host, &a6) == 1)
                return IN6_IS_ADDR_LOOPBACK(&a6);
        return false;
}
