/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The pure parts of hutch serve --e2b (e2b-internal.h), unit-tested in
 * tests/unit/test-e2b-util.c: ids, sandbox hosts and chunk sizes (the
 * allowlist ceiling is the core's: hutch_ext_host_within()). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "e2b-internal.h"

bool e2b_id_is_valid(const char *id) {
        if (!id || strlen(id) != E2B_ID_LEN)
                return false;
        for (size_t i = 0; i < E2B_ID_LEN; i++)
                if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9')))
                        return false;
        return true;
}

/* Whether @host ("<port>-<id>.<domain>[:N]") names a sandbox port under
 * @domain: the port and id then. */
bool e2b_host_parse(const char *host, const char *domain, unsigned *ret_port,
                    char ret_id[E2B_ID_LEN + 1]) {
        size_t dlen = strlen(domain), n;
        const char *colon, *dot, *dash;
        unsigned port = 0;

        if (!host)
                return false;
        colon = strrchr(host, ':');
        n = colon ? (size_t)(colon - host) : strlen(host);
        if (n > 0 && host[n - 1] == '.')
                n--;
        if (n < dlen + 2 || host[n - dlen - 1] != '.' ||
            strncasecmp(host + n - dlen, domain, dlen) != 0)
                return false;
        dot = host + n - dlen - 1;
        dash = memchr(host, '-', (size_t)(dot - host));
        if (!dash || dash == host || dash - host > 5)
                return false;
        for (const char *p = host; p < dash; p++) {
                if (*p < '0' || *p > '9')
                        return false;
                port = port * 10 + (unsigned)(*p - '0');
        }
        if (port < 1 || port > 65535 || dot - dash - 1 != E2B_ID_LEN)
                return false;
        memcpy(ret_id, dash + 1, E2B_ID_LEN);
        ret_id[E2B_ID_LEN] = '\0';
        for (size_t i = 0; i < E2B_ID_LEN; i++)
                ret_id[i] =
                        (char)(ret_id[i] >= 'A' && ret_id[i] <= 'Z' ? ret_id[i] + 32 : ret_id[i]);
        if (!e2b_id_is_valid(ret_id))
                return false;
        *ret_port = port;
        return true;
}

int e2b_chunk_size_parse(const char *line, uint64_t *ret) {
        uint64_t size = 0;
        const char *p;

        for (p = line; *p && *p != ';' && *p != ' ' && *p != '\t'; p++) {
                int d = *p >= '0' && *p <= '9'   ? *p - '0'
                        : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
                        : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10
                                                 : -1;

                if (d < 0 || size > (UINT64_MAX >> 4))
                        return -EBADMSG;
                size = size * 16 + (uint64_t)d;
        }
        if (p == line || p - line > 16)
                return -EBADMSG;
        *ret = size;
        return 0;
}
