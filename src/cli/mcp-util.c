/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp-util.h"

#define MCP_PATH_MAX 4095
#define MCP_BASE_MAX 24

const char *const mcp_protocol_versions[] = {
        "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", NULL,
};

const char *mcp_protocol_negotiate(const char *requested) {
        for (size_t i = 0; mcp_protocol_versions[i]; i++)
                if (requested && strcmp(requested, mcp_protocol_versions[i]) == 0)
                        return mcp_protocol_versions[i];
        return mcp_protocol_versions[0];
}

bool mcp_version_at_least(const char *v, const char *min) {
        return v && strcmp(v, min) >= 0;
}

void mcp_default_name(const char *cwd, char ret[MCP_NAME_MAX + 1]) {
        uint64_t h = UINT64_C(0xcbf29ce484222325);
        const char *base = strrchr(cwd, '/');
        char b[MCP_BASE_MAX + 1];
        size_t n = 0;

        for (const char *p = cwd; *p; p++) {
                h ^= (unsigned char)*p;
                h *= UINT64_C(0x100000001b3);
        }
        base = base ? base + 1 : cwd;
        for (; *base && n < MCP_BASE_MAX; base++) {
                char c = *base;

                if (c >= 'A' && c <= 'Z')
                        c = (char)(c - 'A' + 'a');
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                      c == '-'))
                        c = '-';
                b[n++] = c;
        }
        b[n] = '\0';
        (void)snprintf(ret, MCP_NAME_MAX + 1, "mcp-%s-%08x", n > 0 ? b : "root",
                       (unsigned)(h >> 32));
}

int mcp_path_normalize(const char *path, const char *base, char **ret) {
        size_t len = path ? strlen(path) : 0, o = 0, blen = 0;
        bool absolute;
        char *out;

        if (len == 0)
                return -EINVAL;
        if (len > MCP_PATH_MAX)
                return -ENAMETOOLONG;
        absolute = path[0] == '/';
        if (!absolute && base)
                blen = strlen(base);
        /* The result is never longer than the base, a '/' and the path. */
        out = malloc(blen + len + 3);
        if (!out)
                return -ENOMEM;
        for (const char *p = path; *p;) {
                size_t n = strcspn(p, "/");

                if (n == 2 && p[0] == '.' && p[1] == '.') {
                        char *slash;

                        if (o == 0) {
                                free(out);
                                return -EPERM;
                        }
                        out[o] = '\0';
                        slash = strrchr(out, '/');
                        o = slash ? (size_t)(slash - out) : 0;
                } else if (n > 0 && !(n == 1 && p[0] == '.')) {
                        if (o > 0 || absolute)
                                out[o++] = '/';
                        memcpy(out + o, p, n);
                        o += n;
                }
                p += n;
                p += strspn(p, "/");
        }
        out[o] = '\0';
        if (absolute && o == 0)
                (void)strcpy(out, "/");
        else if (!absolute && base) {
                /* Put the relative result below @base. */
                memmove(out + blen + 1, out, o + 1);
                memcpy(out, base, blen);
                if (o == 0)
                        out[blen] = '\0';
                else if (blen > 0 && base[blen - 1] == '/')
                        memmove(out + blen, out + blen + 1, o + 1);
                else
                        out[blen] = '/';
        } else if (o == 0)
                (void)strcpy(out, ".");
        *ret = out;
        return 0;
}
